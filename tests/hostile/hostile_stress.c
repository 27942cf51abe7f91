/* hostile_stress.c - a front end that floods the signer or stops reading, with
 * its own signer (signer/signer_core.[ch]): the queue is bounded (8192 requests,
 * 16 MiB); a reply the front end does not take within 2 s cuts it off and asks
 * the supervisor for a new one ('K'); the main thread, which also serves the
 * control channel, waits at most 100 ms to answer "queue full"; SIGTERM stops
 * the signer within a bound. Each case prints what it counted and measured. */
#include "hostile.h"

#include <errno.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "ipc_frame.h"
#include "signer_core.h"
#include "signer_tbs.h"
#include "util.h"

#define HS_SEND_TIMEOUT_S 2.0 /* SIGNER_SEND_TIMEOUT_MS in signer/signer_core.c */
#define HS_CUT_BOUND_S 15.0   /* liveness bound on a cut, not a benchmark */
#define HS_STOP_BOUND_S 10.0  /* and on SIGTERM */
#define HS_STUCK_S 0.3        /* replies that stop growing this long: the workers wait */
#define HS_BIG (1 << 20)      /* 1 MiB: the VmRSS margins below are in KiB */
#define JUNK_REASON "invariant 0: TBSCertificate: not DER"
#define FULL_REASON "invariant 7: signer queue full ("

/* A request the signer refuses at its first byte (tbs = 00), so its workers
 * cost nothing, and the size of its reply. */
static struct {
    uint8_t frame[128];
    size_t n, reply_size;
} junk;

static void junk_init(void)
{
    static const uint8_t tbs0[1] = {0}, csr[32] = {3};
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = TBS_PROFILE_WORKLOAD;
    req.tbs.data = (uint8_t *)tbs0;
    req.tbs.len = 1;
    req.requester = (char *)HF_SPIFFE_ID;
    req.csr_sha256.data = (uint8_t *)csr;
    req.csr_sha256.len = 32;
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    assert_true(IPC_HEADER_LEN + n <= sizeof(junk.frame));
    junk.frame[0] = IPC_SIGN_REQ;
    hsmca__ipc__sign_request__pack(&req, junk.frame + IPC_HEADER_LEN);
    junk.n = IPC_HEADER_LEN + n;
    Hsmca__Ipc__SignReply rep = HSMCA__IPC__SIGN_REPLY__INIT;
    rep.code = HSMCA_EINVAL;
    rep.reason = (char *)JUNK_REASON;
    junk.reply_size = IPC_HEADER_LEN + hsmca__ipc__sign_reply__get_packed_size(&rep);
}

/* Sends n packets (frame with a fresh id each) without reading a reply, as fast
 * as the signer takes them; stops at EPIPE (the signer cut us off). Returns how
 * many went out. */
static int send_many(int fd, uint8_t *frame, size_t len, int n)
{
    struct timeval tv = {5, 0}; /* the signer's main thread never stops reading */
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
    for (int i = 0; i < n; i++) {
        uint64_t id = hf.next_id++;
        for (int b = 0; b < 8; b++)
            frame[1 + b] = (uint8_t)(id >> (56 - 8 * b));
        if (send(fd, frame, len, MSG_NOSIGNAL) == (ssize_t)len)
            continue;
        if (errno == EPIPE || errno == ECONNRESET)
            return i;
        fail_msg("send %d of %d: %s (the signer stopped reading requests?)", i, n, strerror(errno));
    }
    return n;
}

static int send_junk(int fd, int n)
{
    return send_many(fd, junk.frame, junk.n, n);
}

/* Bytes of replies waiting for us (FIONREAD sums a SEQPACKET queue): looked at,
 * never read. */
static int inq(int fd)
{
    int q = 0;
    assert_int_equal(ioctl(fd, FIONREAD, &q), 0);
    return q;
}

/* Waits until the signer has read every packet we sent on fd (SIOCOUTQ: what
 * we sent that is still in its socket), so that the control channel, which
 * the signer serves first, cannot overtake them. */
static void wait_all_read(int fd)
{
    double t0 = util_mono_now();
    for (int out = 1; out > 0;) {
        assert_int_equal(ioctl(fd, SIOCOUTQ, &out), 0);
        if (out > 0 && util_mono_now() - t0 > 5)
            fail_msg("the signer left %d bytes of requests unread for 5 s", out);
        if (out > 0)
            usleep(1000);
    }
}

/* Waits until the replies waiting on fd stop growing for HS_STUCK_S: the
 * signer's socket buffer is full and its workers wait on it. Returns when they
 * last grew; *bytes is what waits for us. */
static double wait_stuck(int fd, int *bytes)
{
    double t0 = util_mono_now(), t_last = t0;
    int last = inq(fd);
    while (util_mono_now() - t_last < HS_STUCK_S) {
        usleep(5000);
        int q = inq(fd);
        if (q != last) {
            last = q;
            t_last = util_mono_now();
        }
        if (util_mono_now() - t0 > 10)
            fail_msg("the replies kept growing for 10 s");
    }
    *bytes = last;
    return t_last;
}

/* The next packet on fd (its length), 0 at EOF. A signer that closes with our
 * requests still unread in its socket makes the first recv fail with
 * ECONNRESET; the replies it sent before are still there, so read on. */
static size_t recv_packet(int fd, uint8_t *buf)
{
    for (;;) {
        if (!hf_wait_readable(fd, HF_DROP_MS))
            fail_msg("no EOF within %d ms", HF_DROP_MS);
        ssize_t r = recv(fd, buf, IPC_MAX_FRAME, 0);
        if (r >= 0)
            return (size_t)r; /* the signer never sends an empty packet */
        if (errno != ECONNRESET && errno != EINTR)
            fail_msg("recv: %s", strerror(errno));
    }
}

/* Reads fd to EOF: every reply must be the junk refusal or "queue full". */
static void drain(int fd, int *n_junk, int *n_full)
{
    static uint8_t buf[IPC_MAX_FRAME];
    *n_junk = *n_full = 0;
    for (size_t n; (n = recv_packet(fd, buf)) > 0;) {
        ipc_msg m;
        hsmca_err e;
        if (ipc_frame_decode(buf, n, &m, &e) != HSMCA_OK)
            fail_msg("%s", e.msg);
        Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
        assert_non_null(rep);
        if (rep->code == HSMCA_EINVAL && !strcmp(rep->reason, JUNK_REASON))
            (*n_junk)++;
        else if (rep->code == HSMCA_ERATE && !strncmp(rep->reason, FULL_REASON, 30))
            (*n_full)++;
        else
            fail_msg("unexpected reply: code %u \"%s\"", rep->code, rep->reason);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    }
}

static void assert_signs_within(double secs)
{
    double t0 = util_mono_now();
    for (;;) {
        size_t len;
        uint8_t *tbs = hf_valid_tbs(&len);
        Hsmca__Ipc__SignReply *rep = hf_sign(TBS_PROFILE_WORKLOAD, tbs, len);
        int full = rep->code == HSMCA_ERATE && strstr(rep->reason, "signer queue full");
        if (!full)
            hf_assert_signed(rep, tbs, len);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        OPENSSL_free(tbs);
        if (!full)
            return;
        if (util_mono_now() - t0 > secs)
            fail_msg("still \"queue full\" %.1f s later", secs);
        usleep(50 * 1000);
    }
}

static void test_stress_ready(void **state)
{
    junk_init();
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    uint64_t id = hf_send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs, len);
    Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, HF_READY_MS);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    fprintf(stderr, "  %u signing threads; queue bound %d requests, %u bytes\n", hf.sessions,
            SIGNER_MAX_QUEUE, SIGNER_MAX_QUEUE_BYTES);
}

/* More requests than the queue holds, never reading a reply. Replies fill the
 * socket and the workers wait on it (at most 2 s each); the queue then fills
 * behind them, and the main thread's "queue full" reply finds no room within
 * its 100 ms either. So from the code: no "queue full" reply can reach this
 * front end; it is cut off as stalled (by the main thread once the queue is
 * full, or by a worker's 2 s, whichever comes first), 'K' goes to the
 * supervisor, and the replies sent before the workers stopped are all it gets. */
static void test_flood_never_read(void **state)
{
    enum { FIRST = 2048, MORE = SIGNER_MAX_QUEUE + 2048 };
    long rss0 = hf_vm_rss_kb();
    size_t cut_lines = hf_log_count("front end stopped reading replies");
    double t0 = util_mono_now();
    assert_int_equal(send_junk(hf.ipc, FIRST), FIRST);
    int bytes;
    double t_stuck = wait_stuck(hf.ipc, &bytes);
    assert_int_equal(bytes % (int)junk.reply_size, 0);
    int replies = bytes / (int)junk.reply_size;
    assert_true(replies < FIRST); /* the workers do wait */
    int more = send_junk(hf.ipc, MORE);
    double t_sent = util_mono_now();
    int k = hf_read_ctl((int)(HS_CUT_BOUND_S * 1000));
    double t_k = util_mono_now();
    long rss1 = hf_vm_rss_kb();
    int n_junk, n_full;
    drain(hf.ipc, &n_junk, &n_full);
    assert_true(hf_signer_alive());
    hf_hand_over(0); /* first, so that a failure below leaves the next test a connection */
    hf_assert_signs_fresh();
    fprintf(stderr,
            "  sent %d, then %d of %d more before the signer cut us off; %d replies waited "
            "when the workers stopped (%.3f s after the first send); restart request "
            "%.3f s after that (%.3f s after the last send); %d replies read, %d of them "
            "\"queue full\"; VmRSS %ld KiB before, %ld KiB at the cut\n",
            FIRST, more, MORE, replies, t_stuck - t0, t_k - t_stuck, t_k - t_sent, n_junk + n_full,
            n_full, rss0, rss1);
    if (k != CTL_RESTART_PEER)
        fail_msg("no restart request within %.0f s", HS_CUT_BOUND_S);
    assert_true(more < MORE);                     /* cut before the flood was all taken */
    assert_true(FIRST + more > SIGNER_MAX_QUEUE); /* and the flood did exceed the queue */
    assert_int_equal(n_full, 0);                  /* no room for one */
    assert_true(n_junk >= replies && n_junk <= replies + (int)hf.sessions);
    assert_true(t_k - t_stuck < HS_CUT_BOUND_S);
    assert_int_equal(hf_log_count("front end stopped reading replies"), cut_lines + 1);
    /* Sooner than any worker's 2 s (they all started waiting after t_stuck): the
     * main thread cut us, after 100 ms, with the queue full. The log must say
     * that, not a 2 s stall that did not happen. */
    char *cut = hf_log_last_msg("front end stopped reading replies");
    fprintf(stderr, "  logged: \"%s\"\n", cut);
    if (t_k - t_stuck < HS_SEND_TIMEOUT_S - 0.1 &&
        (!strstr(cut, "the queue is full") || !strstr(cut, "waited 100 ms")))
        fail_msg("cut %.3f s after the workers stopped (by the main thread, queue full), "
                 "but the log says \"%s\"",
                 t_k - t_stuck, cut);
    free(cut);
    assert_true(rss1 - rss0 < 64 * 1024);
    fprintf(stderr, "  VmRSS %ld KiB after\n", hf_vm_rss_kb());
}

/* A SignRequest frame (header id filled in by send_many) whose tbs is tbs_len
 * zero bytes: refused by the validator at once, but queued at its full size. */
static uint8_t *junk_frame(size_t tbs_len, size_t *len)
{
    static const uint8_t csr[32] = {3};
    uint8_t *tbs = calloc(1, tbs_len);
    assert_non_null(tbs);
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = TBS_PROFILE_WORKLOAD;
    req.tbs.data = tbs;
    req.tbs.len = tbs_len;
    req.requester = (char *)HF_SPIFFE_ID;
    req.csr_sha256.data = (uint8_t *)csr;
    req.csr_sha256.len = 32;
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    uint8_t *f = malloc(IPC_HEADER_LEN + n);
    assert_non_null(f);
    f[0] = IPC_SIGN_REQ;
    hsmca__ipc__sign_request__pack(&req, f + IPC_HEADER_LEN);
    free(tbs);
    *len = IPC_HEADER_LEN + n;
    return f;
}

/* The replies that come back on fd at once (none for 300 ms: the rest are
 * queued), all "queue full" with the same counts, which *q and *qb return;
 * *t_first is when the first came. */
static int read_queue_full(int fd, int *q, size_t *qb, double *t_first)
{
    int n = 0;
    *q = -1;
    *t_first = 0;
    while (hf_wait_readable(fd, 300)) {
        uint64_t rid;
        Hsmca__Ipc__SignReply *rep = hf_recv_reply(fd, HF_REPLY_MS, &rid, "a queue-full reply");
        int rq = -1;
        size_t rb = 0;
        if (rep->code != HSMCA_ERATE ||
            sscanf(rep->reason, FULL_REASON "%d requests, %zu bytes)", &rq, &rb) != 2)
            fail_msg("expected \"%s...\", got code %u \"%s\"", FULL_REASON, rep->code, rep->reason);
        if (n == 0) {
            *t_first = util_mono_now();
            fprintf(stderr, "  first refusal: \"%s\"\n", rep->reason);
        } else if (rq != *q || rb != *qb) /* the workers wait: nothing leaves the queue */
            fail_msg("queue moved while full: %d/%zu then \"%s\"", *q, *qb, rep->reason);
        *q = rq;
        *qb = rb;
        n++;
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    }
    return n;
}

/* Front end A floods and stops reading: the workers wait on it. The supervisor
 * hands over a new front end B while A is still open (so the workers keep
 * waiting, up to 2 s); B's flood meets the full queue and, its socket having
 * room, gets "queue full" (ERATE) for exactly the excess. With the queue still
 * full, the control channel hands over C and C is answered at once; once the
 * workers give up on A, the stale jobs of A and B are dropped and C is signed.
 * big: B's requests carry 16 KiB each, so the byte bound refuses first. */
static void queue_full_scenario(int big)
{
    enum { FIRST = 2048, SLACK = 16, NB_SMALL = 64, NB_BIG = 1100 };
    long rss0 = hf_vm_rss_kb();
    int a = hf.ipc, bytes;
    assert_int_equal(send_junk(a, FIRST), FIRST);
    double t_stuck = wait_stuck(a, &bytes);
    int r_a = bytes / (int)junk.reply_size;
    /* Jobs held by the signer: queued, or in a waiting worker's hands. */
    int sent_a = FIRST, in_hands = (int)hf.sessions;
    if (!big) {
        int fill = SIGNER_MAX_QUEUE - (FIRST - r_a) - SLACK; /* short of full by SLACK */
        assert_int_equal(send_junk(a, fill), fill);
        sent_a += fill;
    }
    wait_all_read(a);
    assert_int_equal(hf_hand_over(1), a);
    size_t flen;
    uint8_t *frame = big ? junk_frame(TBS_MAX_LEN, &flen) : junk_frame(1, &flen);
    int nb = big ? NB_BIG : NB_SMALL;
    assert_int_equal(send_many(hf.ipc, frame, flen, nb), nb);
    int q;
    size_t qb = 0;
    double t_full;
    int n_full = read_queue_full(hf.ipc, &q, &qb, &t_full);
    long rss_peak = hf_vm_rss_kb();

    /* The control channel, with the queue full: C is taken, and its request
     * like B's is answered at once. */
    int b = hf_hand_over(1);
    assert_int_equal(send_many(hf.ipc, frame, flen, 1), 1);
    free(frame);
    int cq;
    size_t cqb = 0;
    double t_c;
    int c_full = read_queue_full(hf.ipc, &cq, &cqb, &t_c);
    assert_signs_within(HS_CUT_BOUND_S);
    double t_signed = util_mono_now();
    int k = hf_read_ctl(0);
    int a_junk, a_full, b_junk, b_full;
    drain(a, &a_junk, &a_full);
    drain(b, &b_junk, &b_full);
    close(a);
    close(b);
    long rss1 = hf_vm_rss_kb();
    /* What A left in the queue, from what A was finally sent back (a worker
     * held up by the scheduler may have sent one more after wait_stuck): the
     * signer counts queued jobs, not those in the workers' hands. */
    int queued_a = sent_a - a_junk - in_hands, took = q - queued_a;
    fprintf(stderr,
            "  A: %d requests held (%d replies waiting, %d in the workers' hands); B: %d "
            "requests of %zu bytes, %d queued, %d answered \"queue full\" (%d requests, %zu "
            "bytes); C answered %s %.3f s after the workers stopped; C signed %.3f s after; "
            "then A read %d replies and EOF, B %d; VmRSS %ld KiB before, %ld KiB with the "
            "queue full, %ld KiB after\n",
            sent_a - a_junk, r_a, in_hands, nb, flen, took, n_full, q, qb,
            c_full ? "\"queue full\"" : "?", t_c - t_stuck, t_signed - t_stuck, a_junk,
            b_junk + b_full, rss0, rss_peak, rss1);
    if (k >= 0)
        fail_msg("restart request '%c': the workers gave up on A before B was handed over "
                 "(%.3f s after they stopped; this machine is too slow for the scenario)",
                 k, t_full - t_stuck);
    if (c_full != 1 || cq != q || cqb != qb)
        fail_msg("C's request was not refused \"queue full\" as B's were (%.3f s after "
                 "the workers stopped)",
                 t_c - t_stuck);
    assert_int_equal(took + n_full, nb);
    if (big) { /* the byte bound refused: within one 16 KiB request of 16 MiB */
        assert_true(q < SIGNER_MAX_QUEUE);
        assert_true(qb <= SIGNER_MAX_QUEUE_BYTES && qb + TBS_MAX_LEN > SIGNER_MAX_QUEUE_BYTES);
    } else { /* the count bound: B's excess, exactly */
        assert_int_equal(q, SIGNER_MAX_QUEUE);
        assert_int_equal(n_full, nb - (SIGNER_MAX_QUEUE - queued_a));
    }
    /* A was replaced, not sent the stale replies: what waited, and at most one
     * more per worker. */
    assert_true(a_junk >= r_a && a_junk <= r_a + in_hands);
    assert_int_equal(a_full + b_junk + b_full, 0);
    assert_true(rss_peak - rss0 < 64 * 1024 && rss1 - rss0 < 64 * 1024);
}

static void test_queue_full_by_count_and_ctl_served(void **state)
{
    queue_full_scenario(0);
}

static void test_queue_full_by_bytes_and_ctl_served(void **state)
{
    queue_full_scenario(1);
}

/* A front end that sends many valid requests and never reads a reply. Fewer
 * than the queue holds, so the cut must come from a worker whose reply waited
 * 2 s: never sooner than 2 s after the first request. The replies sent before
 * the workers stopped are all signatures of the requests sent. */
static void test_stall_cut_off(void **state)
{
    enum { N = 3000 };
    EVP_PKEY *key = EVP_EC_gen("P-256"); /* one key: the builder's keygen is not the point */
    assert_non_null(key);
    tbs_spec spec = {.key = key};
    uint8_t **tbs = calloc(N, sizeof(*tbs));
    size_t *len = calloc(N, sizeof(*len));
    assert_true(tbs && len);
    for (int i = 0; i < N; i++)
        tbs[i] = hf_build_tbs(&spec, &len[i]);
    EVP_PKEY_free(key);
    long rss0 = hf_vm_rss_kb();
    size_t cut_lines = hf_log_count("front end stopped reading replies (a reply waited 2000 ms)");
    uint64_t first = hf.next_id;
    double t0 = util_mono_now();
    int sent = 0;
    for (; sent < N; sent++)
        hf_send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs[sent], len[sent]);
    double t_sent = util_mono_now();
    int k = hf_read_ctl((int)(HS_CUT_BOUND_S * 1000));
    double t_k = util_mono_now();
    usleep(200 * 1000); /* the stale jobs are dropped */
    long rss1 = hf_vm_rss_kb();
    /* Now read what the signer sent before the cut: signatures, each as sent. */
    int n_signed = 0;
    static uint8_t buf[IPC_MAX_FRAME];
    for (size_t n; (n = recv_packet(hf.ipc, buf)) > 0;) {
        ipc_msg m;
        hsmca_err e;
        if (ipc_frame_decode(buf, n, &m, &e) != HSMCA_OK)
            fail_msg("%s", e.msg);
        assert_true(m.id >= first && m.id < first + N);
        Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
        assert_non_null(rep);
        hf_assert_signed(rep, tbs[m.id - first], len[m.id - first]);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        n_signed++;
    }
    fprintf(stderr,
            "  %d valid requests sent in %.3f s, none read; restart request %.3f s after the "
            "first (%.3f s after the last); then %d signatures read, then EOF; VmRSS %ld KiB "
            "before, %ld KiB after\n",
            sent, t_sent - t0, t_k - t0, t_k - t_sent, n_signed, rss0, rss1);
    for (int i = 0; i < N; i++)
        OPENSSL_free(tbs[i]);
    free(tbs);
    free(len);
    if (k != CTL_RESTART_PEER)
        fail_msg("no restart request within %.0f s of the last request", HS_CUT_BOUND_S);
    assert_true(t_k - t0 >= HS_SEND_TIMEOUT_S - 0.01); /* the 2 s send timeout, no sooner */
    assert_true(t_k - t_sent < HS_CUT_BOUND_S);
    assert_true(n_signed > 0 && n_signed < N);
    assert_int_equal(hf_log_count("front end stopped reading replies (a reply waited 2000 ms)"),
                     cut_lines + 1);
    if (rss1 - rss0 > 32 * 1024)
        fail_msg("VmRSS grew by %ld KiB across the stall", rss1 - rss0);
    hf_hand_over(0);
    hf_assert_signs_fresh();
}

/* SIGTERM while the workers wait on a front end that stopped reading: the
 * signer stops (workers joined within 3 s) and exits 0. */
static void test_sigterm_during_stall(void **state)
{
    int bytes;
    assert_int_equal(send_junk(hf.ipc, 2048), 2048);
    double t_stuck = wait_stuck(hf.ipc, &bytes);
    double t0 = util_mono_now();
    assert_int_equal(kill(hf.pid, SIGTERM), 0);
    int st = 0;
    pid_t r;
    while ((r = waitpid(hf.pid, &st, WNOHANG)) == 0 && util_mono_now() - t0 < HS_STOP_BOUND_S)
        usleep(10 * 1000);
    double t_exit = util_mono_now();
    fprintf(stderr,
            "  SIGTERM %.3f s after the workers stopped (%d replies waiting): exit %s %d after "
            "%.3f s\n",
            t0 - t_stuck, bytes / (int)junk.reply_size,
            r == hf.pid && WIFEXITED(st) ? "status" : "?",
            r == hf.pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1, t_exit - t0);
    if (r != hf.pid) {
        hf_dump_log_tail();
        fail_msg("the signer did not stop within %.0f s of SIGTERM", HS_STOP_BOUND_S);
    }
    hf.pid = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        hf_dump_log_tail();
        fail_msg("the signer did not exit cleanly (status 0x%x)", st);
    }
    hf_log_stats ls;
    hf_check_log(&ls);
    assert_true(hf_log_count("stopping on signal") == 1);
}

int hf_stress_group_setup(void **state)
{
    return hf_start_signer("hostile-stress", NULL);
}

const struct CMUnitTest hf_stress_tests[] = {
    cmocka_unit_test(test_stress_ready),
    cmocka_unit_test(test_flood_never_read),
    cmocka_unit_test(test_queue_full_by_count_and_ctl_served),
    cmocka_unit_test(test_queue_full_by_bytes_and_ctl_served),
    cmocka_unit_test(test_stall_cut_off),
    cmocka_unit_test(test_sigterm_during_stall),
};
const size_t hf_n_stress_tests = sizeof(hf_stress_tests) / sizeof(hf_stress_tests[0]);
