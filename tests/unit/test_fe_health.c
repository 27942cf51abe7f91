/* test_fe_health.c - grpc.health.v1.Health/Check's request parsing and answers
 * (frontend/fe_health.c): the services answered, what is refused, and NOT_SERVING while
 * the front end is not ready (no signer connected here). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "fe_health.h"

static hsmca_config cfg;
static fe_app app = {.cfg = &cfg};

static int check(const void *body, size_t len, uint8_t out[2], size_t *n)
{
    const char *msg = NULL;
    int code = fe_health_check(&app, body, len, out, n, &msg);
    assert_non_null(msg);
    return code;
}

static void test_services_answered(void **state)
{
    (void)state;
    uint8_t out[2];
    size_t n = 0;
    assert_int_equal(check("", 0, out, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 0x08);
    assert_int_equal(out[1], 2); /* NOT_SERVING: no signer connected */
    static const char ca[] = "\x0a\x25istio.v1.auth.IstioCertificateService";
    assert_int_equal(check(ca, sizeof(ca) - 1, out, &n), 0);
    assert_int_equal(out[1], 2);
    assert_int_equal(check("\x0a\x00", 2, out, &n), 0); /* service "" spelled out */
}

static void test_unknown_service_not_found(void **state)
{
    (void)state;
    uint8_t out[2];
    size_t n;
    assert_int_equal(check("\x0a\x03"
                           "foo",
                           5, out, &n),
                     5);
    static const char prefix[] = "\x0a\x05istio";
    assert_int_equal(check(prefix, sizeof(prefix) - 1, out, &n), 5);
}

static void test_garbage_invalid(void **state)
{
    (void)state;
    uint8_t out[2];
    size_t n;
    assert_int_equal(check("\x08\x01", 2, out, &n), 3); /* field 1 as a varint */
    assert_int_equal(check("\x12\x00", 2, out, &n), 3); /* field 2 */
    assert_int_equal(check("\x0a\x05"
                           "ab",
                           4, out, &n),
                     3);                                    /* length past the end */
    assert_int_equal(check("\x0a\x80\x00", 3, out, &n), 3); /* a padded varint */
    assert_int_equal(check("\x0a", 1, out, &n), 3);         /* no length */
    static uint8_t big[FE_HEALTH_MAX_REQUEST + 1];
    big[0] = 0x0a;
    big[1] = 0x7f;
    assert_int_equal(check(big, sizeof(big), out, &n), 3); /* over the bound */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_services_answered),
        cmocka_unit_test(test_unknown_service_not_found),
        cmocka_unit_test(test_garbage_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
