/* test_leaf_tbs.c - builds TBS certificates, signs them with a real CA key in
 * software and checks every field of the resulting certificate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "leaf_csr.h"
#include "leaf_tbs.h"
#include "leaf_tbs_ref.h"

#define ME "spiffe://cluster.local/ns/default/sa/sleep"

typedef struct {
    EVP_PKEY *key;
    X509 *cert;
} ca;

static ca ec_ca, rsa_ca;
static EVP_PKEY *leaf_ec, *leaf_rsa;

/* A self-signed CA with a subject of several attributes and an SKI, valid for secs
 * from now (0: until 9999). */
static X509 *make_ca_for(EVP_PKEY *key, int with_ski, long secs)
{
    X509 *x = X509_new();
    assert_non_null(x);
    assert_true(X509_set_version(x, X509_VERSION_3));
    assert_true(ASN1_INTEGER_set(X509_get_serialNumber(x), 42));
    X509_NAME *n = X509_get_subject_name(x);
    assert_true(X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
                                           (const unsigned char *)"hsmca test", -1, -1, 0));
    assert_true(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"Root CA",
                                           -1, -1, 0));
    assert_true(X509_set_issuer_name(x, n));
    assert_true(X509_gmtime_adj(X509_getm_notBefore(x), -3600));
    if (secs)
        assert_true(X509_gmtime_adj(X509_getm_notAfter(x), secs));
    else /* RFC 5280 4.1.2.5's "no well-defined expiration date" */
        assert_true(ASN1_TIME_set_string(X509_getm_notAfter(x), "99991231235959Z"));
    assert_true(X509_set_pubkey(x, key));
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints, "critical,CA:TRUE");
    assert_true(bc && X509_add_ext(x, bc, -1));
    X509_EXTENSION_free(bc);
    if (with_ski) {
        X509_EXTENSION *ski = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_key_identifier, "hash");
        assert_true(ski && X509_add_ext(x, ski, -1));
        X509_EXTENSION_free(ski);
    }
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    return x;
}

/* Valid until 9999, so no TTL the tests ask for is cut to its notAfter. */
static X509 *make_ca(EVP_PKEY *key, int with_ski)
{
    return make_ca_for(key, with_ski, 0);
}

static int setup(void **state)
{
    (void)state;
    ec_ca.key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    rsa_ca.key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    leaf_ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    leaf_rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (!ec_ca.key || !rsa_ca.key || !leaf_ec || !leaf_rsa)
        return -1;
    ec_ca.cert = make_ca(ec_ca.key, 1);
    rsa_ca.cert = make_ca(rsa_ca.key, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    X509_free(ec_ca.cert);
    X509_free(rsa_ca.cert);
    EVP_PKEY_free(ec_ca.key);
    EVP_PKEY_free(rsa_ca.key);
    EVP_PKEY_free(leaf_ec);
    EVP_PKEY_free(leaf_rsa);
    return 0;
}

/* DER length octets for n into p; returns their count. */
static size_t der_len(uint8_t *p, size_t n)
{
    if (n < 0x80) {
        p[0] = (uint8_t)n;
        return 1;
    }
    size_t k = 0;
    for (size_t m = n; m; m >>= 8)
        k++;
    p[0] = (uint8_t)(0x80 | k);
    for (size_t i = 0; i < k; i++)
        p[k - i] = (uint8_t)(n >> (8 * i));
    return k + 1;
}

/* Signs tbs with the CA key in software, assembles SEQUENCE {tbs, alg, BIT
 * STRING} by hand and parses it back (caller X509_free's). */
static X509 *sign_and_parse(const ca *c, int sig_nid, const uint8_t *tbs, size_t tbs_len)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t sig_len = 0;
    assert_true(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, c->key) == 1);
    assert_true(EVP_DigestSign(md, NULL, &sig_len, tbs, tbs_len) == 1);
    uint8_t *sig = malloc(sig_len);
    assert_true(EVP_DigestSign(md, sig, &sig_len, tbs, tbs_len) == 1);
    EVP_MD_CTX_free(md);

    X509_ALGOR *alg = X509_ALGOR_new();
    int rsa = sig_nid == NID_sha256WithRSAEncryption;
    assert_true(X509_ALGOR_set0(alg, OBJ_nid2obj(sig_nid), rsa ? V_ASN1_NULL : V_ASN1_UNDEF, NULL));
    unsigned char *alg_der = NULL;
    int alg_len = i2d_X509_ALGOR(alg, &alg_der);
    assert_true(alg_len > 0);
    X509_ALGOR_free(alg);

    size_t cap = tbs_len + (size_t)alg_len + sig_len + 32;
    uint8_t *cert = malloc(cap), body_hdr[8], bits_hdr[8];
    size_t bits_hl = 1 + der_len(bits_hdr + 1, sig_len + 1);
    bits_hdr[0] = 0x03;
    size_t body = tbs_len + (size_t)alg_len + bits_hl + 1 + sig_len;
    size_t o = 1 + der_len(body_hdr + 1, body);
    body_hdr[0] = 0x30;
    memcpy(cert, body_hdr, o);
    memcpy(cert + o, tbs, tbs_len);
    o += tbs_len;
    memcpy(cert + o, alg_der, (size_t)alg_len);
    o += (size_t)alg_len;
    memcpy(cert + o, bits_hdr, bits_hl);
    o += bits_hl;
    cert[o++] = 0x00; /* no unused bits */
    memcpy(cert + o, sig, sig_len);
    o += sig_len;

    const unsigned char *p = cert;
    X509 *x = d2i_X509(NULL, &p, (long)o);
    assert_non_null(x);
    assert_ptr_equal(p, cert + o);
    assert_int_equal(X509_verify(x, c->key), 1);
    OPENSSL_free(alg_der);
    free(sig);
    free(cert);
    return x;
}

static void assert_name_der_equal(const X509_NAME *a, const X509_NAME *b)
{
    unsigned char *da = NULL, *db = NULL;
    int la = i2d_X509_NAME(a, &da), lb = i2d_X509_NAME(b, &db);
    assert_true(la > 0);
    assert_int_equal(la, lb);
    assert_memory_equal(da, db, (size_t)la);
    OPENSSL_free(da);
    OPENSSL_free(db);
}

static void assert_time(const ASN1_TIME *t, int64_t want, int type)
{
    ASN1_TIME *w = ASN1_TIME_set(NULL, (time_t)want);
    assert_non_null(w);
    assert_int_equal(ASN1_TIME_compare(t, w), 0);
    assert_int_equal(ASN1_STRING_type(t), type);
    ASN1_TIME_free(w);
}

static const int ext_order[] = {NID_basic_constraints,
                                NID_key_usage,
                                NID_ext_key_usage,
                                NID_subject_key_identifier,
                                NID_authority_key_identifier,
                                NID_subject_alt_name};
static const int ext_crit[] = {1, 1, 0, 0, 0, 1};

/* Every field of a certificate built from p. */
static void check_cert(const ca *c, const leaf_tbs_params *p, const uint8_t *tbs, size_t tbs_len,
                       X509 *x)
{
    /* Our TBS is DER: re-encoding the parsed certificate's TBS gives the same bytes. */
    unsigned char *re = NULL;
    int re_len = i2d_re_X509_tbs(x, &re);
    assert_int_equal(re_len, (int)tbs_len);
    assert_memory_equal(re, tbs, tbs_len);
    OPENSSL_free(re);

    assert_int_equal(X509_get_version(x), X509_VERSION_3);
    /* Serial: INTEGER of 16 content octets, positive, no leading zero octet. */
    const ASN1_INTEGER *sn = X509_get0_serialNumber(x);
    assert_int_equal(ASN1_STRING_type(sn), V_ASN1_INTEGER);
    assert_int_equal(ASN1_STRING_length(sn), 16);
    uint8_t first = ASN1_STRING_get0_data(sn)[0];
    assert_true(first >= 0x01 && first <= 0x7f);
    /* ...and on the wire: SEQUENCE hdr, [0] { INTEGER 2 }, 02 10 <16 octets>. */
    size_t h = (tbs[1] & 0x80) ? 2 + (tbs[1] & 0x7f) : 2;
    static const uint8_t ver_serial[] = {0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x10};
    assert_memory_equal(tbs + h, ver_serial, sizeof(ver_serial));

    /* Inner algorithm = the CA's; RSA with NULL parameters, ECDSA with none. */
    const X509_ALGOR *alg = X509_get0_tbs_sigalg(x);
    const ASN1_OBJECT *obj;
    int ptype;
    X509_ALGOR_get0(&obj, &ptype, NULL, alg);
    assert_int_equal(OBJ_obj2nid(obj), p->sig_nid);
    assert_int_equal(ptype, p->sig_nid == NID_sha256WithRSAEncryption ? V_ASN1_NULL : V_ASN1_UNDEF);

    assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 0);
    assert_name_der_equal(X509_get_issuer_name(x), X509_get_subject_name(c->cert));
    assert_int_equal(X509_check_issued(c->cert, x), X509_V_OK);

    assert_time(X509_get0_notBefore(x), p->now - 120,
                p->now - 120 < 2524608000 ? V_ASN1_UTCTIME : V_ASN1_GENERALIZEDTIME);
    assert_time(X509_get0_notAfter(x), p->now - 120 + p->ttl,
                p->now - 120 + p->ttl < 2524608000 ? V_ASN1_UTCTIME : V_ASN1_GENERALIZEDTIME);
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), p->subject_key), 1);

    /* Extensions: exactly these, in this order, with this criticality. */
    assert_int_equal(X509_get_ext_count(x), 6);
    for (int i = 0; i < 6; i++) {
        X509_EXTENSION *ext = X509_get_ext(x, i);
        assert_int_equal(OBJ_obj2nid(X509_EXTENSION_get_object(ext)), ext_order[i]);
        assert_int_equal(X509_EXTENSION_get_critical(ext), ext_crit[i]);
    }
    /* BC: CA:FALSE encodes as an empty SEQUENCE; KU: digitalSignature, with
     * keyEncipherment for an RSA key only (RFC 8813 3: never on an EC key). */
    const ASN1_OCTET_STRING *bc = X509_EXTENSION_get_data(X509_get_ext(x, 0));
    assert_int_equal(ASN1_STRING_length(bc), 2);
    assert_memory_equal(ASN1_STRING_get0_data(bc), "\x30\x00", 2);
    const ASN1_OCTET_STRING *ku = X509_EXTENSION_get_data(X509_get_ext(x, 1));
    int rsa_key = EVP_PKEY_get_base_id(p->subject_key) == EVP_PKEY_RSA;
    assert_int_equal(ASN1_STRING_length(ku), 4);
    assert_memory_equal(ASN1_STRING_get0_data(ku), rsa_key ? "\x03\x02\x05\xa0" : "\x03\x02\x07\x80",
                        4);
    assert_int_equal(X509_get_key_usage(x),
                     rsa_key ? KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT : KU_DIGITAL_SIGNATURE);
    assert_int_equal(X509_check_ca(x), 0);
    EXTENDED_KEY_USAGE *eku = X509_get_ext_d2i(x, NID_ext_key_usage, NULL, NULL);
    assert_int_equal(sk_ASN1_OBJECT_num(eku), 2);
    assert_int_equal(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, 0)), NID_server_auth);
    assert_int_equal(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, 1)), NID_client_auth);
    sk_ASN1_OBJECT_pop_free(eku, ASN1_OBJECT_free);

    /* SKI = SHA-1 of the subjectPublicKey bits (computed here independently). */
    unsigned char *pub = NULL;
    int pub_len = i2d_PublicKey(p->subject_key, &pub);
    assert_true(pub_len > 0);
    uint8_t sha1[20];
    assert_true(EVP_Digest(pub, (size_t)pub_len, sha1, NULL, EVP_sha1(), NULL));
    OPENSSL_free(pub);
    const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(x);
    assert_non_null(ski);
    assert_int_equal(ASN1_STRING_length(ski), 20);
    assert_memory_equal(ASN1_STRING_get0_data(ski), sha1, 20);
    /* AKI: keyIdentifier only, equal to the CA's SKI. */
    AUTHORITY_KEYID *aki = X509_get_ext_d2i(x, NID_authority_key_identifier, NULL, NULL);
    assert_non_null(aki);
    assert_null(aki->issuer);
    assert_null(aki->serial);
    assert_int_equal(ASN1_OCTET_STRING_cmp(aki->keyid, X509_get0_subject_key_id(c->cert)), 0);
    AUTHORITY_KEYID_free(aki);

    /* SAN: the URI, then DNS names, then IPs, nothing else. */
    GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    assert_non_null(gens);
    int k = 0;
    if (p->uri_san) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, k++);
        assert_int_equal(g->type, GEN_URI);
        assert_int_equal(ASN1_STRING_length(g->d.uniformResourceIdentifier),
                         (int)strlen(p->uri_san));
        assert_memory_equal(ASN1_STRING_get0_data(g->d.uniformResourceIdentifier), p->uri_san,
                            strlen(p->uri_san));
    }
    for (int i = 0; i < p->n_dns; i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, k++);
        assert_int_equal(g->type, GEN_DNS);
        assert_string_equal((const char *)ASN1_STRING_get0_data(g->d.dNSName), p->dns[i]);
    }
    for (int i = 0; i < p->n_ips; i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, k++);
        assert_int_equal(g->type, GEN_IPADD);
        ASN1_OCTET_STRING *want = a2i_IPADDRESS(p->ips[i]);
        assert_int_equal(ASN1_OCTET_STRING_cmp(g->d.iPAddress, want), 0);
        ASN1_OCTET_STRING_free(want);
    }
    assert_int_equal(sk_GENERAL_NAME_num(gens), k);
    GENERAL_NAMES_free(gens);
}

static void build_sign_check(const ca *c, leaf_tbs_params *p)
{
    uint8_t *tbs = NULL;
    size_t len = 0;
    hsmca_err e;
    hsmca_err_clear(&e);
    p->ca_cert = c->cert;
    p->sig_nid = certasm_sig_nid_for_key(c->key);
    hsmca_code rc = leaf_tbs_build(p, &tbs, &len, &e);
    if (rc != HSMCA_OK)
        fail_msg("leaf_tbs_build: %s", e.msg);
    X509 *x = sign_and_parse(c, p->sig_nid, tbs, len);
    check_cert(c, p, tbs, len, x);
    X509_free(x);
    OPENSSL_free(tbs);
}

static void test_workload(void **state)
{
    (void)state;
    const ca *cas[] = {&ec_ca, &rsa_ca};
    EVP_PKEY *leaves[] = {leaf_ec, leaf_rsa};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            leaf_tbs_params p = {
                .subject_key = leaves[j], .uri_san = ME, .now = (int64_t)time(NULL), .ttl = 86400};
            build_sign_check(cas[i], &p);
        }
}

/* The CSR path: the key comes as the CSR's parsed SubjectPublicKeyInfo and is
 * copied, not re-encoded; the certificate must be the same as from the EVP_PKEY. */
static void test_workload_from_csr_spki(void **state)
{
    (void)state;
    EVP_PKEY *leaves[] = {leaf_ec, leaf_rsa};
    for (int j = 0; j < 2; j++) {
        X509_REQ *req = X509_REQ_new();
        assert_non_null(req);
        assert_true(X509_REQ_set_pubkey(req, leaves[j]));
        unsigned char *want = NULL;
        int want_len = i2d_PUBKEY(leaves[j], &want);
        assert_true(want_len > 0);
        /* Through DER and back, as a CSR from the wire would be. */
        unsigned char *req_der = NULL;
        assert_true(X509_REQ_sign(req, leaves[j], EVP_sha256()) > 0);
        int req_len = i2d_X509_REQ(req, &req_der);
        const unsigned char *rp = req_der;
        X509_REQ *parsed = d2i_X509_REQ(NULL, &rp, req_len);
        assert_non_null(parsed);

        leaf_tbs_params p = {.subject_spki = X509_REQ_get_X509_PUBKEY(parsed),
                           .uri_san = ME,
                           .now = (int64_t)time(NULL),
                           .ttl = 86400};
        p.ca_cert = ec_ca.cert;
        p.sig_nid = certasm_sig_nid_for_key(ec_ca.key);
        leaf_tbs_params only_spki = p;
        only_spki.subject_key = NULL;
        p.subject_key = leaves[j]; /* check_cert compares against it */
        uint8_t *tbs = NULL;
        size_t len = 0;
        hsmca_err e;
        assert_int_equal(leaf_tbs_build(&only_spki, &tbs, &len, &e), HSMCA_OK);
        X509 *x = sign_and_parse(&ec_ca, only_spki.sig_nid, tbs, len);
        check_cert(&ec_ca, &p, tbs, len, x);
        unsigned char *got = NULL;
        int got_len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x), &got);
        assert_int_equal(got_len, want_len);
        assert_memory_equal(got, want, (size_t)want_len);
        OPENSSL_free(got);
        OPENSSL_free(want);
        OPENSSL_free(req_der);
        OPENSSL_free(tbs);
        X509_free(x);
        X509_REQ_free(parsed);
        X509_REQ_free(req);
    }
}

static void test_serving_and_times(void **state)
{
    (void)state;
    const char *dns[] = {"hsmca.example.com", "localhost"};
    const char *ips[] = {"127.0.0.1", "::1"};
    leaf_tbs_params p = {.subject_key = leaf_ec,
                       .dns = dns,
                       .n_dns = 2,
                       .ips = ips,
                       .n_ips = 2,
                       .now = 1700000000,
                       .ttl = 3600};
    build_sign_check(&ec_ca, &p);
    /* URI and DNS together. */
    p.uri_san = ME;
    p.n_ips = 0;
    build_sign_check(&rsa_ca, &p);
    /* notAfter past 2049: GeneralizedTime, notBefore still UTCTime. */
    leaf_tbs_params late = {.subject_key = leaf_ec, .uri_san = ME, .now = 2524607000, .ttl = 86400};
    build_sign_check(&ec_ca, &late);
}

/* As istiod does: a TTL that would outlive the CA certificate is cut to its notAfter,
 * on every profile (workload, serving); an expired CA certificate issues nothing. */
static void test_not_after_clamped_to_ca(void **state)
{
    (void)state;
    const char *dns[] = {"hsmca.example.com"};
    ca soon = {ec_ca.key, make_ca_for(ec_ca.key, 1, 3600)};
    int64_t ca_end = 0;
    struct tm tm;
    assert_true(ASN1_TIME_to_tm(X509_get0_notAfter(soon.cert), &tm));
    ca_end = (int64_t)timegm(&tm);
    leaf_tbs_params w = {.ca_cert = soon.cert, .sig_nid = NID_ecdsa_with_SHA256,
                       .subject_key = leaf_ec, .uri_san = ME, .now = (int64_t)time(NULL),
                       .ttl = 86400};
    leaf_tbs_params sv = w;
    sv.uri_san = NULL;
    sv.dns = dns;
    sv.n_dns = 1;
    const leaf_tbs_params *ps[] = {&w, &sv};
    for (size_t i = 0; i < 2; i++) {
        uint8_t *tbs = NULL;
        size_t len = 0;
        hsmca_err e;
        assert_int_equal(leaf_tbs_build(ps[i], &tbs, &len, &e), HSMCA_OK);
        X509 *x = sign_and_parse(&soon, NID_ecdsa_with_SHA256, tbs, len);
        assert_time(X509_get0_notAfter(x), ca_end, V_ASN1_UTCTIME);
        assert_time(X509_get0_notBefore(x), ps[i]->now - 120, V_ASN1_UTCTIME);
        X509_free(x);
        OPENSSL_free(tbs);
    }
    /* Expired: refused, nothing built. */
    X509_free(soon.cert);
    soon.cert = make_ca_for(ec_ca.key, 1, -60);
    w.ca_cert = soon.cert;
    uint8_t *tbs = NULL;
    size_t len = 0;
    hsmca_err e;
    assert_int_equal(leaf_tbs_build(&w, &tbs, &len, &e), HSMCA_EUNAVAIL);
    assert_string_equal(e.msg, "the CA certificate has expired: nothing can be issued under it");
    assert_null(tbs);
    X509_free(soon.cert);
}

static void test_serials_differ(void **state)
{
    (void)state;
    leaf_tbs_params p = {.ca_cert = ec_ca.cert,
                       .sig_nid = NID_ecdsa_with_SHA256,
                       .subject_key = leaf_ec,
                       .uri_san = ME,
                       .now = 1700000000,
                       .ttl = 60};
    uint8_t seen[64][16];
    hsmca_err e;
    for (int i = 0; i < 64; i++) {
        uint8_t *tbs = NULL;
        size_t len = 0;
        assert_int_equal(leaf_tbs_build(&p, &tbs, &len, &e), HSMCA_OK);
        size_t h = (tbs[1] & 0x80) ? 2 + (tbs[1] & 0x7f) : 2;
        assert_int_equal(tbs[h + 5], 0x02);
        assert_int_equal(tbs[h + 6], 16);
        memcpy(seen[i], tbs + h + 7, 16);
        assert_true(seen[i][0] >= 1 && seen[i][0] <= 0x7f);
        for (int j = 0; j < i; j++)
            assert_memory_not_equal(seen[i], seen[j], 16);
        OPENSSL_free(tbs);
    }
}

static void assert_refused(const leaf_tbs_params *p, hsmca_code code, const char *msg)
{
    uint8_t *tbs = (uint8_t *)"untouched";
    size_t len = 99;
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(leaf_tbs_build(p, &tbs, &len, &e), code);
    assert_int_equal(e.code, code);
    assert_string_equal(e.msg, msg);
    assert_null(tbs);
    assert_int_equal(len, 0);
}

static void test_refusals(void **state)
{
    (void)state;
    leaf_tbs_params p = {.ca_cert = ec_ca.cert,
                       .sig_nid = NID_ecdsa_with_SHA256,
                       .subject_key = leaf_ec,
                       .now = 1700000000,
                       .ttl = 60};
    assert_refused(&p, HSMCA_EINVAL, "TBS: no SAN (neither URI nor DNS/IP) requested");
    const char *bad_ip[] = {"not-an-ip"};
    p.ips = bad_ip;
    p.n_ips = 1;
    assert_refused(&p, HSMCA_EINVAL, "TBS: IP SAN 0 is not an IP address");
    p.n_ips = 0;
    p.uri_san = "";
    assert_refused(&p, HSMCA_EINVAL, "TBS: URI SAN is empty or longer than 1024 bytes");
    const char *empty_dns[] = {""};
    p.uri_san = ME;
    p.dns = empty_dns;
    p.n_dns = 1;
    assert_refused(&p, HSMCA_EINVAL, "TBS: DNS SAN is empty or longer than 1024 bytes");
    p.n_dns = 0;
    p.ttl = 0;
    assert_refused(&p, HSMCA_EINVAL, "TBS: TTL is 0");
    p.ttl = 60;
    p.sig_nid = NID_undef;
    assert_int_equal(leaf_tbs_build(&p, &(uint8_t *){NULL}, &(size_t){0}, NULL), HSMCA_EINTERNAL);
    p.sig_nid = NID_ecdsa_with_SHA256;

    /* A CA certificate without an SKI cannot be named in an AKI. */
    X509 *no_ski = make_ca(ec_ca.key, 0);
    p.ca_cert = no_ski;
    assert_refused(&p, HSMCA_EINVAL, "CA certificate has no subjectKeyIdentifier");
    X509_free(no_ski);
    p.ca_cert = NULL;
    assert_refused(&p, HSMCA_EINTERNAL, "leaf_tbs_build: missing parameter");
}

/* ---- leaf_tbs_build's DER template against the X509-API builder (leaf_tbs_ref.c) ---- */

/* leaf_tbs_build and the reference on the same parameters: the same code and message
 * when refused; else the same bytes, the reference given the serial drawn. */
static void assert_same_as_ref(const leaf_tbs_params *p)
{
    uint8_t *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    hsmca_err ea, eb;
    hsmca_err_clear(&ea);
    hsmca_err_clear(&eb);
    hsmca_code ra = leaf_tbs_build(p, &a, &al, &ea);
    uint8_t serial[16];
    memset(serial, 0x11, sizeof(serial));
    if (ra == HSMCA_OK) {
        static const uint8_t ver_serial[] = {0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x10};
        size_t h = (a[1] & 0x80) ? 2 + (a[1] & 0x7f) : 2;
        assert_true(al > h + sizeof(ver_serial) + 16);
        assert_memory_equal(a + h, ver_serial, sizeof(ver_serial));
        memcpy(serial, a + h + sizeof(ver_serial), 16);
    }
    hsmca_code rb = leaf_tbs_ref_build(p, serial, &b, &bl, &eb);
    if (ra != rb || (ra != HSMCA_OK && strcmp(ea.msg, eb.msg) != 0))
        fail_msg("template: %s (%s), reference: %s (%s)", hsmca_code_name(ra), ea.msg,
                 hsmca_code_name(rb), eb.msg);
    if (ra == HSMCA_OK) {
        assert_int_equal(al, bl);
        assert_memory_equal(a, b, al);
    } else {
        assert_null(a);
        assert_int_equal(al, 0);
    }
    OPENSSL_free(a);
    OPENSSL_free(b);
}

/* A CA whose subject has every attribute at its usual upper bound (RFC 5280
 * ub-*: 64-byte CN, O, OU; UTF8 and printable strings) and an SKI of ski_len
 * bytes (0: the 20-byte SHA-1 one), so lengths cross the long forms. */
static X509 *make_long_ca(EVP_PKEY *key, int ski_len)
{
    X509 *x = X509_new();
    assert_non_null(x);
    assert_true(X509_set_version(x, X509_VERSION_3));
    assert_true(ASN1_INTEGER_set(X509_get_serialNumber(x), 7));
    X509_NAME *n = X509_get_subject_name(x);
    char v[65];
    memset(v, 'a', 64);
    v[64] = 0;
    static const char *const fields[] = {"C", "ST", "L", "O", "OU", "CN"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const char *val = strcmp(fields[i], "C") == 0 ? "DE" : v;
        int type = strcmp(fields[i], "CN") == 0 ? MBSTRING_UTF8 : MBSTRING_ASC;
        assert_true(
            X509_NAME_add_entry_by_txt(n, fields[i], type, (const unsigned char *)val, -1, -1, 0));
    }
    /* a multi-valued RDN and a non-ASCII CN value */
    assert_true(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8,
                                           (const unsigned char *)"Zertifizierungsstelle \xc3\xa4",
                                           -1, -1, 1));
    assert_true(X509_set_issuer_name(x, n));
    assert_true(X509_gmtime_adj(X509_getm_notBefore(x), -3600));
    assert_true(ASN1_TIME_set_string(X509_getm_notAfter(x), "99991231235959Z"));
    assert_true(X509_set_pubkey(x, key));
    ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
    uint8_t id[300];
    for (size_t i = 0; i < sizeof(id); i++)
        id[i] = (uint8_t)(i * 7 + 1);
    if (ski_len == 0) {
        X509V3_CTX ctx;
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_key_identifier, "hash");
        assert_true(ext && X509_add_ext(x, ext, -1));
        X509_EXTENSION_free(ext);
    } else {
        assert_true(ski_len <= (int)sizeof(id) && ASN1_OCTET_STRING_set(ski, id, ski_len));
        assert_true(X509_add1_ext_i2d(x, NID_subject_key_identifier, ski, 0, X509V3_ADD_DEFAULT));
    }
    ASN1_OCTET_STRING_free(ski);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    /* As the front end has it: read back from DER (the encodings cached). */
    unsigned char *der = NULL;
    int len = i2d_X509(x, &der);
    const unsigned char *p = der;
    X509 *back = d2i_X509(NULL, &p, len);
    assert_non_null(back);
    OPENSSL_free(der);
    X509_free(x);
    return back;
}

/* The SubjectPublicKeyInfo as the front end has it from a CSR: leaf_csr_parse of a
 * PEM CSR signed by key (the caller leaf_csr_free's c). */
static void csr_spki(EVP_PKEY *key, leaf_csr *c)
{
    X509_REQ *req = X509_REQ_new();
    assert_non_null(req);
    assert_true(X509_REQ_set_pubkey(req, key));
    assert_true(X509_REQ_sign(req, key, EVP_sha256()) > 0);
    BIO *bio = BIO_new(BIO_s_mem());
    assert_true(PEM_write_bio_X509_REQ(bio, req));
    char *pem = NULL;
    long n = BIO_get_mem_data(bio, &pem);
    hsmca_err e;
    if (leaf_csr_parse(pem, (size_t)n, c, &e) != HSMCA_OK)
        fail_msg("leaf_csr_parse: %s", e.msg);
    BIO_free(bio);
    X509_REQ_free(req);
}

/* A string of n bytes of c (static buffer per slot). */
static const char *filled(int slot, size_t n, char c)
{
    static char bufs[4][1100];
    assert_true(slot < 4 && n < sizeof(bufs[0]));
    memset(bufs[slot], c, n);
    bufs[slot][n] = 0;
    return bufs[slot];
}

/* Every CA key type, every subject key type, from a key or a CSR, SAN kinds and
 * lengths around the DER length boundaries, TTLs and times around the
 * UTCTime/GeneralizedTime switch. */
static void test_template_matches_reference(void **state)
{
    (void)state;
    EVP_PKEY *p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    EVP_PKEY *p256 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    EVP_PKEY *rsa3072 = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)3072);
    assert_true(p384 && p256 && rsa3072);
    ca p384_ca = {p384, make_ca(p384, 1)};
    ca long_ca = {ec_ca.key, make_long_ca(ec_ca.key, 0)};
    ca odd_ski_ca = {rsa_ca.key, make_long_ca(rsa_ca.key, 200)};
    ca short_ski_ca = {ec_ca.key, make_long_ca(ec_ca.key, 1)};
    const ca *cas[] = {&ec_ca, &rsa_ca, &p384_ca, &long_ca, &odd_ski_ca, &short_ski_ca};
    EVP_PKEY *leaves[] = {p256, leaf_ec, leaf_rsa, rsa3072};
    leaf_csr csrs[4];
    for (int j = 0; j < 4; j++)
        csr_spki(leaves[j], &csrs[j]);

    const char *dns8[8] = {
        "a.example",         "hsmca.example.com", "localhost",          filled(0, 63, 'd'),
        filled(1, 127, 'e'), filled(2, 128, 'f'), filled(3, 1024, 'g'), "x"};
    const char *ips[] = {"127.0.0.1", "::1", "10.1.2.3", "2001:db8::42"};
    const char *uris[] = {ME, "spiffe://t/" /* short */, NULL};
    char long_uri[1025];
    memset(long_uri, 'u', 1024);
    memcpy(long_uri, "spiffe://", 9);
    long_uri[1024] = 0;

    struct {
        int64_t now;
        uint32_t ttl;
    } times[] = {
        {1700000000, 1},
        {1700000000, 86400},
        {1700000000, UINT32_MAX},
        {2524607999 + 120, 1},    /* notBefore 2049-12-31T23:59:59: UTCTime, notAfter 2050 */
        {2524608000 + 120, 60},   /* notBefore 2050-01-01T00:00:00: GeneralizedTime */
        {-631152000 + 120, 3600}, /* notBefore 1950-01-01: UTCTime */
        {-631152001 + 120, 3600}, /* 1949-12-31T23:59:59: GeneralizedTime */
        {253402300799 + 120 - 3600, 3600}, /* notAfter 9999-12-31T23:59:59 */
        {1700000000, 7776000},             /* 90 days */
    };
    int n = 0;
    for (size_t i = 0; i < sizeof(cas) / sizeof(cas[0]); i++)
        for (int j = 0; j < 4; j++)
            for (int from_csr = 0; from_csr < 2; from_csr++)
                for (int s = 0; s < 6; s++) {
                    leaf_tbs_params p = {.ca_cert = cas[i]->cert,
                                       .sig_nid = certasm_sig_nid_for_key(cas[i]->key),
                                       .now = times[(i + j + (size_t)s) % 9].now,
                                       .ttl = times[(i + j + (size_t)s) % 9].ttl};
                    if (from_csr)
                        p.subject_spki = csrs[j].spki;
                    else
                        p.subject_key = leaves[j];
                    switch (s) {
                    case 0: p.uri_san = uris[0]; break;
                    case 1: p.uri_san = long_uri; break;
                    case 2:
                        p.uri_san = uris[1];
                        p.dns = dns8;
                        p.n_dns = 8;
                        break;
                    case 3:
                        p.dns = dns8;
                        p.n_dns = 3;
                        p.ips = ips;
                        p.n_ips = 4;
                        break;
                    case 4:
                        p.ips = ips;
                        p.n_ips = 1;
                        break;
                    default:
                        p.uri_san = filled(0, 128, 'v');
                        p.dns = dns8 + 6;
                        p.n_dns = 2;
                    }
                    assert_same_as_ref(&p);
                    n++;
                }
    /* Every time case with every CA (the loop above spreads them). */
    for (size_t t = 0; t < sizeof(times) / sizeof(times[0]); t++)
        for (size_t i = 0; i < sizeof(cas) / sizeof(cas[0]); i++) {
            leaf_tbs_params p = {.ca_cert = cas[i]->cert,
                               .sig_nid = certasm_sig_nid_for_key(cas[i]->key),
                               .subject_spki = csrs[0].spki,
                               .uri_san = ME,
                               .now = times[t].now,
                               .ttl = times[t].ttl};
            assert_same_as_ref(&p);
        }
    assert_int_equal(n, 6 * 4 * 2 * 6);
    for (int j = 0; j < 4; j++)
        leaf_csr_free(&csrs[j]);
    X509_free(p384_ca.cert);
    X509_free(long_ca.cert);
    X509_free(odd_ski_ca.cert);
    X509_free(short_ski_ca.cert);
    EVP_PKEY_free(p384);
    EVP_PKEY_free(p256);
    EVP_PKEY_free(rsa3072);
}

/* A SAN extension over 64 KiB (three length octets), and SAN counts from 1 to 70. */
static void test_template_large_sans(void **state)
{
    (void)state;
    const char *dns[70];
    for (int i = 0; i < 70; i++)
        dns[i] = filled(i % 4, 1024 - (size_t)(i % 4), (char)('a' + i % 26));
    for (int k = 1; k <= 70; k += (k < 10 ? 1 : 20)) {
        leaf_tbs_params p = {.ca_cert = rsa_ca.cert,
                           .sig_nid = NID_sha256WithRSAEncryption,
                           .subject_key = leaf_rsa,
                           .uri_san = ME,
                           .dns = dns,
                           .n_dns = k,
                           .now = 1700000000,
                           .ttl = 3600};
        assert_same_as_ref(&p);
    }
}

/* Refused the same way, with the same message, whichever check fails first. */
static void test_template_refusals_match(void **state)
{
    (void)state;
    X509 *no_ski = make_ca(ec_ca.key, 0);
    const char *bad_ip[] = {"127.0.0.1", "::1", "not-an-ip"};
    const char *empty_dns[] = {"ok.example", ""};
    const char *null_dns[] = {NULL};
    const char *long_dns[] = {filled(0, 1025, 'l')};
    char long_uri[1026];
    memset(long_uri, 'u', 1025);
    long_uri[1025] = 0;
    leaf_tbs_params base = {.ca_cert = ec_ca.cert,
                          .sig_nid = NID_ecdsa_with_SHA256,
                          .subject_key = leaf_ec,
                          .uri_san = ME,
                          .now = 1700000000,
                          .ttl = 60};
    leaf_tbs_params v[16];
    int n = 0;
    v[n] = base, v[n++].uri_san = NULL;                  /* no SAN */
    v[n] = base, v[n].ips = bad_ip, v[n++].n_ips = 3;    /* IP 2 */
    v[n] = base, v[n++].uri_san = "";                    /* empty URI */
    v[n] = base, v[n++].uri_san = long_uri;              /* 1025-byte URI */
    v[n] = base, v[n].dns = empty_dns, v[n++].n_dns = 2; /* empty DNS */
    v[n] = base, v[n].dns = null_dns, v[n++].n_dns = 1;  /* NULL DNS */
    v[n] = base, v[n].dns = long_dns, v[n++].n_dns = 1;  /* 1025-byte DNS */
    v[n] = base, v[n++].n_dns = -1;                      /* malformed list */
    v[n] = base, v[n++].n_ips = 1;                       /* ips NULL */
    v[n] = base, v[n++].ttl = 0;
    v[n] = base, v[n++].sig_nid = NID_undef;
    v[n] = base, v[n].sig_nid = NID_undef, v[n++].uri_san = ""; /* SAN first */
    v[n] = base, v[n].ca_cert = no_ski, v[n++].uri_san = "";    /* SKI first */
    v[n] = base, v[n++].ca_cert = no_ski;
    v[n] = base, v[n].ca_cert = no_ski, v[n++].now = 253402300800; /* validity first */
    v[n] = base, v[n++].subject_key = NULL;
    for (int i = 0; i < n; i++)
        assert_same_as_ref(&v[i]);

    /* A key with explicit curve parameters, as a CSR's SPKI: refused; as a key: certified
     * as it encodes (the serving path's own key, never a CSR's). */
    EVP_PKEY *explicit = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    assert_non_null(explicit);
    assert_int_equal(EVP_PKEY_set_utf8_string_param(explicit, OSSL_PKEY_PARAM_EC_ENCODING,
                                                    OSSL_PKEY_EC_ENCODING_EXPLICIT),
                     1);
    X509_PUBKEY *xp = NULL;
    assert_true(X509_PUBKEY_set(&xp, explicit));
    leaf_tbs_params ex = base;
    ex.subject_key = NULL;
    ex.subject_spki = xp;
    assert_same_as_ref(&ex);
    assert_refused(&ex, HSMCA_EINTERNAL, "cannot set version, issuer or key of the TBS");
    ex.subject_spki = NULL;
    ex.subject_key = explicit;
    assert_same_as_ref(&ex);
    X509_PUBKEY_free(xp);
    EVP_PKEY_free(explicit);
    X509_free(no_ski);

    /* A notAfter past 9999 has no GeneralizedTime (four-digit years): it is past every
     * CA certificate's notAfter too, so it is cut to that (here 9999-12-31T23:59:59). */
    leaf_tbs_params late = base;
    late.now = 253402300800 + 120 - 3600;
    late.ttl = 3600;
    uint8_t *tbs = NULL;
    size_t len = 0;
    hsmca_err e;
    assert_int_equal(leaf_tbs_build(&late, &tbs, &len, &e), HSMCA_OK);
    X509 *x = sign_and_parse(&ec_ca, NID_ecdsa_with_SHA256, tbs, len);
    assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(ec_ca.cert)), 0);
    X509_free(x);
    OPENSSL_free(tbs);
    late.ttl = 3599; /* 9999-12-31T23:59:59 */
    assert_same_as_ref(&late);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workload),
        cmocka_unit_test(test_workload_from_csr_spki),
        cmocka_unit_test(test_serving_and_times),
        cmocka_unit_test(test_not_after_clamped_to_ca),
        cmocka_unit_test(test_serials_differ),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_template_matches_reference),
        cmocka_unit_test(test_template_large_sans),
        cmocka_unit_test(test_template_refusals_match),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
