/* test_leaf_csr.c - CSR parsing with real OpenSSL-made requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "leaf_csr.h"

#define ME "spiffe://cluster.local/ns/default/sa/sleep"

/* Keys made once: RSA key generation is the slow part of this test. */
static EVP_PKEY *k_p256, *k_p384, *k_rsa2048, *k_rsa1024, *k_p521, *k_k256, *k_ed25519, *k_rsa_e3;

/* An RSA-2048 key with public exponent 3: valid RSA, outside the profile. */
static EVP_PKEY *rsa_e3(void)
{
    EVP_PKEY *k = NULL;
    BIGNUM *e = BN_new();
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    if (e && ctx && BN_set_word(e, 3) && EVP_PKEY_keygen_init(ctx) == 1 &&
        EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1 &&
        EVP_PKEY_CTX_set1_rsa_keygen_pubexp(ctx, e) == 1)
        EVP_PKEY_keygen(ctx, &k);
    EVP_PKEY_CTX_free(ctx);
    BN_free(e);
    return k;
}

static int setup(void **state)
{
    (void)state;
    k_p256 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    k_p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    k_p521 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-521");
    k_k256 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "secp256k1");
    k_rsa2048 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    k_rsa1024 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    k_ed25519 = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    k_rsa_e3 = rsa_e3();
    return k_p256 && k_p384 && k_p521 && k_k256 && k_rsa2048 && k_rsa1024 && k_ed25519 && k_rsa_e3
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY *all[] = {k_p256, k_p384, k_rsa2048, k_rsa1024, k_p521, k_k256, k_ed25519, k_rsa_e3};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        EVP_PKEY_free(all[i]);
    return 0;
}

/* One SAN for a request: type GEN_URI/GEN_DNS/GEN_EMAIL (IA5 of len bytes) or GEN_IPADD. */
typedef struct {
    int type;
    const char *val;
    int len; /* -1: strlen */
} san;

static X509_EXTENSION *san_ext(const san *sans, int n)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    assert_non_null(gens);
    for (int i = 0; i < n; i++) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        assert_non_null(g);
        if (sans[i].type == GEN_IPADD) {
            ASN1_OCTET_STRING *ip = a2i_IPADDRESS(sans[i].val);
            assert_non_null(ip);
            GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
        } else {
            ASN1_IA5STRING *s = ASN1_IA5STRING_new();
            int len = sans[i].len < 0 ? (int)strlen(sans[i].val) : sans[i].len;
            assert_true(ASN1_STRING_set(s, sans[i].val, len));
            GENERAL_NAME_set0_value(g, sans[i].type, s);
        }
        assert_true(sk_GENERAL_NAME_push(gens, g));
    }
    X509_EXTENSION *ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens);
    assert_non_null(ext);
    GENERAL_NAMES_free(gens);
    return ext;
}

/* A signed PKCS#10 request as DER (caller OPENSSL_free's). n_san_exts copies of
 * the SAN extension (0: no extensionRequest at all). */
static uint8_t *make_csr(EVP_PKEY *key, const san *sans, int n, int n_san_exts, long version,
                         const char *org, size_t *len)
{
    X509_REQ *req = X509_REQ_new();
    assert_non_null(req);
    assert_true(X509_REQ_set_version(req, version));
    assert_true(X509_REQ_set_pubkey(req, key));
    if (org)
        assert_true(X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req), "O", MBSTRING_ASC,
                                               (const unsigned char *)org, -1, -1, 0));
    if (n_san_exts > 0) {
        STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
        for (int i = 0; i < n_san_exts; i++)
            assert_true(sk_X509_EXTENSION_push(exts, san_ext(sans, n)));
        assert_true(X509_REQ_add_extensions(req, exts));
        sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    }
    const EVP_MD *md = EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519 ? NULL : EVP_sha256();
    assert_true(X509_REQ_sign(req, key, md) > 0);
    unsigned char *der = NULL;
    int l = i2d_X509_REQ(req, &der);
    assert_true(l > 0);
    X509_REQ_free(req);
    *len = (size_t)l;
    return der;
}

static const san my_uri[] = {{GEN_URI, ME, -1}};

static uint8_t *simple_csr(EVP_PKEY *key, size_t *len)
{
    return make_csr(key, my_uri, 1, 1, X509_REQ_VERSION_1, NULL, len);
}

/* PEM of der under label (new NUL-terminated string, caller frees). */
static char *pem_of(const uint8_t *der, size_t len, const char *label)
{
    BIO *b = BIO_new(BIO_s_mem());
    assert_non_null(b);
    assert_true(PEM_write_bio(b, label, "", der, (long)len) > 0);
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    BIO_free(b);
    return s;
}

static char *csr_pem(EVP_PKEY *key)
{
    size_t len;
    uint8_t *der = simple_csr(key, &len);
    char *pem = pem_of(der, len, "CERTIFICATE REQUEST");
    OPENSSL_free(der);
    return pem;
}

/* a followed by b (new string, caller frees). */
static char *cat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    assert_non_null(s);
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

static void assert_refused_len(const char *pem, size_t len, const char *msg)
{
    leaf_csr c;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = leaf_csr_parse(pem, len, &c, &e);
    if (rc != HSMCA_EINVAL)
        fail_msg("expected refusal \"%s\", got %d \"%s\"", msg, rc, e.msg);
    assert_int_equal(e.code, HSMCA_EINVAL);
    assert_string_equal(e.msg, msg);
    /* A refused parse leaves nothing to free. */
    assert_null(c.pubkey);
    assert_int_equal(c.n_uris, 0);
    leaf_csr_free(&c);
}

static void assert_refused(const char *pem, const char *msg)
{
    assert_refused_len(pem, strlen(pem), msg);
}

static void assert_refused_der(const uint8_t *der, size_t len, const char *msg)
{
    char *pem = pem_of(der, len, "CERTIFICATE REQUEST");
    assert_refused(pem, msg);
    free(pem);
}

static void parse_ok(const char *pem, size_t len, leaf_csr *c)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = leaf_csr_parse(pem, len, c, &e);
    if (rc != HSMCA_OK)
        fail_msg("refused: %s", e.msg);
}

static void accept_key(EVP_PKEY *key)
{
    size_t len;
    uint8_t *der = simple_csr(key, &len);
    char *pem = pem_of(der, len, "CERTIFICATE REQUEST");
    leaf_csr c;
    parse_ok(pem, strlen(pem), &c);
    assert_int_equal(c.n_uris, 1);
    assert_string_equal(c.uris[0], ME);
    assert_int_equal(c.n_other_sans, 0);
    assert_non_null(c.pubkey);
    assert_int_equal(EVP_PKEY_eq(c.pubkey, key), 1);
    uint8_t want[32];
    assert_true(EVP_Digest(der, len, want, NULL, EVP_sha256(), NULL));
    assert_memory_equal(c.der_sha256, want, 32);
    leaf_csr_free(&c);
    assert_null(c.pubkey);
    OPENSSL_free(der);
    free(pem);
}

static void test_accepts_keys(void **state)
{
    (void)state;
    accept_key(k_p256);
    accept_key(k_p384);
    accept_key(k_rsa2048);
}

static void test_accepts_forms(void **state)
{
    (void)state;
    leaf_csr c;
    char *pem = csr_pem(k_p256);
    /* Whitespace around the block. */
    char *pre = cat(" \r\n\t\n", pem), *both = cat(pre, "\n\n  \r\n");
    parse_ok(both, strlen(both), &c);
    assert_string_equal(c.uris[0], ME);
    leaf_csr_free(&c);
    /* CRLF line endings throughout. */
    char *crlf = malloc(2 * strlen(pem) + 1);
    size_t o = 0;
    for (const char *p = pem; *p; p++) {
        if (*p == '\n')
            crlf[o++] = '\r';
        crlf[o++] = *p;
    }
    crlf[o] = '\0';
    parse_ok(crlf, o, &c);
    leaf_csr_free(&c);
    /* No final newline after END. */
    size_t n = strlen(pem);
    parse_ok(pem, n - 1, &c);
    leaf_csr_free(&c);
    /* A non-empty subject is ignored. */
    size_t len;
    uint8_t *der = make_csr(k_p256, my_uri, 1, 1, X509_REQ_VERSION_1, "Acme", &len);
    char *opem = pem_of(der, len, "CERTIFICATE REQUEST");
    parse_ok(opem, strlen(opem), &c);
    assert_string_equal(c.uris[0], ME);
    leaf_csr_free(&c);
    /* Exactly at the size cap (padded with whitespace). */
    char *big = malloc(LEAF_CSR_MAX_LEN + 2);
    memset(big, ' ', LEAF_CSR_MAX_LEN + 1);
    memcpy(big, pem, n);
    big[LEAF_CSR_MAX_LEN + 1] = '\0';
    parse_ok(big, LEAF_CSR_MAX_LEN, &c);
    leaf_csr_free(&c);
    assert_refused_len(big, LEAF_CSR_MAX_LEN + 1, "CSR is larger than 16384 bytes");
    free(big);
    free(opem);
    OPENSSL_free(der);
    free(crlf);
    free(pre);
    free(both);
    free(pem);
}

static void test_san_extraction(void **state)
{
    (void)state;
    const san sans[] = {{GEN_URI, ME, -1},
                        {GEN_DNS, "example.com", -1},
                        {GEN_URI, "spiffe://cluster.local/ns/x/sa/y", -1},
                        {GEN_IPADD, "10.0.0.1", -1},
                        {GEN_EMAIL, "a@example.com", -1}};
    size_t len;
    uint8_t *der = make_csr(k_p256, sans, 5, 1, X509_REQ_VERSION_1, NULL, &len);
    char *pem = pem_of(der, len, "CERTIFICATE REQUEST");
    leaf_csr c;
    parse_ok(pem, strlen(pem), &c);
    assert_int_equal(c.n_uris, 2);
    assert_string_equal(c.uris[0], ME);
    assert_string_equal(c.uris[1], "spiffe://cluster.local/ns/x/sa/y");
    assert_int_equal(c.n_other_sans, 3);
    assert_int_equal(c.n_dns, 1); /* kept for the policy file's dns_names rule */
    assert_string_equal(c.dns[0], "example.com");
    leaf_csr_free(&c);
    OPENSSL_free(der);
    free(pem);

    /* No extensionRequest at all: parses, with no SANs (policy refuses it). */
    der = make_csr(k_p256, NULL, 0, 0, X509_REQ_VERSION_1, NULL, &len);
    pem = pem_of(der, len, "CERTIFICATE REQUEST");
    parse_ok(pem, strlen(pem), &c);
    assert_int_equal(c.n_uris, 0);
    assert_int_equal(c.n_other_sans, 0);
    leaf_csr_free(&c);
    OPENSSL_free(der);
    free(pem);

    /* Up to LEAF_CSR_MAX_SANS URIs are collected, one more is refused. */
    san many[LEAF_CSR_MAX_SANS + 1];
    for (int i = 0; i <= LEAF_CSR_MAX_SANS; i++)
        many[i] = (san){GEN_URI, ME, -1};
    der = make_csr(k_p256, many, LEAF_CSR_MAX_SANS, 1, X509_REQ_VERSION_1, NULL, &len);
    pem = pem_of(der, len, "CERTIFICATE REQUEST");
    parse_ok(pem, strlen(pem), &c);
    assert_int_equal(c.n_uris, LEAF_CSR_MAX_SANS);
    leaf_csr_free(&c);
    OPENSSL_free(der);
    free(pem);
    der = make_csr(k_p256, many, LEAF_CSR_MAX_SANS + 1, 1, X509_REQ_VERSION_1, NULL, &len);
    assert_refused_der(der, len, "CSR carries more than 8 URI SANs");
    OPENSSL_free(der);
}

static void test_refuses_san_forms(void **state)
{
    (void)state;
    size_t len;
    /* An embedded NUL would truncate the SPIFFE ID if copied as a C string. */
    const san nul[] = {{GEN_URI, ME "\0.evil", (int)sizeof(ME "\0.evil") - 1}};
    uint8_t *der = make_csr(k_p256, nul, 1, 1, X509_REQ_VERSION_1, NULL, &len);
    assert_refused_der(der, len, "CSR URI SAN contains a NUL byte");
    OPENSSL_free(der);

    const san empty[] = {{GEN_URI, "", 0}};
    der = make_csr(k_p256, empty, 1, 1, X509_REQ_VERSION_1, NULL, &len);
    assert_refused_der(der, len, "CSR URI SAN is empty");
    OPENSSL_free(der);

    der = make_csr(k_p256, my_uri, 1, 2, X509_REQ_VERSION_1, NULL, &len);
    assert_refused_der(der, len, "CSR carries more than one subjectAltName");
    OPENSSL_free(der);
}

static void test_refuses_keys(void **state)
{
    (void)state;
    struct {
        EVP_PKEY **key;
        const char *msg;
    } cases[] = {
        {&k_rsa1024, "CSR key type/size not allowed: RSA-1024"},
        /* what the signer refuses too (invariant 5): refused here, not there */
        {&k_rsa_e3, "CSR key type/size not allowed: RSA exponent (odd, 65537 to 2^31-1)"},
        {&k_p521, "CSR key type/size not allowed: EC secp521r1"},
        {&k_k256, "CSR key type/size not allowed: EC secp256k1"},
        {&k_ed25519, "CSR key type/size not allowed: ED25519"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *pem = csr_pem(*cases[i].key);
        assert_refused(pem, cases[i].msg);
        free(pem);
    }
}

static void test_refuses_signature(void **state)
{
    (void)state;
    EVP_PKEY *keys[] = {k_p256, k_rsa2048};
    for (size_t i = 0; i < 2; i++) {
        size_t len;
        uint8_t *der = simple_csr(keys[i], &len);
        /* The signature BIT STRING is the last element: its final octet is signature. */
        der[len - 1] ^= 0x01;
        assert_refused_der(der, len, "CSR signature does not verify");
        der[len - 1] ^= 0x01;
        /* A byte of the signed part (inside the URI) changed: same refusal. */
        uint8_t *u = memmem(der, len, "default", 7);
        assert_non_null(u);
        u[0] = 'D';
        assert_refused_der(der, len, "CSR signature does not verify");
        OPENSSL_free(der);
    }
    /* Signed by another key than the one in the request. */
    X509_REQ *req = X509_REQ_new();
    assert_true(X509_REQ_set_pubkey(req, k_p256));
    assert_true(X509_REQ_sign(req, k_p384, EVP_sha256()) > 0);
    unsigned char *der = NULL;
    int l = i2d_X509_REQ(req, &der);
    assert_refused_der(der, (size_t)l, "CSR signature does not verify");
    OPENSSL_free(der);
    X509_REQ_free(req);
}

/* The proof of possession against OpenSSL's own (X509_REQ_verify on the same DER):
 * leaf_csr_parse verifies ECDSA-SHA256/384 under an EC key with the digest and a raw
 * verify, everything else through ASN1_item_verify; both must agree with it on every
 * signature, altered or not: bit flips in the value, unused bits, a changed signed
 * part, and every algorithm label on every key. */
static void test_verify_matches_openssl(void **state)
{
    (void)state;
    EVP_PKEY *keys[] = {k_p256, k_p384, k_rsa2048};
    const EVP_MD *mds[] = {EVP_sha256(), EVP_sha384(), EVP_sha512(), EVP_sha1()};
    const int alg_nids[] = {NID_ecdsa_with_SHA256,       NID_ecdsa_with_SHA384,
                            NID_ecdsa_with_SHA512,       NID_ecdsa_with_SHA1,
                            NID_sha256WithRSAEncryption, NID_sha384WithRSAEncryption};
    int accepted = 0, refused = 0;
    for (size_t ki = 0; ki < sizeof(keys) / sizeof(keys[0]); ki++)
        for (size_t mi = 0; mi < sizeof(mds) / sizeof(mds[0]); mi++)
            for (int mut = 0; mut < 24; mut++) {
                X509_REQ *req = X509_REQ_new();
                assert_true(X509_REQ_set_version(req, X509_REQ_VERSION_1));
                assert_true(X509_REQ_set_pubkey(req, keys[ki]));
                STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
                assert_true(sk_X509_EXTENSION_push(exts, san_ext(my_uri, 1)));
                assert_true(X509_REQ_add_extensions(req, exts));
                sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
                assert_true(X509_REQ_sign(req, keys[ki], mds[mi]) > 0);
                const ASN1_BIT_STRING *csig;
                const X509_ALGOR *calg;
                X509_REQ_get0_signature(req, &csig, &calg);
                ASN1_BIT_STRING *sig = (ASN1_BIT_STRING *)csig;
                X509_ALGOR *alg = (X509_ALGOR *)calg;
                int alter_signed_part = 0;
                if (mut >= 1 && mut <= 12) {
                    /* one bit of the value: DER header, r, s, or the last octet */
                    int n = ASN1_STRING_length(sig);
                    int at = mut == 12 ? n - 1 : (mut * 5) % n;
                    sig->data[at] ^= (uint8_t)(1u << (mut % 8));
                } else if (mut == 13) {
                    sig->flags = ASN1_STRING_FLAG_BITS_LEFT | 1; /* one unused bit */
                } else if (mut >= 14 && mut < 20) {
                    int nid = alg_nids[mut - 14];
                    int rsa =
                        nid == NID_sha256WithRSAEncryption || nid == NID_sha384WithRSAEncryption;
                    assert_true(X509_ALGOR_set0(alg, OBJ_nid2obj(nid),
                                                rsa ? V_ASN1_NULL : V_ASN1_UNDEF, NULL));
                } else if (mut == 20) {
                    alter_signed_part = 1;
                }
                unsigned char *der = NULL;
                int len = i2d_X509_REQ(req, &der);
                assert_true(len > 0);
                if (alter_signed_part) {
                    uint8_t *u = memmem(der, (size_t)len, "default", 7);
                    assert_non_null(u);
                    u[0] = 'D';
                }
                /* OpenSSL's verdict on exactly these bytes */
                const unsigned char *p = der;
                X509_REQ *back = d2i_X509_REQ(NULL, &p, len);
                int want = back && X509_REQ_verify(back, keys[ki]) == 1;
                ERR_clear_error();
                char *pem = pem_of(der, (size_t)len, "CERTIFICATE REQUEST");
                leaf_csr c;
                hsmca_err e;
                hsmca_err_clear(&e);
                hsmca_code rc = leaf_csr_parse(pem, strlen(pem), &c, &e);
                if ((rc == HSMCA_OK) != want)
                    fail_msg("key %zu md %zu mutation %d: OpenSSL %s, leaf_csr_parse %s (%s)", ki, mi,
                             mut, want ? "verifies" : "refuses",
                             rc == HSMCA_OK ? "accepts" : "refuses", e.msg);
                if (rc != HSMCA_OK) {
                    assert_string_equal(e.msg, "CSR signature does not verify");
                    refused++;
                } else {
                    accepted++;
                }
                leaf_csr_free(&c);
                free(pem);
                X509_REQ_free(back);
                OPENSSL_free(der);
                X509_REQ_free(req);
            }
    /* Unaltered and the alterations that keep a valid signature (mutations 0 and
     * 21-23, a few relabellings): some of each. */
    assert_true(accepted >= 3 * 4 * 4);
    assert_true(refused > accepted);
}

static void test_refuses_pem_forms(void **state)
{
    (void)state;
    const char *not_pem = "CSR is not a PEM block labelled CERTIFICATE REQUEST";
    char *pem = csr_pem(k_p256);
    size_t len;
    uint8_t *der = simple_csr(k_p256, &len);

    assert_refused_len("", 0, "CSR is empty");
    assert_refused("garbage", not_pem);
    assert_refused("   \n", not_pem);
    /* Raw DER is not accepted in place of PEM. */
    assert_refused_len((const char *)der, len, not_pem);

    char *two = cat(pem, pem);
    assert_refused(two, "CSR has data after the PEM block");
    char *junk = cat(pem, "x");
    assert_refused(junk, "CSR has data after the PEM block");
    char *lead = cat("x", pem);
    assert_refused(lead, not_pem);

    const char *labels[] = {"NEW CERTIFICATE REQUEST", "CERTIFICATE", "X509 CRL"};
    for (size_t i = 0; i < 3; i++) {
        char *other = pem_of(der, len, labels[i]);
        assert_refused(other, not_pem);
        free(other);
    }
    /* A matching BEGIN but a different END. */
    char *end = strstr(pem, "-----END");
    assert_non_null(end);
    char *badend = malloc(strlen(pem) + 32);
    memcpy(badend, pem, (size_t)(end - pem));
    strcpy(badend + (end - pem), "-----END CERTIFICATE-----\n");
    assert_refused(badend, "CSR PEM: body line is not base64 (headers, blank lines or stray "
                           "characters)");
    /* Missing END. */
    badend[end - pem] = '\0';
    assert_refused(badend, "CSR PEM: no END CERTIFICATE REQUEST line");
    free(badend);

    /* PEM headers, blank lines, stray characters, BEGIN without a line break. */
    const char *body_msg =
        "CSR PEM: body line is not base64 (headers, blank lines or stray characters)";
    const size_t bl = strlen("-----BEGIN CERTIFICATE REQUEST-----\n");
    const char *inserts[] = {"Proc-Type: 4,ENCRYPTED\n", "\n", " \n", "AAAA AAAA\n", "AA=A\n"};
    for (size_t i = 0; i < sizeof(inserts) / sizeof(inserts[0]); i++) {
        char *m = malloc(strlen(pem) + 64);
        memcpy(m, pem, bl);
        strcpy(m + bl, inserts[i]);
        strcat(m, pem + bl);
        assert_refused(m, body_msg);
        free(m);
    }
    assert_refused("-----BEGIN CERTIFICATE REQUEST----- AAAA\n", "CSR PEM: no line break after "
                                                                 "the BEGIN line");

    /* Base64 strictness, on bodies that are not DER anyway. */
    const char *b64_msg = "CSR PEM body is not canonical base64";
    assert_refused("-----BEGIN CERTIFICATE REQUEST-----\nAB==\n-----END CERTIFICATE REQUEST-----\n",
                   b64_msg); /* non-zero bits under the padding */
    assert_refused("-----BEGIN CERTIFICATE REQUEST-----\nAAB=\n-----END CERTIFICATE REQUEST-----\n",
                   b64_msg);
    assert_refused("-----BEGIN CERTIFICATE REQUEST-----\nAAA\n-----END CERTIFICATE REQUEST-----\n",
                   b64_msg); /* not a whole quad */
    assert_refused("-----BEGIN CERTIFICATE REQUEST-----\nAA==\nAAAA\n-----END CERTIFICATE "
                   "REQUEST-----\n",
                   b64_msg); /* padding before the end */
    assert_refused("-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n",
                   "CSR is not a DER PKCS#10 request");

    /* An embedded NUL anywhere. */
    char *nul = strdup(pem);
    nul[bl + 3] = '\0';
    assert_refused_len(nul, strlen(pem), body_msg);
    free(nul);

    /* Oversized input. */
    char *big = malloc(LEAF_CSR_MAX_LEN * 2);
    memset(big, 'A', LEAF_CSR_MAX_LEN * 2);
    assert_refused_len(big, LEAF_CSR_MAX_LEN * 2, "CSR is larger than 16384 bytes");
    free(big);

    free(two);
    free(junk);
    free(lead);
    OPENSSL_free(der);
    free(pem);
}

static void test_refuses_der_forms(void **state)
{
    (void)state;
    size_t len;
    uint8_t *der = simple_csr(k_p256, &len);
    /* Trailing bytes after the SEQUENCE. */
    uint8_t *longer = malloc(len + 2);
    memcpy(longer, der, len);
    longer[len] = 0;
    longer[len + 1] = 0;
    assert_refused_der(longer, len + 2, "CSR DER has trailing bytes");
    /* Truncated DER. */
    assert_refused_der(der, len - 1, "CSR is not a DER PKCS#10 request");
    free(longer);

    /* The P-256 point moved off the curve (the key is imported directly, not by
     * OpenSSL's decoder: the import must still refuse it), and the key's BIT STRING
     * with unused bits. */
    unsigned char *pub = NULL;
    int pub_len = i2d_PublicKey(k_p256, &pub);
    assert_int_equal(pub_len, 65);
    uint8_t *at = NULL;
    for (size_t i = 0; i + 65 <= len && !at; i++)
        if (memcmp(der + i, pub, 65) == 0)
            at = der + i;
    assert_non_null(at);
    at[64] ^= 0x01;
    assert_refused_der(der, len, "CSR public key does not decode");
    at[64] ^= 0x01;
    at[-1] = 0x01; /* the unused-bits octet before the point */
    assert_refused_der(der, len, "CSR public key does not decode");
    at[-1] = 0x00;
    OPENSSL_free(pub);
    OPENSSL_free(der);

    /* A version other than v1 (0). */
    der = make_csr(k_p256, my_uri, 1, 1, 2, NULL, &len);
    char *pem = pem_of(der, len, "CERTIFICATE REQUEST");
    leaf_csr c;
    hsmca_err e;
    hsmca_code rc = leaf_csr_parse(pem, strlen(pem), &c, &e);
    assert_int_equal(rc, HSMCA_EINVAL);
    /* OpenSSL 3.0 decodes it (later versions may refuse earlier): our check refuses. */
    assert_string_equal(e.msg, "CSR version is not v1");
    free(pem);
    OPENSSL_free(der);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_keys),           cmocka_unit_test(test_accepts_forms),
        cmocka_unit_test(test_san_extraction),         cmocka_unit_test(test_refuses_san_forms),
        cmocka_unit_test(test_refuses_keys),           cmocka_unit_test(test_refuses_signature),
        cmocka_unit_test(test_verify_matches_openssl), cmocka_unit_test(test_refuses_pem_forms),
        cmocka_unit_test(test_refuses_der_forms),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
