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

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "audit_entry.h"
#include "audit_ica.h"
#include "audit_ica_renew.h"
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

/* The issue-result of intent seq intent of request id. */
static audit_entry result(uint64_t seq, uint64_t id, uint64_t intent_seq)
{
    audit_entry a = step(AUDIT_ISSUE_RESULT, seq, id, "", 1001);
    a.requester = (audit_str){NULL, 0, 0};
    a.intent_seq = intent_seq;
    memset(a.cert_sha256, 'd', 64);
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
    /* One spelling per value: the same bytes with the spare bits under '=' set are not
     * base64 (util_b64_decode, as every reader of base64). */
    bad = cert_entry(7, 3);
    bad.cert = (audit_str){"AQIDBB==", 8, 0};
    apply(t, bad, HSMCA_EPERM, "the certificate is not base64");
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

static audit_entry auto_approve(uint64_t seq, uint64_t id, uint64_t renews, int64_t t)
{
    audit_entry a = step(AUDIT_ICA_AUTO_APPROVE, seq, id, "alice", t);
    a.renews = renews;
    return a;
}

/* intermediate-auto-approve: its line, and the renewal rule (the proof's signature is
 * test_auto_renew's, with real keys). */
static void test_auto_rules(void **state)
{
    audit_entry a = auto_approve(11, 10, 3, 1005);
    round_trip(&a, "{\"kind\":\"intermediate-auto-approve\",\"renews\":3,\"request_id\":10,"
                   "\"requester\":\"alice\",\"seq\":11,\"time\":1005}\n");
    a.proof = (audit_str){"AQID", 4, 0};
    round_trip(&a, "{\"kind\":\"intermediate-auto-approve\",\"proof\":\"AQID\",\"renews\":3,"
                   "\"request_id\":10,\"requester\":\"alice\",\"seq\":11,\"time\":1005}\n");
    size_t n;
    a.renews = 0;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    apply(t, request(3, "alice", 2, 5000), HSMCA_OK, NULL);
    apply(t, auto_approve(4, 3, 3, 1001), HSMCA_EPERM, "renews 3, which is not an issued");
    apply(t, step(AUDIT_ICA_APPROVE, 4, 3, "bob", 1001), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "carol", 1001), HSMCA_OK, NULL);
    audit_entry in = intent(6, 3);
    in.not_after = 9000;
    strcpy(in.serial, "0a");
    apply(t, in, HSMCA_OK, NULL);
    apply(t, result(7, 3, 6), HSMCA_OK, NULL);
    apply(t, cert_entry(7, 3), HSMCA_OK, NULL);
    /* The same key, the same cluster, before the renewed one expires: approved, signable. */
    apply(t, request(10, "alice", 2, 5000), HSMCA_OK, NULL);
    apply(t, auto_approve(11, 10, 3, 1005), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 10), 1006), ICA_APPROVED);
    apply(t, auto_approve(12, 10, 3, 1005), HSMCA_EPERM, "which is not pending");
    apply(t, step(AUDIT_ICA_APPROVE, 12, 10, "bob", 1006), HSMCA_EPERM, "auto-approval");
    apply(t, intent(12, 10), HSMCA_OK, NULL);
    /* Another key without a proof, another cluster, past the renewed one's notAfter. */
    audit_entry other = request(20, "alice", 2, 99999);
    memset(other.key_sha256, 'c', 64);
    apply(t, other, HSMCA_OK, NULL);
    apply(t, auto_approve(21, 20, 3, 1006), HSMCA_EPERM, "has another key than 3 and no proof");
    audit_entry elsewhere = request(22, "alice", 2, 99999);
    strcpy(elsewhere.cluster, "cluster-b");
    apply(t, elsewhere, HSMCA_OK, NULL);
    apply(t, auto_approve(23, 22, 3, 1006), HSMCA_EPERM, "not an issued intermediate of cluster");
    apply(t, request(24, "alice", 2, 99999), HSMCA_OK, NULL);
    apply(t, auto_approve(25, 24, 3, 9500), HSMCA_EPERM, "whose certificate is expired");
    /* Revoked: renews nothing. */
    audit_entry rv = step(AUDIT_REVOKE, 25, 0, "root", 1007);
    strcpy(rv.serial, "0a");
    strcpy(rv.profile, AUDIT_ICA_PROFILE);
    rv.reason = (audit_str){"keyCompromise", 13, 0};
    apply(t, rv, HSMCA_OK, NULL);
    apply(t, auto_approve(26, 24, 3, 1008), HSMCA_EPERM, "whose certificate is revoked");
    audit_ica_free(t);
}

/* Request id (requested at seq id) approved by bob and carol and issued with serial. */
static void issue(audit_ica *t, uint64_t id, char key, const char *serial)
{
    audit_entry q = request(id, "alice", 2, 99999);
    memset(q.key_sha256, key, 64);
    apply(t, q, HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, id + 1, id, "bob", 1001), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, id + 2, id, "carol", 1001), HSMCA_OK, NULL);
    audit_entry in = intent(id + 3, id);
    in.not_after = 9000;
    strcpy(in.serial, serial);
    apply(t, in, HSMCA_OK, NULL);
    apply(t, cert_entry(id + 4, id), HSMCA_OK, NULL);
    apply(t, result(id + 5, id, id + 3), HSMCA_OK, NULL); /* no longer in flight */
}

static void pending(audit_ica *t, uint64_t id, char key, const char *cluster)
{
    audit_entry q = request(id, "alice", 2, 99999);
    memset(q.key_sha256, key, 64);
    strcpy(q.cluster, cluster);
    apply(t, q, HSMCA_OK, NULL);
}

/* audit_ica_may_renew at time now, refused with want. */
static void refused(audit_ica *t, uint64_t id, int64_t now, const char *want)
{
    hsmca_err e;
    uint64_t renews = 0;
    static const uint8_t proof[] = {1, 2, 3};
    assert_int_equal(audit_ica_may_renew(t, id, "o", proof, sizeof(proof), now, &renews, &e),
                     HSMCA_EPERM);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not say '%s'", e.msg, want);
}

/* The renewal rule works only on the requests handed to it: an intermediate that is not
 * its cluster's current one is refused, as is none. */
static void test_renew_check_current(void **state)
{
    (void)state;
    audit_ica_renew *s;
    assert_int_equal(audit_ica_renew_new(&s, NULL), HSMCA_OK);
    char cert[] = CERT_B64, csr[] = CSR_B64;
    audit_ica_req old = {.id = 3, .cert_b64 = cert, .not_after = 9000};
    audit_ica_req cur = old, r = {.id = 20, .required = 1, .expires = 5000, .csr_b64 = csr};
    cur.id = 10;
    strcpy(old.cluster, "cluster-a");
    strcpy(cur.cluster, "cluster-a");
    strcpy(r.cluster, "cluster-a");
    uint64_t id = 0;
    assert_int_equal(audit_ica_renew_current(s, "cluster-a", &id), 0);
    assert_int_equal(audit_ica_renew_issued(s, &old, NULL), HSMCA_OK);
    assert_int_equal(audit_ica_renew_issued(s, &cur, NULL), HSMCA_OK);
    assert_int_equal(audit_ica_renew_current(s, "cluster-a", &id), 1);
    assert_int_equal(id, 10);
    static const uint8_t proof[] = {1, 2, 3};
    hsmca_err e;
    assert_int_equal(audit_ica_renew_check(s, &r, &old, "o", proof, sizeof(proof), 1005, &e),
                     HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "request 3 is not the current intermediate of cluster "
                                  "cluster-a"));
    assert_int_equal(audit_ica_renew_check(s, &r, NULL, "o", proof, sizeof(proof), 1005, &e),
                     HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "has no issued intermediate to renew"));
    assert_int_equal(audit_ica_renew_check(s, &r, &cur, "o", proof, sizeof(proof), 1005, &e),
                     HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "does not verify under the key of request 10's"));
    audit_ica_renew_free(s);
}

/* The renewal rules of audit_ica_renew.h that come before the proof's signature (which
 * test_auto_renew checks with real keys): the current intermediate only, revoked keys
 * renew nothing, a revoked current one stops its cluster until an approved issue. */
static void test_renew_rules(void **state)
{
    audit_entry a = auto_approve(11, 10, 3, 1005);
    a.proof = (audit_str){"AQID", 4, 0};
    strcpy(a.origin, "host/hsmca/cluster.local");
    round_trip(&a, "{\"kind\":\"intermediate-auto-approve\",\"origin\":"
                   "\"host/hsmca/cluster.local\",\"proof\":\"AQID\",\"renews\":3,"
                   "\"request_id\":10,\"requester\":\"alice\",\"seq\":11,\"time\":1005}\n");
    size_t n;
    strcpy(a.origin, "two words");
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    strcpy(a.origin, "o");
    a.proof.len = 0;
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    issue(t, 3, 'b', "0a");
    issue(t, 10, 'b', "0b"); /* the current one of cluster-a: the newest issued */
    pending(t, 20, 'b', "cluster-a");
    hsmca_err e;
    uint64_t renews = 0;
    assert_int_equal(audit_ica_may_renew(t, 20, "o", NULL, 0, 1005, &renews, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "no proof of possession"));
    refused(t, 20, 1005, "does not verify under the key of request 10's certificate");
    refused(t, 20, 9000, "(request 10) has expired");
    pending(t, 21, 'b', "cluster-b");
    refused(t, 21, 1005, "cluster cluster-b has no issued intermediate");
    /* The current one revoked: its cluster stops, whichever key. */
    audit_entry rv = step(AUDIT_REVOKE, 22, 0, "root", 1007);
    strcpy(rv.serial, "0b");
    strcpy(rv.profile, AUDIT_ICA_PROFILE);
    rv.reason = (audit_str){"keyCompromise", 13, 0};
    apply(t, rv, HSMCA_OK, NULL);
    refused(t, 20, 1008, "auto-renewal of cluster cluster-a stopped when its current "
                         "intermediate (request 10) was revoked");
    pending(t, 23, 'c', "cluster-a");
    refused(t, 23, 1008, "stopped");
    audit_entry aa = auto_approve(24, 23, 10, 1008);
    aa.proof = (audit_str){"AQID", 4, 0};
    strcpy(aa.origin, "o");
    apply(t, aa, HSMCA_EPERM, "stopped");
    aa.renews = 3; /* the older one, same key, not revoked itself */
    apply(t, aa, HSMCA_EPERM, "stopped");
    /* Issued with approvals: the cluster renews again, but not the revoked key. */
    issue(t, 30, 'b', "0c");
    refused(t, 23, 1009, "the key of cluster cluster-a's current intermediate (request 30) "
                         "is a revoked intermediate's key");
    issue(t, 40, 'd', "0d");
    refused(t, 20, 1009, "request 20: its key is a revoked intermediate's key");
    refused(t, 23, 1009, "does not verify under the key of request 40's certificate");
    aa = auto_approve(50, 23, 30, 1009);
    aa.proof = (audit_str){"AQID", 4, 0};
    strcpy(aa.origin, "o");
    apply(t, aa, HSMCA_EPERM, "does not verify"); /* the proof fails before the renews check */
    audit_ica_free(t);
}

/* DER as base64 into out (AUDIT_BLOB_MAX + 1 bytes), with its SHA-256 in hex. */
static void b64_of(const uint8_t *der, int n, char *out, char hex[65])
{
    uint8_t md[32];
    assert_true(n > 0 && (size_t)n <= AUDIT_BLOB_MAX / 4 * 3);
    EVP_EncodeBlock((unsigned char *)out, der, n);
    SHA256(der, (size_t)n, md);
    util_hex(md, 32, hex);
}

/* A key k's self-signed certificate and CSR, as base64 DER. */
static void real_pair(EVP_PKEY *k, char *cert, char cert_hex[65], char *csr, uint8_t **csr_der,
                      int *csr_len)
{
    X509 *x = X509_new();
    X509_REQ *q = X509_REQ_new();
    assert_true(x && q && X509_set_version(x, X509_VERSION_3) && X509_set_pubkey(x, k) &&
                ASN1_INTEGER_set(X509_get_serialNumber(x), 1) &&
                X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
                X509_gmtime_adj(X509_getm_notAfter(x), 3600) && X509_sign(x, k, EVP_sha256()) &&
                X509_REQ_set_pubkey(q, k) && X509_REQ_sign(q, k, EVP_sha256()));
    uint8_t *der = NULL;
    int n = i2d_X509(x, &der);
    b64_of(der, n, cert, cert_hex);
    OPENSSL_free(der);
    char unused[65];
    *csr_len = i2d_X509_REQ(q, csr_der);
    b64_of(*csr_der, *csr_len, csr, unused);
    X509_free(x);
    X509_REQ_free(q);
}

/* k's signature over the renewal message of (origin, id, cluster-a, csr). */
static size_t sign_renewal(EVP_PKEY *k, const char *origin, uint64_t id, const uint8_t *csr,
                           int csr_len, uint8_t sig[256])
{
    size_t mn = 0, sl = 256;
    uint8_t *m = audit_ica_renew_message(origin, id, "cluster-a", csr, (size_t)csr_len, &mn);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_true(m && ctx && EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k) == 1 &&
                EVP_DigestSign(ctx, sig, &sl, m, mn) == 1);
    EVP_MD_CTX_free(ctx);
    free(m);
    return sl;
}

/* The proof with real keys: it verifies for its own request of its own log only. */
static void test_renew_proof(void **state)
{
    static char cert[AUDIT_BLOB_MAX + 1], csr[AUDIT_BLOB_MAX + 1];
    char hex[65];
    uint8_t *csr_der = NULL, sig[256];
    int csr_len = 0;
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    real_pair(k, cert, hex, csr, &csr_der, &csr_len);
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    issue(t, 3, 'b', "0a"); /* an older one of the cluster */
    audit_entry q = request(10, "alice", 2, 99999);
    q.csr = (audit_str){csr, strlen(csr), 0};
    memset(q.key_sha256, 'b', 64);
    apply(t, q, HSMCA_OK, NULL);
    audit_entry again = q;
    again.seq = 11;
    apply(t, again, HSMCA_OK, NULL); /* the same CSR, another request */
    /* Issued with the real certificate: the current one. */
    audit_entry r = request(20, "alice", 2, 99999);
    memset(r.key_sha256, 'b', 64);
    apply(t, r, HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 21, 20, "bob", 1001), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 22, 20, "carol", 1001), HSMCA_OK, NULL);
    audit_entry in = intent(23, 20);
    in.not_after = 9000;
    strcpy(in.serial, "0b");
    apply(t, in, HSMCA_OK, NULL);
    audit_entry ce = cert_entry(24, 20);
    ce.cert = (audit_str){cert, strlen(cert), 0};
    memcpy(ce.cert_sha256, hex, 65);
    apply(t, ce, HSMCA_OK, NULL);
    size_t sl = sign_renewal(k, "o", 10, csr_der, csr_len, sig);
    uint64_t renews = 0;
    hsmca_err e;
    assert_int_equal(audit_ica_may_renew(t, 10, "o", sig, sl, 1005, &renews, &e), HSMCA_OK);
    assert_int_equal(renews, 20);
    assert_int_equal(audit_ica_may_renew(t, 10, "p", sig, sl, 1005, &renews, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "does not verify under the key of request 20's certificate"));
    assert_int_equal(audit_ica_may_renew(t, 11, "o", sig, sl, 1005, &renews, &e), HSMCA_EPERM);
    /* The one verifier both messages go through: request 20's key over the bytes signed. */
    size_t mn = 0;
    uint8_t *m = audit_ica_renew_message("o", 10, "cluster-a", csr_der, (size_t)csr_len, &mn);
    assert_non_null(m);
    assert_int_equal(audit_ica_renew_verify(audit_ica_find(t, 20), m, mn, sig, sl), 1);
    assert_int_equal(audit_ica_renew_verify(audit_ica_find(t, 3), m, mn, sig, sl), 0);
    m[mn - 1] ^= 1;
    assert_int_equal(audit_ica_renew_verify(audit_ica_find(t, 20), m, mn, sig, sl), 0);
    free(m);
    /* The entry: approved by it, once. */
    audit_entry aa = auto_approve(25, 10, 20, 1005);
    char b64[400];
    EVP_EncodeBlock((unsigned char *)b64, sig, (int)sl);
    aa.proof = (audit_str){b64, strlen(b64), 0};
    strcpy(aa.origin, "o");
    aa.renews = 3;
    apply(t, aa, HSMCA_EPERM, "renews 3, but its cluster's current intermediate is 20");
    aa.renews = 20;
    apply(t, aa, HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 10), 1006), ICA_APPROVED);
    aa.seq = 26;
    apply(t, aa, HSMCA_EPERM, "which is approved, not pending");
    aa.request_id = 11;
    apply(t, aa, HSMCA_EPERM, "does not verify");
    audit_ica_free(t);
    OPENSSL_free(csr_der);
    EVP_PKEY_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_fields_refused),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_auto_rules),
        cmocka_unit_test(test_renew_rules),
        cmocka_unit_test(test_renew_check_current),
        cmocka_unit_test(test_renew_proof),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
