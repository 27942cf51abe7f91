/* test_signer_stage.c - the signer's staged requests (signer/signer_stage.c): a request
 * parked with its intent appended reaches a worker to sign only after the syncer's sync
 * covered its intent (invariant 8), every request parked meanwhile shares that sync, a
 * failed sync hands them back UNAVAILABLE, and a stop lets the workers go only once
 * nothing is staged and the checker holds nothing. The log's sync is held in its hook
 * (audit_log_set_sync_hook). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit_log.h"
#include "signer_ctx.h"
#include "signer_stage.h"
#include "signer_work.h"
#include "testutil.h"
#include "util.h"

/* The sync hook: holds each sync until the test lets it go, failing with `fail`. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_calls, g_allowed, g_fail;

static int hold_hook(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    int me = g_calls++;
    pthread_cond_broadcast(&g_cv);
    while (g_allowed <= me)
        pthread_cond_wait(&g_cv, &g_mu);
    int err = g_fail;
    pthread_mutex_unlock(&g_mu);
    return err;
}

static void release_sync(int fail)
{
    pthread_mutex_lock(&g_mu);
    g_fail = fail;
    g_allowed++;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static int sync_calls(void)
{
    pthread_mutex_lock(&g_mu);
    int n = g_calls;
    pthread_mutex_unlock(&g_mu);
    return n;
}

static void wait_sync_calls(int n)
{
    for (int i = 0; i < 500 && sync_calls() < n; i++)
        usleep(10 * 1000);
    if (sync_calls() < n)
        fail_msg("the syncer did not start sync %d", n);
}

static signer_conn g_conn = {-1, 1};

/* A signer_ctx with only what the staging uses: the lock and conditions, the log, the
 * stage pool, the current front end, and the syncer thread. */
static signer_ctx *ctx_new(audit_log *log)
{
    signer_ctx *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->more, NULL);
    pthread_cond_init(&s->check, NULL);
    util_cond_init_monotonic(&s->park);
    s->audit = log;
    s->conn = &g_conn;
    s->n_workers = 2;
    s->max_staged = 4;
    signer_stages_init(s);
    assert_int_equal(pthread_create(&s->syncer, NULL, signer_syncer, s), 0);
    return s;
}

static void ctx_free(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    s->syncer_stop = 1;
    pthread_cond_broadcast(&s->park);
    pthread_mutex_unlock(&s->lock);
    assert_int_equal(pthread_join(s->syncer, NULL), 0);
    signer_stages_free(s);
    free(s);
}

/* Queues a job, takes it as the checker would (it gets a stage), appends its intent
 * and stages it (parked, with the log). Returns the job. */
static signer_job *take_and_park(signer_ctx *s, audit_log *log, uint64_t id)
{
    signer_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    j->id = id;
    j->conn = &g_conn;
    pthread_mutex_lock(&s->lock);
    s->head = s->tail = j;
    s->queued = 1;
    assert_ptr_equal(signer_next_to_check(s), j);
    assert_int_equal(s->checking, 1);
    pthread_mutex_unlock(&s->lock);
    assert_true(j->current);
    assert_non_null(j->st);
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.request_id = id;
    memset(a.tbs_sha256, 'b', 64);
    snprintf(a.serial, sizeof(a.serial), "03%016llx", (unsigned long long)id);
    strcpy(a.profile, "workload");
    a.not_before = 1;
    a.not_after = 2;
    a.requester = (audit_str){"spiffe://td/ns/a/sa/b", 21, 0};
    a.sans = (audit_str){"uri:x", 5, 0};
    hsmca_err e;
    assert_int_equal(audit_log_append(log, &a, &j->st->intent_seq, &e), HSMCA_OK);
    j->st->rc = HSMCA_OK;
    signer_stage_checked(s, j);
    pthread_mutex_lock(&s->lock);
    assert_int_equal(s->checking, 0);
    pthread_mutex_unlock(&s->lock);
    return j;
}

/* A worker's wait for its next job, on a thread of its own. */
typedef struct {
    signer_ctx *s;
    pthread_t th;
    signer_job *got;
    int done; /* atomic */
} taker;

static void *take_main(void *arg)
{
    taker *t = arg;
    pthread_mutex_lock(&t->s->lock);
    t->got = signer_next_to_sign(t->s);
    pthread_mutex_unlock(&t->s->lock);
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void take_start(taker *t, signer_ctx *s)
{
    memset(t, 0, sizeof(*t));
    t->s = s;
    assert_int_equal(pthread_create(&t->th, NULL, take_main, t), 0);
}

static int taken(taker *t)
{
    return __atomic_load_n(&t->done, __ATOMIC_ACQUIRE);
}

static void take_end(taker *t)
{
    for (int i = 0; i < 500 && !taken(t); i++)
        usleep(10 * 1000);
    if (!taken(t))
        fail_msg("no job reached the worker");
    assert_int_equal(pthread_join(t->th, NULL), 0);
}

static uint64_t durable(audit_log *l)
{
    uint64_t lines, bytes;
    audit_log_durable(l, &lines, &bytes);
    return lines;
}

/* Gives a job back as the worker does when it is done with it. */
static void job_done(signer_ctx *s, signer_job *j)
{
    pthread_mutex_lock(&s->lock);
    s->free_stages[s->n_free_stages++] = j->st;
    pthread_mutex_unlock(&s->lock);
    free(j);
}

static void run(int fail)
{
    char *dir = tu_mkdtemp("signerstage");
    audit_log *log;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &log, NULL, &e),
                     HSMCA_OK);
    g_calls = g_allowed = g_fail = 0;
    audit_log_set_sync_hook(log, hold_hook, NULL);
    signer_ctx *s = ctx_new(log);

    signer_job *a = take_and_park(s, log, 1);
    wait_sync_calls(1); /* the syncer syncs a's intent, held in the hook */
    signer_job *b = take_and_park(s, log, 2), *c = take_and_park(s, log, 3);
    taker t;
    take_start(&t, s);
    usleep(100 * 1000);
    assert_false(taken(&t)); /* nothing is ready while its sync is held */
    assert_int_equal(durable(log), 0);

    release_sync(fail); /* sync 1: a only */
    take_end(&t);
    assert_ptr_equal(t.got, a);
    if (fail) { /* handed back refused, not durable; b and c with it, by no second sync */
        assert_int_equal(a->st->rc, HSMCA_EUNAVAIL);
        assert_string_equal(a->st->err.msg, "audit log: sync failed: Input/output error");
        assert_int_equal(durable(log), 0);
    } else {
        assert_int_equal(a->st->rc, HSMCA_OK);
        assert_true(durable(log) > a->st->intent_seq);
        assert_true(durable(log) <= b->st->intent_seq);
        wait_sync_calls(2); /* b and c share the next sync, held */
        take_start(&t, s);
        usleep(100 * 1000);
        assert_false(taken(&t));
        release_sync(0);
    }
    for (int i = 0; i < 2; i++) {
        if (i > 0 || fail)
            take_start(&t, s);
        take_end(&t);
        assert_ptr_equal(t.got, i == 0 ? b : c);
        if (fail)
            assert_int_equal(t.got->st->rc, HSMCA_EUNAVAIL);
        else
            assert_true(durable(log) > t.got->st->intent_seq);
    }
    assert_int_equal(sync_calls(), fail ? 1 : 2);

    /* A stop: the checker takes nothing more, though a request is queued; a worker
     * goes only once nothing is staged and the checker holds nothing it will stage. */
    signer_job *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->conn = &g_conn;
    pthread_mutex_lock(&s->lock);
    assert_int_equal(s->staged, 0);
    s->head = s->tail = d;
    s->queued = 1;
    s->stopping = 1;
    assert_null(signer_next_to_check(s));
    s->checking = 1; /* as if the checker were still checking one */
    pthread_mutex_unlock(&s->lock);
    take_start(&t, s);
    usleep(100 * 1000);
    assert_false(taken(&t));
    pthread_mutex_lock(&s->lock);
    s->checking = 0;
    pthread_cond_broadcast(&s->more);
    pthread_mutex_unlock(&s->lock);
    take_end(&t);
    assert_null(t.got);
    s->head = s->tail = NULL;
    free(d);
    job_done(s, a);
    job_done(s, b);
    job_done(s, c);
    ctx_free(s);
    audit_log_set_sync_hook(log, NULL, NULL);
    audit_log_close(log);
    free(dir);
}

static void test_signed_after_covering_sync(void **state)
{
    (void)state;
    run(0);
}

static void test_failed_sync_hands_back_unavailable(void **state)
{
    (void)state;
    run(EIO);
}

static int ready_count(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->n_ready;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* While the workers have SIGNER_READY_LOW durable jobs to sign, a parked intent's sync
 * waits: until a worker takes the ready list below it, or SIGNER_SYNC_HOLD_S at most. */
static void test_sync_held_while_workers_busy(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("signerhold");
    audit_log *log;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &log, NULL, &e),
                     HSMCA_OK);
    g_calls = g_fail = 0;
    g_allowed = 1000; /* syncs are counted, not held */
    audit_log_set_sync_hook(log, hold_hook, NULL);
    signer_ctx *s = ctx_new(log);
    enum { N = SIGNER_READY_LOW };
    signer_job ready[N];
    memset(ready, 0, sizeof(ready));
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < N; i++) { /* durable jobs no worker took yet */
        ready[i].conn = &g_conn;
        ready[i].next = i + 1 < N ? &ready[i + 1] : NULL;
    }
    s->ready = &ready[0];
    s->ready_tail = &ready[N - 1];
    s->n_ready = s->staged = N;
    s->max_staged = N + 4; /* room for a and b (the dummies hold no stage) */
    pthread_mutex_unlock(&s->lock);

    signer_job *a = take_and_park(s, log, 1);
    usleep(20 * 1000); /* well within SIGNER_SYNC_HOLD_S */
    assert_int_equal(sync_calls(), 0);
    pthread_mutex_lock(&s->lock); /* a worker takes one: below the mark, sync now */
    assert_ptr_equal(signer_next_to_sign(s), &ready[0]);
    pthread_mutex_unlock(&s->lock);
    wait_sync_calls(1);

    /* With the ready list at the mark and nobody taking from it, the hold ends anyway. */
    pthread_mutex_lock(&s->lock);
    ready[0].next = s->ready;
    s->ready = &ready[0];
    s->n_ready++;
    s->staged++;
    pthread_mutex_unlock(&s->lock);
    double t0 = util_mono_now();
    signer_job *b = take_and_park(s, log, 2);
    wait_sync_calls(2);
    assert_true(util_mono_now() - t0 >= SIGNER_SYNC_HOLD_S * 0.9);

    for (int i = 0; i < 500 && ready_count(s) < N + 2; i++) /* a and b, durable */
        usleep(10 * 1000);
    pthread_mutex_lock(&s->lock);
    assert_int_equal(s->n_ready, N + 2);
    while (s->ready)
        (void)signer_next_to_sign(s);
    assert_int_equal(s->staged, 0);
    assert_int_equal(s->n_ready, 0);
    pthread_mutex_unlock(&s->lock);
    job_done(s, a);
    job_done(s, b);
    ctx_free(s);
    audit_log_set_sync_hook(log, NULL, NULL);
    audit_log_close(log);
    free(dir);
}

/* A stop with two workers waiting for the one staged job: the syncer wakes one worker
 * for it; the other must learn from the first that nothing is left, not wait on (the
 * process's stop joins both). */
static void test_stop_releases_every_worker(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("signerstop");
    audit_log *log;
    hsmca_err e;
    assert_int_equal(audit_log_open(dir, (uid_t)-1, (gid_t)-1, NULL, NULL, &log, NULL, &e),
                     HSMCA_OK);
    g_calls = g_allowed = g_fail = 0;
    audit_log_set_sync_hook(log, hold_hook, NULL);
    signer_ctx *s = ctx_new(log);
    signer_job *a = take_and_park(s, log, 1);
    wait_sync_calls(1); /* a's sync is held */
    taker t[2];
    take_start(&t[0], s);
    take_start(&t[1], s);
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_broadcast(&s->more);
    pthread_mutex_unlock(&s->lock);
    usleep(100 * 1000);
    assert_false(taken(&t[0])); /* a is staged: both wait for it */
    assert_false(taken(&t[1]));
    release_sync(0);
    for (int i = 0; i < 500 && !taken(&t[0]) && !taken(&t[1]); i++)
        usleep(10 * 1000);
    int first = taken(&t[0]) && t[0].got == a ? 0 : 1;
    take_end(&t[first]);
    assert_ptr_equal(t[first].got, a);
    take_start(&t[first], s); /* the worker that signed a asks again: nothing */
    take_end(&t[first]);
    assert_null(t[first].got);
    take_end(&t[!first]);
    assert_null(t[!first].got);
    job_done(s, a);
    ctx_free(s);
    audit_log_set_sync_hook(log, NULL, NULL);
    audit_log_close(log);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signed_after_covering_sync),
        cmocka_unit_test(test_failed_sync_hands_back_unavailable),
        cmocka_unit_test(test_sync_held_while_workers_busy),
        cmocka_unit_test(test_stop_releases_every_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
