/* test_fe_sigstat.c - the front end's client of the signer's figures (fe_sigstat.h)
 * against a fake signer on a real SOCK_SEQPACKET socketpair, through fe_ipc: a
 * StatusRequest with an empty payload at start, the reply's figures copied (values
 * outside their enum read as 0, arrays capped), one request in flight at a time, the
 * next one from the IPC thread's tick once the interval has passed, and the
 * connection's state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fe_ipc.h"
#include "fe_sigstat.h"
#include "ipc_frame.h"
#include "signer.pb-c.h"
#include "util.h"

typedef struct {
    int fd;
    atomic_int requests;  /* StatusRequests seen */
    atomic_int non_empty; /* of which with a payload */
    atomic_int answer;    /* 0: keep them unanswered */
} fake_signer;

static void answer(fake_signer *f, uint64_t id)
{
    Hsmca__Ipc__StatusReply r = HSMCA__IPC__STATUS_REPLY__INIT;
    Hsmca__Ipc__Histogram h = HSMCA__IPC__HISTOGRAM__INIT;
    uint64_t buckets[METRICS_HIST_BUCKETS + 4] = {1, 2, 3};
    uint64_t issued[SIGSTAT_PROFILES + 2] = {7, 1, 0, 2, 99, 99};
    int64_t roots[SIGSTAT_ROOTS_MAX + 3];
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
        roots[i] = 2000000000 + (int64_t)i;
    h.bucket = buckets;
    h.n_bucket = sizeof(buckets) / sizeof(buckets[0]);
    h.sum = 0.25;
    r.ca_token = SIGSTAT_TOKEN_RECONNECTING;
    r.audit_token = 77; /* no such state */
    r.sessions_open = 4;
    r.sessions_busy = 1;
    r.reconnects = 3;
    r.ca_key_type = (char *)"ec-p256";
    r.issued = issued;
    r.n_issued = sizeof(issued) / sizeof(issued[0]);
    r.c_sign = &h;
    r.audit_state = SIGSTAT_AUDIT_FAILING;
    r.audit_entries = 10;
    r.checkpoint_size = 9;
    r.checkpoint_time = 1700000000;
    r.ca_not_after = 1900000000;
    r.roots_not_after = roots;
    r.n_roots_not_after = sizeof(roots) / sizeof(roots[0]);
    uint8_t out[SIGSTAT_REPLY_MAX * 2];
    size_t n = hsmca__ipc__status_reply__pack(&r, out);
    hsmca_err e;
    if (ipc_send(f->fd, IPC_STATUS_REPLY, id, out, n, &e) != HSMCA_OK)
        return; /* the front end went away: the test sees no reply */
}

static void *fake_signer_run(void *arg)
{
    fake_signer *f = arg;
    static uint8_t buf[IPC_MAX_FRAME];
    for (;;) {
        ipc_msg m;
        hsmca_err e;
        if (ipc_recv(f->fd, buf, &m, &e) != HSMCA_OK)
            return NULL;
        if (m.type != IPC_STATUS_REQ)
            continue;
        atomic_fetch_add(&f->requests, 1);
        if (m.len)
            atomic_fetch_add(&f->non_empty, 1);
        if (atomic_load(&f->answer))
            answer(f, m.id);
    }
}

static volatile int stop_flag;

/* Waits (deadline 10 s) until the figures hold at least `replies` replies. */
static void await_replies(fe_sigstat *st, uint64_t replies, fe_sigstat_figures *f)
{
    double end = util_mono_now() + 10;
    do {
        fe_sigstat_get(st, f);
        if (f->replies >= replies)
            return;
        usleep(2000);
    } while (util_mono_now() < end);
    fail_msg("no status reply %llu within 10 s", (unsigned long long)replies);
}

static void check_figures(const fe_sigstat_figures *f)
{
    assert_int_equal(f->connected, 1);
    assert_int_equal(f->valid, 1);
    assert_true(f->age >= 0 && f->age < 10);
    assert_int_equal(f->ca_token, SIGSTAT_TOKEN_RECONNECTING);
    assert_int_equal(f->audit_token, SIGSTAT_TOKEN_NONE); /* out of its enum */
    assert_int_equal(f->sessions_open, 4);
    assert_int_equal(f->sessions_busy, 1);
    assert_int_equal(f->reconnects, 3);
    assert_string_equal(f->ca_key_type, "ec-p256");
    assert_int_equal(f->issued[SIGSTAT_PROFILE_WORKLOAD], 7);
    assert_int_equal(f->issued[SIGSTAT_PROFILE_CRL], 2);
    assert_int_equal(f->c_sign.count, 6); /* the buckets past ours are cut */
    assert_true(f->c_sign.sum == 0.25);
    assert_int_equal(f->queue_wait.count, 0); /* absent */
    assert_int_equal(f->audit_state, SIGSTAT_AUDIT_FAILING);
    assert_int_equal(f->checkpoint_size, 9);
    assert_int_equal(f->checkpoint_time, 1700000000);
    assert_int_equal(f->ca_not_after, 1900000000);
    assert_int_equal(f->n_roots, SIGSTAT_ROOTS_MAX);
    assert_int_equal(f->roots_not_after[SIGSTAT_ROOTS_MAX - 1],
                     2000000000 + SIGSTAT_ROOTS_MAX - 1);
}

static void test_round_trip_and_poll(void **state)
{
    (void)state;
    int ipc[2], ctl[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ipc), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ctl), 0);
    fake_signer f = {.fd = ipc[1]};
    atomic_init(&f.answer, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fake_signer_run, &f), 0);
    hsmca_err e;
    fe_ipc *c = fe_ipc_start(ipc[0], ctl[0], &stop_flag, &e);
    assert_non_null(c);
    fe_sigstat_figures fig;
    fe_sigstat_get(NULL, &fig);
    assert_int_equal(fig.valid, 0);
    fe_sigstat *st = fe_sigstat_start(c); /* sends the first request */
    assert_non_null(st);
    /* Unanswered: no second request while the first waits (under its timeout). */
    double end = util_mono_now() + 10;
    while (atomic_load(&f.requests) < 1 && util_mono_now() < end)
        usleep(2000);
    assert_int_equal(atomic_load(&f.requests), 1);
    assert_int_equal(fe_sigstat_refresh(st), 0);
    fe_sigstat_get(st, &fig);
    assert_int_equal(fig.valid, 0);
    assert_true(fig.age < 0);
    assert_int_equal(fig.connected, 1);
    assert_int_equal(atomic_load(&f.requests), 1);
    /* Answered from now on: once the first request's timeout passes, the tick asks again
     * and the figures come; then one request a second. */
    atomic_store(&f.answer, 1);
    await_replies(st, 1, &fig);
    check_figures(&fig);
    double t0 = util_mono_now();
    await_replies(st, 3, &fig);
    assert_true(util_mono_now() - t0 >= FE_SIGSTAT_INTERVAL_S);
    check_figures(&fig);
    assert_int_equal(atomic_load(&f.non_empty), 0);
    /* The signer gone: the figures stay, with their age; connected says 0. */
    shutdown(ipc[1], SHUT_RDWR);
    pthread_join(th, NULL);
    end = util_mono_now() + 10;
    do
        fe_sigstat_get(st, &fig);
    while (fig.connected && util_mono_now() < end && usleep(2000) == 0);
    assert_int_equal(fig.connected, 0);
    assert_int_equal(fig.valid, 1);
    assert_int_equal(fe_sigstat_refresh(st), -1);
    close(ipc[1]);
    close(ctl[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_and_poll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
