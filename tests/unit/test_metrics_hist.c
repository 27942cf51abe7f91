/* test_metrics_hist.c - the shared latency histogram (common/metrics_hist.h): its
 * bounds, which bucket an observation lands in (Prometheus `le`: a value equal to a
 * bound is counted under it), the cumulative view, the snapshot a peer's reply becomes,
 * and exact counts under concurrent observers (it takes no lock). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "metrics_hist.h"

static void test_bounds_ascend_in_seconds(void **state)
{
    (void)state;
    assert_true(metrics_hist_bound[0] > 0);
    for (size_t i = 1; i < METRICS_HIST_BOUNDS; i++)
        assert_true(metrics_hist_bound[i] > metrics_hist_bound[i - 1]);
    /* Half a millisecond to ten seconds: a C_Sign on a fast token to a request the front
     * end gives up on. */
    assert_true(metrics_hist_bound[0] <= 0.001);
    assert_true(metrics_hist_bound[METRICS_HIST_BOUNDS - 1] >= 10);
}

static void test_index_is_le(void **state)
{
    (void)state;
    for (size_t i = 0; i < METRICS_HIST_BOUNDS; i++) {
        double b = metrics_hist_bound[i];
        assert_int_equal(metrics_hist_index(b), i);
        assert_int_equal(metrics_hist_index(nextafter(b, INFINITY)), i + 1);
        if (i > 0)
            assert_int_equal(metrics_hist_index(nextafter(metrics_hist_bound[i - 1], INFINITY)),
                             i);
    }
    assert_int_equal(metrics_hist_index(0), 0);
    assert_int_equal(metrics_hist_index(1e9), METRICS_HIST_BOUNDS);
    assert_int_equal(metrics_hist_index(INFINITY), METRICS_HIST_BOUNDS);
}

static void test_observe_sum_count_cumulative(void **state)
{
    (void)state;
    metrics_hist h;
    metrics_hist_init(&h);
    metrics_hist_observe(&h, 0.0002); /* bucket 0 */
    metrics_hist_observe(&h, 0.003);  /* (0.0025, 0.005] */
    metrics_hist_observe(&h, 0.003);
    metrics_hist_observe(&h, 42);  /* +Inf */
    metrics_hist_observe(&h, -1);  /* a clock step back: 0, bucket 0 */
    metrics_hist_observe(&h, NAN); /* counted as 0 */
    metrics_hist_snap s;
    metrics_hist_read(&h, &s);
    assert_int_equal(s.count, 6);
    assert_int_equal(s.bucket[0], 3);
    assert_int_equal(s.bucket[metrics_hist_index(0.003)], 2);
    assert_int_equal(s.bucket[METRICS_HIST_BOUNDS], 1);
    assert_true(fabs(s.sum - (0.0002 + 0.006 + 42)) < 1e-9);
    uint64_t cum[METRICS_HIST_BUCKETS];
    metrics_hist_cumulative(&s, cum);
    for (size_t i = 1; i < METRICS_HIST_BUCKETS; i++)
        assert_true(cum[i] >= cum[i - 1]);
    assert_int_equal(cum[0], 3);
    assert_int_equal(cum[metrics_hist_index(0.003)], 5);
    assert_int_equal(cum[METRICS_HIST_BOUNDS - 1], 5); /* le="10": all but the 42 s one */
    assert_int_equal(cum[METRICS_HIST_BOUNDS], s.count); /* le="+Inf" is _count */
}

static void test_from_a_peer(void **state)
{
    (void)state;
    uint64_t b[METRICS_HIST_BUCKETS + 3];
    for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
        b[i] = i + 1;
    metrics_hist_snap s;
    /* More buckets than ours: the rest is cut, and count is the sum of what was kept. */
    metrics_hist_from(&s, b, sizeof(b) / sizeof(b[0]), 1.5);
    uint64_t want = 0;
    for (size_t i = 0; i < METRICS_HIST_BUCKETS; i++)
        want += i + 1;
    assert_int_equal(s.count, want);
    assert_true(s.sum == 1.5);
    /* Fewer: the rest are 0; a sum that is no duration becomes 0. */
    metrics_hist_from(&s, b, 2, -3);
    assert_int_equal(s.count, 3);
    assert_int_equal(s.bucket[2], 0);
    assert_true(s.sum == 0);
    metrics_hist_from(&s, NULL, 0, NAN);
    assert_int_equal(s.count, 0);
    assert_true(s.sum == 0);
}

#define THREADS 4
#define PER_THREAD 200000

static void *observer(void *arg)
{
    metrics_hist *h = arg;
    for (int i = 0; i < PER_THREAD; i++)
        metrics_hist_observe(h, (i & 1) ? 0.001 : 0.02);
    return NULL;
}

/* Lock-free: no observation lost with threads adding at once, and the sum exact (whole
 * nanoseconds). */
static void test_concurrent_observers(void **state)
{
    (void)state;
    static metrics_hist h;
    metrics_hist_init(&h);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, observer, &h), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    metrics_hist_snap s;
    metrics_hist_read(&h, &s);
    assert_int_equal(s.count, (uint64_t)THREADS * PER_THREAD);
    assert_int_equal(s.bucket[metrics_hist_index(0.001)], (uint64_t)THREADS * PER_THREAD / 2);
    assert_int_equal(s.bucket[metrics_hist_index(0.02)], (uint64_t)THREADS * PER_THREAD / 2);
    double want = THREADS * (PER_THREAD / 2) * (0.001 + 0.02);
    assert_true(fabs(s.sum - want) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_ascend_in_seconds),
        cmocka_unit_test(test_index_is_le),
        cmocka_unit_test(test_observe_sum_count_cumulative),
        cmocka_unit_test(test_from_a_peer),
        cmocka_unit_test(test_concurrent_observers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
