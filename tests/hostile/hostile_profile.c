/* hostile_profile.c - invariants 1-3, 5 and 6: TBS certificates that break one
 * rule each (the SAN and SPIFFE-ID cases of invariant 4 are in
 * hostile_spiffe.c). Every refusal must carry the code and the reason's prefix
 * given here, and the same signer must still sign a fresh valid TBS after it;
 * every case the profile allows must be signed exactly as sent. */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "leaf_tbs.h"
#include "signer_tbs.h"

#define EKU_SA "1.3.6.1.5.5.7.3.1"
#define EKU_CA "1.3.6.1.5.5.7.3.2"
#define ANY_EKU "2.5.29.37.0"
#define KU_ONLY "invariant 3: keyUsage allows only digitalSignature, keyEncipherment"
#define KU_EC "invariant 3: keyUsage of an EC key must be digitalSignature alone"
#define KU_RSA "invariant 3: keyUsage of an RSA key must be digitalSignature, keyEncipherment"
#define EKU_ONLY "invariant 3: extKeyUsage allows only serverAuth, clientAuth"
#define EKU_BOTH "invariant 3: extKeyUsage must have both serverAuth and clientAuth"
#define SKI_SHA1 "invariant 3: subjectKeyIdentifier must be the SHA-1 of the subject key"
#define AKI_ONLY "invariant 1: authorityKeyIdentifier must hold only keyIdentifier"
#define RSA_E "invariant 5: RSA exponent must be in [65537, 2^31-1]"
#define KEY_ALG "invariant 5: key must be RSA 2048-8192 or EC P-256/P-384"
#define EC_UNC "invariant 5: EC point must be uncompressed"
#define EC_OFF "invariant 5: EC point is not on the curve"

/* A case of the workload profile: name, code, the reason's prefix (NULL when
 * signed), then the tbs_spec knobs. */
/* clang-format off */
#define W(nm, c, pre, ...) {.name = (nm), .code = (c), .prefix = (pre), .spec = {__VA_ARGS__}}
static const hf_case profile_cases[] = {
    /* invariant 1: version, signature algorithm, issuer, AKI */
    W("v1 (version absent)", HSMCA_EPERM, "invariant 1: version must be v3 (version absent)",
      .version = 1),
    W("v2", HSMCA_EPERM, "invariant 1: version must be v3", .version = 2),
    W("RSA signature algorithm under an EC CA", HSMCA_EPERM,
      "invariant 1: signature algorithm must equal the CA key's",
      .sig_nid = NID_sha256WithRSAEncryption),
    W("ECDSA-SHA384 under a P-256 CA", HSMCA_EPERM,
      "invariant 1: signature algorithm must equal the CA key's",
      .sig_nid = NID_ecdsa_with_SHA384),
    W("issuer not the CA subject", HSMCA_EPERM, "invariant 1: issuer must equal the CA subject",
      .issuer_cn = "hsmca dev root CA evil"),
    W("no AKI", HSMCA_EPERM, "invariant 1: authorityKeyIdentifier missing", .aki_mode = EXT_OMIT),
    W("AKI critical", HSMCA_EPERM, "invariant 1: authorityKeyIdentifier must not be critical",
      .aki_mode = EXT_FLIP_CRITICAL),
    W("AKI of another CA", HSMCA_EPERM,
      "invariant 1: authorityKeyIdentifier must equal the CA's SKI",
      .aki = AKI_OTHER_KEYID),
    W("AKI with keyid, issuer and serial", HSMCA_EPERM, AKI_ONLY, .aki = AKI_KEYID_ISSUER_SERIAL),
    W("AKI with issuer and serial only", HSMCA_EPERM, AKI_ONLY, .aki = AKI_ISSUER_SERIAL),
    /* invariant 2: validity */
    W("TTL beyond the profile max", HSMCA_EPERM,
      "invariant 2: validity 90120 s exceeds the profile max TTL",
      .not_after = 25 * 3600),
    W("notBefore 10 min ago", HSMCA_EPERM, "invariant 2: notBefore more than 300 s in the past",
      .not_before = -600),
    W("notBefore 5 min ahead", HSMCA_EPERM, "invariant 2: notBefore more than 60 s in the future",
      .not_before = 300),
    W("TTL exactly the max", HSMCA_OK, NULL, .not_after = 86400 - 120),
    W("TTL the max + 1 s", HSMCA_EPERM, "invariant 2: validity 86401 s exceeds the profile max TTL",
      .not_after = 86400 - 119),
    W("notBefore as GeneralizedTime before 2050", HSMCA_EINVAL,
      "invariant 2: notBefore: GeneralizedTime before 2050 (must be UTCTime)", .gen_time = 1),
    W("notAfter before notBefore", HSMCA_EPERM, "invariant 2: notAfter must be after notBefore",
      .not_after = -3600),
    /* invariant 3: extensions */
    W("CA:TRUE", HSMCA_EPERM, "invariant 3: basicConstraints must be CA:FALSE", .bc = BC_CA_TRUE),
    W("CA:FALSE with pathLen", HSMCA_EPERM, "invariant 3: basicConstraints pathLen not allowed",
      .bc = BC_PATHLEN),
    W("CA:FALSE written out (BER)", HSMCA_EINVAL,
      "invariant 3: basicConstraints cA FALSE encoded (not DER)",
      .bc = BC_CA_FALSE_EXPLICIT),
    W("no basicConstraints", HSMCA_EPERM, "invariant 3: basicConstraints missing",
      .bc_mode = EXT_OMIT),
    W("basicConstraints not critical", HSMCA_EPERM,
      "invariant 3: basicConstraints must be critical",
      .bc_mode = EXT_FLIP_CRITICAL),
    W("no keyUsage", HSMCA_EPERM, "invariant 3: keyUsage missing", .ku_mode = EXT_OMIT),
    W("no extKeyUsage", HSMCA_EPERM, "invariant 3: extKeyUsage missing", .eku_mode = EXT_OMIT),
    W("neither keyUsage nor extKeyUsage (good for any purpose)", HSMCA_EPERM,
      "invariant 3: keyUsage missing",
      .ku_mode = EXT_OMIT, .eku_mode = EXT_OMIT),
    W("keyUsage not critical", HSMCA_EPERM, "invariant 3: keyUsage must be critical",
      .ku_mode = EXT_FLIP_CRITICAL),
    W("keyUsage keyEncipherment without digitalSignature", HSMCA_EPERM,
      "invariant 3: keyUsage must have digitalSignature",
      .ku = KU_SET | KU_KE),
    W("keyUsage with no bit", HSMCA_EINVAL, "invariant 3: keyUsage BIT STRING empty or malformed",
      .ku = KU_SET),
    W("keyUsage + keyCertSign", HSMCA_EPERM, KU_ONLY, .ku = KU_SET | KU_DS | KU_KE | KU_CERT_SIGN),
    W("keyUsage + cRLSign", HSMCA_EPERM, KU_ONLY, .ku = KU_SET | KU_DS | KU_CRL_SIGN),
    W("keyUsage + keyAgreement", HSMCA_EPERM, KU_ONLY, .ku = KU_SET | KU_DS | KU_KA),
    W("keyUsage + nonRepudiation", HSMCA_EPERM, KU_ONLY, .ku = KU_SET | KU_DS | KU_NR),
    W("keyUsage + dataEncipherment", HSMCA_EPERM, KU_ONLY, .ku = KU_SET | KU_DS | KU_DE),
    W("keyUsage + decipherOnly (second octet)", HSMCA_EPERM, KU_ONLY,
      .ku = KU_SET | KU_DS | KU_DECIPHER_ONLY),
    W("keyUsage digitalSignature alone", HSMCA_OK, NULL, .ku = KU_SET | KU_DS),
    W("keyUsage + keyEncipherment on an EC key (RFC 8813)", HSMCA_EPERM, KU_EC,
      .ku = KU_SET | KU_DS | KU_KE),
    W("keyUsage + keyEncipherment on a P-384 key", HSMCA_EPERM, KU_EC, .key_kind = KEY_P384,
      .ku = KU_SET | KU_DS | KU_KE),
    W("keyUsage digitalSignature alone on an RSA key", HSMCA_EPERM, KU_RSA,
      .key_kind = KEY_RSA, .ku = KU_SET | KU_DS),
    W("keyUsage digitalSignature|keyEncipherment on an RSA key", HSMCA_OK, NULL,
      .key_kind = KEY_RSA, .ku = KU_SET | KU_DS | KU_KE),
    W("extKeyUsage serverAuth only", HSMCA_EPERM, EKU_BOTH, .eku = EKU_SA),
    W("extKeyUsage clientAuth only", HSMCA_EPERM, EKU_BOTH, .eku = EKU_CA),
    W("extKeyUsage empty", HSMCA_EPERM, EKU_BOTH, .eku = ""),
    W("extKeyUsage + anyExtendedKeyUsage", HSMCA_EPERM, EKU_ONLY,
      .eku = EKU_SA "," EKU_CA "," ANY_EKU),
    W("extKeyUsage + codeSigning", HSMCA_EPERM, EKU_ONLY,
      .eku = EKU_SA "," EKU_CA ",1.3.6.1.5.5.7.3.3"),
    W("extKeyUsage + OCSPSigning", HSMCA_EPERM, EKU_ONLY,
      .eku = EKU_SA "," EKU_CA ",1.3.6.1.5.5.7.3.9"),
    W("extKeyUsage + emailProtection", HSMCA_EPERM, EKU_ONLY,
      .eku = EKU_SA "," EKU_CA ",1.3.6.1.5.5.7.3.4"),
    W("extKeyUsage serverAuth's child arc", HSMCA_EPERM, EKU_ONLY,
      .eku = EKU_SA ".1," EKU_CA),
    W("extKeyUsage id-kp arc 129", HSMCA_EPERM, EKU_ONLY,
      .eku = EKU_SA "," EKU_CA ",1.3.6.1.5.5.7.3.129"),
    W("extKeyUsage anyExtendedKeyUsage alone", HSMCA_EPERM, EKU_ONLY, .eku = ANY_EKU),
    W("extKeyUsage serverAuth twice", HSMCA_EPERM, "invariant 3: extKeyUsage purpose repeated",
      .eku = EKU_SA "," EKU_SA "," EKU_CA),
    W("extKeyUsage critical", HSMCA_EPERM, "invariant 3: extKeyUsage must not be critical",
      .eku_mode = EXT_FLIP_CRITICAL),
    W("extKeyUsage clientAuth, serverAuth", HSMCA_OK, NULL, .eku = EKU_CA "," EKU_SA),
    W("no SKI", HSMCA_EPERM, "invariant 3: subjectKeyIdentifier missing", .ski_mode = EXT_OMIT),
    W("SKI critical", HSMCA_EPERM, "invariant 3: subjectKeyIdentifier must not be critical",
      .ski_mode = EXT_FLIP_CRITICAL),
    W("SKI of another key", HSMCA_EPERM, SKI_SHA1, .ski = SKI_OTHER_KEY),
    W("SKI of 32 bytes (SHA-256)", HSMCA_EPERM, SKI_SHA1, .ski = SKI_SHA256),
    W("SKI of 8 bytes", HSMCA_EPERM, SKI_SHA1, .ski = SKI_TRUNCATED),
    W("private extension", HSMCA_EPERM,
      "invariant 3: extension 1.3.6.1.4.1.55555.1.1 not in the allowlist",
      .extra = EXTRA_PRIVATE_OID),
    W("nameConstraints", HSMCA_EPERM, "invariant 3: extension 2.5.29.30 not in the allowlist",
      .extra = EXTRA_NAME_CONSTRAINTS),
    /* invariant 4: the subject (the SANs are in hostile_spiffe.c) */
    W("subject CN", HSMCA_EPERM, "invariant 4: subject must be empty", .subject_cn = "sleep"),
    /* invariant 5: the subject key */
    W("RSA e = 3", HSMCA_EPERM, RSA_E, .key_kind = KEY_RSA, .rsa_e = "03"),
    W("RSA e = 1", HSMCA_EPERM, RSA_E, .key_kind = KEY_RSA, .rsa_e = "01"),
    W("RSA e = 65535", HSMCA_EPERM, RSA_E, .key_kind = KEY_RSA, .rsa_e = "FFFF"),
    W("RSA e = 65538 (even)", HSMCA_EPERM, "invariant 5: RSA exponent must be odd",
      .key_kind = KEY_RSA, .rsa_e = "010002"),
    W("RSA e = 2^31+1", HSMCA_EPERM, RSA_E, .key_kind = KEY_RSA, .rsa_e = "80000001"),
    W("RSA e = 2^64+1", HSMCA_EPERM, RSA_E, .key_kind = KEY_RSA, .rsa_e = "010000000000000001"),
    W("RSA e = n + 2 (e > n)", HSMCA_EPERM, RSA_E, .key_kind = KEY_RSA, .rsa_e = "n+2"),
    W("RSA e = -65537", HSMCA_EPERM, "invariant 5: RSA modulus and exponent must be positive",
      .key_kind = KEY_RSA, .rsa_e = "-010001"),
    W("RSA even modulus", HSMCA_EPERM, "invariant 5: RSA modulus must be odd",
      .key_kind = KEY_RSA, .rsa_even_n = 1),
    W("RSA 1024", HSMCA_EPERM, "invariant 5: RSA key of 1024 bits (2048-8192 allowed)",
      .key_kind = KEY_RSA, .rsa_bits = 1024),
    W("RSA 2047", HSMCA_EPERM, "invariant 5: RSA key of 2047 bits (2048-8192 allowed)",
      .key_kind = KEY_RSA, .rsa_bits = 2047),
    W("RSA 8193", HSMCA_EPERM, "invariant 5: RSA key of 8193 bits (2048-8192 allowed)",
      .key_kind = KEY_RSA, .rsa_bits = 8193),
    W("RSA 2048, e = 65537", HSMCA_OK, NULL, .key_kind = KEY_RSA),
    W("RSA 2048, e = 2^31-1", HSMCA_OK, NULL, .key_kind = KEY_RSA, .rsa_e = "7FFFFFFF"),
    W("RSA 8192 modulus", HSMCA_OK, NULL, .key_kind = KEY_RSA, .rsa_bits = 8192),
    W("EC P-384", HSMCA_OK, NULL, .key_kind = KEY_P384),
    W("EC P-256 compressed point", HSMCA_EPERM, EC_UNC, .key_kind = KEY_P256_COMPRESSED),
    W("EC P-256 hybrid point", HSMCA_EPERM, EC_UNC, .key_kind = KEY_P256_HYBRID),
    W("EC P-256 OID over a P-384 point", HSMCA_EPERM, EC_UNC, .key_kind = KEY_P256_P384_POINT),
    W("EC P-256 point off the curve", HSMCA_EPERM, EC_OFF, .key_kind = KEY_P256_OFF_CURVE),
    W("EC P-256 coordinate >= p", HSMCA_EPERM, EC_OFF, .key_kind = KEY_P256_X_TOO_BIG),
    W("EC secp256k1", HSMCA_EPERM, KEY_ALG, .key_kind = KEY_SECP256K1),
    W("Ed25519", HSMCA_EPERM, KEY_ALG, .key_kind = KEY_ED25519),
    /* invariant 6: the serial's form (uniqueness: test_refuses_repeated_serial) */
    W("serial of 7 octets", HSMCA_EPERM, "invariant 6: serial of 7 octets (8-20 allowed)",
      .serial_len = 7),
    W("serial of 21 octets", HSMCA_EPERM, "invariant 6: serial of 21 octets (8-20 allowed)",
      .serial_len = 21),
    W("serial negative", HSMCA_EPERM, "invariant 6: serial must be positive", .serial_sign = -1),
    W("serial 0", HSMCA_EPERM, "invariant 6: serial must be positive", .serial_zero = 1),
    W("serial of 8 octets", HSMCA_OK, NULL, .serial_len = 8),
    W("serial of 20 octets", HSMCA_OK, NULL, .serial_len = 20),
};
/* clang-format on */

/* ---- what a table cannot say ------------------------------------------------------ */

/* The first request also waits for the signer to finish starting: the packet
 * waits in the socket until the signer reads it. */
static void test_ready_and_signs_valid(void **state)
{
    hf_assert_signs_within(HF_READY_MS);
}

/* What the real front end builds is signed too. */
static void test_signs_leaf_tbs_build(void **state)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    leaf_tbs_params p = {.ca_cert = hf.ca,
                       .sig_nid = NID_ecdsa_with_SHA256,
                       .subject_key = key,
                       .uri_san = HF_SPIFFE_ID,
                       .now = time(NULL),
                       .ttl = 3600};
    uint8_t *tbs = NULL;
    size_t len = 0;
    hsmca_err e;
    if (leaf_tbs_build(&p, &tbs, &len, &e) != HSMCA_OK)
        fail_msg("leaf_tbs_build: %s", e.msg);
    Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    EVP_PKEY_free(key);
}

static void test_refuses_repeated_serial(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, tbs, len);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    hf_assert_refused(PROFILE_WORKLOAD, tbs, len, HSMCA_EPERM,
                      "invariant 6: serial issued before");
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
    hf_assert_refused(PROFILE_WORKLOAD, bad, len + 1, HSMCA_EINVAL,
                      "invariant 1: version: not DER");
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
    hf_assert_refused(PROFILE_WORKLOAD, tbs, len, HSMCA_EINVAL,
                      "invariant 3: extension critical: not DER");
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
    hf_assert_refused(PROFILE_WORKLOAD, bad, len + 2, HSMCA_EINVAL,
                      "invariant 0: TBSCertificate: not DER");
    free(bad);
    OPENSSL_free(tbs);
}

/* An element with a high tag number ([31] in two octets, [128] in three) between the
 * subject key and the extensions: refused naming the tag form, not as if the extensions
 * were missing. The valid TBS's inner length is in 30 82 hh ll and its last element is
 * the extensions [3] (a3 82 hh ll, under 64 KiB). */
static void test_refuses_high_tag_number(void **state)
{
    static const struct {
        uint8_t el[4];
        size_t n;
    } high[] = {{{0x9f, 0x1f, 0x00}, 3}, {{0xbf, 0x81, 0x00, 0x00}, 4}};
    for (size_t i = 0; i < sizeof(high) / sizeof(high[0]); i++) {
        size_t len;
        uint8_t *tbs = hf_valid_tbs(&len);
        assert_int_equal(tbs[1], 0x82);
        size_t ext = 4; /* walk the inner elements to the last one, the extensions */
        for (;;) {
            size_t hl = tbs[ext + 1] < 0x80 ? 2 : 2 + (tbs[ext + 1] & 0x7f), vl = 0;
            for (size_t k = 2; k < hl; k++)
                vl = vl << 8 | tbs[ext + k];
            vl = hl == 2 ? tbs[ext + 1] : vl;
            if (ext + hl + vl >= len)
                break;
            ext += hl + vl;
        }
        assert_int_equal(tbs[ext], 0xa3);
        uint8_t *bad = malloc(len + high[i].n);
        assert_non_null(bad);
        size_t inner = ((size_t)tbs[2] << 8 | tbs[3]) + high[i].n;
        memcpy(bad, tbs, ext);
        bad[2] = (uint8_t)(inner >> 8);
        bad[3] = (uint8_t)inner;
        memcpy(bad + ext, high[i].el, high[i].n);
        memcpy(bad + ext + high[i].n, tbs + ext, len - ext);
        hf_assert_refused(PROFILE_WORKLOAD, bad, len + high[i].n, HSMCA_EINVAL,
                          "invariant 3: high tag number (31 or more) where the extensions belong");
        free(bad);
        OPENSSL_free(tbs);
    }
}

/* The profile number is the front end's word too: 0, 99 and 2^32-1 do not exist. */
static void test_refuses_unknown_profiles(void **state)
{
    static const uint32_t bad[] = {0, 99, 0xffffffffu};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "invariant 0: unknown profile %u", bad[i]);
        size_t len;
        uint8_t *tbs = hf_valid_tbs(&len); /* valid, under a profile that does not exist */
        hf_assert_refused(bad[i], tbs, len, HSMCA_EPERM, want);
        OPENSSL_free(tbs);
    }
}

/* No message the front end can send produces a CA certificate: the profile number an
 * intermediate would take does not exist on this IPC (intermediates are signed only
 * for approved requests of the admin socket), and a TBS with an intermediate's
 * extensions (CA:TRUE pathlen 0, keyCertSign|cRLSign) is refused by both profiles. */
static void test_refuses_ca_certificates(void **state)
{
    tbs_spec ca = {.bc = BC_CA_TRUE, .ku = KU_SET | KU_DS | KU_CERT_SIGN | KU_CRL_SIGN};
    size_t len;
    uint8_t *tbs = hf_build_tbs(&ca, &len);
    assert_non_null(tbs);
    hf_assert_refused(3, tbs, len, HSMCA_EPERM, "invariant 0: unknown profile 3");
    hf_assert_refused(PROFILE_WORKLOAD, tbs, len, HSMCA_EPERM, "invariant 3: ");
    hf_assert_refused(PROFILE_SERVING, tbs, len, HSMCA_EPERM, "invariant 3: ");
    OPENSSL_free(tbs);
    tbs_spec pathlen = {.bc = BC_CA_TRUE}; /* CA:TRUE alone, workload key usage */
    tbs = hf_build_tbs(&pathlen, &len);
    assert_non_null(tbs);
    hf_assert_refused(PROFILE_WORKLOAD, tbs, len, HSMCA_EPERM,
                      "invariant 3: basicConstraints must be CA:FALSE");
    OPENSSL_free(tbs);
}

static const struct CMUnitTest profile_specials[] = {
    cmocka_unit_test(test_refuses_ca_certificates),
    cmocka_unit_test(test_ready_and_signs_valid),
    cmocka_unit_test(test_signs_leaf_tbs_build),
    cmocka_unit_test(test_refuses_repeated_serial),
    cmocka_unit_test(test_refuses_long_form_length),
    cmocka_unit_test(test_refuses_ber_boolean),
    cmocka_unit_test(test_refuses_trailing_bytes),
    cmocka_unit_test(test_refuses_unknown_profiles),
    cmocka_unit_test(test_refuses_high_tag_number),
};

const struct CMUnitTest *hf_profile_tests(size_t *n)
{
    static struct CMUnitTest all[sizeof(profile_specials) / sizeof(profile_specials[0]) +
                                 sizeof(profile_cases) / sizeof(profile_cases[0])];
    size_t k = 0;
    for (size_t i = 0; i < sizeof(profile_specials) / sizeof(profile_specials[0]); i++)
        all[k++] = profile_specials[i];
    for (size_t i = 0; i < sizeof(profile_cases) / sizeof(profile_cases[0]); i++)
        all[k++] = hf_case_unit_test(&profile_cases[i]);
    *n = k;
    return all;
}
