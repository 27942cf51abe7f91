/* test_audit_ica.c - the intermediate-* entries (audit/audit_entry.h) round-trip in
 * canonical form and refuse bad fields; their rules (audit/audit_ica.h), which the
 * signer and `hsmca audit verify` share: no self-approval, each user once, none after
 * expiry, denial or the certificate, no CA certificate without its approvals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "audit_entry.h"
#include "audit_ica.h"
#include "util.h"

static char g_line[AUDIT_LINE_MAX];
#define CSR_B64 "MIIBAA=="
#define CERT_B64 "AQIDBA==" /* the bytes 01 02 03 04 */

static audit_entry step(audit_kind k, uint64_t seq, uint64_t id, const char *user, int64_t t)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = k;
    a.seq = seq;
    a.time = t;
    a.request_id = id;
    a.requester = (audit_str){user, strlen(user), 0};
    return a;
}

static audit_entry request(uint64_t seq, const char *user, uint64_t required, int64_t expires)
{
    audit_entry a = step(AUDIT_ICA_REQUEST, seq, 0, user, 1000);
    a.csr = (audit_str){CSR_B64, strlen(CSR_B64), 0};
    memset(a.key_sha256, 'b', 64);
    strcpy(a.cluster, "cluster-a");
    a.required = required;
    a.expires = expires;
    a.ttl_s = 3600;
    return a;
}

static audit_entry cert_entry(uint64_t seq, uint64_t id)
{
    audit_entry a = step(AUDIT_ICA_CERT, seq, id, "", 1001);
    a.requester = (audit_str){NULL, 0, 0};
    a.cert = (audit_str){CERT_B64, strlen(CERT_B64), 0};
    static const uint8_t der[] = {1, 2, 3, 4};
    uint8_t md[32];
    SHA256(der, sizeof(der), md);
    util_hex(md, 32, a.cert_sha256);
    return a;
}

static void round_trip(const audit_entry *a, const char *want)
{
    static audit_entry_buf buf;
    audit_entry b;
    size_t n;
    hsmca_err e;
    assert_int_equal(audit_entry_encode(a, g_line, &n, &e), HSMCA_OK);
    g_line[n] = '\0';
    assert_string_equal(g_line, want);
    assert_int_equal(audit_entry_parse(g_line, n - 1, &b, &buf, &e), HSMCA_OK);
    assert_int_equal(b.kind, a->kind);
}

static void test_lines(void **state)
{
    audit_entry a = request(3, "alice", 2, 5000);
    round_trip(&a, "{\"cluster\":\"cluster-a\",\"csr\":\"MIIBAA==\",\"expires\":5000,"
                   "\"key_sha256\":\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\","
                   "\"kind\":\"intermediate-request\",\"required\":2,\"requester\":\"alice\","
                   "\"seq\":3,\"time\":1000,\"ttl_s\":3600}\n");
    a = step(AUDIT_ICA_APPROVE, 4, 3, "bob", 1001);
    round_trip(&a, "{\"kind\":\"intermediate-approve\",\"request_id\":3,\"requester\":\"bob\","
                   "\"seq\":4,\"time\":1001}\n");
    a = step(AUDIT_ICA_DENY, 5, 3, "carol", 1002);
    a.reason = (audit_str){"no", 2, 0};
    round_trip(&a, "{\"kind\":\"intermediate-deny\",\"reason\":\"no\",\"request_id\":3,"
                   "\"requester\":\"carol\",\"seq\":5,\"time\":1002}\n");
    a = step(AUDIT_ICA_FETCH, 7, 3, "root", 1003);
    round_trip(&a, "{\"kind\":\"intermediate-fetch\",\"request_id\":3,\"requester\":\"root\","
                   "\"seq\":7,\"time\":1003}\n");
    a = cert_entry(6, 3);
    size_t n;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_OK);
    assert_non_null(strstr(g_line, "{\"cert\":\"AQIDBA==\",\"cert_sha256\":\"9f64a7"));
}

static void test_fields_refused(void **state)
{
    size_t n;
    audit_entry a = request(3, "alice", 2, 5000);
    a.csr = (audit_str){"not base64!", 11, 0};
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = request(3, "alice", 0, 5000);
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = request(3, "alice", 17, 5000);
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = request(3, "", 2, 5000);
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = request(3, "alice", 2, 5000);
    strcpy(a.cluster, "bad/name");
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = cert_entry(6, 3);
    a.cert_sha256[0] = '\0';
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
}

/* Applies a and expects rc, with the message holding want when refused. */
static void apply(audit_ica *t, audit_entry a, hsmca_code rc, const char *want)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(audit_ica_apply(t, &a, 0, &e), rc);
    if (want && !strstr(e.msg, want))
        fail_msg("'%s' does not say '%s'", e.msg, want);
}

static audit_entry intent(uint64_t seq, uint64_t id)
{
    audit_entry a = step(AUDIT_ISSUE_INTENT, seq, id, "carol", 1001);
    strcpy(a.profile, AUDIT_ICA_PROFILE);
    return a;
}

static void test_rules(void **state)
{
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    apply(t, request(3, "alice", 2, 5000), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 4, 3, "alice", 1001), HSMCA_EPERM,
          "a requester's own approval does not count");
    apply(t, step(AUDIT_ICA_APPROVE, 4, 9, "bob", 1001), HSMCA_EPERM, "does not exist");
    apply(t, step(AUDIT_ICA_APPROVE, 4, 3, "bob", 1001), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "bob", 1001), HSMCA_EPERM, "the same user counts once");
    apply(t, intent(5, 3), HSMCA_EPERM, "which has 1 of its 2 approvals");
    apply(t, cert_entry(5, 3), HSMCA_EPERM, "which has 1 of its 2 approvals");
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 1001), ICA_PENDING);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 6000), ICA_EXPIRED);
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "carol", 5001), HSMCA_EPERM, "expired");
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "carol", 1002), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 9999), ICA_APPROVED);
    apply(t, cert_entry(6, 3), HSMCA_EPERM, "has no issue-intent before it");
    apply(t, intent(6, 3), HSMCA_OK, NULL);
    audit_entry bad = cert_entry(7, 3);
    bad.cert_sha256[0] = bad.cert_sha256[0] == 'a' ? 'b' : 'a';
    apply(t, bad, HSMCA_EPERM, "cert_sha256 is not the SHA-256 of its certificate");
    apply(t, cert_entry(7, 3), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 1003), ICA_ISSUED);
    apply(t, cert_entry(8, 3), HSMCA_EPERM, "signed already");
    apply(t, step(AUDIT_ICA_FETCH, 8, 3, "root", 1004), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_DENY, 8, 3, "dave", 1004), HSMCA_EPERM, "revoke it instead");
    /* A denied one: no approval, no second denial, no certificate. */
    apply(t, request(10, "alice", 1, 5000), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_DENY, 11, 10, "bob", 1004), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 12, 10, "carol", 1004), HSMCA_EPERM, "was denied by bob");
    apply(t, step(AUDIT_ICA_DENY, 12, 10, "carol", 1004), HSMCA_EPERM, "denied already");
    apply(t, intent(12, 10), HSMCA_EPERM, "and was denied");
    apply(t, step(AUDIT_ICA_FETCH, 12, 10, "root", 1004), HSMCA_EPERM, "which is not signed");
    /* Workload intents are none of its business. */
    audit_entry w = intent(12, 77);
    strcpy(w.profile, "workload");
    apply(t, w, HSMCA_OK, NULL);
    assert_int_equal(audit_ica_count(t), 2);
    audit_ica_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_fields_refused),
        cmocka_unit_test(test_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
