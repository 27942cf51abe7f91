/* hostile_tbs.c - TBS certificates built the way a front end would, with one
 * knob per rule of the profile (tbs_spec in hostile.h). Every value a knob does
 * not touch is what the real front end sends, so a refusal is for that rule. */
#include "hostile.h"

#include <arpa/inet.h>
#include <string.h>
#include <time.h>

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certasm.h"
#include "profile.h"

static void add_ext_i2d(X509 *x, int nid, void *value, int crit)
{
    assert_non_null(value);
    assert_int_equal(X509_add1_ext_i2d(x, nid, value, crit, X509V3_ADD_APPEND), 1);
}

static void add_ext_raw(X509 *x, ASN1_OBJECT *obj, int crit, const uint8_t *der, int len)
{
    ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
    assert_non_null(os);
    assert_int_equal(ASN1_OCTET_STRING_set(os, der, len), 1);
    X509_EXTENSION *ext = X509_EXTENSION_create_by_OBJ(NULL, obj, crit, os);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(x, ext, -1), 1);
    X509_EXTENSION_free(ext);
    ASN1_OCTET_STRING_free(os);
}

/* The criticality an extension gets: the profile's, or the other one. */
static int crit_of(ext_mode m, int profile_crit)
{
    return m == EXT_FLIP_CRITICAL ? !profile_crit : profile_crit;
}

static void set_serial(X509 *x, const tbs_spec *s)
{
    uint8_t b[32];
    int n = s->serial_len ? s->serial_len : 16;
    assert_true(n > 0 && n <= (int)sizeof(b));
    assert_int_equal(RAND_bytes(b, n), 1);
    b[0] = (uint8_t)((b[0] & 0x7f) | 0x01); /* positive, exactly n content octets */
    BIGNUM *bn = BN_bin2bn(b, n, NULL);
    assert_non_null(bn);
    if (s->serial_zero)
        BN_zero(bn);
    BN_set_negative(bn, s->serial_sign < 0);
    assert_non_null(BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)));
    BN_free(bn);
}

static X509_NAME *name_cn(const char *cn)
{
    X509_NAME *n = X509_NAME_new();
    assert_non_null(n);
    assert_int_equal(
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0), 1);
    return n;
}

static void set_names_and_time(X509 *x, const tbs_spec *s, const X509 *ca)
{
    static const long versions[] = {X509_VERSION_3, X509_VERSION_1, X509_VERSION_2};
    assert_true(s->version >= 0 && s->version <= 2);
    assert_int_equal(X509_set_version(x, versions[s->version]), 1);
    set_serial(x, s);
    X509_NAME *n = s->issuer_cn ? name_cn(s->issuer_cn) : NULL;
    assert_int_equal(X509_set_issuer_name(x, n ? n : X509_get_subject_name(ca)), 1);
    X509_NAME_free(n);
    if (s->subject_cn) { /* otherwise X509_new's empty name */
        n = name_cn(s->subject_cn);
        assert_int_equal(X509_set_subject_name(x, n), 1);
        X509_NAME_free(n);
    }
    time_t now = time(NULL);
    assert_non_null(ASN1_TIME_set(X509_getm_notBefore(x),
                                  now + (s->not_before ? s->not_before : -PROFILE_BACKDATE_S)));
    assert_non_null(
        ASN1_TIME_set(X509_getm_notAfter(x), now + (s->not_after ? s->not_after : 3600)));
    if (s->gen_time) {
        ASN1_GENERALIZEDTIME *g = ASN1_TIME_to_generalizedtime(X509_get0_notBefore(x), NULL);
        assert_non_null(g);
        assert_int_equal(X509_set1_notBefore(x, g), 1);
        ASN1_GENERALIZEDTIME_free(g);
    }
}

static void add_bc(X509 *x, const tbs_spec *s)
{
    static const uint8_t bc_der[][5] = {
        [BC_CA_FALSE] = {0x30, 0x00},
        [BC_CA_TRUE] = {0x30, 0x03, 0x01, 0x01, 0xff},
        [BC_PATHLEN] = {0x30, 0x03, 0x02, 0x01, 0x00},
        [BC_CA_FALSE_EXPLICIT] = {0x30, 0x03, 0x01, 0x01, 0x00},
    };
    if (s->bc_mode != EXT_OMIT)
        add_ext_raw(x, OBJ_nid2obj(NID_basic_constraints), crit_of(s->bc_mode, 1), bc_der[s->bc],
                    s->bc == BC_CA_FALSE ? 2 : 5);
}

static void add_ku_eku(X509 *x, const tbs_spec *s)
{
    if (s->ku_mode != EXT_OMIT) {
        ASN1_OBJECT *alg = NULL; /* the profile's usage for the key's type (RFC 8813 3) */
        X509_PUBKEY_get0_param(&alg, NULL, NULL, NULL, X509_get_X509_PUBKEY(x));
        int rsa = alg && OBJ_obj2nid(alg) == NID_rsaEncryption;
        unsigned bits = s->ku ? s->ku : rsa ? KU_DS | KU_KE : KU_DS;
        ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new(); /* i2d keeps a named bit list minimal */
        assert_non_null(ku);
        for (int i = 0; i < 9; i++)
            if (bits & (1u << i))
                assert_int_equal(ASN1_BIT_STRING_set_bit(ku, i, 1), 1);
        add_ext_i2d(x, NID_key_usage, ku, crit_of(s->ku_mode, 1));
        ASN1_BIT_STRING_free(ku);
    }
    if (s->eku_mode == EXT_OMIT)
        return;
    EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
    assert_non_null(eku);
    char list[512];
    snprintf(list, sizeof(list), "%s", s->eku ? s->eku : "1.3.6.1.5.5.7.3.1,1.3.6.1.5.5.7.3.2");
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        ASN1_OBJECT *o = OBJ_txt2obj(t, 1);
        assert_non_null(o);
        assert_true(sk_ASN1_OBJECT_push(eku, o) > 0);
    }
    add_ext_i2d(x, NID_ext_key_usage, eku, crit_of(s->eku_mode, 0));
    sk_ASN1_OBJECT_pop_free(eku, ASN1_OBJECT_free);
}

static void add_key_ids(X509 *x, const tbs_spec *s, X509 *ca)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (s->ski_mode != EXT_OMIT) {
        const EVP_MD *h = s->ski == SKI_SHA256 ? EVP_sha256() : EVP_sha1();
        assert_int_equal(X509_pubkey_digest(x, h, md, &mdlen), 1);
        if (s->ski == SKI_OTHER_KEY) {
            X509 *other = X509_new();
            EVP_PKEY *k = EVP_EC_gen("P-256");
            assert_true(other && k && X509_set_pubkey(other, k) == 1);
            assert_int_equal(X509_pubkey_digest(other, EVP_sha1(), md, &mdlen), 1);
            EVP_PKEY_free(k);
            X509_free(other);
        } else if (s->ski == SKI_TRUNCATED) {
            mdlen = 8;
        }
        ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
        assert_non_null(ski);
        assert_int_equal(ASN1_OCTET_STRING_set(ski, md, (int)mdlen), 1);
        add_ext_i2d(x, NID_subject_key_identifier, ski, crit_of(s->ski_mode, 0));
        ASN1_OCTET_STRING_free(ski);
    }
    if (s->aki_mode == EXT_OMIT)
        return;
    AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
    assert_non_null(aki);
    if (s->aki == AKI_OTHER_KEYID) {
        uint8_t r[20];
        assert_int_equal(RAND_bytes(r, sizeof(r)), 1);
        aki->keyid = ASN1_OCTET_STRING_new();
        assert_non_null(aki->keyid);
        assert_int_equal(ASN1_OCTET_STRING_set(aki->keyid, r, sizeof(r)), 1);
    } else if (s->aki != AKI_ISSUER_SERIAL) {
        aki->keyid = ASN1_OCTET_STRING_dup(X509_get0_subject_key_id(ca));
        assert_non_null(aki->keyid);
    }
    if (s->aki == AKI_KEYID_ISSUER_SERIAL || s->aki == AKI_ISSUER_SERIAL) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        assert_non_null(g);
        X509_NAME *in = X509_NAME_dup(X509_get_issuer_name(ca));
        assert_non_null(in);
        GENERAL_NAME_set0_value(g, GEN_DIRNAME, in);
        aki->issuer = sk_GENERAL_NAME_new_null();
        assert_non_null(aki->issuer);
        assert_true(sk_GENERAL_NAME_push(aki->issuer, g) > 0);
        aki->serial = ASN1_INTEGER_dup(X509_get0_serialNumber(ca));
        assert_non_null(aki->serial);
    }
    add_ext_i2d(x, NID_authority_key_identifier, aki, crit_of(s->aki_mode, 0));
    AUTHORITY_KEYID_free(aki);
}

static void push_name(GENERAL_NAMES *gens, int type, const void *bytes, size_t n, int str_type)
{
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_STRING *v = ASN1_STRING_type_new(str_type);
    assert_non_null(g);
    assert_non_null(v);
    assert_int_equal(ASN1_STRING_set(v, bytes, (int)n), 1);
    GENERAL_NAME_set0_value(g, type, v);
    assert_true(sk_GENERAL_NAME_push(gens, g) > 0);
}

static void push_text(GENERAL_NAMES *gens, int type, const char *text)
{
    push_name(gens, type, text, strlen(text), V_ASN1_IA5STRING);
}

static GENERAL_NAMES *san_names(const tbs_spec *s)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    assert_non_null(gens);
    if (s->uri_empty)
        push_name(gens, GEN_URI, "", 0, V_ASN1_IA5STRING);
    else if (!s->uri || *s->uri || s->uri_len)
        push_name(gens, GEN_URI, s->uri ? s->uri : HF_SPIFFE_ID,
                  s->uri_len ? s->uri_len : strlen(s->uri ? s->uri : HF_SPIFFE_ID),
                  V_ASN1_IA5STRING);
    if (s->uri2)
        push_text(gens, GEN_URI, s->uri2);
    if (s->dns)
        push_text(gens, GEN_DNS, s->dns);
    if (s->ip) {
        uint8_t a[16];
        int v6 = strchr(s->ip, ':') != NULL;
        assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, s->ip, a), 1);
        push_name(gens, GEN_IPADD, a, v6 ? 16 : 4, V_ASN1_OCTET_STRING);
    }
    if (s->email)
        push_text(gens, GEN_EMAIL, s->email);
    if (s->dir_name) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        assert_non_null(g);
        GENERAL_NAME_set0_value(g, GEN_DIRNAME, name_cn("sleep"));
        assert_true(sk_GENERAL_NAME_push(gens, g) > 0);
    }
    if (s->other_name) { /* otherName { id-ms-upn, [0] UTF8String "sleep@cluster.local" } */
        GENERAL_NAME *g = GENERAL_NAME_new();
        ASN1_TYPE *v = ASN1_TYPE_new();
        ASN1_UTF8STRING *u = ASN1_UTF8STRING_new();
        assert_true(g && v && u && ASN1_STRING_set(u, "sleep@cluster.local", -1) == 1);
        ASN1_TYPE_set(v, V_ASN1_UTF8STRING, u);
        assert_int_equal(
            GENERAL_NAME_set0_othername(g, OBJ_txt2obj("1.3.6.1.4.1.311.20.2.3", 1), v), 1);
        assert_true(sk_GENERAL_NAME_push(gens, g) > 0);
    }
    return gens;
}

static void add_san_and_extra(X509 *x, const tbs_spec *s)
{
    if (s->san_mode != EXT_OMIT) {
        GENERAL_NAMES *gens = san_names(s);
        for (int i = 0; i < (s->san_twice ? 2 : 1); i++)
            add_ext_i2d(x, NID_subject_alt_name, gens, crit_of(s->san_mode, 1));
        GENERAL_NAMES_free(gens);
    }
    if (s->extra == EXTRA_PRIVATE_OID) {
        static const uint8_t null_der[] = {0x05, 0x00};
        ASN1_OBJECT *o = OBJ_txt2obj("1.3.6.1.4.1.55555.1.1", 1);
        assert_non_null(o);
        add_ext_raw(x, o, 0, null_der, sizeof(null_der));
        ASN1_OBJECT_free(o);
    } else if (s->extra == EXTRA_NAME_CONSTRAINTS) {
        /* NameConstraints { permittedSubtrees [0] { { dNSName "evil" } } }, critical
         * as RFC 5280 wants: well formed, so only the allowlist can refuse it. */
        static const uint8_t nc_der[] = {0x30, 0x0a, 0xa0, 0x08, 0x30, 0x06,
                                         0x82, 0x04, 'e',  'v',  'i',  'l'};
        add_ext_raw(x, OBJ_nid2obj(NID_name_constraints), 1, nc_der, sizeof(nc_der));
    }
}

/* ---- subject keys ------------------------------------------------------------------ */

/* One real RSA-2048 modulus per run: keygen is the slowest step of the builder. */
static BIGNUM *shared_modulus(void)
{
    static BIGNUM *n;
    if (!n) {
        EVP_PKEY *k = EVP_RSA_gen(2048);
        assert_non_null(k);
        assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_N, &n), 1);
        EVP_PKEY_free(k);
    }
    return n;
}

/* RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER } of any
 * (n, e), written out here: OpenSSL would not import some of them. */
static uint8_t *rsa_public_der(const BIGNUM *n, const BIGNUM *e, int *len)
{
    uint8_t *part[2] = {NULL, NULL};
    int plen[2];
    const BIGNUM *v[2] = {n, e};
    for (int i = 0; i < 2; i++) {
        ASN1_INTEGER *ai = BN_to_ASN1_INTEGER(v[i], NULL);
        assert_non_null(ai);
        plen[i] = i2d_ASN1_INTEGER(ai, &part[i]);
        assert_true(plen[i] > 0);
        ASN1_INTEGER_free(ai);
    }
    int body = plen[0] + plen[1], hdr = body < 128 ? 2 : body < 256 ? 3 : 4;
    uint8_t *der = OPENSSL_malloc((size_t)(hdr + body));
    assert_non_null(der);
    der[0] = 0x30;
    if (hdr == 2)
        der[1] = (uint8_t)body;
    else if (hdr == 3)
        der[1] = 0x81, der[2] = (uint8_t)body;
    else
        der[1] = 0x82, der[2] = (uint8_t)(body >> 8), der[3] = (uint8_t)body;
    memcpy(der + hdr, part[0], (size_t)plen[0]);
    memcpy(der + hdr + plen[0], part[1], (size_t)plen[1]);
    OPENSSL_free(part[0]);
    OPENSSL_free(part[1]);
    *len = hdr + body;
    return der;
}

/* Replaces x's subjectPublicKeyInfo with rsaEncryption over (n, e) per spec. */
static void set_rsa_key(X509 *x, const tbs_spec *s)
{
    BIGNUM *n = BN_new(), *e = BN_new();
    assert_true(n && e);
    if (s->rsa_bits) { /* a random odd number of exactly rsa_bits bits */
        assert_int_equal(BN_rand(n, s->rsa_bits, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ODD), 1);
    } else {
        assert_non_null(BN_copy(n, shared_modulus()));
        if (s->rsa_even_n)
            assert_int_equal(BN_add_word(n, 1), 1);
    }
    const char *ex = s->rsa_e && *s->rsa_e ? s->rsa_e : "010001";
    if (!strcmp(ex, "n+2")) {
        assert_non_null(BN_copy(e, n));
        assert_int_equal(BN_add_word(e, 2), 1);
    } else {
        assert_true(BN_hex2bn(&e, ex) > 0);
    }
    int len = 0;
    uint8_t *der = rsa_public_der(n, e, &len);
    assert_int_equal(X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), OBJ_nid2obj(NID_rsaEncryption),
                                            V_ASN1_NULL, NULL, der, len),
                     1);
    BN_free(n);
    BN_free(e);
}

/* Replaces x's subjectPublicKeyInfo with id-ecPublicKey over curve and these
 * point bytes, which OpenSSL would refuse to import as a key. */
static void set_raw_ec_point(X509 *x, int curve_nid, const uint8_t *pt, size_t n)
{
    uint8_t *copy = OPENSSL_memdup(pt, n);
    assert_non_null(copy);
    X509_PUBKEY *pk = X509_get_X509_PUBKEY(x);
    assert_int_equal(X509_PUBKEY_set0_param(pk, OBJ_nid2obj(NID_X9_62_id_ecPublicKey),
                                            V_ASN1_OBJECT, OBJ_nid2obj(curve_nid), copy, (int)n),
                     1);
}

/* The uncompressed point 04 || x || y of an EC key. */
static size_t ec_point(EVP_PKEY *k, uint8_t *out, size_t cap)
{
    size_t n = 0;
    assert_int_equal(
        EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, out, cap, &n), 1);
    assert_int_equal(out[0], 0x04);
    return n;
}

/* Sets x's key per spec; returns the key to free (NULL when borrowed). */
static EVP_PKEY *set_key(X509 *x, const tbs_spec *s)
{
    static const char *const gen[] = {[KEY_P384] = "P-384", [KEY_SECP256K1] = "secp256k1"};
    EVP_PKEY *k = NULL;
    if (s->key) {
        assert_int_equal(X509_set_pubkey(x, s->key), 1);
        return NULL;
    }
    if (s->key_kind == KEY_ED25519)
        k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    else if (s->key_kind == KEY_P384 || s->key_kind == KEY_SECP256K1)
        k = EVP_EC_gen(gen[s->key_kind]);
    else
        k = EVP_EC_gen("P-256");
    assert_non_null(k);
    assert_int_equal(X509_set_pubkey(x, k), 1);

    uint8_t pt[200];
    size_t n = 0;
    switch (s->key_kind) {
    case KEY_RSA: set_rsa_key(x, s); break;
    case KEY_P256_COMPRESSED:
        n = ec_point(k, pt, sizeof(pt));
        pt[0] = (uint8_t)(0x02 | (pt[64] & 1));
        set_raw_ec_point(x, NID_X9_62_prime256v1, pt, 33);
        break;
    case KEY_P256_HYBRID:
        n = ec_point(k, pt, sizeof(pt));
        pt[0] = (uint8_t)(0x06 | (pt[64] & 1));
        set_raw_ec_point(x, NID_X9_62_prime256v1, pt, n);
        break;
    case KEY_P256_OFF_CURVE:
        n = ec_point(k, pt, sizeof(pt));
        pt[64] ^= 1;
        set_raw_ec_point(x, NID_X9_62_prime256v1, pt, n);
        break;
    case KEY_P256_X_TOO_BIG:
        n = ec_point(k, pt, sizeof(pt));
        memset(pt + 1, 0xff, 32);
        set_raw_ec_point(x, NID_X9_62_prime256v1, pt, n);
        break;
    case KEY_P256_P384_POINT: {
        EVP_PKEY *big = EVP_EC_gen("P-384");
        assert_non_null(big);
        n = ec_point(big, pt, sizeof(pt));
        EVP_PKEY_free(big);
        set_raw_ec_point(x, NID_X9_62_prime256v1, pt, n);
        break;
    }
    default: break;
    }
    return k;
}

/* ---- the TBS ---------------------------------------------------------------------- */

uint8_t *hf_build_tbs(const tbs_spec *s, size_t *len)
{
    X509 *x = X509_new();
    assert_non_null(x);
    set_names_and_time(x, s, hf.ca);
    EVP_PKEY *key = set_key(x, s);
    add_bc(x, s);
    add_ku_eku(x, s);
    add_key_ids(x, s, hf.ca);
    add_san_and_extra(x, s);
    uint8_t *der = NULL;
    hsmca_err e;
    hsmca_code rc =
        certasm_tbs_der(x, s->sig_nid ? s->sig_nid : NID_ecdsa_with_SHA256, &der, len, &e);
    if (rc != HSMCA_OK)
        fail_msg("certasm_tbs_der: %s", e.msg);
    X509_free(x);
    EVP_PKEY_free(key);
    return der;
}

uint8_t *hf_valid_tbs(size_t *len)
{
    tbs_spec s = {0};
    return hf_build_tbs(&s, len);
}

void hf_tbs_new_serial(uint8_t *tbs, size_t len)
{
    /* SEQUENCE header, [0] { INTEGER 2 } (v3), then INTEGER serial. */
    static const uint8_t v3[] = {0xa0, 0x03, 0x02, 0x01, 0x02};
    assert_true(len > 4 && tbs[0] == 0x30);
    size_t at = 2 + ((tbs[1] & 0x80) ? (size_t)(tbs[1] & 0x7f) : 0);
    assert_true(at + sizeof(v3) + 2 < len);
    assert_memory_equal(tbs + at, v3, sizeof(v3));
    at += sizeof(v3);
    size_t n = tbs[at + 1];
    assert_true(tbs[at] == 0x02 && n >= 1 && n < 0x80 && at + 2 + n <= len);
    uint8_t *p = tbs + at + 2;
    assert_int_equal(RAND_bytes(p, (int)n), 1);
    p[0] = (uint8_t)((p[0] & 0x7f) | 0x01); /* positive, exactly n content octets */
}
