/* test_policy_spiffe.c - the one SPIFFE-ID validator (policy_spiffe.h) that the
 * policy, the front end and the signer share: the grammar, one refusal per
 * rule, each naming it. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "policy_spiffe.h"

static const char *const TD[] = {"cluster.local", "other.example"};

static hsmca_code check(const char *s, size_t len, hsmca_err *e)
{
    hsmca_err_clear(e);
    return policy_spiffe_id_check(s, len, TD, 2, e);
}

static void test_accepts(void **state)
{
    static const char *const good[] = {
        "spiffe://cluster.local/ns/default/sa/sleep",
        "spiffe://other.example/x",
        "spiffe://cluster.local/a.b/c..d/-_/A-Z/...", /* "..." and "c..d" are segments */
        "spiffe://cluster.local/ns/default/sa/a..b",
    };
    hsmca_err e;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (check(good[i], strlen(good[i]), &e) != HSMCA_OK)
            fail_msg("refused %s: %s", good[i], e.msg);
    /* n_tds 0: any well-formed trust domain. */
    assert_int_equal(policy_spiffe_id_check("spiffe://x.y/z", 14, NULL, 0, &e), HSMCA_OK);
}

static void test_refuses_naming_the_rule(void **state)
{
    static const struct {
        const char *id, *msg;
    } bad[] = {
        {"", "SPIFFE ID: empty"},
        {"https://cluster.local/ns/a", "SPIFFE ID: scheme must be spiffe://"},
        {"SPIFFE://cluster.local/ns/a", "SPIFFE ID: scheme must be spiffe://"},
        {"spiffe:/cluster.local/ns/a", "SPIFFE ID: scheme must be spiffe://"},
        {"spiffe:///ns/a", "SPIFFE ID: empty trust domain"},
        {"spiffe://cluster.local", "SPIFFE ID: no path"},
        {"spiffe://cluster.local/", "SPIFFE ID: path segment 1 is empty"},
        {"spiffe://cluster.local/ns/a/", "SPIFFE ID: path segment 3 is empty"},
        {"spiffe://cluster.local//ns", "SPIFFE ID: path segment 1 is empty"},
        {"spiffe://cluster.local/./ns", "SPIFFE ID: path segment 1 is '.'"},
        {"spiffe://cluster.local/ns/../a", "SPIFFE ID: path segment 2 is '..'"},
        {"spiffe://cluster.local/ns/..", "SPIFFE ID: path segment 2 is '..'"},
        {"spiffe://cluster.localx/ns/a", "SPIFFE ID: trust domain is not a configured one"},
        {"spiffe://cluster.loca/ns/a", "SPIFFE ID: trust domain is not a configured one"},
        {"spiffe://CLUSTER.LOCAL/ns/a", "SPIFFE ID: trust domain must be lowercase"},
        {"spiffe://user@cluster.local/ns/a", "SPIFFE ID: userinfo ('@') not allowed"},
        {"spiffe://cluster.local:443/ns/a", "SPIFFE ID: port (':') not allowed"},
        {"spiffe://cluster.local/ns/a%2f", "SPIFFE ID: percent-encoding not allowed"},
        {"spiffe://cluster.local/ns/a?x=1", "SPIFFE ID: query or fragment not allowed"},
        {"spiffe://cluster.local/ns/a#f", "SPIFFE ID: query or fragment not allowed"},
        {"spiffe://cluster.local?x/ns", "SPIFFE ID: query or fragment not allowed"},
        {"spiffe://clu$ter.local/ns", "SPIFFE ID: trust domain byte 0x24 at offset 12"},
        /* Every character the old signer let through in a path. */
        {"spiffe://cluster.local/ns/a,b", "SPIFFE ID: path byte 0x2c at offset 27"},
        {"spiffe://cluster.local/ns/a=b", "SPIFFE ID: path byte 0x3d at offset 27"},
        {"spiffe://cluster.local/ns/a@b", "SPIFFE ID: path byte 0x40 at offset 27"},
        {"spiffe://cluster.local/ns/a:b", "SPIFFE ID: path byte 0x3a at offset 27"},
        {"spiffe://cluster.local/ns/a*b", "SPIFFE ID: path byte 0x2a at offset 27"},
        {"spiffe://cluster.local/ns/a;b", "SPIFFE ID: path byte 0x3b at offset 27"},
        {"spiffe://cluster.local/ns/a<b", "SPIFFE ID: path byte 0x3c at offset 27"},
        {"spiffe://cluster.local/ns/a\"b", "SPIFFE ID: path byte 0x22 at offset 27"},
        {"spiffe://cluster.local/ns/a'b", "SPIFFE ID: path byte 0x27 at offset 27"},
        {"spiffe://cluster.local/ns/a~b", "SPIFFE ID: path byte 0x7e at offset 27"},
        {"spiffe://cluster.local/ns/a+b", "SPIFFE ID: path byte 0x2b at offset 27"},
        {"spiffe://cluster.local/ns/a[b", "SPIFFE ID: path byte 0x5b at offset 27"},
        {"spiffe://cluster.local/ns/a]b", "SPIFFE ID: path byte 0x5d at offset 27"},
        {"spiffe://cluster.local/ns/a(b", "SPIFFE ID: path byte 0x28 at offset 27"},
        {"spiffe://cluster.local/ns/a b", "SPIFFE ID: path byte 0x20 at offset 27"},
        {"spiffe://cluster.local/ns/a\\b", "SPIFFE ID: path byte 0x5c at offset 27"},
        {"spiffe://cluster.local/ns/a\x7f", "SPIFFE ID: path byte 0x7f at offset 27"},
        {"spiffe://cluster.local/ns/\xc3\xa9", "SPIFFE ID: path byte 0xc3 at offset 26"},
    };
    hsmca_err e;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hsmca_code rc = check(bad[i].id, strlen(bad[i].id), &e);
        if (rc != HSMCA_EPERM || strncmp(e.msg, bad[i].msg, strlen(bad[i].msg)) != 0)
            fail_msg("%s: expected \"%s\", got %s \"%s\"", bad[i].id, bad[i].msg,
                     hsmca_code_name(rc), e.msg);
    }
}

static void test_length_nul_null(void **state)
{
    hsmca_err e;
    /* The length is what counts: an embedded NUL is refused, not a cut. */
    const char nul[] = "spiffe://cluster.local/ns/a\0b";
    assert_int_equal(check(nul, sizeof(nul) - 1, &e), HSMCA_EPERM);
    assert_string_equal(e.msg, "SPIFFE ID: contains a NUL byte");
    assert_int_equal(check(nul, sizeof(nul) - 3, &e), HSMCA_OK);
    assert_int_equal(check(NULL, 10, &e), HSMCA_EPERM);
    /* At most 2048 bytes. */
    char id[3000];
    memcpy(id, "spiffe://cluster.local/", 23);
    memset(id + 23, 'a', sizeof(id) - 23);
    assert_int_equal(check(id, SPIFFE_ID_MAX, &e), HSMCA_OK);
    assert_int_equal(check(id, SPIFFE_ID_MAX + 1, &e), HSMCA_EPERM);
    assert_string_equal(e.msg, "SPIFFE ID: 2049 bytes (at most 2048)");
    /* A trust domain over 255 bytes. */
    memcpy(id, "spiffe://", 9);
    memset(id + 9, 'a', 256);
    memcpy(id + 265, "/x", 2);
    assert_int_equal(policy_spiffe_id_check(id, 267, NULL, 0, &e), HSMCA_EPERM);
    assert_string_equal(e.msg, "SPIFFE ID: trust domain of 256 bytes (at most 255)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts),
        cmocka_unit_test(test_refuses_naming_the_rule),
        cmocka_unit_test(test_length_nul_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
