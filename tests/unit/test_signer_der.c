/* test_signer_der.c - the signer's strict DER cursor: every verb on good input,
 * and every way a length, tag or encoding can be not DER. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "signer_der.h"

#define CUR(lit) der_cur_init((const uint8_t *)(lit), sizeof(lit) - 1)

static void test_get_and_element(void **state)
{
    /* SEQUENCE { INTEGER 5, NULL } */
    der_cur c = CUR("\x30\x05\x02\x01\x05\x05\x00"), seq, whole, v;
    der_cur copy = c;
    assert_true(der_get(&c, DER_SEQUENCE, &seq));
    assert_true(der_empty(&c));
    assert_int_equal(seq.len, 5);
    assert_true(der_get_element(&copy, DER_SEQUENCE, &whole));
    assert_int_equal(whole.len, 7);
    assert_true(der_eq(&whole, (const uint8_t *)"\x30\x05\x02\x01\x05\x05\x00", 7));
    assert_true(der_peek(&seq, DER_INTEGER));
    assert_false(der_peek(&seq, DER_NULL));
    assert_true(der_get_integer(&seq, &v));
    assert_true(der_eq(&v, (const uint8_t *)"\x05", 1));
    /* The wrong tag reads nothing. */
    der_cur before = seq;
    assert_false(der_get(&seq, DER_INTEGER, &v));
    assert_true(seq.p == before.p && seq.len == before.len);
    assert_true(der_get(&seq, DER_NULL, &v));
    assert_int_equal(v.len, 0);
    assert_true(der_empty(&seq));
    assert_false(der_peek(&seq, DER_NULL)); /* nothing left */
    uint8_t tag;
    assert_false(der_get_any(&seq, &tag, &v));
}

static void test_optional_and_only(void **state)
{
    der_cur c = CUR("\x01\x01\xff\x04\x00"), v;
    bool present, b;
    assert_true(der_get_optional(&c, DER_INTEGER, &v, &present));
    assert_false(present);
    assert_true(der_get_bool(&c, &b));
    assert_true(b);
    assert_true(der_get_optional(&c, DER_OCTET_STRING, &v, &present));
    assert_true(present);
    assert_true(der_empty(&c));
    /* get_only refuses anything after the element. */
    der_cur two = CUR("\x04\x00\x05\x00");
    assert_false(der_get_only(&two, DER_OCTET_STRING, &v));
    der_cur one = CUR("\x04\x01\x41");
    assert_true(der_get_only(&one, DER_OCTET_STRING, &v));
    /* A present but malformed optional element is an error. */
    der_cur broken = CUR("\x02\x05\x01");
    assert_false(der_get_optional(&broken, DER_INTEGER, &v, &present));
}

static void test_lengths(void **state)
{
    der_cur v;
    uint8_t long_ok[3 + 200] = {0x04, 0x81, 200};
    der_cur c = der_cur_init(long_ok, sizeof(long_ok));
    assert_true(der_get(&c, DER_OCTET_STRING, &v));
    assert_int_equal(v.len, 200);
    uint8_t two_octets[4 + 300] = {0x04, 0x82, 0x01, 0x2c};
    c = der_cur_init(two_octets, sizeof(two_octets));
    assert_true(der_get(&c, DER_OCTET_STRING, &v));
    assert_int_equal(v.len, 300);

    static const struct {
        const char *der;
        size_t n;
        const char *why;
    } bad[] = {
        {"\x04\x80\x00\x00", 4, "indefinite length"},
        {"\x04\x81\x05\x01\x02\x03\x04\x05", 8, "long form below 128"},
        {"\x04\x82\x00\x05\x01\x02\x03\x04\x05", 9, "leading zero length octet"},
        {"\x04\x83\x01\x00\x00", 5, "three length octets (over the 16 KiB cap)"},
        {"\x04\x05\x01\x02", 4, "length beyond the input"},
        {"\x04\x81", 2, "truncated long length"},
        {"\x04", 1, "no length"},
        {"\x1f\x01\x01\x00", 4, "high tag number form"},
        {"", 0, "empty"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        der_cur b = der_cur_init((const uint8_t *)bad[i].der, bad[i].n);
        uint8_t tag;
        if (der_get_any(&b, &tag, &v))
            fail_msg("accepted: %s", bad[i].why);
    }
    /* The high-tag-number form is refused by every verb, and der_peek_high_tag names it. */
    der_cur high = der_cur_init((const uint8_t *)"\x9f\x1f\x00", 3);
    der_cur low = der_cur_init((const uint8_t *)"\x9e\x00", 2);
    assert_true(der_peek_high_tag(&high));
    assert_false(der_peek_high_tag(&low));
    der_cur nothing = der_cur_init(NULL, 0);
    assert_false(der_peek_high_tag(&nothing));
    der_cur none = der_cur_init(NULL, 10);
    assert_true(der_empty(&none));
}

static void test_integer_bool_oid(void **state)
{
    der_cur v, c;
    bool b;
    static const char *const bad_ints[] = {"\x02\x00", "\x02\x02\x00\x01", "\x02\x02\xff\x80"};
    static const size_t bad_int_len[] = {2, 4, 4};
    for (size_t i = 0; i < 3; i++) {
        c = der_cur_init((const uint8_t *)bad_ints[i], bad_int_len[i]);
        assert_false(der_get_integer(&c, &v));
    }
    c = CUR("\x02\x02\x00\x80"); /* the 0x00 keeps 128 positive: minimal */
    assert_true(der_get_integer(&c, &v));
    c = CUR("\x02\x02\xff\x7f");
    assert_true(der_get_integer(&c, &v));
    c = CUR("\x01\x01\x01");
    assert_false(der_get_bool(&c, &b)); /* BER's "any non-zero is true" */
    c = CUR("\x01\x02\xff\xff");
    assert_false(der_get_bool(&c, &b));
    c = CUR("\x01\x01\x00");
    assert_true(der_get_bool(&c, &b));
    assert_false(b);
    c = CUR("\x06\x03\x55\x1d\x0f");
    assert_true(der_get_oid(&c, &v));
    c = CUR("\x06\x03\x55\x80\x01"); /* leading 0x80 in a subidentifier */
    assert_false(der_get_oid(&c, &v));
    c = CUR("\x06\x02\x55\x81"); /* last octet continues */
    assert_false(der_get_oid(&c, &v));
    c = CUR("\x06\x00");
    assert_false(der_get_oid(&c, &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_and_element),
        cmocka_unit_test(test_optional_and_only),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_integer_bool_oid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
