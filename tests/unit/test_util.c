/* test_util.c - the shared helpers of common/util.h: the one base64 decoder
 * (both alphabets, canonical input only) and the message-safe string copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- base64 ------------------------------------------------------------------ */

static void assert_decodes(uint8_t *(*dec)(const char *, size_t, size_t *), const char *in,
                           const char *want, size_t wantlen)
{
    size_t n = 99;
    uint8_t *out = dec(in, strlen(in), &n);
    if (!out)
        fail_msg("refused \"%s\"", in);
    assert_int_equal(n, wantlen);
    if (wantlen)
        assert_memory_equal(out, want, wantlen);
    free(out);
}

static void assert_refused(uint8_t *(*dec)(const char *, size_t, size_t *), const char *in,
                           size_t len)
{
    size_t n = 99;
    uint8_t *out = dec(in, len, &n);
    if (out)
        fail_msg("accepted \"%.*s\"", (int)len, in);
    assert_int_equal(n, 99); /* nothing written on refusal */
}

static void test_b64_roundtrip_both_alphabets(void **state)
{
    uint8_t in[40];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(i * 37 + 0xf9); /* hits 62 and 63 in both alphabets */
    for (size_t len = 0; len <= sizeof(in); len++) {
        char *u = util_b64url_encode(in, len), *s = util_b64_encode(in, len);
        assert_non_null(u);
        assert_non_null(s);
        assert_null(strpbrk(u, "+/="));
        assert_null(strpbrk(s, "-_"));
        assert_int_equal(strlen(s) % 4, 0);
        size_t n;
        uint8_t *d = util_b64url_decode(u, strlen(u), &n);
        assert_non_null(d);
        assert_int_equal(n, len);
        if (len)
            assert_memory_equal(d, in, len);
        free(d);
        d = util_b64_decode(s, strlen(s), &n);
        assert_non_null(d);
        assert_int_equal(n, len);
        if (len)
            assert_memory_equal(d, in, len);
        free(d);
        free(u);
        free(s);
    }
}

static void test_b64url_strict(void **state)
{
    assert_decodes(util_b64url_decode, "", "", 0);
    assert_decodes(util_b64url_decode, "QQ", "A", 1);
    assert_decodes(util_b64url_decode, "QUI", "AB", 2);
    assert_decodes(util_b64url_decode, "-_8", "\xfb\xff", 2);
    const char *bad[] = {
        "QQ==",  /* padding */
        "QQ=",   /* padding */
        "QUI=",  /* padding */
        "+_8",   /* standard alphabet */
        "-/8",   /* standard alphabet */
        "Q",     /* 4k+1 characters: no encoding is this long */
        "QUJDR", /* 4k+1 */
        "QR",    /* a spare bit set: a second encoding of "A" */
        "QUJ",   /* a spare bit set */
        "QQ ",   /* whitespace */
        " QQ",   /* whitespace */
        "Q\nQ",  /* line break */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_refused(util_b64url_decode, bad[i], strlen(bad[i]));
    assert_refused(util_b64url_decode, "QU\0I", 4); /* embedded NUL within the length */
}

static void test_b64_std_strict(void **state)
{
    assert_decodes(util_b64_decode, "", "", 0);
    assert_decodes(util_b64_decode, "QQ==", "A", 1);
    assert_decodes(util_b64_decode, "QUI=", "AB", 2);
    assert_decodes(util_b64_decode, "QUJD", "ABC", 3);
    assert_decodes(util_b64_decode, "+/8=", "\xfb\xff", 2);
    const char *bad[] = {
        "QQ",       /* padding missing */
        "QQ=",      /* not whole quads */
        "QUI",      /* padding missing */
        "QUJD====", /* padding not needed */
        "QUJDRA=",  /* not whole quads */
        "QUJDRA===",
        "Q===",     /* three '=' */
        "====",
        "QQ=A",     /* data after '=' */
        "Q=QA",
        "QUI==",    /* too much padding */
        "QR==",     /* a spare bit under the padding */
        "QUJ=",     /* a spare bit under the padding */
        "-_8=",     /* url alphabet */
        "QQ==\n",   /* whitespace */
        "QU I=",
        "QQ==QQ==", /* padding in the middle */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_refused(util_b64_decode, bad[i], strlen(bad[i]));
    assert_refused(util_b64_decode, "QU\0=", 4);
}

static void test_b64_span(void **state)
{
    assert_int_equal(util_b64_span("", 0), 0);
    assert_int_equal(util_b64_span("Ab9+/", 5), 5);
    assert_int_equal(util_b64_span("Ab9+/==", 7), 5); /* '=' is padding, not the alphabet */
    assert_int_equal(util_b64_span("AB\r\n", 4), 2);
    assert_int_equal(util_b64_span("AB-_", 4), 2); /* url characters are not standard */
    assert_int_equal(util_b64_span("ABCD", 2), 2); /* never past the length */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_roundtrip_both_alphabets),
        cmocka_unit_test(test_b64url_strict),
        cmocka_unit_test(test_b64_std_strict),
        cmocka_unit_test(test_b64_span),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
