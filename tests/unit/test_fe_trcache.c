/* test_fe_trcache.c - the TokenReview cache (frontend/fe_trcache.h): hits until
 * the entry's expiry and not after, the bound on entries and what is evicted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "fe_trcache.h"

static void key(uint8_t k[32], int i)
{
    memset(k, 0, 32);
    k[0] = (uint8_t)i;
    k[31] = (uint8_t)(i >> 8);
}

static fe_tr_identity ident(const char *sa)
{
    fe_tr_identity id;
    memset(&id, 0, sizeof(id));
    strcpy(id.ns, "prod");
    strcpy(id.sa, sa);
    strcpy(id.pod_name, "p");
    return id;
}

static void test_hit_until_expiry(void **state)
{
    (void)state;
    fe_trcache *c = fe_trcache_new(4);
    uint8_t k[32];
    key(k, 1);
    fe_tr_identity in = ident("web"), out;
    fe_trcache_put(c, k, 100, 160, &in);
    assert_int_equal(fe_trcache_get(c, k, 100, &out), 1);
    assert_string_equal(out.sa, "web");
    assert_string_equal(out.pod_name, "p");
    assert_int_equal(fe_trcache_get(c, k, 159, &out), 1);
    assert_int_equal(fe_trcache_get(c, k, 160, &out), 0); /* expired: dropped */
    assert_int_equal(fe_trcache_size(c), 0);
    uint8_t other[32];
    key(other, 2);
    fe_trcache_put(c, k, 100, 160, &in);
    assert_int_equal(fe_trcache_get(c, other, 100, &out), 0);
    /* Already expired, or no lifetime: not kept. */
    fe_trcache_put(c, other, 100, 100, &in);
    fe_trcache_put(c, other, 100, 50, &in);
    assert_int_equal(fe_trcache_size(c), 1);
    /* The same key again refreshes, no second entry. */
    fe_tr_identity in2 = ident("api");
    fe_trcache_put(c, k, 110, 200, &in2);
    assert_int_equal(fe_trcache_size(c), 1);
    assert_int_equal(fe_trcache_get(c, k, 170, &out), 1);
    assert_string_equal(out.sa, "api");
    fe_trcache_free(c);
}

static void test_bounded(void **state)
{
    (void)state;
    fe_trcache *c = fe_trcache_new(3);
    uint8_t k[32];
    fe_tr_identity in = ident("web"), out;
    for (int i = 0; i < 3; i++) {
        key(k, i);
        fe_trcache_put(c, k, 0, 102 - i, &in); /* key 2, the last in, expires first */
    }
    key(k, 9);
    fe_trcache_put(c, k, 0, 500, &in);
    assert_int_equal(fe_trcache_size(c), 3);
    key(k, 2);
    assert_int_equal(fe_trcache_get(c, k, 1, &out), 0); /* the soonest to expire went */
    for (int i = 0; i < 2; i++) {
        key(k, i);
        assert_int_equal(fe_trcache_get(c, k, 1, &out), 1);
    }
    /* Many more keys: never more than the bound. */
    for (int i = 100; i < 1100; i++) {
        key(k, i);
        fe_trcache_put(c, k, 0, 1000 + i, &in);
        assert_true(fe_trcache_size(c) <= 3);
    }
    key(k, 1099);
    assert_int_equal(fe_trcache_get(c, k, 1, &out), 1); /* the newest, longest-lived stays */
    fe_trcache_free(c);
}

static void test_zero_entries(void **state)
{
    (void)state;
    fe_trcache *c = fe_trcache_new(0);
    uint8_t k[32];
    key(k, 1);
    fe_tr_identity in = ident("web"), out;
    fe_trcache_put(c, k, 0, 100, &in);
    assert_int_equal(fe_trcache_get(c, k, 1, &out), 0);
    assert_int_equal(fe_trcache_size(c), 0);
    fe_trcache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_until_expiry),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_zero_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
