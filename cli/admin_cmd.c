/* admin_cmd.c - see admin_cmd.h. */
#include "admin_cmd.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin_contract.h"
#include "cli_opts.h"
#include "config.h"

/* How long a reply may take: an approval that completes a request waits for its
 * signature (and the log's syncs). */
#define ADMIN_REPLY_TIMEOUT_MS 60000

static HSMCA_MUSTCHECK hsmca_code socket_of(const char *config_path, const char *socket_path,
                                            char *out, size_t cap, hsmca_err *e)
{
    if (socket_path) {
        snprintf(out, cap, "%s", socket_path);
        return HSMCA_OK;
    }
    HSMCA_ENSURE(config_path, e, HSMCA_EINVAL, "--config FILE (or --socket PATH) is required");
    hsmca_config *cfg = calloc(1, sizeof(*cfg));
    HSMCA_ENSURE(cfg, e, HSMCA_ENOMEM, "out of memory");
    hsmca_code rc = config_load(config_path, cfg, e);
    if (rc == HSMCA_OK && !cfg->admin_socket[0])
        rc = hsmca_fail(e, HSMCA_EINVAL, "%s sets no admin.socket: the signer serves none",
                        config_path);
    if (rc == HSMCA_OK)
        snprintf(out, cap, "%s", cfg->admin_socket);
    free(cfg);
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code exchange(int fd, const char *path, const char *text,
                                           json_t **reply, hsmca_err *e)
{
    static char buf[ADMIN_MAX_MSG + 1];
    /* A signer that refuses a connection at once (a user's connection cap) answers and
     * closes before our request is read: the send may fail, the first read may report the
     * reset; its answer is queued all the same, and says why. */
    int sent = send(fd, text, strlen(text), MSG_NOSIGNAL) == (ssize_t)strlen(text);
    int send_errno = errno;
    struct pollfd p = {fd, POLLIN, 0};
    int ready = poll(&p, 1, sent ? ADMIN_REPLY_TIMEOUT_MS : 0) == 1;
    HSMCA_ENSURE(ready || sent, e, HSMCA_EUNAVAIL, "admin socket %s: send: %s", path,
                 strerror(send_errno));
    HSMCA_ENSURE(ready, e, HSMCA_EUNAVAIL, "admin socket %s: no reply within %d s", path,
                 ADMIN_REPLY_TIMEOUT_MS / 1000);
    ssize_t n = recv(fd, buf, ADMIN_MAX_MSG, 0);
    if (n < 0 && errno == ECONNRESET)
        n = recv(fd, buf, ADMIN_MAX_MSG, MSG_DONTWAIT);
    HSMCA_ENSURE(n > 0, e, HSMCA_EUNAVAIL, "admin socket %s: the signer closed the connection%s%s",
                 path, n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
    json_error_t je;
    *reply = json_loadb(buf, (size_t)n, 0, &je);
    HSMCA_ENSURE(*reply && json_is_object(*reply), e, HSMCA_EINVAL,
                 "admin socket %s: the reply is not a JSON object", path);
    if (!json_is_true(json_object_get(*reply, "ok"))) {
        const char *err = json_string_value(json_object_get(*reply, "error"));
        hsmca_fail(e, HSMCA_EPERM, "%s", err ? err : "refused");
        json_decref(*reply);
        *reply = NULL;
        return HSMCA_EPERM;
    }
    return HSMCA_OK;
}

hsmca_code admin_call(const char *config_path, const char *socket_path, json_t *req,
                      json_t **reply, hsmca_err *e)
{
    char path[CONFIG_MAX_STR];
    *reply = NULL;
    HSMCA_GUARD(socket_of(config_path, socket_path, path, sizeof(path), e));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    HSMCA_ENSURE(strlen(path) < sizeof(sa.sun_path), e, HSMCA_EINVAL, "admin socket path too long");
    memcpy(sa.sun_path, path, strlen(path) + 1);
    char *text = json_dumps(req, JSON_COMPACT);
    HSMCA_ENSURE(text && strlen(text) <= ADMIN_MAX_MSG, e, HSMCA_EINVAL,
                 "request too large (at most %d bytes)", ADMIN_MAX_MSG);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    hsmca_code rc = HSMCA_OK;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL,
                        "admin socket %s: %s (is the signer running with admin.socket set, and "
                        "are you root or in admin.group?)",
                        path, strerror(errno));
    else
        rc = exchange(fd, path, text, reply, e);
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

static void usage(FILE *f)
{
    fputs("usage: hsmca admin status --config FILE [--socket PATH] [--json]\n"
          "\n"
          "Asks the running signer, over its admin socket (admin.socket in FILE), for its\n"
          "state: the CA and audit keys and their tokens, the audit log's size, the\n"
          "intermediate requests waiting for approval, the last policy reload (ok, or\n"
          "failed: why) and the failed reloads since the signer started. The socket is\n"
          "the signer's own (mode 0660, signer.user:admin.group): only root and members\n"
          "of admin.group may use it; each caller is recorded by its unix user name.\n"
          "Intermediate CA requests: hsmca intermediate --help.\n",
          f);
}

static void print_status(json_t *r)
{
    const char *keys[] = {"caller", "ca_key", "ca_token", "audit_key", "audit_token", "audit_dir",
                          "audit_entries", "audit_bytes", "trust_domain", "approval_required",
                          "intermediates_pending", "ca_profile", "policy_reload",
                          "policy_reload_failures"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(r, keys[i]);
        if (json_is_string(v))
            printf("%-22s %s\n", keys[i], json_string_value(v));
        else if (json_is_integer(v))
            printf("%-22s %lld\n", keys[i], (long long)json_integer_value(v));
    }
}

int admin_main(int argc, char **argv)
{
    static const struct option flags[] = {{"config", required_argument, 0, 'c'},
                                          {"socket", required_argument, 0, 's'},
                                          {"json", no_argument, 0, 'j'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    const char *operands[1] = {NULL}, *config = NULL, *sock = NULL;
    int json = 0, c;
    cli_opts o;
    cli_opts_init(&o, "hsmca admin", flags, operands, 1);
    while ((c = cli_opts_next(&o, argc, argv)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 's': sock = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: return 2;
        }
    }
    if (!operands[0] || strcmp(operands[0], "status") != 0) {
        usage(stderr);
        return 2;
    }
    json_t *req = json_pack("{s:s}", "op", "status"), *reply = NULL;
    hsmca_err e;
    hsmca_code rc = admin_call(config, sock, req, &reply, &e);
    json_decref(req);
    if (rc != HSMCA_OK) {
        fprintf(stderr, "hsmca admin status: %s\n", e.msg);
        return rc == HSMCA_EPERM ? 1 : rc == HSMCA_EINVAL ? 2 : 3;
    }
    if (json) {
        json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
        fputc('\n', stdout);
    } else {
        print_status(reply);
    }
    json_decref(reply);
    return 0;
}
