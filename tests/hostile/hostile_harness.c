/* hostile_harness.c - the supervisor's side of the hostile front end: the signer
 * process (fork + exec on a fresh dev CA), its control channel, its log, and the
 * IPC as the front end speaks it. */
#include "hostile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "config.h"
#include "ipc_frame.h"
#include "signer_core.h"
#include "testutil.h"
#include "util.h"

hf_state hf = {.pid = 0, .ipc = -1, .ctl = -1, .next_id = 1};

/* ---- files and the signer's log ---------------------------------------------------- */

/* Whole file as a NUL-terminated string (malloc'd), NULL when unreadable. */
char *hf_read_text(const char *path, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The end of the signer's log, so a failure shows what the signer said. */
void hf_dump_log_tail(void)
{
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    if (!text)
        return;
    size_t n = strlen(text);
    const char *from = n > 3000 ? text + n - 3000 : text;
    fprintf(stderr, "---- signer log (%s), last %zu bytes ----\n%s\n---- end ----\n", hf.log,
            strlen(from), from);
    free(text);
}

int hf_signer_alive(void)
{
    if (hf.pid <= 0)
        return 0;
    int st;
    pid_t r = waitpid(hf.pid, &st, WNOHANG);
    if (r == 0)
        return 1;
    if (r == hf.pid) {
        fprintf(stderr, "signer exited: %s %d\n", WIFSIGNALED(st) ? "signal" : "status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        hf.pid = 0;
    }
    return 0;
}

/* ---- the IPC, as the front end speaks it ---------------------------------------- */

uint64_t hf_send_request(int fd, uint32_t profile, const uint8_t *tbs, size_t len)
{
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    uint8_t csr_sha[32];
    SHA256(tbs, len, csr_sha); /* stands in for the CSR digest: only logged */
    req.profile = profile;
    req.tbs.data = (uint8_t *)tbs;
    req.tbs.len = len;
    req.requester = (char *)HF_SPIFFE_ID;
    req.csr_sha256.data = csr_sha;
    req.csr_sha256.len = sizeof(csr_sha);
    return hf_send_sign_request(fd, &req);
}

uint64_t hf_send_sign_request(int fd, const Hsmca__Ipc__SignRequest *req)
{
    size_t n = hsmca__ipc__sign_request__get_packed_size(req);
    assert_true(n <= IPC_MAX_PAYLOAD);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    hsmca__ipc__sign_request__pack(req, buf);
    uint64_t id = hf.next_id++;
    hsmca_err e;
    hsmca_code rc = ipc_send(fd, IPC_SIGN_REQ, id, buf, n, &e);
    free(buf);
    if (rc != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    return id;
}

/* Waits for the next reply, whatever its id (timeout_ms); fails the test on a hang,
 * EOF, a dead signer or a wrong type. what names the wait in failure messages. */
Hsmca__Ipc__SignReply *hf_recv_reply(int fd, int timeout_ms, uint64_t *rid, const char *what)
{
    static uint8_t buf[IPC_MAX_FRAME];
    for (int waited = 0;; waited += 100) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 100);
        if (r > 0)
            break;
        if (r < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        if (!hf_signer_alive()) {
            hf_dump_log_tail();
            fail_msg("the signer died while %s was pending", what);
        }
        if (waited >= timeout_ms) {
            hf_dump_log_tail();
            fail_msg("no reply to %s within %d ms", what, timeout_ms);
        }
    }
    ipc_msg m;
    hsmca_err e;
    if (ipc_recv(fd, buf, &m, &e) != HSMCA_OK) {
        hf_dump_log_tail();
        fail_msg("ipc_recv (%s): %s%s", what, e.msg,
                 m.eof ? " (the signer closed the connection)" : "");
    }
    *rid = m.id;
    assert_int_equal(m.type, IPC_SIGN_REPLY);
    Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
    assert_non_null(rep);
    if (rep->code != HSMCA_OK && rep->reason && strstr(rep->reason, "signer queue full"))
        hf.n_queue_full++;
    else if (rep->code != HSMCA_OK)
        hf.n_refused++;
    return rep;
}

/* Waits for the reply to id (timeout_ms); as hf_recv_reply, and a reply to another
 * request fails the test too. */
Hsmca__Ipc__SignReply *hf_await_reply(int fd, uint64_t id, int timeout_ms)
{
    char what[64];
    snprintf(what, sizeof(what), "request %llu", (unsigned long long)id);
    uint64_t rid = 0;
    Hsmca__Ipc__SignReply *rep = hf_recv_reply(fd, timeout_ms, &rid, what);
    assert_int_equal(rid, id);
    return rep;
}

Hsmca__Ipc__SignReply *hf_sign(uint32_t profile, const uint8_t *tbs, size_t len)
{
    uint64_t id = hf_send_request(hf.ipc, profile, tbs, len);
    return hf_await_reply(hf.ipc, id, HF_REPLY_MS);
}

/* One raw packet of n bytes on the front end connection. */
void hf_send_raw(const uint8_t *p, size_t n)
{
    ssize_t w = send(hf.ipc, p, n, MSG_NOSIGNAL);
    if (w < 0 || (size_t)w != n)
        fail_msg("send of %zu raw bytes: %zd (%s)", n, w, strerror(errno));
}

int hf_wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

/* ---- group setup: dev CA, socketpairs, the signer process ------------------------ */

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return x;
}

/* fork + exec `hsmca-signer` with ipc_child on fd 3, ctl_child on fd 4 and
 * stdout/stderr into the log, as supervisor/supervisor.c does. */
static pid_t spawn_signer(int ipc_child, int ctl_child)
{
    int logfd = open(hf.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0)
        return -1;
    const char *bin = tu_signer_bin();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan signer if this test dies */
        /* LeakSanitizer needs ptrace and a non-thread clone, which the signer's
         * seccomp filter refuses (as the front end's does): no leak check in it.
         * (This program has no threads: setenv after fork is safe.) */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof(opts), "%s:detect_leaks=0", asan ? asan : "");
        setenv("ASAN_OPTIONS", opts, 1);
        /* Lift every source above 4 first, so no dup2 clobbers another source. */
        int a = fcntl(ipc_child, F_DUPFD_CLOEXEC, 10), b = fcntl(ctl_child, F_DUPFD_CLOEXEC, 10),
            l = fcntl(logfd, F_DUPFD_CLOEXEC, 10);
        if (a < 0 || b < 0 || l < 0 || dup2(a, 3) != 3 || dup2(b, 4) != 4 || dup2(l, 1) != 1 ||
            dup2(l, 2) != 2)
            _exit(127);
        execl(bin, bin, "--config", hf.conf, "--ipc-fd", "3", "--ctl-fd", "4",
              (char *)NULL);
        _exit(127);
    }
    close(logfd);
    return pid;
}

/* ---- the signer's configuration ---------------------------------------------------- */

static int yaml_key_line(const char *line, size_t n, const char *key)
{
    size_t k = strlen(key);
    return n > k + 2 && !memcmp(line, "  ", 2) && !memcmp(line + 2, key, k) && line[2 + k] == ':';
}

/* in with kv->key set to kv->value under kv->section, every other line kept as it
 * was; a line it already had for the key is dropped, so no key repeats (the
 * config parser refuses duplicates). A malloc'd buffer of *out_len bytes. */
static char *yaml_set(const char *in, size_t len, const hf_yaml_kv *kv, size_t *out_len)
{
    size_t sl = strlen(kv->section), o = 0;
    size_t cap = len + sl + strlen(kv->key) + strlen(kv->value) + 16;
    char *out = malloc(cap);
    int in_section = 0, inserted = 0;
    for (const char *line = in; out && line < in + len;) {
        const char *nl = memchr(line, '\n', (size_t)(in + len - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(in + len - line);
        int top = n > 0 && line[0] != ' ' && line[0] != '#';
        if (top)
            in_section = n == sl + 1 && !memcmp(line, kv->section, sl) && line[sl] == ':';
        if (!(in_section && !top && yaml_key_line(line, n, kv->key))) {
            memcpy(out + o, line, n);
            o += n;
            out[o++] = '\n';
        }
        if (top && in_section) {
            o += (size_t)snprintf(out + o, cap - o, "  %s: %s\n", kv->key, kv->value);
            inserted = 1;
        }
        line += n + 1;
    }
    if (out && !inserted)
        o += (size_t)snprintf(out + o, cap - o, "%s:\n  %s: %s\n", kv->section, kv->key, kv->value);
    *out_len = o;
    return out;
}

int hf_rewrite_config(const hf_yaml_kv *kv, size_t n, hsmca_config *before, hsmca_config *after)
{
    char *text = NULL;
    size_t len = 0;
    hsmca_err e;
    hsmca_err_clear(&e);
    int rc = -1;
    if (util_read_file(hf.conf, 1 << 20, &text, &len, &e) != HSMCA_OK ||
        config_load(hf.conf, before, &e) != HSMCA_OK)
        goto done;
    for (size_t i = 0; i < n && text; i++) {
        size_t out_len = 0;
        char *out = yaml_set(text, len, &kv[i], &out_len);
        free(text);
        text = out;
        len = out_len;
    }
    if (!text || util_write_file_atomic(hf.conf, text, len, 0644, &e) != HSMCA_OK ||
        config_load(hf.conf, after, &e) != HSMCA_OK || config_validate(after, &e) != HSMCA_OK)
        goto done;
    rc = 0;
done:
    if (rc != 0)
        fprintf(stderr, "rewriting %s: %s\n", hf.conf, e.msg[0] ? e.msg : "out of memory");
    free(text);
    return rc;
}

/* Makes a dev CA in a new directory named after prefix, lets prepare (when not
 * NULL) change it, and starts a signer on it with fresh socketpairs. 0 on success. */
int hf_start_signer(const char *prefix, int (*prepare)(void))
{
    hf.dir = tu_mkdtemp(prefix);
    if (tu_dev_init(hf.dir, "ec-p256") != 0)
        return -1;
    snprintf(hf.conf, sizeof(hf.conf), "%s/hsmca.yaml", hf.dir);
    snprintf(hf.log, sizeof(hf.log), "%s/signer.log", hf.dir);
    char path[1100];
    snprintf(path, sizeof(path), "%s/root-cert.pem", hf.dir);
    if (!(hf.ca = load_cert(path))) {
        fprintf(stderr, "cannot load %s\n", path);
        return -1;
    }
    if (prepare && prepare() != 0)
        return -1;
    hsmca_config *cfg = malloc(sizeof(*cfg));
    hsmca_err e;
    if (!cfg || config_load(hf.conf, cfg, &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", hf.conf, cfg ? e.msg : "out of memory");
        free(cfg);
        return -1;
    }
    hf.sessions = cfg->sessions;
    hf.workers = signer_worker_count(cfg->sessions);
    free(cfg);
    hf_notes_reset();
    hf.n_refused = hf.n_queue_full = 0;
    int ipc[2], ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ipc) != 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
        return -1;
    hf.pid = spawn_signer(ipc[1], ctl[1]);
    close(ipc[1]);
    close(ctl[1]);
    hf.ipc = ipc[0];
    hf.ctl = ctl[0];
    if (hf.pid <= 0) {
        fprintf(stderr, "cannot start the signer\n");
        return -1;
    }
    fprintf(stderr, "signer pid %d, dir %s\n", (int)hf.pid, hf.dir);
    return 0;
}

/* Also leaves hf idle, so that the next group can start its own signer. */
int hf_group_teardown(void **state)
{
    if (hf.pid > 0) { /* a test failed before the orderly stop */
        kill(hf.pid, SIGKILL);
        waitpid(hf.pid, NULL, 0);
        hf.pid = 0;
    }
    if (hf.ipc >= 0)
        close(hf.ipc);
    if (hf.ctl >= 0)
        close(hf.ctl);
    hf.ipc = hf.ctl = -1;
    X509_free(hf.ca);
    hf.ca = NULL;
    free(hf.dir);
    hf.dir = NULL;
    return 0;
}

/* Closes the control channel like a supervisor that went away: the signer must
 * stop cleanly within HF_EXIT_MS. */
void hf_stop_signer(void)
{
    assert_true(hf_signer_alive());
    close(hf.ctl);
    hf.ctl = -1;
    int st = 0, waited = 0;
    pid_t r;
    while ((r = waitpid(hf.pid, &st, WNOHANG)) == 0 && waited < HF_EXIT_MS) {
        usleep(50 * 1000);
        waited += 50;
    }
    if (r != hf.pid) {
        hf_dump_log_tail();
        fail_msg("the signer did not exit within %d ms of its control channel closing", HF_EXIT_MS);
    }
    hf.pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        hf_dump_log_tail();
        fail_msg("the signer did not exit cleanly (status 0x%x)", st);
    }
}

/* The signer's whole log (malloc'd), checked to be free of the PIN. */
char *hf_read_log_without_pin(void)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/pin", hf.dir);
    char *pin = hf_read_text(path, 256);
    assert_non_null(pin);
    pin[strcspn(pin, "\r\n")] = '\0';
    assert_true(strlen(pin) >= 8);
    char *log = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(log);
    if (strstr(log, pin))
        fail_msg("the signer logged the PIN (%s)", hf.log);
    OPENSSL_cleanse(pin, strlen(pin));
    free(pin);
    return log;
}

int hf_hand_over(int keep_old)
{
    int pair[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    hsmca_err e;
    if (ipc_send_fd(hf.ctl, pair[1], &e) != HSMCA_OK)
        fail_msg("ipc_send_fd: %s", e.msg);
    close(pair[1]);
    int old = hf.ipc;
    hf.ipc = pair[0];
    if (!keep_old && old >= 0) {
        close(old);
        old = -1;
    }
    return old;
}

int hf_read_ctl(int timeout_ms)
{
    char k;
    if (!hf_wait_readable(hf.ctl, timeout_ms))
        return -1;
    return read(hf.ctl, &k, 1) == 1 ? (unsigned char)k : -1;
}

long hf_vm_rss_kb(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)hf.pid);
    char *text = hf_read_text(path, 1 << 16);
    assert_non_null(text);
    const char *at = strstr(text, "\nVmRSS:");
    long kb = at ? strtol(at + 8, NULL, 10) : -1;
    free(text);
    assert_true(kb > 0);
    return kb;
}
