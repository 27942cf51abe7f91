/* hostile_profile.c - invariants 1-6: TBS certificates that break one rule each.
 * After every refusal the same signer must still sign a fresh valid TBS. */
#include "hostile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "fe_tbs.h"
#include "signer_tbs.h"

/* ---- the tests ------------------------------------------------------------------- */

/* The first request also waits for the signer to finish starting: the packet
 * waits in the socket until the signer reads it. */
static void test_ready_and_signs_valid(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    uint64_t id = hf_send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs, len);
    Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, HF_READY_MS);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

/* What the real front end builds is signed too. */
static void test_signs_fe_tbs_build(void **state)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    fe_tbs_params p = {.ca_cert = hf.ca,
                       .sig_nid = NID_ecdsa_with_SHA256,
                       .subject_key = key,
                       .uri_san = HF_SPIFFE_ID,
                       .now = time(NULL),
                       .ttl = 3600};
    uint8_t *tbs = NULL;
    size_t len = 0;
    hsmca_err e;
    if (fe_tbs_build(&p, &tbs, &len, &e) != HSMCA_OK)
        fail_msg("fe_tbs_build: %s", e.msg);
    Hsmca__Ipc__SignReply *rep = hf_sign(TBS_PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    EVP_PKEY_free(key);
}

static void test_refuses_ca_true(void **state)
{
    tbs_spec s = {.ca_true = 1};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 3", "basicConstraints must be CA:FALSE");
}

static void test_refuses_wrong_issuer(void **state)
{
    tbs_spec s = {.issuer_cn = "hsmca dev root CA evil"};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 1", "issuer must equal the CA subject");
}

static void test_refuses_ttl_beyond_max(void **state)
{
    tbs_spec s = {.not_after = 25 * 3600};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 2", "exceeds the profile max TTL");
}

static void test_refuses_foreign_trust_domain(void **state)
{
    tbs_spec s = {.uri = "spiffe://evil.example/ns/default/sa/sleep"};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 4", "trust domain is not a configured one");
}

static void test_refuses_private_extension(void **state)
{
    tbs_spec s = {.extra = EXTRA_PRIVATE_OID};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 3",
                   "extension 1.3.6.1.4.1.55555.1.1 not in the allowlist");
}

static void test_refuses_name_constraints(void **state)
{
    tbs_spec s = {.extra = EXTRA_NAME_CONSTRAINTS};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 3", "extension 2.5.29.30 not in the allowlist");
}

static void test_refuses_repeated_serial(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    Hsmca__Ipc__SignReply *rep = hf_sign(TBS_PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    hf_assert_refused(TBS_PROFILE_WORKLOAD, tbs, len, HSMCA_EPERM, "invariant 6",
                      "serial issued before");
    OPENSSL_free(tbs);
}

/* The version field [0] { INTEGER 2 } = a0 03 02 01 02 right after the outer
 * header 30 82 hh ll; its length re-encoded in long form (81 03), and the outer
 * length grown by one to match. Everything else is untouched. */
static void test_refuses_long_form_length(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    static const uint8_t version[] = {0xa0, 0x03, 0x02, 0x01, 0x02};
    assert_true(len > 9 && len < 0xffff);
    assert_int_equal(tbs[0], 0x30);
    assert_int_equal(tbs[1], 0x82);
    assert_memory_equal(tbs + 4, version, sizeof(version));
    uint8_t *bad = malloc(len + 1);
    assert_non_null(bad);
    size_t inner = ((size_t)tbs[2] << 8 | tbs[3]) + 1;
    bad[0] = 0x30;
    bad[1] = 0x82;
    bad[2] = (uint8_t)(inner >> 8);
    bad[3] = (uint8_t)inner;
    bad[4] = 0xa0;
    bad[5] = 0x81;
    memcpy(bad + 6, tbs + 5, len - 5);
    hf_assert_refused(TBS_PROFILE_WORKLOAD, bad, len + 1, HSMCA_EINVAL, "invariant 1",
                      "version: not DER");
    free(bad);
    OPENSSL_free(tbs);
}

/* basicConstraints' critical flag as BOOLEAN 0x01 instead of DER's 0xFF. */
static void test_refuses_ber_boolean(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    static const uint8_t bc_crit[] = {0x06, 0x03, 0x55, 0x1d, 0x13, 0x01, 0x01, 0xff};
    uint8_t *at = memmem(tbs, len, bc_crit, sizeof(bc_crit));
    assert_non_null(at);
    at[sizeof(bc_crit) - 1] = 0x01;
    hf_assert_refused(TBS_PROFILE_WORKLOAD, tbs, len, HSMCA_EINVAL, "invariant 3",
                      "extension critical: not DER");
    OPENSSL_free(tbs);
}

static void test_refuses_trailing_bytes(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    uint8_t *bad = malloc(len + 2);
    assert_non_null(bad);
    memcpy(bad, tbs, len);
    bad[len] = 0x05; /* a well-formed NULL after the TBS */
    bad[len + 1] = 0x00;
    hf_assert_refused(TBS_PROFILE_WORKLOAD, bad, len + 2, HSMCA_EINVAL, "invariant 0",
                      "TBSCertificate: not DER");
    free(bad);
    OPENSSL_free(tbs);
}

static void test_refuses_dns_san_in_workload(void **state)
{
    tbs_spec s = {.dns = "sleep.default.svc.cluster.local"};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 4", "DNS SAN not granted to workload identities");
}

/* CA:FALSE but keyCertSign: a leaf that could still sign certificates for
 * relying parties that do not check basicConstraints. */
static void test_refuses_key_cert_sign(void **state)
{
    tbs_spec s = {.ku_cert_sign = 1};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 3", "keyUsage allows only");
}

/* The front end picks the profile, so the serving profile must not be a way
 * around the workload rules: it takes only the names it is configured for.
 * First the positive case, so that the refusal below is for the name alone. */
static void test_serving_profile_signs_localhost(void **state)
{
    tbs_spec s = {.uri = "", .dns = "localhost"};
    size_t len;
    uint8_t *tbs = hf_build_tbs(&s, &len);
    Hsmca__Ipc__SignReply *rep = hf_sign(TBS_PROFILE_SERVING, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

static void test_refuses_serving_foreign_dns(void **state)
{
    tbs_spec s = {.uri = "", .dns = "accounts.google.com"};
    size_t len;
    uint8_t *tbs = hf_build_tbs(&s, &len);
    hf_assert_refused(TBS_PROFILE_SERVING, tbs, len, HSMCA_EPERM, "invariant 4",
                      "DNS SAN not in the serving list");
    OPENSSL_free(tbs);
}

static void test_refuses_rsa_1024(void **state)
{
    tbs_spec s = {.key = EVP_RSA_gen(1024)};
    assert_non_null(s.key);
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 5", "RSA key of 1024 bits");
    EVP_PKEY_free(s.key);
}

static void test_refuses_wrong_sig_alg(void **state)
{
    tbs_spec s = {.sig_nid = NID_sha256WithRSAEncryption};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 1", "signature algorithm must equal the CA key's");
}

static void test_refuses_unknown_profile(void **state)
{
    size_t len;
    uint8_t *tbs =
        hf_valid_tbs(&len); /* a valid workload TBS under a profile that does not exist */
    hf_assert_refused(99, tbs, len, HSMCA_EPERM, "unknown profile", "99");
    OPENSSL_free(tbs);
}

const struct CMUnitTest hf_profile_tests[] = {
    cmocka_unit_test(test_ready_and_signs_valid),
    cmocka_unit_test(test_signs_fe_tbs_build),
    cmocka_unit_test(test_refuses_ca_true),
    cmocka_unit_test(test_refuses_wrong_issuer),
    cmocka_unit_test(test_refuses_ttl_beyond_max),
    cmocka_unit_test(test_refuses_foreign_trust_domain),
    cmocka_unit_test(test_refuses_private_extension),
    cmocka_unit_test(test_refuses_name_constraints),
    cmocka_unit_test(test_refuses_repeated_serial),
    cmocka_unit_test(test_refuses_long_form_length),
    cmocka_unit_test(test_refuses_ber_boolean),
    cmocka_unit_test(test_refuses_trailing_bytes),
    cmocka_unit_test(test_refuses_dns_san_in_workload),
    cmocka_unit_test(test_refuses_key_cert_sign),
    cmocka_unit_test(test_serving_profile_signs_localhost),
    cmocka_unit_test(test_refuses_serving_foreign_dns),
    cmocka_unit_test(test_refuses_rsa_1024),
    cmocka_unit_test(test_refuses_wrong_sig_alg),
    cmocka_unit_test(test_refuses_unknown_profile),
};
const size_t hf_n_profile_tests = sizeof(hf_profile_tests) / sizeof(hf_profile_tests[0]);
