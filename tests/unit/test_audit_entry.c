/* test_audit_entry.c - canonical entry lines (audit/audit_entry.h): every kind round-trips,
 * hostile requester bytes stay on one line and come back byte for byte, caps, and the
 * parser refuses every other spelling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_entry.h"

static char g_line[AUDIT_LINE_MAX];

static audit_entry intent(const char *req, size_t req_len)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.seq = 7;
    a.time = 1790000000;
    a.request_id = 42;
    memset(a.tbs_sha256, 'a', 64);
    memset(a.csr_sha256, '0', 64);
    strcpy(a.serial, "0102030405060708");
    strcpy(a.profile, "workload");
    a.not_before = 1790000000;
    a.not_after = 1790086400;
    a.requester = (audit_str){req, req_len, 0};
    a.sans = (audit_str){"uri:spiffe://td/ns/a/sa/b", 25, 0};
    return a;
}

/* Encodes a, checks the line's framing, parses it back and re-encodes: same bytes. */
static size_t round_trip(const audit_entry *a, audit_entry *back, audit_entry_buf *buf)
{
    size_t n;
    assert_int_equal(audit_entry_encode(a, g_line, &n, NULL), HSMCA_OK);
    assert_true(n < AUDIT_LINE_MAX);
    assert_int_equal(g_line[n - 1], '\n');
    assert_null(memchr(g_line, '\n', n - 1));
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(audit_entry_parse(g_line, n - 1, back, buf, &e), HSMCA_OK);
    assert_int_equal(back->kind, a->kind);
    assert_int_equal(back->seq, a->seq);
    return n;
}

static void test_intent_round_trip(void **state)
{
    audit_entry a = intent("spiffe://td/ns/a/sa/b", 21), b;
    static audit_entry_buf buf;
    size_t n = round_trip(&a, &b, &buf);
    assert_string_equal(b.serial, a.serial);
    assert_string_equal(b.tbs_sha256, a.tbs_sha256);
    assert_int_equal(b.not_after, a.not_after);
    assert_int_equal(b.requester.len, 21);
    assert_memory_equal(b.requester.p, "spiffe://td/ns/a/sa/b", 21);
    g_line[n] = 0;
    /* keys sorted, no spaces */
    assert_non_null(strstr(g_line, "{\"csr_sha256\":\"000"));
    assert_non_null(strstr(g_line, "\"time\":1790000000}\n"));
}

/* "bound" (identity binding) is optional: present only on a bound intent, so older
 * logs still parse; never empty, never on another kind. */
static void test_intent_bound(void **state)
{
    audit_entry a = intent("spiffe://td/ns/a/sa/b", 21), b;
    static audit_entry_buf buf;
    strcpy(a.bound, "jwt");
    size_t n = round_trip(&a, &b, &buf);
    assert_string_equal(b.bound, "jwt");
    g_line[n] = 0;
    assert_non_null(strstr(g_line, "{\"bound\":\"jwt\",\"csr_sha256\":"));
    a.bound[0] = 0;
    n = round_trip(&a, &b, &buf);
    g_line[n] = 0;
    assert_null(strstr(g_line, "bound"));
    assert_string_equal(b.bound, "");
    hsmca_err e;
    static char empty[AUDIT_LINE_MAX + 16];
    snprintf(empty, sizeof(empty), "{\"bound\":\"\",%.*s", (int)(n - 2), g_line + 1);
    assert_int_equal(audit_entry_parse(empty, strlen(empty), &b, &buf, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "audit line: not in canonical form");
    const char *other = "{\"bound\":\"jwt\",\"kind\":\"start\",\"seq\":0,\"time\":1}";
    assert_int_equal(audit_entry_parse(other, strlen(other), &b, &buf, &e), HSMCA_EINVAL);
    strcpy(a.bound, "j w t");
    assert_int_equal(audit_entry_encode(&a, g_line, &n, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "audit entry: bad bound name");
}

/* "cluster" (multicluster): only on a bound intent, a cluster id, absent otherwise. */
static void test_intent_cluster(void **state)
{
    audit_entry a = intent("spiffe://td/ns/a/sa/b", 21), b;
    static audit_entry_buf buf;
    strcpy(a.bound, "jwt");
    strcpy(a.cluster, "west.1_x-Y");
    size_t n = round_trip(&a, &b, &buf);
    assert_string_equal(b.cluster, "west.1_x-Y");
    g_line[n] = 0;
    assert_non_null(
        strstr(g_line, "{\"bound\":\"jwt\",\"cluster\":\"west.1_x-Y\",\"csr_sha256\":"));
    hsmca_err e;
    strcpy(a.cluster, "we st");
    assert_int_equal(audit_entry_encode(&a, g_line, &n, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "audit entry: cluster must be a cluster id, and bound");
    strcpy(a.cluster, "west");
    a.bound[0] = 0;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, &e), HSMCA_EINVAL);
    const char *other = "{\"cluster\":\"west\",\"kind\":\"start\",\"seq\":0,\"time\":1}";
    assert_int_equal(audit_entry_parse(other, strlen(other), &b, &buf, &e), HSMCA_EINVAL);
}

/* An intent's authenticator (the front end's word) is optional too: written when named,
 * escaped like the requester; absent from older lines. */
static void test_intent_authenticator(void **state)
{
    audit_entry a = intent("spiffe://td/ns/a/sa/b", 21), b;
    static audit_entry_buf buf;
    a.authenticator = (audit_str){"jwt", 3, 0};
    size_t n = round_trip(&a, &b, &buf);
    g_line[n] = 0;
    assert_non_null(strstr(g_line, "{\"authenticator\":\"jwt\",\"csr_sha256\":"));
    assert_int_equal(b.authenticator.len, 3);
    assert_memory_equal(b.authenticator.p, "jwt", 3);
    a.authenticator = (audit_str){"a\"b", 3, 0};
    n = round_trip(&a, &b, &buf);
    g_line[n] = 0;
    assert_non_null(strstr(g_line, "{\"authenticator\":\"a\\\"b\","));
    a.authenticator = (audit_str){"", 0, 0};
    n = round_trip(&a, &b, &buf);
    g_line[n] = 0;
    assert_null(strstr(g_line, "authenticator"));
    assert_int_equal(b.authenticator.len, 0);
}

static void test_other_kinds(void **state)
{
    static audit_entry_buf buf;
    audit_entry a, b;
    audit_kind kinds[] = {AUDIT_START, AUDIT_STOP};
    for (size_t i = 0; i < 2; i++) {
        memset(&a, 0, sizeof(a));
        a.kind = kinds[i];
        a.seq = i;
        round_trip(&a, &b, &buf);
    }
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_RESULT;
    a.seq = 8;
    a.intent_seq = 7;
    memset(a.cert_sha256, 'b', 64);
    round_trip(&a, &b, &buf);
    assert_int_equal(b.intent_seq, 7);
    assert_string_equal(b.cert_sha256, a.cert_sha256);
    memset(a.cert_sha256, 0, sizeof(a.cert_sha256));
    strcpy(a.code, "UNAVAILABLE");
    a.error = (audit_str){"token gone", 10, 0};
    round_trip(&a, &b, &buf);
    assert_memory_equal(b.error.p, "token gone", 10);
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_DENY;
    strcpy(a.code, "PERMISSION_DENIED");
    a.reason = (audit_str){"invariant 4: TTL", 16, 0};
    a.requester = (audit_str){"x", 1, 0};
    round_trip(&a, &b, &buf);
    assert_memory_equal(b.reason.p, "invariant 4: TTL", 16);
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_RECOVERY;
    a.reason = (audit_str){"cut 3 bytes", 11, 0};
    round_trip(&a, &b, &buf);
}

static void test_hostile_requester(void **state)
{
    static audit_entry_buf buf;
    /* newline, quote, NUL, backslash, a fake \xc0 text, invalid UTF-8, valid UTF-8, DEL */
    static const char req[] = "a\nb\"c\0d\\e\\xc0f\xc0\xff\xed\xa0\x80g\xe2\x82\xach\x7f";
    audit_entry a = intent(req, sizeof(req) - 1), b;
    round_trip(&a, &b, &buf);
    assert_int_equal(b.requester.len, sizeof(req) - 1);
    assert_memory_equal(b.requester.p, req, sizeof(req) - 1);
    assert_int_equal(b.requester.full, 0);
}

static void test_caps(void **state)
{
    static audit_entry_buf buf;
    static char big[3 * AUDIT_STR_MAX], sans[2 * AUDIT_SANS_MAX];
    memset(big, '\n', sizeof(big)); /* every byte costs the most when escaped */
    memset(sans, 0x01, sizeof(sans));
    audit_entry a = intent(big, sizeof(big)), b;
    a.sans = (audit_str){sans, sizeof(sans), 0};
    size_t n = round_trip(&a, &b, &buf);
    assert_true(n < AUDIT_LINE_MAX);
    assert_int_equal(b.requester.len, AUDIT_STR_MAX);
    assert_int_equal(b.requester.full, sizeof(big));
    assert_int_equal(b.sans.len, AUDIT_SANS_MAX);
    assert_int_equal(b.sans.full, sizeof(sans));
    g_line[n] = 0;
    assert_non_null(strstr(g_line, "\"requester_truncated\":6144,\"sans\":"));
}

static void refuse(const char *line)
{
    static audit_entry_buf buf;
    audit_entry b;
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(audit_entry_parse(line, strlen(line), &b, &buf, &e), HSMCA_EINVAL);
    assert_true(strlen(e.msg) > 0);
}

static void test_parser_refuses(void **state)
{
    static audit_entry_buf buf;
    audit_entry b;
    assert_int_equal(
        audit_entry_parse("{\"kind\":\"start\",\"seq\":0,\"time\":5}", 33, &b, &buf, NULL),
        HSMCA_OK);
    refuse("{\"kind\":\"start\",\"seq\":0,\"time\":5} ");
    refuse("{\"seq\":0,\"kind\":\"start\",\"time\":5}");   /* key order */
    refuse("{\"kind\":\"start\", \"seq\":0,\"time\":5}");  /* whitespace */
    refuse("{\"kind\":\"start\",\"seq\":0.0,\"time\":5}"); /* float */
    refuse("{\"kind\":\"start\",\"seq\":-1,\"time\":5}");
    refuse("{\"kind\":\"start\",\"seq\":0,\"seq\":0,\"time\":5}"); /* duplicate */
    refuse("{\"kind\":\"begin\",\"seq\":0,\"time\":5}");
    refuse("{\"kind\":\"start\",\"seq\":0,\"time\":5,\"x\":1}"); /* unknown key */
    refuse("{\"kind\":\"st\\u0061rt\",\"seq\":0,\"time\":5}");   /* other escape */
    refuse("[1]");
    refuse("");
    refuse("{\"kind\":\"deny\",\"code\":\"X\",\"reason\":\"a\\\\qb\",\"request_id\":1,"
           "\"requester\":\"\",\"seq\":0,\"time\":5}");
    refuse("{\"code\":\"X\",\"kind\":\"deny\",\"reason\":\"a\",\"reason_truncated\":1,"
           "\"request_id\":1,\"requester\":\"\",\"seq\":0,\"time\":5}");
    refuse("{\"kind\":\"start\",\"seq\":0,\"time\":5}\n");
    refuse("{\"code\":\"X\",\"kind\":\"deny\",\"reason\":\"a\",\"reason_truncated\":9999,"
           "\"request_id\":1,\"requester\":\"\",\"seq\":0,\"time\":5}"); /* not at the cap */
}

/* The kinds of issue 6 item 1: config, key, frontend-deny and the suppressed summary. */
static void test_new_kinds(void **state)
{
    static audit_entry_buf buf;
    audit_entry a, b;
    size_t n;

    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_CONFIG;
    a.seq = 1;
    memset(a.config_sha256, 'c', 64);
    memset(a.policy_sha256, 'd', 64);
    n = round_trip(&a, &b, &buf);
    assert_string_equal(b.config_sha256, a.config_sha256);
    assert_string_equal(b.policy_sha256, a.policy_sha256);
    g_line[n] = 0;
    assert_non_null(strstr(g_line, "{\"config_sha256\":\"cccc"));

    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_KEY;
    a.seq = 2;
    strcpy(a.ca_key_alg, "ecdsa-with-SHA256");
    strcpy(a.ca_key_type, "ec-prime256v1");
    memset(a.ca_spki_sha256, '1', 64);
    memset(a.ca_cert_sha256, '2', 64);
    strcpy(a.audit_key_alg, "ed25519");
    memset(a.audit_public_key, 'e', 64);
    a.ca_key_uri = (audit_str){"pkcs11:token=t;object=ca", 24, 0};
    a.audit_key_uri = (audit_str){"pkcs11:token=t;object=a\"", 24, 0};
    n = round_trip(&a, &b, &buf);
    assert_string_equal(b.ca_key_alg, "ecdsa-with-SHA256");
    assert_string_equal(b.ca_key_type, "ec-prime256v1");
    assert_string_equal(b.audit_public_key, a.audit_public_key);
    assert_memory_equal(b.audit_key_uri.p, a.audit_key_uri.p, 24);
    assert_memory_equal(b.ca_key_uri.p, a.ca_key_uri.p, 24);
    /* no audit key: both empty */
    a.audit_key_alg[0] = 0;
    a.audit_public_key[0] = 0;
    a.audit_key_uri = (audit_str){"", 0, 0};
    round_trip(&a, &b, &buf);
    a.audit_public_key[0] = 'e'; /* a key without its algorithm */
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);

    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_FRONTEND_DENY;
    a.seq = 3;
    a.request_id = 77;
    strcpy(a.code, "UNAUTHENTICATED");
    a.requester = (audit_str){"", 0, 0};
    a.authenticator = (audit_str){"jwt\n", 4, 0};
    a.reason = (audit_str){"authentication: bad signature", 29, 0};
    n = round_trip(&a, &b, &buf);
    assert_int_equal(b.request_id, 77);
    assert_string_equal(b.code, "UNAUTHENTICATED");
    assert_memory_equal(b.authenticator.p, "jwt\n", 4);
    g_line[n] = 0;
    assert_non_null(strstr(g_line, "\"source\":\"frontend\",\"time\""));
    static char big[3 * AUDIT_NAME_STR_MAX];
    memset(big, 'x', sizeof(big));
    a.authenticator = (audit_str){big, sizeof(big), 0};
    n = round_trip(&a, &b, &buf);
    assert_int_equal(b.authenticator.len, AUDIT_NAME_STR_MAX);
    assert_int_equal(b.authenticator.full, sizeof(big));

    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_SUPPRESSED;
    a.seq = 4;
    strcpy(a.of, "frontend-deny");
    a.count = 12345;
    a.limit = 50;
    a.interval_s = 1;
    n = round_trip(&a, &b, &buf);
    assert_int_equal(b.count, 12345);
    assert_int_equal(b.limit, 50);
    assert_string_equal(b.of, "frontend-deny");
    strcpy(a.of, "issue-intent");
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    strcpy(a.of, "deny");
    a.count = 0;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);

    memset(&a, 0, sizeof(a)); /* the result written for an intent open at a restart */
    a.kind = AUDIT_ISSUE_RESULT;
    a.intent_seq = 9;
    strcpy(a.code, "UNKNOWN");
    a.error = (audit_str){"outcome unknown", 15, 0};
    round_trip(&a, &b, &buf);
    assert_string_equal(b.code, "UNKNOWN");
}

/* Each new kind has one spelling: missing, extra or misplaced fields are refused. */
static void test_new_kinds_refused(void **state)
{
    static audit_entry_buf buf;
    audit_entry b;
    const char *ok = "{\"count\":3,\"interval_s\":1,\"kind\":\"suppressed\",\"limit\":50,"
                     "\"of\":\"deny\",\"seq\":0,\"time\":5}";
    assert_int_equal(audit_entry_parse(ok, strlen(ok), &b, &buf, NULL), HSMCA_OK);
    refuse("{\"count\":3,\"interval_s\":1,\"kind\":\"suppressed\",\"limit\":50,"
           "\"of\":\"start\",\"seq\":0,\"time\":5}");
    refuse("{\"interval_s\":1,\"kind\":\"suppressed\",\"limit\":50,\"of\":\"deny\",\"seq\":0,"
           "\"time\":5}"); /* no count */
    refuse("{\"count\":3,\"interval_s\":1,\"kind\":\"suppressed\",\"limit\":50,\"of\":\"deny\","
           "\"seq\":0,\"source\":\"frontend\",\"time\":5}"); /* a key of another kind */
    /* frontend-deny without its source, or with another source */
    refuse("{\"authenticator\":\"jwt\",\"code\":\"UNAUTHENTICATED\",\"kind\":\"frontend-deny\","
           "\"reason\":\"r\",\"request_id\":1,\"requester\":\"\",\"seq\":0,\"time\":5}");
    refuse("{\"authenticator\":\"jwt\",\"code\":\"UNAUTHENTICATED\",\"kind\":\"frontend-deny\","
           "\"reason\":\"r\",\"request_id\":1,\"requester\":\"\",\"seq\":0,\"source\":\"signer\","
           "\"time\":5}");
    const char *fd = "{\"authenticator\":\"jwt\",\"code\":\"UNAUTHENTICATED\",\"kind\":"
                     "\"frontend-deny\",\"reason\":\"r\",\"request_id\":1,\"requester\":\"\","
                     "\"seq\":0,\"source\":\"frontend\",\"time\":5}";
    assert_int_equal(audit_entry_parse(fd, strlen(fd), &b, &buf, NULL), HSMCA_OK);
    /* config with an upper-case hash; a config hash on a start entry */
    refuse(
        "{\"config_sha256\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
        "\"kind\":\"config\",\"policy_sha256\":"
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"seq\":0,"
        "\"time\":5}");
    refuse(
        "{\"config_sha256\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
        "\"kind\":\"start\",\"seq\":0,\"time\":5}");
}

static void test_encoder_refuses(void **state)
{
    size_t n;
    audit_entry a = intent("r", 1);
    a.tbs_sha256[3] = 'A';
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = intent("r", 1);
    a.serial[0] = 0;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_RESULT; /* neither a hash nor an error */
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a.kind = 99;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
}

/* ca-key: a ceremony step written by the hsmca command (ca/ca_audit.h). */
static void test_ca_key(void **state)
{
    static audit_entry_buf buf;
    audit_entry a, b;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_CA_KEY;
    a.seq = 3;
    strcpy(a.step, "rotate-switch");
    strcpy(a.ca_key_alg, "ecdsa-with-SHA256");
    strcpy(a.ca_key_type, "ec-prime256v1");
    memset(a.ca_spki_sha256, 'c', 64);
    memset(a.ca_cert_sha256, 'd', 64);
    a.ca_key_uri = (audit_str){"pkcs11:token=t;object=k2", 24, 0};
    a.requester = (audit_str){"alice", 5, 0};
    size_t n = round_trip(&a, &b, &buf);
    g_line[n] = 0;
    assert_string_equal(b.step, "rotate-switch");
    assert_memory_equal(b.ca_key_uri.p, "pkcs11:token=t;object=k2", 24);
    assert_non_null(strstr(g_line, "\"requester\":\"alice\",\"seq\":3,\"step\":\"rotate-switch\""));
    memset(a.ca_cert_sha256, 0, sizeof(a.ca_cert_sha256)); /* a key alone: no certificate */
    round_trip(&a, &b, &buf);
    assert_string_equal(b.ca_cert_sha256, "");
    hsmca_err e;
    a.step[0] = 0; /* a step is required */
    assert_int_equal(audit_entry_encode(&a, g_line, &n, &e), HSMCA_EINVAL);
    strcpy(a.step, "init");
    a.requester = (audit_str){"", 0, 0}; /* and who ran it */
    assert_int_equal(audit_entry_encode(&a, g_line, &n, &e), HSMCA_EINVAL);
    a.requester = (audit_str){"alice", 5, 0};
    a.ca_spki_sha256[0] = 0; /* and the key */
    assert_int_equal(audit_entry_encode(&a, g_line, &n, &e), HSMCA_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intent_round_trip),
        cmocka_unit_test(test_intent_bound),
        cmocka_unit_test(test_intent_cluster),
        cmocka_unit_test(test_intent_authenticator),
        cmocka_unit_test(test_other_kinds),
        cmocka_unit_test(test_hostile_requester),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_parser_refuses),
        cmocka_unit_test(test_encoder_refuses),
        cmocka_unit_test(test_new_kinds),
        cmocka_unit_test(test_new_kinds_refused),
        cmocka_unit_test(test_ca_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
