/* test_audit_log_sync.c - the log's group commit, step by step (audit/audit_log.h): a
 * sync is held in its hook (after its write, before its fdatasync) while threads wait,
 * and the test checks who is released when. A waiter returns only after the sync that
 * covers its line has ended: a line written before a sync started is released by that
 * sync, one written after it by the next, which one of the waiters starts (nobody is
 * left asleep with no sync coming); a failed sync releases every waiter with
 * UNAVAILABLE and makes nothing durable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit_log.h"
#include "testutil.h"

/* The sync hook: counts its calls and holds each until the test lets it go, with the
 * errno the test chose (0: the fdatasync goes ahead). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;   /* syncs that reached the hook */
    int allowed; /* syncs the test has let go */
    int fail;    /* errno for the syncs let go from now on */
} hold;

static hold g_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static int hold_hook(void *ctx)
{
    hold *h = ctx;
    pthread_mutex_lock(&h->mu);
    int me = h->calls++;
    pthread_cond_broadcast(&h->cv);
    while (h->allowed <= me)
        pthread_cond_wait(&h->cv, &h->mu);
    int err = h->fail;
    pthread_mutex_unlock(&h->mu);
    return err;
}

static void hold_release(hold *h, int fail)
{
    pthread_mutex_lock(&h->mu);
    h->fail = fail;
    h->allowed++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Until n syncs have reached the hook (fails the test after 5 s). */
static void hold_wait_calls(hold *h, int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&h->mu);
    int rc = 0;
    while (h->calls < n && rc == 0)
        rc = pthread_cond_timedwait(&h->cv, &h->mu, &until);
    int calls = h->calls;
    pthread_mutex_unlock(&h->mu);
    if (calls < n)
        fail_msg("only %d of %d syncs started (a waiter was left with no sync coming)", calls, n);
}

/* A thread in audit_log_sync_through(seq); done and rc once it returned. */
typedef struct {
    audit_log *l;
    uint64_t seq;
    pthread_t th;
    int done; /* atomic */
    hsmca_code rc;
    hsmca_err e;
} waiter;

static void *wait_main(void *arg)
{
    waiter *w = arg;
    w->rc = audit_log_sync_through(w->l, w->seq, &w->e);
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void wait_start(waiter *w, audit_log *l, uint64_t seq)
{
    memset(w, 0, sizeof(*w));
    w->l = l;
    w->seq = seq;
    assert_int_equal(pthread_create(&w->th, NULL, wait_main, w), 0);
}

static int is_done(waiter *w)
{
    return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

/* Joins w (fails the test when it has not returned within 5 s) and checks its code. */
static void wait_end(waiter *w, hsmca_code want)
{
    for (int i = 0; i < 500 && !is_done(w); i++)
        usleep(10 * 1000);
    if (!is_done(w))
        fail_msg("the waiter for line %llu never returned", (unsigned long long)w->seq);
    assert_int_equal(pthread_join(w->th, NULL), 0);
    assert_int_equal(w->rc, want);
}

static uint64_t append_one(audit_log *l, uint64_t id)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.request_id = id;
    memset(a.tbs_sha256, 'a', 64);
    snprintf(a.serial, sizeof(a.serial), "02%016llx", (unsigned long long)id);
    strcpy(a.profile, "workload");
    a.not_before = 1;
    a.not_after = 2;
    a.requester = (audit_str){"spiffe://td/ns/a/sa/b", 21, 0};
    a.sans = (audit_str){"uri:x", 5, 0};
    uint64_t seq;
    hsmca_err e;
    assert_int_equal(audit_log_append(l, &a, &seq, &e), HSMCA_OK);
    return seq;
}

static uint64_t durable(audit_log *l)
{
    uint64_t lines, bytes;
    audit_log_durable(l, &lines, &bytes);
    return lines;
}

/* Time for the waiters to reach their sleep (the checks hold however far they got). */
static void settle(void)
{
    usleep(100 * 1000);
}

/* Sync 1 (lines 0-1) is held: the syncer and a waiter it covers, plus two waiters for
 * later lines (2, 3), all wait. Returns with all four started. */
static void start_four(audit_log *l, waiter w[4])
{
    uint64_t s0 = append_one(l, 0), s1 = append_one(l, 1);
    wait_start(&w[0], l, s0); /* starts sync 1, covering lines 0 and 1 */
    hold_wait_calls(&g_hold, 1);
    wait_start(&w[1], l, s1); /* covered by sync 1 */
    uint64_t s2 = append_one(l, 2), s3 = append_one(l, 3);
    wait_start(&w[2], l, s2); /* written after sync 1 began: the next sync's */
    wait_start(&w[3], l, s3);
    settle();
    for (int i = 0; i < 4; i++)
        if (is_done(&w[i]))
            fail_msg("waiter %d returned before any sync ended", i);
    assert_int_equal(durable(l), 0);
}

static void test_released_by_covering_sync(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("auditsync");
    audit_log *l;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, NULL, &e), HSMCA_OK);
    g_hold.calls = g_hold.allowed = g_hold.fail = 0;
    audit_log_set_sync_hook(l, hold_hook, &g_hold);
    waiter w[4];
    start_four(l, w);

    hold_release(&g_hold, 0); /* sync 1 ends: lines 0 and 1 only */
    wait_end(&w[0], HSMCA_OK);
    wait_end(&w[1], HSMCA_OK);
    assert_int_equal(durable(l), 2);
    hold_wait_calls(&g_hold, 2); /* a waiter of lines 2-3 started sync 2 ... */
    settle();
    assert_false(is_done(&w[2])); /* ... and nobody returns before it ends */
    assert_false(is_done(&w[3]));
    assert_int_equal(durable(l), 2);

    hold_release(&g_hold, 0);
    wait_end(&w[2], HSMCA_OK);
    wait_end(&w[3], HSMCA_OK);
    assert_int_equal(durable(l), 4);
    assert_int_equal(audit_log_syncs(l), 2); /* one sync per group, not per line */
    audit_log_set_sync_hook(l, NULL, NULL);
    audit_log_close(l);
    free(dir);
}

static void test_failed_sync_releases_none(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("auditsync");
    audit_log *l;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &l, NULL, &e), HSMCA_OK);
    audit_log_set_retry_interval(l, 0.2);
    g_hold.calls = g_hold.allowed = g_hold.fail = 0;
    audit_log_set_sync_hook(l, hold_hook, &g_hold);
    waiter w[4];
    start_four(l, w);

    hold_release(&g_hold, EIO); /* sync 1 fails: every waiter is refused, none signs */
    for (int i = 0; i < 4; i++) {
        wait_end(&w[i], HSMCA_EUNAVAIL);
        assert_string_equal(w[i].e.msg, "audit log: sync failed: Input/output error");
    }
    assert_int_equal(durable(l), 0);
    assert_int_equal(g_hold.calls, 1); /* nobody synced past the failure */

    /* After the retry interval an append reopens the log, writes the lines again and
     * syncs them: the four lines are durable, and the next one syncs as usual. */
    audit_log_set_sync_hook(l, NULL, NULL);
    usleep(250 * 1000);
    uint64_t s4 = append_one(l, 4);
    assert_int_equal(durable(l), 4);
    assert_int_equal(audit_log_sync_through(l, s4, &e), HSMCA_OK);
    assert_int_equal(durable(l), 5);
    audit_log_close(l);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_released_by_covering_sync),
        cmocka_unit_test(test_failed_sync_releases_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
