/* test_pbwire.c - the one varint reader (common/pbwire.h): shortest form only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pbwire.h"

static int read1(const uint8_t *p, size_t len, uint64_t *v, size_t *off)
{
    *off = 0;
    return pbwire_varint(p, len, off, v);
}

static void test_minimal_values(void **state)
{
    (void)state;
    uint64_t v;
    size_t off;
    static const uint8_t zero[] = {0x00}, one[] = {0x01}, b300[] = {0xac, 0x02};
    static const uint8_t max[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_true(read1(zero, 1, &v, &off) && v == 0 && off == 1);
    assert_true(read1(one, 1, &v, &off) && v == 1);
    assert_true(read1(b300, 2, &v, &off) && v == 300 && off == 2);
    /* ten bytes is a uint64's (and a negative int32's) shortest form */
    assert_true(read1(max, sizeof(max), &v, &off) && v == UINT64_MAX && off == 10);
}

static void test_refused(void **state)
{
    (void)state;
    uint64_t v;
    size_t off;
    static const uint8_t padded1[] = {0x81, 0x00}, padded0[] = {0x80, 0x00};
    static const uint8_t over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    static const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    static const uint8_t cut[] = {0x80};
    assert_false(read1(padded1, 2, &v, &off)); /* 1 in two bytes */
    assert_false(read1(padded0, 2, &v, &off)); /* 0 in two bytes */
    assert_false(read1(over, sizeof(over), &v, &off)); /* above 2^64 - 1 */
    assert_false(read1(eleven, sizeof(eleven), &v, &off));
    assert_false(read1(cut, 1, &v, &off)); /* runs past the end */
    assert_false(read1(cut, 0, &v, &off));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_values),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
