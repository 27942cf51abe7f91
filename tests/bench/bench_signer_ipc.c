/* bench_signer_ipc.c - the signer half of bench_signer: a real `hsmca-signer`
 * started like the supervisor starts it, fed valid workload TBSs over its IPC
 * socket with a window of requests in flight.
 *
 * TBSs are built with the front end's own leaf_tbs_build (a fresh serial each:
 * the signer refuses a serial twice) in chunks, between timed phases: building
 * costs CPU on the same cores, so only the phases that drive the signer count
 * towards its rate and its CPU time. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "certasm.h"
#include "config.h"
#include "leaf_tbs.h"
#include "ipc_frame.h"
#include "signer.pb-c.h"
#include "signer_tbs.h"
#include "testutil.h"
#include "util.h"

#define BENCH_CHUNK 8192 /* TBSs built per untimed pause (~500 bytes each) */
#define BENCH_MAX_CHUNKS 256

/* ---- the config the signer runs with ---------------------------------------------- */

/* Rewrites DIR/hsmca.yaml line by line: in each (section, key) listed, drops
 * the key's line and puts ours right after the section's header (so a key the
 * file lacks is added too). The dev config is flat two-level YAML. */
static int bench_config(const char *dir, const char *name, int log_on, hsmca_config *cfg)
{
    static const char *set[][3] = {{"pkcs11", "sessions", "2"}, /* BENCH_SESSIONS */
                                   {"issuance", "rate_per_second", BENCH_RATE_STR},
                                   {"issuance", "rate_burst", BENCH_RATE_STR},
                                   {"audit", "dir", "\"\""}, /* log off only: */
                                   {"audit", "disabled", "true"}}; /* the last two */
    const size_t n_set = sizeof(set) / sizeof(set[0]) - (log_on ? 2 : 0);
    char path[1100], *in = NULL, section[64] = "";
    size_t len, o = 0;
    hsmca_err e;
    snprintf(path, sizeof(path), "%s/hsmca.yaml", dir);
    if (util_read_file(path, 64 * 1024, &in, &len, &e) != HSMCA_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        return -1;
    }
    size_t cap = len + 512;
    char *out = malloc(cap);
    for (char *line = in, *nl; out && line < in + len; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            nl = in + len;
        *nl = '\0';
        int drop = 0;
        if (line[0] != ' ' && line[0] != '#' && strchr(line, ':'))
            snprintf(section, sizeof(section), "%.*s", (int)strcspn(line, ":"), line);
        for (size_t i = 0; i < n_set; i++)
            drop |= !strcmp(section, set[i][0]) && !strncmp(line, "  ", 2) &&
                    !strncmp(line + 2, set[i][1], strlen(set[i][1])) &&
                    line[2 + strlen(set[i][1])] == ':';
        if (!drop)
            o += (size_t)snprintf(out + o, cap - o, "%s\n", line);
        for (size_t i = 0; i < n_set && line[0] != ' '; i++)
            if (!strncmp(line, set[i][0], strlen(set[i][0])) &&
                !strcmp(line + strlen(set[i][0]), ":"))
                o += (size_t)snprintf(out + o, cap - o, "  %s: %s\n", set[i][1], set[i][2]);
    }
    free(in);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int bad = !out || o >= cap || util_write_file_atomic(path, out, o, 0644, &e) != HSMCA_OK ||
              config_load(path, cfg, &e) != HSMCA_OK || config_validate(cfg, &e) != HSMCA_OK;
    free(out);
    if (bad) {
        fprintf(stderr, "bench: rewriting %s: %s\n", path, out ? e.msg : "out of memory");
        return -1;
    }
    if (cfg->sessions != BENCH_SESSIONS || cfg->rate_per_second != BENCH_RATE ||
        cfg->rate_burst != BENCH_RATE || !cfg->audit_dir[0] != !log_on) {
        fprintf(stderr, "bench: %s did not take the benchmark settings (or has no audit.dir)\n",
                path);
        return -1;
    }
    return 0;
}

/* ---- the signer process ----------------------------------------------------------- */

typedef struct {
    pid_t pid;
    int ipc, ctl; /* our ends */
} signer_proc;

static int lift_fd(int fd)
{
    int n = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (n < 0)
        _exit(127);
    return n;
}

/* fork+exec `hsmca-signer` the way the supervisor does: its IPC end on fd 3,
 * its control channel on fd 4, stderr (one log line per certificate) to a file. */
static int signer_spawn(const char *config, const char *logpath, signer_proc *sp)
{
    int ipc[2], ctl[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ipc) != 0)
        return -1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
        close(ipc[0]);
        close(ipc[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int log = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log < 0 || dup2(log, 2) != 2)
            _exit(127);
        int a = lift_fd(ipc[1]), b = lift_fd(ctl[1]);
        if (dup2(a, 3) != 3 || dup2(b, 4) != 4)
            _exit(127);
        const char *bin = tu_signer_bin();
        execl(bin, bin, "--config", config, "--ipc-fd", "3", "--ctl-fd", "4",
              (char *)NULL);
        _exit(127);
    }
    close(ipc[1]);
    close(ctl[1]);
    if (pid < 0) {
        close(ipc[0]);
        close(ctl[0]);
        return -1;
    }
    *sp = (signer_proc){pid, ipc[0], ctl[0]};
    return 0;
}

/* Closing the control channel is how the supervisor says goodbye. */
static void signer_stop(signer_proc *sp)
{
    close(sp->ctl);
    for (int i = 0; i < 100; i++) {
        if (waitpid(sp->pid, NULL, WNOHANG) == sp->pid) {
            close(sp->ipc);
            return;
        }
        usleep(100 * 1000);
    }
    kill(sp->pid, SIGKILL);
    waitpid(sp->pid, NULL, 0);
    close(sp->ipc);
}

/* ---- requests ---------------------------------------------------------------------- */

typedef struct {
    uint8_t *buf; /* packed SignRequest */
    size_t len;
} bench_msg;

static X509 *load_cert(const char *path)
{
    FILE *f = fopen(path, "r");
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    return x;
}

typedef struct {
    X509 *ca;
    bench_msg *msgs;
    size_t from, to;
    int bad;
} build_job;

/* Packed workload SignRequests msgs[from..to), each with its own TBS and serial,
 * for one subject key of this thread's own (the signer does not care whose key
 * it certifies; the CSR hash is only logged). */
static void *build_range(void *arg)
{
    build_job *j = arg;
    EVP_PKEY *leaf = EVP_EC_gen("P-256");
    /* The key as the front end has it: a CSR's parsed SubjectPublicKeyInfo. */
    X509_REQ *req = X509_REQ_new();
    if (!req || !leaf || !X509_REQ_set_pubkey(req, leaf))
        j->bad = 1;
    uint8_t csr_hash[32] = {0};
    leaf_tbs_params p = {.ca_cert = j->ca,
                       .sig_nid = certasm_sig_nid_for_key(X509_get0_pubkey(j->ca)),
                       .subject_spki = req ? X509_REQ_get_X509_PUBKEY(req) : NULL,
                       .uri_san = BENCH_SPIFFE,
                       .now = util_wall_now(),
                       .ttl = 3600};
    j->bad = j->bad || !leaf;
    for (size_t i = j->from; i < j->to && !j->bad; i++) {
        uint8_t *tbs = NULL;
        size_t tbs_len = 0;
        hsmca_err e;
        if (leaf_tbs_build(&p, &tbs, &tbs_len, &e) != HSMCA_OK) {
            fprintf(stderr, "bench: leaf_tbs_build: %s\n", e.msg);
            j->bad = 1;
            break;
        }
        Hsmca__Ipc__SignRequest r = HSMCA__IPC__SIGN_REQUEST__INIT;
        r.profile = PROFILE_WORKLOAD;
        r.tbs = (ProtobufCBinaryData){tbs_len, tbs};
        r.requester = (char *)BENCH_SPIFFE;
        r.csr_sha256 = (ProtobufCBinaryData){sizeof(csr_hash), csr_hash};
        j->msgs[i].len = hsmca__ipc__sign_request__get_packed_size(&r);
        j->msgs[i].buf = malloc(j->msgs[i].len);
        j->bad = !j->msgs[i].buf;
        if (!j->bad)
            hsmca__ipc__sign_request__pack(&r, j->msgs[i].buf);
        OPENSSL_free(tbs);
    }
    X509_REQ_free(req);
    EVP_PKEY_free(leaf);
    return NULL;
}

static void free_msgs(bench_msg *msgs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(msgs[i].buf);
        msgs[i].buf = NULL;
    }
}

/* Fills msgs[0..n) in two threads (the machine has two cores). */
static int build_msgs(X509 *ca, bench_msg *msgs, size_t n)
{
    build_job j[2] = {{ca, msgs, 0, n / 2, 0}, {ca, msgs, n / 2, n, 0}};
    pthread_t th;
    if (pthread_create(&th, NULL, build_range, &j[1]) != 0)
        return -1;
    build_range(&j[0]);
    pthread_join(th, NULL);
    if (j[0].bad || j[1].bad) {
        free_msgs(msgs, n);
        return -1;
    }
    return 0;
}

/* Receives every reply already waiting (non-blocking) and counts them by code;
 * keeps a copy of the first certificate when first_cert is given. Returns the
 * number received, or -1 when the signer hung up or broke the framing. */
static int recv_ready(int fd, uint64_t codes[BENCH_MAX_CODES], uint8_t **first_cert,
                      size_t *first_len)
{
    static uint8_t pkt[IPC_MAX_FRAME];
    int got = 0;
    for (int i = 0; i < 4096; i++) {
        ssize_t r = recv(fd, pkt, sizeof(pkt), MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (r <= 0)
            return -1;
        ipc_msg m;
        hsmca_err e;
        if (ipc_frame_decode(pkt, (size_t)r, &m, &e) != HSMCA_OK || m.type != IPC_SIGN_REPLY)
            return -1;
        Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
        if (!rep)
            return -1;
        unsigned c = rep->code < BENCH_MAX_CODES ? rep->code : BENCH_MAX_CODES - 1;
        if (++codes[c] == 1 && c != 0) /* the first of each kind says why */
            fprintf(stderr, "bench: signer refused: %s: %s\n",
                    hsmca_code_name((hsmca_code)rep->code), rep->reason);
        if (first_cert && !*first_cert && rep->code == 0) {
            *first_cert = malloc(rep->certificate.len);
            if (*first_cert) {
                memcpy(*first_cert, rep->certificate.data, rep->certificate.len);
                *first_len = rep->certificate.len;
            }
        }
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        got++;
    }
    return got;
}

/* ---- driving it -------------------------------------------------------------------- */

/* One request through the signer before timing: it pays for the module load
 * and login, and its certificate must verify under the CA certificate. */
static int warm_up(const signer_proc *sp, const bench_msg *m, X509 *ca)
{
    uint64_t codes[BENCH_MAX_CODES] = {0};
    uint8_t *cert = NULL;
    size_t len = 0;
    hsmca_err e;
    if (ipc_send(sp->ipc, IPC_SIGN_REQ, 0, m->buf, m->len, &e) != HSMCA_OK) {
        fprintf(stderr, "bench: send to signer: %s\n", e.msg);
        return -1;
    }
    int got = 0;
    for (int i = 0; i < 600 && got == 0; i++) { /* up to 60 s for start-up */
        struct pollfd pfd = {sp->ipc, POLLIN, 0};
        if (poll(&pfd, 1, 100) > 0)
            got = recv_ready(sp->ipc, codes, &cert, &len);
    }
    X509 *x = NULL;
    const uint8_t *p = cert;
    if (cert)
        x = d2i_X509(NULL, &p, (long)len);
    int ok = got == 1 && codes[0] == 1 && x && ca && X509_verify(x, X509_get0_pubkey(ca)) == 1;
    X509_free(x);
    free(cert);
    if (!ok)
        fprintf(stderr, "bench: the signer's first certificate did not come back valid\n");
    return ok ? 0 : -1;
}

/* Receives until nothing is in flight (up to 30 s), without counting them in
 * the rate: replies that come back after the deadline are not part of it (but
 * their intents are in the log: they count in r->intents). */
static int drain(const signer_proc *sp, size_t inflight, bench_mode *r)
{
    uint64_t late[BENCH_MAX_CODES] = {0};
    for (int i = 0; i < 300 && inflight > 0; i++) {
        struct pollfd pfd = {sp->ipc, POLLIN, 0};
        if (poll(&pfd, 1, 100) > 0) {
            int got = recv_ready(sp->ipc, late, NULL, NULL);
            if (got < 0)
                return -1;
            inflight -= (size_t)got;
        }
    }
    r->intents += late[0];
    return inflight ? -1 : 0;
}

/* One timed phase: sends msgs (ids from id0) keeping `window` in flight until
 * all are answered or `budget` seconds pass; adds the counts and times to *r. */
static int drive(const signer_proc *sp, const bench_msg *msgs, size_t n, uint64_t id0,
                 unsigned window, double budget, bench_mode *r)
{
    size_t next = 0, inflight = 0;
    int bad = 0;
    double c0 = bench_proc_cpu(sp->pid), s0 = bench_self_cpu(), t0 = util_mono_now();
    while (!bad && util_mono_now() < t0 + budget && (next < n || inflight > 0)) {
        for (; inflight < window && next < n && !bad; next++, inflight++) {
            hsmca_err e;
            if (ipc_send(sp->ipc, IPC_SIGN_REQ, id0 + next, msgs[next].buf, msgs[next].len, &e) !=
                HSMCA_OK) {
                fprintf(stderr, "bench: send to signer: %s\n", e.msg);
                bad = 1;
            }
        }
        struct pollfd pfd = {sp->ipc, POLLIN, 0};
        if (poll(&pfd, 1, 50) > 0) {
            int got = recv_ready(sp->ipc, r->codes, NULL, NULL);
            bad |= got < 0;
            inflight -= got > 0 ? (size_t)got : 0;
        }
    }
    r->wall += util_mono_now() - t0;
    r->signer_cpu += bench_proc_cpu(sp->pid) - c0;
    r->self_cpu += bench_self_cpu() - s0;
    if (bad || drain(sp, inflight, r) != 0) {
        fprintf(stderr, "bench: the signer connection failed (see its log)\n");
        return -1;
    }
    return 0;
}

/* Chunks of TBSs, each built untimed and then driven through the signer,
 * until the timed phases add up to --seconds. */
static int run_chunks(const signer_proc *sp, X509 *ca, const bench_opts *o, bench_mode *r,
                      double *tbs_cpu_us)
{
    bench_msg *msgs = calloc(BENCH_CHUNK, sizeof(*msgs));
    double build_cpu = 0, wall0 = r->wall;
    uint64_t ok0 = r->codes[0];
    size_t built = 0;
    int bad = !msgs;
    for (int c = 0; !bad && c < BENCH_MAX_CHUNKS && r->wall - wall0 < o->seconds - 0.01; c++) {
        double c0 = bench_self_cpu();
        bad = build_msgs(ca, msgs, BENCH_CHUNK) != 0;
        build_cpu += bench_self_cpu() - c0;
        built += BENCH_CHUNK;
        if (!bad && c == 0) {
            bad = warm_up(sp, &msgs[0], ca) != 0;
            r->intents += !bad;
            printf("signer pid %d is up; driving it for %d s\n", (int)sp->pid, o->seconds);
            fflush(stdout);
        }
        if (!bad)
            bad = drive(sp, msgs + (c == 0), BENCH_CHUNK - (c == 0), (uint64_t)c * BENCH_CHUNK + 1,
                        o->window, o->seconds - (r->wall - wall0), r) != 0;
        free_msgs(msgs, BENCH_CHUNK);
    }
    free(msgs);
    r->intents += r->codes[0] - ok0;
    *tbs_cpu_us = built ? build_cpu * 1e6 / built : 0;
    return bad ? -1 : 0;
}

/* The fdatasyncs of the signer's life, from its "audit log closed" line; 0 when
 * the line is missing (log off). */
static uint64_t log_syncs(const char *logpath)
{
    FILE *f = fopen(logpath, "r");
    char line[4096];
    unsigned long long n = 0;
    while (f && fgets(line, sizeof(line), f)) {
        const char *at = strstr(line, "\"audit log closed\"");
        if (at && (at = strstr(line, "\"syncs\":\"")))
            n = strtoull(at + 9, NULL, 10);
    }
    if (f)
        fclose(f);
    return n;
}

static const char *const MODE_NAME[2] = {"off", "on"};

/* One signer process with config, driven for o->seconds; adds to *m. */
static int run_phase(const char *key, const char *config, const char *logpath, X509 *ca,
                     const bench_opts *o, int mode, bench_mode *m, double *tbs_cpu_us)
{
    signer_proc sp;
    bench_mode r;
    memset(&r, 0, sizeof(r));
    if (signer_spawn(config, logpath, &sp) != 0) {
        fprintf(stderr, "bench: cannot start the signer\n");
        return -1;
    }
    int bad = run_chunks(&sp, ca, o, &r, tbs_cpu_us) != 0;
    double hwm = bench_proc_hwm_mib(sp.pid);
    signer_stop(&sp);
    if (bad) {
        fprintf(stderr, "bench: signer log: %s\n", logpath);
        return -1;
    }
    r.syncs = log_syncs(logpath);
    if (mode == BENCH_LOG_ON && r.syncs == 0) /* an older signer: no sync figures */
        fprintf(stderr, "bench: no \"audit log closed\" line in %s\n", logpath);
    for (int c = 0; c < BENCH_MAX_CODES; c++)
        m->codes[c] += r.codes[c];
    m->intents += r.intents;
    m->syncs += r.syncs;
    m->wall += r.wall;
    m->signer_cpu += r.signer_cpu;
    m->self_cpu += r.self_cpu;
    m->hwm_mib = hwm > m->hwm_mib ? hwm : m->hwm_mib;
    printf("signer key=%s log=%s certs_per_s=%.1f ok=%llu wall_s=%.2f cpu_us_per_cert=%.1f", key,
           MODE_NAME[mode], bench_rate(&r), (unsigned long long)r.codes[0], r.wall,
           r.codes[0] ? r.signer_cpu * 1e6 / (double)r.codes[0] : 0);
    if (mode == BENCH_LOG_ON && r.syncs)
        printf(" syncs=%llu syncs_per_s=%.0f intents_per_sync=%.2f", (unsigned long long)r.syncs,
               r.syncs / r.wall, (double)r.intents / (double)r.syncs);
    printf("\n");
    for (int c = 1; c < BENCH_MAX_CODES; c++)
        if (r.codes[c])
            printf("signer log=%s refused=%llu code=%s\n", MODE_NAME[mode],
                   (unsigned long long)r.codes[c], hsmca_code_name((hsmca_code)c));
    fflush(stdout);
    return 0;
}

int bench_signer_run(const char *dir, const bench_opts *o, bench_row *row)
{
    hsmca_config cfg;
    char config[2][1100], logpath[2][1100];
    if (bench_config(dir, "hsmca-nolog.yaml", 0, &cfg) != 0 ||
        bench_config(dir, "hsmca.yaml", 1, &cfg) != 0)
        return -1;
    snprintf(config[BENCH_LOG_OFF], sizeof(config[0]), "%s/hsmca-nolog.yaml", dir);
    snprintf(config[BENCH_LOG_ON], sizeof(config[1]), "%s/hsmca.yaml", dir);
    /* One log per mode (each phase's signer truncates it): the last phase of each. */
    snprintf(logpath[BENCH_LOG_OFF], sizeof(logpath[0]), "%s/signer-log-off.log", dir);
    snprintf(logpath[BENCH_LOG_ON], sizeof(logpath[1]), "%s/signer-log-on.log", dir);
    X509 *ca = load_cert(cfg.ca_cert);
    int bad = !ca;
    /* On, off, off, on, ...: a drift of the machine's load over the run weighs on
     * both modes alike. */
    for (int i = 0; !bad && i < 2 * o->rounds; i++) {
        int mode = (i % 4 == 0 || i % 4 == 3) ? BENCH_LOG_ON : BENCH_LOG_OFF;
        printf("round %d of %d, key %s, audit log %s\n", i / 2 + 1, o->rounds, row->key,
               MODE_NAME[mode]);
        bad = run_phase(row->key, config[mode], logpath[mode], ca, o, mode, &row->sig[mode],
                        &row->tbs_cpu_us) != 0;
    }
    X509_free(ca);
    return bad ? -1 : 0;
}
