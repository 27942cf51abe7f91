/* hostile_queue.c - invariant 7's queue (signer/signer_core.c: at most 8192
 * requests, and 16 MiB of them as unpacked) filled by a front end that keeps
 * reading while the token is slow, and the hand-over of a new front end
 * (signer_conn_set), which shuts the old connection down at once: the workers
 * waiting to send to it are released, and its queued jobs are dropped as the
 * workers reach them. The token is slow through the shim (hostile_shim.c):
 * "hang C_Sign always" holds the call of each session (pkcs11.sessions) until
 * "release", and the checker goes on staging requests (their intents logged)
 * until SIGNER_MAX_STAGED wait for a session. So the signer holds HQ_HELD jobs,
 * no thread is blocked on a socket, and nothing leaves the queue while it is
 * full. Every request is a valid TBS with a serial of its own. */
#include "hostile.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "ipc_frame.h"
#include "profile.h"
#include "signer_core.h"
#include "signer_tbs.h"
#include "util.h"

#define HQ_EXCESS 600              /* requests beyond what the queue takes */
#define HQ_PROMPT_S 1.0            /* what the main thread owes at once (it waits 100 ms at most) */
#define HQ_LIVE_S 1.5              /* B signed after the hand-over; SIGNER_SEND_TIMEOUT_MS is 2 s */
#define HQ_DRAIN_S 5.0             /* held calls let go, stale jobs dropped, B signed: liveness */
#define HQ_SETTLE_US (1400 * 1000) /* the refusal limiter's 1 s window closed, its summary out */
#define HQ_RSS_KB (64 * 1024)
#define FULL_REASON "invariant 7: signer queue full ("
/* The jobs the signer holds out of its queue while the token hangs: one in each
 * session's call, SIGNER_MAX_STAGED checked and logged behind them. */
#define HQ_HELD (hf.sessions + SIGNER_MAX_STAGED)

/* A flood of valid requests of one shape, and the "queue full" answers to it. */
typedef struct {
    uint8_t *tbs; /* the template: each request gets a fresh serial */
    size_t len;
    const char *requester;
    size_t rlen;
    uint64_t first;        /* the id of request 0 */
    int sent, n_full, cap; /* requests sent; answered "queue full"; room in full[] */
    uint8_t *full;         /* per request: answered "queue full" */
    int q;                 /* the counts every "queue full" named */
    size_t qb;
    char reason[128]; /* the first one */
} hq_flood;

static void send_one(hq_flood *fl, int fd)
{
    assert_true(fl->sent < fl->cap);
    hf_tbs_new_serial(fl->tbs, fl->len);
    uint64_t id =
        hf_send_request_as(fd, PROFILE_WORKLOAD, fl->tbs, fl->len, fl->requester, fl->rlen, 32);
    assert_int_equal(id, fl->first + (uint64_t)fl->sent);
    fl->sent++;
}

/* The next reply on fd: "queue full" for one of ours, once, naming the counts
 * all the others named (the token holds the workers: nothing leaves the queue). */
static void read_one(hq_flood *fl, int fd)
{
    uint64_t rid;
    Hsmca__Ipc__SignReply *rep = hf_recv_reply(fd, HF_REPLY_MS, &rid, "a \"queue full\" reply");
    int q = -1;
    size_t qb = 0;
    if (rep->code != HSMCA_ERATE ||
        sscanf(rep->reason, FULL_REASON "%d requests, %zu bytes)", &q, &qb) != 2)
        fail_msg("request %llu: expected \"%s...\", got code %u \"%s\"", (unsigned long long)rid,
                 FULL_REASON, rep->code, rep->reason);
    if (rid < fl->first || rid >= fl->first + (uint64_t)fl->sent || fl->full[rid - fl->first])
        fail_msg("reply to request %llu: not ours, or a second one", (unsigned long long)rid);
    if (fl->n_full == 0) {
        fl->q = q;
        fl->qb = qb;
        snprintf(fl->reason, sizeof(fl->reason), "%s", rep->reason);
    } else if (q != fl->q || qb != fl->qb) {
        fail_msg("the queue moved while the token held the workers: \"%s\", then \"%s\"",
                 fl->reason, rep->reason);
    }
    fl->full[rid - fl->first] = 1;
    fl->n_full++;
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
}

/* Sends until fl->sent is n, reading every reply as it comes (a front end that
 * keeps reading: the signer never waits on it), then the replies still due. */
static void flood_fill(hq_flood *fl, int fd, int n)
{
    while (fl->sent < n) {
        struct pollfd p = {fd, POLLIN | POLLOUT, 0};
        if (poll(&p, 1, HF_REPLY_MS) <= 0)
            fail_msg("the connection neither readable nor writable for %d ms", HF_REPLY_MS);
        if (p.revents & POLLIN)
            read_one(fl, fd);
        else if (p.revents & POLLOUT)
            send_one(fl, fd);
        else
            fail_msg("the signer ended the connection after %d requests", fl->sent);
    }
    hf_wait_all_read(fd);
    while (hf_wait_readable(fd, 300))
        read_one(fl, fd);
}

/* Waits (up to HQ_DRAIN_S) until the log has n lines "reply ... not delivered" more
 * than `before`: the last thing a worker does with a job whose front end is gone.
 * B can be signed before every worker that waited for a session has had its turn. */
static size_t wait_undelivered(size_t before, size_t n)
{
    double t0 = util_mono_now();
    size_t got;
    while ((got = hf_log_count("reply ") - before) < n && util_mono_now() - t0 < HQ_DRAIN_S)
        usleep(10 * 1000);
    return got;
}

/* The log once the refusal limiter's window is over and its summary written. */
static hf_log_stats settled_log(void)
{
    usleep(HQ_SETTLE_US);
    hf_log_stats st;
    hf_check_log(&st);
    return st;
}

/* A reads: HQ_HELD requests, held by the token (one per session) or staged for a
 * session (the others, counted by their intents in the audit log); then more than
 * the queue holds. A gets "queue full" (ERATE) for exactly the excess: by count with
 * small requests, by bytes with requests padded to the largest requester the
 * wire admits (valid: it is only logged). With the queue full, the supervisor
 * hands over B: B's request is answered at once ("queue full": A's jobs still
 * fill the queue, the workers being in the token), and A gets EOF at once. Once
 * the token lets go, the held calls finish (their replies find A shut down), A's
 * staged jobs are not signed (each intent gets its "not signed" result), its
 * queued jobs are dropped unsigned, and B is signed. */
static void queue_full_scenario(int by_bytes)
{
    static char pad[PROFILE_REQUESTER_MAX];
    hq_flood fl = {0};
    hf_fresh_front_end();
    fl.tbs = hf_valid_tbs(&fl.len);
    fl.requester = HF_SPIFFE_ID;
    fl.rlen = strlen(HF_SPIFFE_ID);
    if (by_bytes) {
        memset(pad, 'p', sizeof(pad));
        memcpy(pad, HF_SPIFFE_ID "/", strlen(HF_SPIFFE_ID "/"));
        fl.requester = pad;
        fl.rlen = sizeof(pad);
    }
    size_t own = fl.len + fl.rlen + 1 + 32 + 64; /* of job_cost: the request's fields */
    int total = by_bytes ? (int)(SIGNER_MAX_QUEUE_BYTES / own) + HQ_EXCESS
                         : (int)HQ_HELD + SIGNER_MAX_QUEUE + HQ_EXCESS;
    fl.cap = total + 1;
    fl.full = calloc((size_t)fl.cap, 1);
    assert_non_null(fl.full);
    hf_log_stats log0 = settled_log();
    unsigned long full0 = hf.n_queue_full, signs0 = hf_shim_count("C_Sign");
    size_t signed0 = hf_log_count("signed "), undelivered0 = hf_log_count("reply ");
    long rss0 = hf_vm_rss_kb();
    size_t intents0 = hf_audit_count("issue-intent"), results0 = hf_audit_count("issue-result");
    int a = hf.ipc;
    fl.first = hf.next_id;

    hf_shim_control("hang C_Sign always\n");
    double t0 = util_mono_now();
    flood_fill(&fl, a, (int)HQ_HELD);
    /* The signer holds them all: the sessions' calls in the token, the others'
     * intents durable (staged for a session). None is left queued. */
    hf_shim_wait_hanging(hf.sessions, 5000);
    hf_audit_wait("issue-intent", intents0 + HQ_HELD, 5000);
    size_t intents_held = hf_audit_count("issue-intent") - intents0;
    flood_fill(&fl, a, total);
    double t_filled = util_mono_now();
    long rss_full = hf_vm_rss_kb();
    int a_sent = fl.sent, taken = fl.sent - fl.n_full, a_full = fl.n_full;

    /* The control channel with the queue full: B is taken, answered at once. */
    double t_h = util_mono_now();
    assert_int_equal(hf_hand_over(1), a);
    send_one(&fl, hf.ipc); /* request fl.sent - 1, of the same shape as A's */
    read_one(&fl, hf.ipc);
    double t_b = util_mono_now();
    static uint8_t buf[IPC_MAX_FRAME];
    size_t a_more = hf_recv_packet(a, buf); /* A: shut down by the hand-over */
    double t_eof = util_mono_now();
    unsigned long held = hf_shim_count("hanging");
    size_t intents_full = hf_audit_count("issue-intent") - intents0;

    double t_r = util_mono_now();
    hf_shim_control("release\n");
    double t_signed;
    int b_full = hf_sign_when_room(HQ_DRAIN_S, &t_signed);
    hf_shim_control("");
    int k = hf_read_ctl(0);
    size_t undelivered = wait_undelivered(undelivered0, hf.sessions);
    unsigned long signs = hf_shim_count("C_Sign") - signs0;
    size_t signed_lines = hf_log_count("signed ") - signed0;
    long rss1 = hf_vm_rss_kb();
    close(a);
    hf_log_stats log1 = settled_log();
    size_t lines = log1.refused_lines - log0.refused_lines;
    unsigned long long suppressed = log1.suppressed - log0.suppressed;
    unsigned long received = hf.n_queue_full - full0;
    size_t cost = taken > 0 ? fl.qb / (size_t)taken : 0;

    fprintf(stderr,
            "  A: %d requests (TBS %zu bytes, requester %zu) in %.3f s, reading all the while: "
            "%u held by the signer (%u in the token, %zu intents logged), %d queued, %d "
            "answered \"%s\"; %zu bytes each in the queue (%zu the signer's own); VmRSS %ld "
            "KiB before, %ld KiB full, %ld KiB after\n",
            a_sent, fl.len, fl.rlen, t_filled - t0, HQ_HELD, hf.sessions, intents_held, fl.q,
            a_full, fl.reason, cost, cost - own, rss0, rss_full, rss1);
    fprintf(stderr,
            "  B handed over with the queue full: answered \"queue full\" after %.3f s; A's EOF "
            "after %.3f s with %lu calls still held; released: B signed %.3f s later (%d "
            "\"queue full\" first); the token signed %lu (%zu logged, %zu undelivered to A), "
            "%d queued jobs of A dropped unsigned\n",
            t_b - t_h, t_eof - t_h, held, t_signed - t_r, b_full, signs, signed_lines, undelivered,
            fl.q);
    fprintf(stderr,
            "  log: %zu refusal lines (%zu \"queue full\") + %llu suppressed for %lu "
            "\"queue full\" received\n",
            lines, log1.queue_full_lines - log0.queue_full_lines, suppressed, received);

    /* What the queue took: the held requests, then the queue's worth; every later
     * one refused, each once, all naming the same counts. The checker took no job
     * once the staged ones filled up: no intent beyond the held ones. */
    assert_true(a_full > 0);
    assert_int_equal(intents_held, HQ_HELD);
    assert_int_equal(intents_full, HQ_HELD);
    assert_int_equal(taken, fl.q + (int)HQ_HELD);
    for (int i = 0; i < a_sent; i++)
        if (fl.full[i] != (i >= taken))
            fail_msg("request %d of %d: %s", i, a_sent,
                     fl.full[i] ? "refused with room" : "not refused past the bound");
    /* The bytes are counted per request, the held ones too. */
    assert_int_equal(fl.qb % (size_t)taken, 0);
    assert_true(cost - own >= sizeof(Hsmca__Ipc__SignRequest) &&
                cost - own <= sizeof(Hsmca__Ipc__SignRequest) + 128);
    if (by_bytes) {
        assert_true(fl.q < SIGNER_MAX_QUEUE);
        assert_true(fl.qb <= SIGNER_MAX_QUEUE_BYTES && fl.qb + cost > SIGNER_MAX_QUEUE_BYTES);
    } else {
        assert_int_equal(fl.q, SIGNER_MAX_QUEUE);
        assert_true(fl.qb + cost <= SIGNER_MAX_QUEUE_BYTES);
    }
    assert_true(rss_full - rss0 < HQ_RSS_KB && rss1 - rss0 < HQ_RSS_KB);
    /* The control channel was served, and the hand-over shut A down at once. */
    assert_true(fl.full[fl.sent - 1]);
    if (t_b - t_h > HQ_PROMPT_S)
        fail_msg("B's request answered %.3f s after the hand-over", t_b - t_h);
    if (a_more != 0 || t_eof - t_h > HQ_PROMPT_S || held != hf.sessions)
        fail_msg("A: %zu more bytes, EOF %.3f s after the hand-over, %lu calls held", a_more,
                 t_eof - t_h, held);
    /* A's queued jobs were dropped, its staged ones not signed (their front end was
     * gone when a worker took them): the token signed the held calls and B's. */
    assert_int_equal(signs, hf.sessions + 1);
    assert_int_equal(signed_lines, hf.sessions + 1);
    assert_int_equal(undelivered, hf.sessions);
    /* Every held job's intent has its result (signed, or not signed), and B's. */
    hf_audit_wait("issue-result", results0 + HQ_HELD + 1, 5000);
    assert_int_equal(k, -1); /* nobody was cut off */
    /* Every "queue full" is in the log, as a line or in a summary count, and the
     * first (the window's first) as a line of its own. */
    assert_int_equal(received, (unsigned long)(a_full + 1 + b_full));
    if (lines + suppressed != received || log1.queue_full_lines - log0.queue_full_lines != lines)
        fail_msg("%lu \"queue full\" received; the log has %zu refusal lines (%zu of them "
                 "\"queue full\") + %llu suppressed",
                 received, lines, log1.queue_full_lines - log0.queue_full_lines, suppressed);
    char rid[24];
    snprintf(rid, sizeof(rid), "%llu", (unsigned long long)(fl.first + (uint64_t)taken));
    json_t *line = hf_log_find("refused request", "request_id", rid);
    assert_non_null(line);
    assert_string_equal(json_string_value(json_object_get(line, "reason")), fl.reason);
    assert_string_equal(json_string_value(json_object_get(line, "code")), "RESOURCE_EXHAUSTED");
    assert_null(json_object_get(line, "requester"));
    json_decref(line);
    free(fl.full);
    OPENSSL_free(fl.tbs);
}

static void test_queue_full_by_count_and_ctl_served(void **state)
{
    queue_full_scenario(0);
}

static void test_queue_full_by_bytes_and_ctl_served(void **state)
{
    queue_full_scenario(1);
}

/* A floods valid requests and stops reading: the replies fill its socket and
 * the workers wait to send (SIGNER_SEND_TIMEOUT_MS, 2 s). The supervisor hands
 * over B. A's shutdown releases the workers at once (their sends fail), A's
 * queued jobs are dropped as they reach them, and B's request is signed well
 * before the 2 s the workers would have waited. A reads the replies that
 * waited, each a signature of what it sent, then EOF; nobody was cut off, so
 * the supervisor is asked for nothing. */
static void test_replaced_front_end_releases_workers(void **state)
{
    enum { N = 1000 };
    hf_fresh_front_end();
    size_t len;
    uint8_t *tmpl = hf_valid_tbs(&len);
    uint8_t *tbs = malloc((size_t)N * len);
    assert_non_null(tbs);
    for (int i = 0; i < N; i++) {
        memcpy(tbs + (size_t)i * len, tmpl, len);
        hf_tbs_new_serial(tbs + (size_t)i * len, len);
    }
    OPENSSL_free(tmpl);
    size_t undelivered0 = hf_log_count("reply ");
    size_t cuts0 = hf_log_count("front end stopped reading replies");
    unsigned long signs0 = hf_shim_count("C_Sign");
    int a = hf.ipc;
    uint64_t first = hf.next_id;
    double t0 = util_mono_now();
    for (int i = 0; i < N; i++)
        hf_send_request(a, PROFILE_WORKLOAD, tbs + (size_t)i * len, len);
    int bytes;
    double t_stuck = hf_wait_stuck(a, &bytes);

    double t_h = util_mono_now();
    assert_int_equal(hf_hand_over(1), a);
    size_t blen;
    uint8_t *btbs = hf_valid_tbs(&blen);
    uint64_t id = hf_send_request(hf.ipc, PROFILE_WORKLOAD, btbs, blen);
    Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, HF_REPLY_MS);
    double t_b = util_mono_now();
    hf_assert_signed(rep, btbs, blen);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(btbs);

    int n_a = 0;
    static uint8_t buf[IPC_MAX_FRAME];
    for (size_t n; (n = hf_recv_packet(a, buf)) > 0; n_a++) {
        ipc_msg m;
        hsmca_err e;
        if (ipc_frame_decode(buf, n, &m, &e) != HSMCA_OK)
            fail_msg("%s", e.msg);
        if (m.id < first || m.id >= first + N)
            fail_msg("A got a reply to request %llu", (unsigned long long)m.id);
        Hsmca__Ipc__SignReply *r = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
        assert_non_null(r);
        hf_assert_signed(r, tbs + (m.id - first) * len, len);
        hsmca__ipc__sign_reply__free_unpacked(r, NULL);
    }
    double t_eof = util_mono_now();
    close(a);
    free(tbs);
    int k = hf_read_ctl(0);
    size_t undelivered = wait_undelivered(undelivered0, hf.sessions);
    unsigned long signs = hf_shim_count("C_Sign") - signs0;
    fprintf(stderr,
            "  A: %d valid requests, not read; the workers waited from %.3f s after the first "
            "(%d bytes of replies waiting); B handed over %.3f s later and signed %.3f s after "
            "the hand-over (%.3f s after the workers began to wait; they would have waited "
            "%.1f s); A read %d signatures, then EOF (%.3f s after the hand-over); the token "
            "signed %lu (%zu replies undelivered to A), %lu of A's jobs dropped unsigned\n",
            N, t_stuck - t0, bytes, t_h - t_stuck, t_b - t_h, t_b - t_stuck, 2.0, n_a, t_eof - t_h,
            signs, undelivered, N - (signs - 1));
    if (t_b - t_h >= HQ_LIVE_S)
        fail_msg("B signed %.3f s after the hand-over: the workers still waited on A", t_b - t_h);
    assert_int_equal(k, -1);
    assert_int_equal(hf_log_count("front end stopped reading replies"), cuts0);
    /* Each signing worker held a reply for A: it failed at the hand-over. */
    assert_int_equal(undelivered, hf.sessions);
    assert_int_equal(signs, (unsigned long)n_a + hf.sessions + 1);
    assert_true(n_a > 0 && n_a + (int)hf.sessions < N);
}

const struct CMUnitTest hf_queue_tests[] = {
    cmocka_unit_test(test_queue_full_by_count_and_ctl_served),
    cmocka_unit_test(test_queue_full_by_bytes_and_ctl_served),
    cmocka_unit_test(test_replaced_front_end_releases_workers),
};
const size_t hf_n_queue_tests = sizeof(hf_queue_tests) / sizeof(hf_queue_tests[0]);
