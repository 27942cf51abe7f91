/* test_certasm.c - TBS preparation, assembly of TBS + signature into a
 * certificate, and PEM output, checked against OpenSSL's own encoders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"

/* A self-signed certificate made with OpenSSL's own signer. */
static X509 *openssl_cert(EVP_PKEY *key)
{
    X509 *x = X509_new();
    X509_NAME *n = X509_NAME_new();
    assert_true(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"t", -1,
                                           -1, 0));
    assert_true(X509_set_version(x, 2) && ASN1_INTEGER_set(X509_get_serialNumber(x), 4242) &&
                X509_set_subject_name(x, n) && X509_set_issuer_name(x, n) &&
                X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
                X509_gmtime_adj(X509_getm_notAfter(x), 3600) && X509_set_pubkey(x, key));
    X509_NAME_free(n);
    return x;
}

static void assemble_and_verify(EVP_PKEY *key, int want_nid)
{
    hsmca_err e;
    int nid = certasm_sig_nid_for_key(key);
    assert_int_equal(nid, want_nid);
    X509 *x = openssl_cert(key);
    uint8_t *tbs = NULL, *cert = NULL;
    size_t tbs_len = 0, cert_len = 0;
    assert_int_equal(certasm_tbs_der(x, nid, &tbs, &tbs_len, &e), HSMCA_OK);

    /* Sign the TBS as the token would (digest then raw sign) in software. */
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t sig[1024];
    size_t sig_len = sizeof(sig);
    assert_true(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1);
    assert_true(EVP_DigestSign(md, sig, &sig_len, tbs, tbs_len) == 1);
    EVP_MD_CTX_free(md);
    assert_int_equal(certasm_assemble(tbs, tbs_len, nid, sig, sig_len, &cert, &cert_len, &e),
                     HSMCA_OK);

    const unsigned char *p = cert;
    X509 *parsed = d2i_X509(NULL, &p, (long)cert_len);
    assert_non_null(parsed);
    assert_ptr_equal(p, cert + cert_len);
    assert_int_equal(X509_verify(parsed, key), 1);
    assert_int_equal(X509_get_signature_nid(parsed), nid);
    /* Re-encoding gives the same bytes: the assembly is DER. */
    unsigned char *re = NULL;
    int re_len = i2d_X509(parsed, &re);
    assert_int_equal((size_t)re_len, cert_len);
    assert_memory_equal(re, cert, cert_len);

    /* PEM: byte for byte what OpenSSL writes. */
    char *pem = certasm_der_to_pem(cert, cert_len);
    assert_non_null(pem);
    BIO *b = BIO_new(BIO_s_mem());
    assert_true(PEM_write_bio_X509(b, parsed));
    char *want = NULL;
    long want_len = BIO_get_mem_data(b, &want);
    assert_int_equal(strlen(pem), (size_t)want_len);
    assert_memory_equal(pem, want, (size_t)want_len);
    BIO_free(b);

    free(pem);
    OPENSSL_free(re);
    OPENSSL_free(tbs);
    OPENSSL_free(cert);
    X509_free(parsed);
    X509_free(x);
}

/* The CRL skeleton both CRL makers share: v2, the issuer's name, the two times, the
 * issuer's keyid as AKI, the number; signed by the issuer's key it verifies. */
static void test_crl_skeleton(void **state)
{
    (void)state;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    X509 *ca = openssl_cert(key);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, ca, ca, NULL, NULL, 0);
    X509_EXTENSION *ski = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_key_identifier, "hash");
    assert_true(ski && X509_add_ext(ca, ski, -1) && X509_sign(ca, key, EVP_sha256()));
    X509_EXTENSION_free(ski);
    ASN1_TIME *next = ASN1_TIME_set(NULL, 1900000000);
    X509_CRL *c = certasm_crl_new(ca, 1800000000, next, 1234567890123ULL);
    assert_non_null(c);
    assert_int_equal(X509_CRL_get_version(c), 1);
    assert_int_equal(X509_NAME_cmp(X509_CRL_get_issuer(c), X509_get_subject_name(ca)), 0);
    assert_int_equal(ASN1_TIME_compare(X509_CRL_get0_nextUpdate(c), next), 0);
    ASN1_TIME *this = ASN1_TIME_set(NULL, 1800000000);
    assert_int_equal(ASN1_TIME_compare(X509_CRL_get0_lastUpdate(c), this), 0);
    assert_null(X509_CRL_get_REVOKED(c));
    ASN1_INTEGER *num = X509_CRL_get_ext_d2i(c, NID_crl_number, NULL, NULL);
    uint64_t n = 0;
    assert_true(num && ASN1_INTEGER_get_uint64(&n, num) == 1);
    assert_true(n == 1234567890123ULL);
    AUTHORITY_KEYID *aki = X509_CRL_get_ext_d2i(c, NID_authority_key_identifier, NULL, NULL);
    assert_true(aki && aki->keyid);
    assert_int_equal(ASN1_OCTET_STRING_cmp(aki->keyid, X509_get0_subject_key_id(ca)), 0);
    assert_int_equal(X509_CRL_get_ext_count(c), 2);
    assert_true(X509_CRL_sign(c, key, EVP_sha256()) > 0);
    assert_int_equal(X509_CRL_verify(c, key), 1);
    AUTHORITY_KEYID_free(aki);
    ASN1_INTEGER_free(num);
    ASN1_TIME_free(this);
    ASN1_TIME_free(next);
    X509_CRL_free(c);
    X509_free(ca);
    EVP_PKEY_free(key);
}

/* The log's fingerprints: the certificate's is X509_digest's SHA-256, the key's the
 * SHA-256 of its DER SubjectPublicKeyInfo; nothing to encode is 0. */
static void test_fingerprints(void **state)
{
    (void)state;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = key ? openssl_cert(key) : NULL;
    assert_true(x && X509_sign(x, key, EVP_sha256()));
    unsigned char md[32], *der = NULL;
    unsigned int mdlen = 0;
    char want[65], hex[65];
    assert_true(X509_digest(x, EVP_sha256(), md, &mdlen) && mdlen == 32);
    for (int i = 0; i < 32; i++)
        snprintf(want + 2 * i, 3, "%02x", md[i]);
    assert_int_equal(certasm_cert_sha256(x, hex), 1);
    assert_string_equal(hex, want);
    int n = i2d_PUBKEY(key, &der);
    assert_true(n > 0 && EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL));
    for (int i = 0; i < 32; i++)
        snprintf(want + 2 * i, 3, "%02x", md[i]);
    assert_int_equal(certasm_spki_sha256(key, hex), 1);
    assert_string_equal(hex, want);
    assert_int_equal(certasm_spki_sha256(NULL, hex), 0);
    assert_int_equal(certasm_cert_sha256(NULL, hex), 0);
    OPENSSL_free(der);
    X509_free(x);
    EVP_PKEY_free(key);
}

static void test_ec(void **state)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assemble_and_verify(k, NID_ecdsa_with_SHA256);
    EVP_PKEY_free(k);
}

static void test_rsa(void **state)
{
    EVP_PKEY *k = EVP_RSA_gen(2048);
    assemble_and_verify(k, NID_sha256WithRSAEncryption);
    EVP_PKEY_free(k);
}

static void test_refusals(void **state)
{
    hsmca_err e;
    uint8_t *out = NULL;
    size_t len = 0;
    uint8_t tbs[4] = {0x30, 0x02, 0x05, 0x00}, sig[4] = {1, 2, 3, 4};
    assert_int_equal(certasm_assemble(tbs, sizeof(tbs), NID_undef, sig, sizeof(sig), &out, &len, &e),
                     HSMCA_EINTERNAL);
    assert_null(certasm_der_to_pem(tbs, 0));
    EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    assert_int_equal(certasm_sig_nid_for_key(ed), NID_undef);
    EVP_PKEY_free(ed);
}

static void test_pem_line_lengths(void **state)
{
    /* 48 bytes = exactly one 64-character line; 49 spills into a second. */
    uint8_t der[49];
    memset(der, 0xab, sizeof(der));
    char *one = certasm_der_to_pem(der, 48), *two = certasm_der_to_pem(der, 49);
    assert_string_equal(one, "-----BEGIN CERTIFICATE-----\n"
                             "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6ur\n"
                             "-----END CERTIFICATE-----\n");
    assert_string_equal(two, "-----BEGIN CERTIFICATE-----\n"
                             "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6ur\n"
                             "qw==\n"
                             "-----END CERTIFICATE-----\n");
    free(one);
    free(two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ec),
        cmocka_unit_test(test_rsa),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_pem_line_lengths),
        cmocka_unit_test(test_crl_skeleton),
        cmocka_unit_test(test_fingerprints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
