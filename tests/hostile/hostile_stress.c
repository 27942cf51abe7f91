/* hostile_stress.c - a front end that floods the signer or stops reading, with
 * its own signer (signer/signer_core.[ch]): the queue is bounded (8192 requests,
 * 16 MiB); a reply the front end does not take within 2 s cuts it off and asks
 * the supervisor for a new one ('K'); the main thread, which also serves the
 * control channel, waits at most 100 ms to answer "queue full"; SIGTERM stops
 * the signer within a bound. Each test starts on a connection of its own: the
 * hand-over shuts the last one down and drops its jobs, so no reply or job of
 * one test reaches the next. Each case prints what it counted and measured. */
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
    req.profile = PROFILE_WORKLOAD;
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

/* SIOCOUTQ: what we sent that is still in the signer's socket. Then the control
 * channel, which the signer serves first, cannot overtake those packets. */
void hf_wait_all_read(int fd)
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

/* HS_STUCK_S without growth: the signer's socket buffer is full and its
 * workers wait on it. */
double hf_wait_stuck(int fd, int *bytes)
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

/* A signer that closes with our requests still unread in its socket makes the
 * first recv fail with ECONNRESET; the replies it sent before are still there,
 * so read on. */
size_t hf_recv_packet(int fd, uint8_t *buf)
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
    for (size_t n; (n = hf_recv_packet(fd, buf)) > 0;) {
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

int hf_sign_when_room(double bound_s, double *t_signed)
{
    double t0 = util_mono_now();
    for (int n_full = 0;; n_full++) {
        size_t len;
        uint8_t *tbs = hf_valid_tbs(&len);
        Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, tbs, len);
        int full = rep->code == HSMCA_ERATE && !strncmp(rep->reason, FULL_REASON, 30);
        if (!full)
            hf_assert_signed(rep, tbs, len);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        OPENSSL_free(tbs);
        *t_signed = util_mono_now();
        if (!full)
            return n_full;
        if (*t_signed - t0 > bound_s)
            fail_msg("still \"queue full\" %.1f s later", bound_s);
        usleep(10 * 1000);
    }
}

void hf_fresh_front_end(void)
{
    /* After a test that failed half way: no call held, its jobs dropped. */
    hf_shim_control("");
    hf_hand_over(0);
    double t;
    hf_sign_when_room(HS_CUT_BOUND_S, &t);
}

static void test_stress_ready(void **state)
{
    junk_init();
    hf_assert_signs_within(HF_READY_MS);
    fprintf(stderr,
            "  %u threads (a checker, a signing worker per session) for %u sessions; queue "
            "bound %d requests, %u bytes; at most %d staged\n",
            hf.workers, hf.sessions, SIGNER_MAX_QUEUE, SIGNER_MAX_QUEUE_BYTES, SIGNER_MAX_STAGED);
    /* The tests below count on the signer running the workers we expect. */
    char ready[64];
    snprintf(ready, sizeof(ready), "\"sessions\":\"%u\"", hf.sessions);
    char *log = hf_read_log_without_pin();
    char *line = strstr(log, "signer ready");
    if (line && strchr(line, '\n'))
        *strchr(line, '\n') = '\0';
    if (!line || !strstr(line, ready))
        fail_msg("the signer's \"signer ready\" line does not say \"%s\"", ready);
    free(log);
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
    hf_fresh_front_end();
    long rss0 = hf_vm_rss_kb();
    size_t cut_lines = hf_log_count("front end stopped reading replies");
    double t0 = util_mono_now();
    assert_int_equal(send_junk(hf.ipc, FIRST), FIRST);
    int bytes;
    double t_stuck = hf_wait_stuck(hf.ipc, &bytes);
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
    /* The old front end's queued jobs leave the shared queue only as the checker reaches
     * them (hostile_queue asserts that rule), so the new one may first hear "queue full";
     * it must get a signature once they are gone, within the cut bound. */
    double t_room;
    int waits = hf_sign_when_room(HS_CUT_BOUND_S, &t_room);
    fprintf(stderr,
            "  sent %d, then %d of %d more before the signer cut us off; %d replies waited "
            "when the workers stopped (%.3f s after the first send); restart request "
            "%.3f s after that (%.3f s after the last send); %d replies read, %d of them "
            "\"queue full\"; VmRSS %ld KiB before, %ld KiB at the cut; the new front end "
            "heard \"queue full\" %d times before a signature\n",
            FIRST, more, MORE, replies, t_stuck - t0, t_k - t_stuck, t_k - t_sent, n_junk + n_full,
            n_full, rss0, rss1, waits);
    if (k != CTL_RESTART_PEER)
        fail_msg("no restart request within %.0f s", HS_CUT_BOUND_S);
    assert_true(more < MORE);                     /* cut before the flood was all taken */
    assert_true(FIRST + more > SIGNER_MAX_QUEUE); /* and the flood did exceed the queue */
    assert_int_equal(n_full, 0);                  /* no room for one */
    assert_true(n_junk >= replies && n_junk <= replies + (int)hf.workers);
    assert_true(t_k - t_stuck < HS_CUT_BOUND_S);
    assert_int_equal(hf_log_count("front end stopped reading replies"), cut_lines + 1);
    /* Sooner than any worker's 2 s (they all started waiting after t_stuck): the
     * main thread cut us, after 100 ms, with the queue full. The log must say
     * that, not a 2 s stall that did not happen. */
    char *what = hf_log_last_field("front end stopped reading replies", "what");
    char *waited = hf_log_last_field("front end stopped reading replies", "waited_ms");
    assert_true(what && waited);
    char cut[300];
    snprintf(cut, sizeof(cut), "%s waited %s ms", what, waited);
    free(what);
    free(waited);
    fprintf(stderr, "  logged: \"%s\"\n", cut);
    if (t_k - t_stuck < HS_SEND_TIMEOUT_S - 0.1 &&
        (!strstr(cut, "the queue is full") || !strstr(cut, "waited 100 ms")))
        fail_msg("cut %.3f s after the workers stopped (by the main thread, queue full), "
                 "but the log says \"%s\"",
                 t_k - t_stuck, cut);
    assert_true(rss1 - rss0 < 64 * 1024);
    fprintf(stderr, "  VmRSS %ld KiB after\n", hf_vm_rss_kb());
}

/* Cut lines that a worker's reply wrote (its wait is the send timeout). */
static size_t cuts_after_a_reply(void)
{
    return hf_log_count_field("front end stopped reading replies", "what", "a reply");
}

/* A front end that sends many valid requests and never reads a reply. Fewer
 * than the queue holds, so the cut must come from a worker whose reply waited
 * 2 s: never sooner than 2 s after the first request. The replies sent before
 * the workers stopped are all signatures of the requests sent; the cut shuts
 * the connection down, so the other workers' replies fail at once and every
 * job left in the queue is dropped unsigned: the token signed what we read,
 * plus one reply per worker at most. */
static void test_stall_cut_off(void **state)
{
    enum { N = 3000 };
    hf_fresh_front_end(); /* no reply to an earlier test's request can come here */
    size_t len0;
    uint8_t *tmpl = hf_valid_tbs(&len0);
    uint8_t *tbs = malloc((size_t)N * len0);
    assert_non_null(tbs);
    for (int i = 0; i < N; i++) { /* distinct serials, one key: keygen is not the point */
        memcpy(tbs + (size_t)i * len0, tmpl, len0);
        hf_tbs_new_serial(tbs + (size_t)i * len0, len0);
    }
    OPENSSL_free(tmpl);
    long rss0 = hf_vm_rss_kb();
    size_t cut_lines = cuts_after_a_reply();
    size_t undelivered0 = hf_log_count("reply ");
    unsigned long signs0 = hf_shim_count("C_Sign");
    uint64_t first = hf.next_id;
    double t0 = util_mono_now();
    int sent = 0;
    for (; sent < N; sent++)
        hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs + (size_t)sent * len0, len0);
    double t_sent = util_mono_now();
    int k = hf_read_ctl((int)(HS_CUT_BOUND_S * 1000));
    double t_k = util_mono_now();
    usleep(200 * 1000); /* the stale jobs are dropped */
    long rss1 = hf_vm_rss_kb();
    /* Now read what the signer sent before the cut: signatures, each as sent. */
    int n_signed = 0;
    static uint8_t buf[IPC_MAX_FRAME];
    for (size_t n; (n = hf_recv_packet(hf.ipc, buf)) > 0;) {
        ipc_msg m;
        hsmca_err e;
        if (ipc_frame_decode(buf, n, &m, &e) != HSMCA_OK)
            fail_msg("%s", e.msg);
        if (m.id < first || m.id >= first + N)
            fail_msg("reply to request %llu, not one of ours [%llu, %llu)",
                     (unsigned long long)m.id, (unsigned long long)first,
                     (unsigned long long)(first + N));
        Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
        assert_non_null(rep);
        hf_assert_signed(rep, tbs + (m.id - first) * len0, len0);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        n_signed++;
    }
    free(tbs);
    unsigned long signs = hf_shim_count("C_Sign") - signs0;
    size_t undelivered = hf_log_count("reply ") - undelivered0;
    fprintf(stderr,
            "  %d valid requests sent in %.3f s, none read; restart request %.3f s after the "
            "first (%.3f s after the last); then %d signatures read, then EOF; the token "
            "signed %lu (%zu replies logged undelivered), %lu jobs dropped unsigned; VmRSS "
            "%ld KiB before, %ld KiB after\n",
            sent, t_sent - t0, t_k - t0, t_k - t_sent, n_signed, signs, undelivered, N - signs,
            rss0, rss1);
    if (k != CTL_RESTART_PEER)
        fail_msg("no restart request within %.0f s of the last request", HS_CUT_BOUND_S);
    assert_true(t_k - t0 >= HS_SEND_TIMEOUT_S - 0.01); /* the 2 s send timeout, no sooner */
    assert_true(t_k - t_sent < HS_CUT_BOUND_S);
    assert_true(n_signed > 0 && n_signed < N);
    assert_int_equal(cuts_after_a_reply(), cut_lines + 1);
    char *waited = hf_log_last_field("front end stopped reading replies", "waited_ms");
    assert_non_null(waited);
    assert_string_equal(waited, "2000");
    free(waited);
    /* The worker that cut us held one reply; each other one at most one more. */
    if (signs < (unsigned long)n_signed + 1 + undelivered ||
        signs > (unsigned long)n_signed + hf.workers)
        fail_msg("the token signed %lu: %d read, %zu undelivered, %u workers", signs, n_signed,
                 undelivered, hf.workers);
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
    hf_fresh_front_end();
    assert_int_equal(send_junk(hf.ipc, 2048), 2048);
    double t_stuck = hf_wait_stuck(hf.ipc, &bytes);
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

const struct CMUnitTest hf_stress_tests[] = {
    cmocka_unit_test(test_stress_ready),
    cmocka_unit_test(test_flood_never_read),
    cmocka_unit_test(test_stall_cut_off),
};
const size_t hf_n_stress_tests = sizeof(hf_stress_tests) / sizeof(hf_stress_tests[0]);

/* Last: it stops the signer. */
const struct CMUnitTest hf_stress_stop_tests[] = {
    cmocka_unit_test(test_sigterm_during_stall),
};
const size_t hf_n_stress_stop_tests =
    sizeof(hf_stress_stop_tests) / sizeof(hf_stress_stop_tests[0]);
