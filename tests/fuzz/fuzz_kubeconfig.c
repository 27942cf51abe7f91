/* fuzz_kubeconfig.c - libFuzzer target for kubeconfig_load (k8s/kubeconfig.h), which
 * the supervisor, publish-roots and `hsmca config check` run on publish.kubeconfig and
 * auth.tokenreview.kubeconfig while still root.
 *
 * The input is the kubeconfig's text, written to a file in a private directory that also
 * holds the files a kubeconfig names by relative path (ca.crt, token, client.crt,
 * client.key, and an empty file), so the *-data fields and the files are both reached.
 * Checked: an accepted kubeconfig yields an https:// server without a trailing slash,
 * a NUL-terminated CA bundle, a client certificate exactly when a key, a token that is
 * not empty; a refusal names its check and leaves the target empty. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kubeconfig.h"
#include "log.h"

static char dir[64], file[96];

static void put(const char *name, const char *text)
{
    char p[160];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        abort();
    close(fd);
}

static void cleanup(void)
{
    static const char *names[] = {"config", "ca.crt", "token", "client.crt", "client.key",
                                  "empty"};
    char p[160];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    log_set_level(LOG_LVL_ERROR);
    /* In memory when it can be: each input is a file rewritten, and a disk's journal
     * would be most of the cost. */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0])
        tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof(dir), "%.40s/fuzz_kubeconfig.XXXXXX", tmp);
    if (!mkdtemp(dir))
        abort();
    atexit(cleanup);
    snprintf(file, sizeof(file), "%s/config", dir);
    put("ca.crt", "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n");
    put("token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln\n");
    put("client.crt", "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n");
    put("client.key", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQ\n-----END EC PRIVATE KEY-----\n");
    put("empty", "");
    return 0;
}

static int empty(const k8s_target *t)
{
    return !t->server[0] && !t->ca_pem && !t->token && !t->cert_pem && !t->key_pem &&
           !t->ca_len && !t->cert_len && !t->key_len;
}

static void check_accepted(const k8s_target *t)
{
    size_t n = strnlen(t->server, sizeof(t->server));
    if (n == sizeof(t->server) || strncmp(t->server, "https://", 8) != 0 ||
        (n > 8 && t->server[n - 1] == '/'))
        abort(); /* an https:// URL that fits, without a trailing slash */
    if (!t->ca_pem || t->ca_pem[t->ca_len] != '\0')
        abort(); /* a CA bundle, always; NUL-terminated like a file read */
    if (!t->cert_pem != !t->key_pem || (t->cert_pem && (t->cert_pem[t->cert_len] != '\0' ||
                                                        t->key_pem[t->key_len] != '\0')))
        abort(); /* a client certificate goes with its key */
    if (t->token && !t->token[0])
        abort(); /* an empty token is refused, never sent */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
        abort();
    close(fd);
    k8s_target t;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = kubeconfig_load(file, &t, &e);
    if (rc == HSMCA_OK)
        check_accepted(&t);
    else if (e.msg[0] == '\0' || !empty(&t))
        abort(); /* a refusal names its check and hands back nothing */
    k8s_target_clear(&t);
    return 0;
}
