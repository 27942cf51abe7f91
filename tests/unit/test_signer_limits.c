/* test_signer_limits.c - the issued-serial set (invariant 6, with its keyed
 * hash checked against SipHash-2-4's reference vectors and OpenSSL's SIPHASH)
 * and the signing rate limiter (invariant 7). */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "signer_limits.h"
#include "window_limiter.h"

/* SipHash-2-4 with key 00..0f over the messages 00, 00 01, ... (the reference
 * implementation's vectors_sip64, as little-endian 64-bit values), and the
 * paper's worked example (Aumasson & Bernstein 2012, appendix A). */
static void test_siphash_reference_vectors(void **state)
{
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    assert_true(serial_set_siphash(key, msg, 0) == 0x726fdb47dd0e0e31ULL);
    assert_true(serial_set_siphash(key, msg, 1) == 0x74f839c593dc67fdULL);
    assert_true(serial_set_siphash(key, msg, 15) == 0xa129ca6149be45e5ULL);
}

/* Every length from 0 to 63 against OpenSSL's SIPHASH (8-byte output). */
static void test_siphash_matches_openssl(void **state)
{
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)(0xa0 + i * 7);
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)(i * 13 + 5);
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
    assert_non_null(mac);
    for (size_t n = 0; n < sizeof(msg); n++) {
        EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
        size_t size = 8, outl = 0;
        OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
                               OSSL_PARAM_construct_end()};
        uint8_t out[8];
        assert_int_equal(EVP_MAC_init(ctx, key, sizeof(key), params), 1);
        assert_int_equal(EVP_MAC_update(ctx, msg, n), 1);
        assert_int_equal(EVP_MAC_final(ctx, out, &outl, sizeof(out)), 1);
        assert_int_equal(outl, 8);
        uint64_t want = 0;
        for (int i = 7; i >= 0; i--)
            want = (want << 8) | out[i];
        assert_true(serial_set_siphash(key, msg, n) == want);
        EVP_MAC_CTX_free(ctx);
    }
    EVP_MAC_free(mac);
}

#define T_NOW 1790000000
#define T_NA (T_NOW + 3600)

static void test_serial_set_restore(void **state)
{
    serial_set *s = serial_set_new();
    assert_non_null(s);
    hsmca_err e;
    const uint8_t a[16] = {0x41, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    /* A serial replayed from the log is refused when the front end sends it again. */
    assert_int_equal(serial_set_restore(s, a, 16, T_NA, T_NOW, &e), HSMCA_OK);
    assert_int_equal(serial_set_insert(s, a, 16, T_NA, T_NOW, &e), HSMCA_EPERM);
    /* A duplicate in the log is reported and stays recorded once. */
    assert_int_equal(serial_set_restore(s, a, 16, T_NA, T_NOW, &e), HSMCA_EPERM);
    assert_int_equal(serial_set_count(s), 1);
    serial_set_free(s);
}

static void test_serial_set(void **state)
{
    serial_set *s = serial_set_new();
    assert_non_null(s);
    hsmca_err e;
    const uint8_t a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    assert_int_equal(serial_set_insert(s, a, 16, T_NA, T_NOW, &e), HSMCA_OK);
    assert_int_equal(serial_set_insert(s, a, 16, T_NA, T_NOW, &e), HSMCA_EPERM);
    assert_string_equal(e.msg, "invariant 6: serial issued before");
    assert_int_equal(serial_set_insert(s, a, 15, T_NA, T_NOW, &e),
                     HSMCA_OK); /* a prefix is another serial */
    assert_int_equal(serial_set_insert(s, a, 0, T_NA, T_NOW, &e), HSMCA_EINVAL);
    assert_int_equal(serial_set_insert(s, a, 21, T_NA, T_NOW, &e), HSMCA_EINVAL);
    /* Enough to grow the table a few times; every one is then a duplicate. */
    uint8_t b[16] = {0};
    for (uint32_t i = 0; i < 5000; i++) {
        memcpy(b, &i, sizeof(i));
        assert_int_equal(serial_set_insert(s, b, 16, T_NA, T_NOW, &e), HSMCA_OK);
    }
    for (uint32_t i = 0; i < 5000; i++) {
        memcpy(b, &i, sizeof(i));
        assert_int_equal(serial_set_insert(s, b, 16, T_NA, T_NOW, &e), HSMCA_EPERM);
    }
    assert_int_equal(serial_set_insert(s, a, 16, T_NA, T_NOW, &e), HSMCA_EPERM);
    serial_set_free(s);
    serial_set_free(NULL);
}

/* Issue 6 item 5: a serial is refused until its certificate expires, then dropped, and
 * a CA that signs for ever with short-lived certificates keeps a bounded table. */
static void test_serial_set_expiry(void **state)
{
    serial_set *s = serial_set_new();
    assert_non_null(s);
    hsmca_err e;
    const uint8_t a[16] = {7, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    assert_int_equal(serial_set_insert(s, a, 16, T_NOW + 10, T_NOW, &e), HSMCA_OK);
    assert_int_equal(serial_set_insert(s, a, 16, T_NOW + 20, T_NOW + 9, &e), HSMCA_EPERM);
    /* expired: no longer held against a new certificate, even before a prune */
    assert_int_equal(serial_set_insert(s, a, 16, T_NOW + 30, T_NOW + 10, &e), HSMCA_OK);
    assert_int_equal(serial_set_count(s), 1);
    assert_int_equal(serial_set_prune(s, T_NOW + 29), 0);
    assert_int_equal(serial_set_prune(s, T_NOW + 30), 1);
    assert_int_equal(serial_set_count(s), 0);
    /* a restored serial keeps the later notAfter of its duplicates */
    assert_int_equal(serial_set_restore(s, a, 16, T_NOW + 50, T_NOW, &e), HSMCA_OK);
    assert_int_equal(serial_set_restore(s, a, 16, T_NOW + 40, T_NOW, &e), HSMCA_EPERM);
    assert_int_equal(serial_set_insert(s, a, 16, T_NOW + 90, T_NOW + 45, &e), HSMCA_EPERM);

    /* 1000 certificates a second, each valid 60 s, for 2000 s: 2 million serials, at
     * most 60000 live. Without expiry the table would reach 4 million slots. */
    uint8_t b[16] = {0};
    size_t max_cap = 0, max_count = 0;
    for (uint32_t i = 0; i < 2000000; i++) {
        int64_t now = T_NOW + 100 + i / 1000;
        memcpy(b, &i, sizeof(i));
        assert_int_equal(serial_set_insert(s, b, 16, now + 60, now, &e), HSMCA_OK);
        if (i % 1000 == 0) {
            size_t c = serial_set_capacity(s), n = serial_set_count(s);
            max_cap = c > max_cap ? c : max_cap;
            max_count = n > max_count ? n : max_count;
        }
    }
    assert_true(max_count <= 4 * 61000); /* live ones plus expired ones not yet dropped */
    assert_true(max_cap <= 512 * 1024);
    /* the live ones are all still refused */
    int64_t end = T_NOW + 100 + 1999;
    for (uint32_t i = 2000000 - 50000; i < 2000000; i++) {
        memcpy(b, &i, sizeof(i));
        assert_int_equal(serial_set_insert(s, b, 16, end + 60, end, &e), HSMCA_EPERM);
    }
    /* everything expired: a prune empties it and shrinks the table */
    serial_set_prune(s, end + 1000);
    assert_int_equal(serial_set_count(s), 0);
    assert_int_equal(serial_set_capacity(s), 1024);
    serial_set_free(s);
}

static void test_window_limiter(void **state)
{
    assert_null(window_limiter_new(5, 0));
    window_limiter *l = window_limiter_new(3, 1.0);
    assert_non_null(l);
    uint64_t rep;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(window_limiter_allow(l, 10.0 + i * 0.1, &rep), 1);
        assert_int_equal(rep, 0);
    }
    for (int i = 0; i < 1000; i++)
        assert_int_equal(window_limiter_allow(l, 10.5, &rep), 0);
    assert_int_equal(window_limiter_flush(l, 10.9), 0); /* the window is still open */
    window_limiter_add_dropped(l, 5);
    /* the next window's first entry reports the last one's drops, once */
    assert_int_equal(window_limiter_allow(l, 11.0, &rep), 1);
    assert_int_equal(rep, 1005);
    assert_int_equal(window_limiter_allow(l, 11.1, &rep), 1);
    assert_int_equal(rep, 0);
    assert_int_equal(window_limiter_allow(l, 11.2, &rep), 1);
    assert_int_equal(window_limiter_allow(l, 11.3, &rep), 0);
    /* a flood that stops is reported by the periodic flush */
    assert_int_equal(window_limiter_flush(l, 12.5), 1);
    assert_int_equal(window_limiter_flush(l, 13.5), 0);
    window_limiter_free(l);
    window_limiter_free(NULL);
}

static void test_rate_limiter(void **state)
{
    assert_null(rate_limiter_new(0, 5));
    assert_null(rate_limiter_new(5, 0));
    rate_limiter *r = rate_limiter_new(2, 3); /* 2/s, burst 3 */
    assert_non_null(r);
    hsmca_err e;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rate_limiter_take(r, 100.0, &e), HSMCA_OK);
    assert_int_equal(rate_limiter_take(r, 100.0, &e), HSMCA_ERATE);
    assert_non_null(strstr(e.msg, "invariant 7: signing rate limit"));
    assert_int_equal(rate_limiter_take(r, 100.25, &e), HSMCA_ERATE); /* half a token */
    assert_int_equal(rate_limiter_take(r, 100.5, &e), HSMCA_OK);     /* one token */
    assert_int_equal(rate_limiter_take(r, 100.5, &e), HSMCA_ERATE);
    /* A clock that goes back refills nothing. */
    assert_int_equal(rate_limiter_take(r, 50.0, &e), HSMCA_ERATE);
    /* A long pause refills only up to the burst. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(rate_limiter_take(r, 1000.0, &e), HSMCA_OK);
    assert_int_equal(rate_limiter_take(r, 1000.0, &e), HSMCA_ERATE);
    rate_limiter_free(r);
    rate_limiter_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_siphash_reference_vectors),
        cmocka_unit_test(test_siphash_matches_openssl),
        cmocka_unit_test(test_serial_set),
        cmocka_unit_test(test_serial_set_restore),
        cmocka_unit_test(test_serial_set_expiry),
        cmocka_unit_test(test_window_limiter),
        cmocka_unit_test(test_rate_limiter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
