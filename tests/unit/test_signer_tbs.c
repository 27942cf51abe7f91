/* test_signer_tbs.c - the signer's TBS validator, serial set and rate limiter.
 *
 * TBS certificates are built here with OpenSSL (not with the front end's builder)
 * and then broken one field at a time; the hand-made non-DER cases splice bytes
 * into a valid TBS and recompute every enclosing length. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "policy_file.h"
#include "signer_tbs.h"

#define WORKLOAD_SAN "critical,URI:spiffe://cluster.local/ns/default/sa/sleep"
#define OMIT "-"
/* keyUsage as the profile fixes it for the subject key's type (RFC 8813 3). */
#define KU_FOR_KEY "for-key"
#define KU_EC "critical,digitalSignature"
#define KU_RSA "critical,digitalSignature,keyEncipherment"

static struct {
    int64_t now;
    EVP_PKEY *ca_key, *other_ca_key, *leaf_key, *p384_key, *rsa1024_key, *rsa_ca_key;
    X509 *ca, *other_ca, *rsa_ca;
    tbs_policy pol;
} g;

/* ---- building certificates ------------------------------------------------------- */

static void add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    if (!value || strcmp(value, OMIT) == 0)
        return;
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(x, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

/* An extension with arbitrary DER as its value (for encodings OpenSSL would not make). */
static X509_EXTENSION *raw_ext(const char *oid, int critical, const uint8_t *val, size_t n)
{
    ASN1_OBJECT *obj = OBJ_txt2obj(oid, 1);
    ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
    assert_non_null(obj);
    assert_int_equal(ASN1_OCTET_STRING_set(os, val, (int)n), 1);
    X509_EXTENSION *ext = X509_EXTENSION_create_by_OBJ(NULL, obj, critical, os);
    assert_non_null(ext);
    ASN1_OBJECT_free(obj);
    ASN1_OCTET_STRING_free(os);
    return ext;
}

static X509 *make_ca(EVP_PKEY *key, const char *cn, int64_t lifetime)
{
    X509 *x = X509_new();
    assert_non_null(x);
    assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"hsmca test", -1, -1,
                               0);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, n);
    ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(g.now - 3600));
    ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(g.now + lifetime));
    X509_set_pubkey(x, key);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(x, &ctx, NID_subject_key_identifier, "hash");
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    return x;
}

/* What a TBS is made of; tbs_opts_default() is the known-good workload leaf. */
typedef struct {
    X509 *ca;      /* issuer name and AKI source */
    int sig_nid;   /* inner signature algorithm */
    EVP_PKEY *key; /* subject public key */
    uint8_t serial[24];
    size_t serial_len;
    bool serial_negative;
    int version; /* X509_VERSION_* */
    int64_t nb, na;
    const char *bc, *ku, *eku, *ski, *aki, *san; /* OpenSSL conf values, OMIT to leave out */
    const char *subject_cn;
    X509_NAME *issuer;     /* overrides the CA subject */
    X509 *aki_from;        /* overrides the CA as the AKI source */
    X509_EXTENSION *extra; /* appended, then freed */
    int dup_nid;           /* this extension is added a second time */
} tbs_opts;

static tbs_opts tbs_opts_default(void)
{
    tbs_opts o = {
        .ca = g.ca,
        .sig_nid = NID_ecdsa_with_SHA256,
        .key = g.leaf_key,
        .serial_len = 16,
        .version = X509_VERSION_3,
        .nb = g.now - 120,
        .na = g.now + 3600,
        .bc = "critical,CA:FALSE",
        .ku = KU_FOR_KEY,
        .eku = "serverAuth,clientAuth",
        .ski = "hash",
        .aki = "keyid:always",
        .san = WORKLOAD_SAN,
    };
    for (size_t i = 0; i < o.serial_len; i++)
        o.serial[i] = (uint8_t)(0x31 + i); /* positive, minimal */
    return o;
}

static void set_serial(X509 *x, const tbs_opts *o)
{
    BIGNUM *bn = BN_bin2bn(o->serial, (int)o->serial_len, NULL);
    assert_non_null(bn);
    BN_set_negative(bn, o->serial_negative);
    ASN1_INTEGER *ai = BN_to_ASN1_INTEGER(bn, NULL);
    assert_non_null(ai);
    assert_int_equal(X509_set_serialNumber(x, ai), 1);
    ASN1_INTEGER_free(ai);
    BN_free(bn);
}

static uint8_t *build_tbs(tbs_opts *o, size_t *len)
{
    X509 *x = X509_new();
    assert_non_null(x);
    assert_int_equal(X509_set_version(x, o->version), 1);
    set_serial(x, o);
    X509_set_issuer_name(x, o->issuer ? o->issuer : X509_get_subject_name(o->ca));
    if (o->subject_cn)
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                   (const unsigned char *)o->subject_cn, -1, -1, 0);
    ASN1_TIME_set(X509_getm_notBefore(x), (time_t)o->nb);
    ASN1_TIME_set(X509_getm_notAfter(x), (time_t)o->na);
    X509_set_pubkey(x, o->key);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, o->aki_from ? o->aki_from : o->ca, x, NULL, NULL, 0);
    add_ext(x, &ctx, NID_basic_constraints, o->bc);
    add_ext(x, &ctx, NID_key_usage,
            strcmp(o->ku, KU_FOR_KEY) != 0                        ? o->ku
            : EVP_PKEY_get_base_id(o->key) == EVP_PKEY_RSA ? KU_RSA
                                                           : KU_EC);
    add_ext(x, &ctx, NID_ext_key_usage, o->eku);
    add_ext(x, &ctx, NID_subject_key_identifier, o->ski);
    add_ext(x, &ctx, NID_authority_key_identifier, o->aki);
    add_ext(x, &ctx, NID_subject_alt_name, o->san);
    if (o->extra) {
        assert_int_equal(X509_add_ext(x, o->extra, -1), 1);
        X509_EXTENSION_free(o->extra);
        o->extra = NULL;
    }
    if (o->dup_nid) {
        int at = X509_get_ext_by_NID(x, o->dup_nid, -1);
        assert_true(at >= 0);
        assert_int_equal(X509_add_ext(x, X509_get_ext(x, at), -1), 1);
    }
    int ptype = o->sig_nid == NID_sha256WithRSAEncryption ? V_ASN1_NULL : V_ASN1_UNDEF;
    X509_ALGOR *alg = (X509_ALGOR *)X509_get0_tbs_sigalg(x);
    assert_int_equal(X509_ALGOR_set0(alg, OBJ_nid2obj(o->sig_nid), ptype, NULL), 1);
    uint8_t *der = NULL;
    int n = i2d_re_X509_tbs(x, &der);
    assert_true(n > 0);
    X509_free(x);
    *len = (size_t)n;
    return der;
}

/* ---- hand-patching DER ----------------------------------------------------------- */

/* Header size and content length of the (valid, our own) TLV at d. */
static size_t t_hdr(const uint8_t *d, size_t *vlen)
{
    if (d[1] < 0x80) {
        *vlen = d[1];
        return 2;
    }
    size_t k = d[1] & 0x7f, v = 0;
    for (size_t i = 0; i < k; i++)
        v = (v << 8) | d[2 + i];
    *vlen = v;
    return 2 + k;
}

static size_t t_put_hdr(uint8_t *out, uint8_t tag, size_t len)
{
    out[0] = tag;
    if (len < 0x80) {
        out[1] = (uint8_t)len;
        return 2;
    }
    size_t k = 0;
    for (size_t v = len; v; v >>= 8)
        k++;
    out[1] = (uint8_t)(0x80 | k);
    for (size_t i = 0; i < k; i++)
        out[2 + i] = (uint8_t)(len >> (8 * (k - 1 - i)));
    return 2 + k;
}

/* A copy of the TLV at d with d[off, off+del) replaced by ins and the lengths of
 * every enclosing TLV recomputed (minimal form). Caller frees. */
static uint8_t *t_splice(const uint8_t *d, size_t off, size_t del, const uint8_t *ins,
                         size_t inslen, size_t *outlen)
{
    size_t vlen, h = t_hdr(d, &vlen);
    const uint8_t *v = d + h;
    assert_true(off >= h && off + del <= h + vlen);
    size_t voff = off - h, nvlen = 0;
    uint8_t *nv = NULL;
    for (size_t cs = 0; (d[0] & 0x20) && cs < vlen;) {
        size_t cvl, ch = t_hdr(v + cs, &cvl), ce = cs + ch + cvl;
        if (voff >= cs + ch && voff < ce && voff + del <= ce) { /* strictly inside a child */
            size_t clen;
            uint8_t *nc = t_splice(v + cs, voff - cs, del, ins, inslen, &clen);
            nvlen = vlen - (ce - cs) + clen;
            nv = malloc(nvlen);
            memcpy(nv, v, cs);
            memcpy(nv + cs, nc, clen);
            memcpy(nv + cs + clen, v + ce, vlen - ce);
            free(nc);
            break;
        }
        cs = ce;
    }
    if (!nv) {
        nvlen = vlen - del + inslen;
        nv = malloc(nvlen + 1);
        memcpy(nv, v, voff);
        memcpy(nv + voff, ins, inslen);
        memcpy(nv + voff + inslen, v + voff + del, vlen - voff - del);
    }
    uint8_t *out = malloc(nvlen + 8);
    size_t oh = t_put_hdr(out, d[0], nvlen);
    memcpy(out + oh, nv, nvlen);
    free(nv);
    *outlen = oh + nvlen;
    return out;
}

/* Offset and total size of the idx-th element inside the outer TBS SEQUENCE. */
static size_t t_field(const uint8_t *d, int idx, size_t *size)
{
    size_t vlen, off = t_hdr(d, &vlen);
    for (int i = 0;; i++) {
        size_t cvl, ch = t_hdr(d + off, &cvl);
        if (i == idx) {
            *size = ch + cvl;
            return off;
        }
        off += ch + cvl;
    }
}

static size_t t_find(const uint8_t *d, size_t n, const uint8_t *pat, size_t plen)
{
    const uint8_t *p = memmem(d, n, pat, plen);
    assert_non_null(p);
    return (size_t)(p - d);
}

/* ---- checking ------------------------------------------------------------------ */

static void expect_refusal_as(const uint8_t *der, size_t len, profile_id prof,
                              const tbs_policy *pol, hsmca_code code, const char *msg)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    tbs_facts f;
    hsmca_code rc = tbs_validate(der, len, prof, pol, g.now, &f, &e);
    if (rc != code || strncmp(e.msg, msg, strlen(msg)) != 0)
        fail_msg("expected %s \"%s\", got %s \"%s\"", hsmca_code_name(code), msg,
                 hsmca_code_name(rc), e.msg);
    assert_int_equal(e.code, code);
    assert_int_equal(f.serial_len, 0); /* no facts from a refused TBS */
}

static void expect_refusal(const uint8_t *der, size_t len, hsmca_code code, const char *msg)
{
    expect_refusal_as(der, len, PROFILE_WORKLOAD, &g.pol, code, msg);
}

/* Builds o into a TBS and expects the workload validator to refuse it with msg. */
static void refuse_opts(tbs_opts *o, hsmca_code code, const char *msg)
{
    size_t len;
    uint8_t *der = build_tbs(o, &len);
    expect_refusal(der, len, code, msg);
    OPENSSL_free(der);
}

static void expect_ok(const uint8_t *der, size_t len, profile_id prof, const tbs_policy *pol,
                      tbs_facts *f)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = tbs_validate(der, len, prof, pol, g.now, f, &e);
    if (rc != HSMCA_OK)
        fail_msg("expected OK, got %s \"%s\"", hsmca_code_name(rc), e.msg);
}

/* ---- fixtures ------------------------------------------------------------------ */

static int group_setup(void **state)
{
    g.now = (int64_t)time(NULL);
    g.ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g.other_ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g.leaf_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    g.p384_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    g.rsa1024_key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    g.rsa_ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    if (!g.ca_key || !g.other_ca_key || !g.leaf_key || !g.p384_key || !g.rsa1024_key ||
        !g.rsa_ca_key)
        return -1;
    g.ca = make_ca(g.ca_key, "root", 30 * 86400);
    g.other_ca = make_ca(g.other_ca_key, "root", 30 * 86400); /* same name, other key */
    g.rsa_ca = make_ca(g.rsa_ca_key, "rsa root", 30 * 86400);
    tbs_policy p = {
        .ca_cert = g.ca,
        .ca_sig_nid = NID_ecdsa_with_SHA256,
        .max_ttl = 86400,
        .serving_max_ttl = 7 * 86400,
        .trust_domains = {"cluster.local", "other.example"},
        .n_trust_domains = 2,
        .serving_dns = {"hsmca.hsmca-system.svc", "localhost"},
        .n_serving_dns = 2,
        .serving_ips = {"127.0.0.1", "::1"},
        .n_serving_ips = 2,
    };
    g.pol = p;
    return 0;
}

static int group_teardown(void **state)
{
    X509_free(g.ca);
    X509_free(g.other_ca);
    X509_free(g.rsa_ca);
    EVP_PKEY_free(g.ca_key);
    EVP_PKEY_free(g.other_ca_key);
    EVP_PKEY_free(g.leaf_key);
    EVP_PKEY_free(g.p384_key);
    EVP_PKEY_free(g.rsa1024_key);
    EVP_PKEY_free(g.rsa_ca_key);
    return 0;
}

/* ---- accepted ------------------------------------------------------------------ */

static void test_accept_workload(void **state)
{
    tbs_opts o = tbs_opts_default();
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    tbs_facts f;
    expect_ok(der, len, PROFILE_WORKLOAD, &g.pol, &f);
    assert_int_equal(f.serial_len, 16);
    assert_memory_equal(f.serial, o.serial, 16);
    assert_int_equal(f.not_before, o.nb);
    assert_int_equal(f.not_after, o.na);
    assert_string_equal(f.sans, "uri:spiffe://cluster.local/ns/default/sa/sleep");
    assert_int_equal(f.n_sans, 1);
    /* NULL facts are allowed. */
    hsmca_err e;
    assert_int_equal(tbs_validate(der, len, PROFILE_WORKLOAD, &g.pol, g.now, NULL, &e),
                     HSMCA_OK);
    OPENSSL_free(der);
}

static void test_accept_variants(void **state)
{
    tbs_facts f;
    size_t len;
    uint8_t *der;
    /* P-384 key, digitalSignature alone, EKU in the other order, second trust
     * domain, longest validity, edge notBefore. */
    tbs_opts o = tbs_opts_default();
    o.key = g.p384_key;
    o.ku = "critical,digitalSignature";
    o.eku = "clientAuth,serverAuth";
    o.san = "critical,URI:spiffe://other.example/a/b";
    o.nb = g.now - 300;
    o.na = o.nb + 86400;
    der = build_tbs(&o, &len);
    expect_ok(der, len, PROFILE_WORKLOAD, &g.pol, &f);
    OPENSSL_free(der);
    /* 20-octet serial counting the 0x00 that keeps it positive; notBefore at now+60. */
    o = tbs_opts_default();
    o.serial_len = 19;
    memset(o.serial, 0xa5, 19);
    o.nb = g.now + 60;
    o.na = g.now + 120;
    der = build_tbs(&o, &len);
    expect_ok(der, len, PROFILE_WORKLOAD, &g.pol, &f);
    assert_int_equal(f.serial_len, 20);
    assert_int_equal(f.serial[0], 0);
    OPENSSL_free(der);
}

static void test_accept_rsa_ca(void **state)
{
    tbs_policy pol = g.pol;
    pol.ca_cert = g.rsa_ca;
    pol.ca_sig_nid = NID_sha256WithRSAEncryption;
    tbs_opts o = tbs_opts_default();
    o.ca = g.rsa_ca;
    o.sig_nid = NID_sha256WithRSAEncryption;
    o.key = g.rsa_ca_key; /* an RSA-2048 subject key too */
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    tbs_facts f;
    expect_ok(der, len, PROFILE_WORKLOAD, &pol, &f);
    /* The same TBS against the EC CA: wrong algorithm first. */
    expect_refusal(der, len, HSMCA_EPERM, "invariant 1: signature algorithm must equal");
    OPENSSL_free(der);
    /* sha256WithRSAEncryption without its NULL parameter is refused. */
    o.sig_nid = NID_sha256WithRSAEncryption;
    der = build_tbs(&o, &len);
    size_t at =
        t_find(der, len,
               (const uint8_t *)"\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0b\x05\x00", 15);
    size_t n2;
    uint8_t *bad = t_splice(
        der, at + 2, 13, (const uint8_t *)"\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x0b", 11, &n2);
    expect_refusal_as(bad, n2, PROFILE_WORKLOAD, &pol, HSMCA_EPERM,
                      "invariant 1: signature algorithm must equal");
    free(bad);
    OPENSSL_free(der);
}

/* ---- invariant 1 --------------------------------------------------------------- */

static void test_inv1(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.sig_nid = NID_ecdsa_with_SHA384;
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: signature algorithm must equal");

    o = tbs_opts_default();
    o.version = X509_VERSION_1;
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: version must be v3");
    o.version = X509_VERSION_2;
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: version must be v3");

    o = tbs_opts_default();
    X509_NAME *other = X509_NAME_new();
    X509_NAME_add_entry_by_txt(other, "CN", MBSTRING_ASC, (const unsigned char *)"root", -1, -1, 0);
    o.issuer = other;
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: issuer must equal the CA subject");
    X509_NAME_free(other);

    o = tbs_opts_default();
    o.aki_from = g.other_ca;
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: authorityKeyIdentifier must equal the CA's SKI");
    o = tbs_opts_default();
    o.aki = "keyid:always,issuer:always";
    refuse_opts(&o, HSMCA_EPERM,
                "invariant 1: authorityKeyIdentifier must hold only keyIdentifier");
    o = tbs_opts_default();
    o.aki = OMIT;
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: authorityKeyIdentifier missing");
    o = tbs_opts_default();
    o.aki = "critical,keyid:always";
    refuse_opts(&o, HSMCA_EPERM, "invariant 1: authorityKeyIdentifier must not be critical");

    /* issuerUniqueID just before the extensions. */
    o = tbs_opts_default();
    size_t len, fsz, n2;
    uint8_t *der = build_tbs(&o, &len);
    size_t at = t_field(der, 7, &fsz);
    assert_int_equal(der[at], 0xa3);
    uint8_t *bad = t_splice(der, at, 0, (const uint8_t *)"\x81\x02\x00\x01", 4, &n2);
    expect_refusal(bad, n2, HSMCA_EPERM, "invariant 1: issuer/subject unique IDs not allowed");
    free(bad);
    OPENSSL_free(der);
}

/* ---- invariant 2 --------------------------------------------------------------- */

static void test_inv2(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.nb = g.now - 301;
    refuse_opts(&o, HSMCA_EPERM, "invariant 2: notBefore more than 300 s in the past");
    o.nb = g.now + 61;
    refuse_opts(&o, HSMCA_EPERM, "invariant 2: notBefore more than 60 s in the future");
    o.nb = g.now - 120;
    o.na = o.nb + 86401;
    refuse_opts(&o, HSMCA_EPERM, "invariant 2: validity 86401 s exceeds the profile max TTL");
    o.na = o.nb;
    refuse_opts(&o, HSMCA_EPERM, "invariant 2: notAfter must be after notBefore");

    /* Within a (generous) TTL but past the CA's own notAfter (now + 30 days). */
    tbs_policy pol = g.pol;
    pol.max_ttl = 90 * 86400;
    o = tbs_opts_default();
    o.na = g.now + 31 * 86400;
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    expect_refusal_as(der, len, PROFILE_WORKLOAD, &pol, HSMCA_EPERM,
                      "invariant 2: notAfter beyond the CA notAfter");
    OPENSSL_free(der);
}

static void test_inv2_time_encoding(void **state)
{
    tbs_opts o = tbs_opts_default();
    size_t len, fsz, n2;
    uint8_t *der = build_tbs(&o, &len);
    size_t at = t_field(der, 4, &fsz); /* validity */
    assert_int_equal(der[at + 2], 0x17);
    char ut[14];
    memcpy(ut, der + at + 4, 13);
    ut[13] = '\0';

    /* The same instant as GeneralizedTime, which RFC 5280 reserves for 2050 on. */
    uint8_t gt[17] = {0x18, 15, '2', '0'};
    memcpy(gt + 4, ut, 13);
    uint8_t *bad = t_splice(der, at + 2, 15, gt, sizeof(gt), &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 2: notBefore: GeneralizedTime before 2050");
    free(bad);

    /* No seconds (YYMMDDHHMMZ) is valid BER UTCTime but not RFC 5280. */
    uint8_t nosec[13] = {0x17, 11};
    memcpy(nosec + 2, ut, 10);
    nosec[12] = 'Z';
    bad = t_splice(der, at + 2, 15, nosec, sizeof(nosec), &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 2: notBefore: not UTCTime");
    free(bad);

    /* Month 13. */
    uint8_t m13[15] = {0x17, 13};
    memcpy(m13 + 2, ut, 13);
    m13[4] = '1';
    m13[5] = '3';
    bad = t_splice(der, at + 2, 15, m13, sizeof(m13), &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 2: notBefore: malformed time");
    free(bad);
    OPENSSL_free(der);
}

/* ---- invariant 3 --------------------------------------------------------------- */

static void test_inv3_basic_constraints(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.bc = "critical,CA:TRUE";
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: basicConstraints must be CA:FALSE");
    o.bc = "CA:FALSE";
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: basicConstraints must be critical");
    o.bc = OMIT;
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: basicConstraints missing");

    o.bc = OMIT;
    o.extra = raw_ext("2.5.29.19", 1, (const uint8_t *)"\x30\x03\x02\x01\x00", 5);
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: basicConstraints pathLen not allowed");
    o.extra = raw_ext("2.5.29.19", 1, (const uint8_t *)"\x30\x03\x01\x01\x00", 5);
    refuse_opts(&o, HSMCA_EINVAL, "invariant 3: basicConstraints cA FALSE encoded (not DER)");
    o.extra = raw_ext("2.5.29.19", 1, (const uint8_t *)"\x30\x03\x01\x01\x01", 5);
    refuse_opts(&o, HSMCA_EINVAL, "invariant 3: basicConstraints cA: not DER");
    o.extra = raw_ext("2.5.29.19", 1, (const uint8_t *)"\x30\x00\x00", 3);
    refuse_opts(&o, HSMCA_EINVAL, "invariant 3: basicConstraints: not DER");
}

static void test_inv3_usages(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.ku = "critical,digitalSignature,keyCertSign";
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: keyUsage allows only digitalSignature");
    o.ku = "critical,digitalSignature,decipherOnly";
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: keyUsage allows only digitalSignature");
    /* digitalSignature|keyEncipherment with a trailing zero bit kept: not DER. */
    o.ku = OMIT;
    o.extra = raw_ext("2.5.29.15", 1, (const uint8_t *)"\x03\x02\x04\xa0", 4);
    refuse_opts(&o, HSMCA_EINVAL, "invariant 3: keyUsage BIT STRING not minimal DER");
    o.extra = raw_ext("2.5.29.15", 1, (const uint8_t *)"\x03\x02\x05\xa1", 4);
    refuse_opts(&o, HSMCA_EINVAL, "invariant 3: keyUsage BIT STRING not minimal DER");

    /* One usage per key type (RFC 8813 3): keyEncipherment on an EC key (P-256, P-384) is
     * refused, and an RSA key must have it. */
    o = tbs_opts_default();
    o.ku = KU_RSA;
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: keyUsage of an EC key must be digitalSignature "
                                 "alone (RFC 8813: no keyEncipherment)");
    o.key = g.p384_key;
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: keyUsage of an EC key must be digitalSignature");
    o = tbs_opts_default();
    o.key = g.rsa_ca_key;
    o.ku = KU_EC;
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: keyUsage of an RSA key must be digitalSignature, "
                                 "keyEncipherment");

    o = tbs_opts_default();
    o.eku = "serverAuth,codeSigning";
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: extKeyUsage allows only serverAuth, clientAuth");
    o.eku = "clientAuth,clientAuth";
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: extKeyUsage purpose repeated");

    /* An X509-SVID: KU and EKU are required, not merely checked when present
     * (a leaf with neither is good for any purpose). */
    static const struct {
        const char *ku, *eku, *ski, *msg;
    } svid[] = {
        {OMIT, NULL, NULL, "invariant 3: keyUsage missing"},
        {NULL, OMIT, NULL, "invariant 3: extKeyUsage missing"},
        {OMIT, OMIT, NULL, "invariant 3: "},
        {NULL, NULL, OMIT, "invariant 3: subjectKeyIdentifier missing"},
        {"digitalSignature", NULL, NULL, "invariant 3: keyUsage must be critical"},
        {"critical,keyEncipherment", NULL, NULL, "invariant 3: keyUsage must have digitalSignature"},
        {NULL, "serverAuth", NULL, "invariant 3: extKeyUsage must have both serverAuth and clientAuth"},
        {NULL, "clientAuth", NULL, "invariant 3: extKeyUsage must have both serverAuth and clientAuth"},
        {NULL, "critical,serverAuth,clientAuth", NULL, "invariant 3: extKeyUsage must not be critical"},
        /* SKI bound to the key: another key's hash, or a made-up value. */
        {NULL, NULL, "0102030405060708090a0b0c0d0e0f1011121314",
         "invariant 3: subjectKeyIdentifier must be the SHA-1 of the subject key"},
    };
    for (size_t i = 0; i < sizeof(svid) / sizeof(svid[0]); i++) {
        o = tbs_opts_default();
        if (svid[i].ku)
            o.ku = svid[i].ku;
        if (svid[i].eku)
            o.eku = svid[i].eku;
        if (svid[i].ski)
            o.ski = svid[i].ski;
        refuse_opts(&o, HSMCA_EPERM, svid[i].msg);
    }
}

static void test_inv3_extension_list(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.extra =
        X509V3_EXT_conf_nid(NULL, NULL, NID_name_constraints, "critical,permitted;DNS:example.com");
    assert_non_null(o.extra);
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: extension 2.5.29.30 not in the allowlist");
    o.extra = raw_ext("1.3.6.1.4.1.55555.1", 0, (const uint8_t *)"\x05\x00", 2);
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: extension 1.3.6.1.4.1.55555.1 not in the allowlist");
    o.dup_nid = NID_ext_key_usage;
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: duplicate extension extKeyUsage");
    o.dup_nid = NID_subject_alt_name;
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: duplicate extension subjectAltName");
    o = tbs_opts_default();
    o.ski = OMIT;
    o.extra = raw_ext("2.5.29.14", 1, (const uint8_t *)"\x04\x02\x01\x02", 4);
    refuse_opts(&o, HSMCA_EPERM, "invariant 3: subjectKeyIdentifier must not be critical");

    /* critical FALSE spelled out (DEFAULT must be omitted in DER). */
    o = tbs_opts_default();
    size_t len, n2;
    uint8_t *der = build_tbs(&o, &len);
    size_t at = t_find(der, len, (const uint8_t *)"\x06\x03\x55\x1d\x25", 5); /* EKU id */
    uint8_t *bad = t_splice(der, at + 5, 0, (const uint8_t *)"\x01\x01\x00", 3, &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 3: critical FALSE encoded (not DER)");
    free(bad);
    /* critical as 0x01 (BER TRUE, not DER). */
    bad = t_splice(der, at + 5, 0, (const uint8_t *)"\x01\x01\x01", 3, &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 3: extension critical: not DER");
    free(bad);
    OPENSSL_free(der);
}

/* ---- invariant 4 --------------------------------------------------------------- */

static void test_inv4_workload_san(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.san = "critical,URI:spiffe://evil.example/ns/default/sa/sleep";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: SPIFFE ID: trust domain is not a configured one");
    o.san = "critical,URI:spiffe://cluster.local.evil/ns/default/sa/sleep";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: SPIFFE ID: trust domain is not a configured one");
    o.san = "critical,URI:spiffe://cluster.local/ns/default/sa/sleep,DNS:sleep.default.svc";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: DNS SAN not granted to workload identities");
    o.san = "critical,URI:spiffe://cluster.local/ns/default/sa/sleep,email:a@b.example";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: SAN type [1] not allowed");
    o.san = "URI:spiffe://cluster.local/ns/default/sa/sleep";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: subjectAltName must be critical");
    o.san = OMIT;
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: subjectAltName missing");
    o.san = "critical,URI:https://cluster.local/ns/default/sa/sleep";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: SPIFFE ID: scheme must be spiffe://");
    o.san = "critical,URI:spiffe://cluster.local/ns/../sa/sleep";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: SPIFFE ID: path segment 2 is '..'");
    /* The signer runs the one SPIFFE-ID validator (policy_spiffe.h, tested in
     * test_policy_spiffe.c); a few of its rules, to show it is the one in use. */
    static const struct {
        const char *san, *msg;
    } bad[] = {
        {"critical,URI:spiffe://cluster.local/ns/%2e%2e/sa/x",
         "invariant 4: SPIFFE ID: percent-encoding not allowed"},
        {"critical,URI:spiffe://cluster.local/ns/a?x=1",
         "invariant 4: SPIFFE ID: query or fragment not allowed"},
        {"critical,URI:spiffe://cluster.local/ns/a#f",
         "invariant 4: SPIFFE ID: query or fragment not allowed"},
        {"critical,URI:spiffe://cluster.local/", "invariant 4: SPIFFE ID: path segment 1 is empty"},
        {"critical,URI:spiffe://cluster.local", "invariant 4: SPIFFE ID: no path"},
        {"critical,URI:spiffe://cluster.local/ns//sa", "invariant 4: SPIFFE ID: path segment 2 is empty"},
        {"critical,URI:spiffe://cluster.local/ns/./x", "invariant 4: SPIFFE ID: path segment 2 is '.'"},
        {"critical,URI:spiffe://cluster.local/ns/a*b/sa/x",
         "invariant 4: SPIFFE ID: path byte 0x2a at offset 27"},
        {"critical,URI:spiffe://cluster.local/ns/default/sa/a=b",
         "invariant 4: SPIFFE ID: path byte 0x3d"},
        {"critical,URI:spiffe://cluster.local/ns/default/sa/a~b",
         "invariant 4: SPIFFE ID: path byte 0x7e"},
        {"critical,URI:spiffe://user@cluster.local/ns/x", "invariant 4: SPIFFE ID: userinfo"},
        {"critical,URI:spiffe://cluster.local:443/ns/x", "invariant 4: SPIFFE ID: port"},
        {"critical,URI:spiffe://Cluster.local/ns/x",
         "invariant 4: SPIFFE ID: trust domain must be lowercase"},
        {"critical,URI:spiffe://cluster.local/ns/a,URI:spiffe://cluster.local/ns/b",
         "invariant 4: an X509-SVID has exactly one URI SAN"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.san = bad[i].san;
        refuse_opts(&o, HSMCA_EPERM, bad[i].msg);
    }
    /* "a..b" is a valid segment (only "." and ".." are not): the policy, the
     * front end and the signer agree on it. */
    o.san = "critical,URI:spiffe://cluster.local/ns/default/sa/a..b";
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    tbs_facts f;
    expect_ok(der, len, PROFILE_WORKLOAD, &g.pol, &f);
    OPENSSL_free(der);

    o = tbs_opts_default();
    o.subject_cn = "sleep";
    refuse_opts(&o, HSMCA_EPERM, "invariant 4: subject must be empty");
}

static void test_serving_profile(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.san = "critical,DNS:hsmca.hsmca-system.svc,DNS:LocalHost,IP:127.0.0.1,IP:::1";
    o.na = g.now + 2 * 86400;
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    tbs_facts f;
    expect_ok(der, len, PROFILE_SERVING, &g.pol, &f);
    assert_string_equal(f.sans, "dns:hsmca.hsmca-system.svc,dns:localhost,ip:127.0.0.1,ip:::1");
    assert_int_equal(f.n_sans, 4);
    /* The same TBS is no workload certificate. */
    expect_refusal(der, len, HSMCA_EPERM, "invariant 2: validity");
    OPENSSL_free(der);
    o.na = g.now + 3600;
    der = build_tbs(&o, &len);
    expect_refusal(der, len, HSMCA_EPERM, "invariant 4: DNS SAN not granted to workload identities");
    OPENSSL_free(der);

    struct {
        const char *san;
        const char *msg;
    } bad[] = {
        {"critical,DNS:evil.example", "invariant 4: DNS SAN not in the serving list"},
        {"critical,IP:10.0.0.1", "invariant 4: IP SAN not in the serving list"},
        {"critical,IP:::2", "invariant 4: IP SAN not in the serving list"},
        {"critical,DNS:localhost,URI:spiffe://cluster.local/ns/a/sa/b",
         "invariant 4: URI SAN not allowed in the serving profile"},
        {"DNS:localhost", "invariant 4: subjectAltName must be critical"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.san = bad[i].san;
        der = build_tbs(&o, &len);
        expect_refusal_as(der, len, PROFILE_SERVING, &g.pol, HSMCA_EPERM, bad[i].msg);
        OPENSSL_free(der);
    }
    o.san = "critical,DNS:localhost";
    o.na = g.now + 8 * 86400;
    der = build_tbs(&o, &len);
    expect_refusal_as(der, len, PROFILE_SERVING, &g.pol, HSMCA_EPERM,
                      "invariant 2: validity 691320 s exceeds the profile max TTL 604800 s");
    OPENSSL_free(der);
}

/* ---- invariant 5 --------------------------------------------------------------- */

static void test_inv5_key(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.key = g.rsa1024_key;
    refuse_opts(&o, HSMCA_EPERM, "invariant 5: RSA key of 1024 bits (2048-8192 allowed)");

    EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    assert_non_null(ed);
    o.key = ed;
    refuse_opts(&o, HSMCA_EPERM, "invariant 5: key must be RSA 2048-8192 or EC P-256/P-384");
    EVP_PKEY_free(ed);

    /* A P-256 point moved off the curve. */
    o = tbs_opts_default();
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    uint8_t *pt = NULL;
    size_t ptlen = EVP_PKEY_get1_encoded_public_key(g.leaf_key, &pt);
    assert_int_equal(ptlen, 65);
    size_t at = t_find(der, len, pt, ptlen);
    der[at + 64] ^= 0x01;
    expect_refusal(der, len, HSMCA_EPERM, "invariant 5: EC point is not on the curve");
    /* A compressed point is refused before OpenSSL sees it. */
    der[at + 64] ^= 0x01;
    size_t n2;
    uint8_t comp[36] = {0x03, 34, 0x00, (uint8_t)(0x02 | (pt[64] & 1))};
    memcpy(comp + 4, pt + 1, 32);
    uint8_t *bad = t_splice(der, at - 3, 68, comp, sizeof(comp), &n2);
    expect_refusal(bad, n2, HSMCA_EPERM, "invariant 5: EC point must be uncompressed");
    free(bad);
    OPENSSL_free(pt);
    OPENSSL_free(der);
}

/* RSA exponents: odd, 65537 <= e <= 2^31-1 (what Go's crypto/x509 accepts); an
 * exponent >= n used to be signed and Go clients then rejected the certificate. */
/* The RSA-2048 test key with its exponent replaced (hex, big-endian): OpenSSL builds the SPKI and the SKI from it as it is. */
static EVP_PKEY *rsa_with_e(const char *e_hex)
{
    BIGNUM *n = NULL, *e = NULL;
    assert_int_equal(EVP_PKEY_get_bn_param(g.rsa_ca_key, "n", &n), 1);
    assert_true(BN_hex2bn(&e, e_hex) > 0);
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    assert_int_equal(OSSL_PARAM_BLD_push_BN(b, "n", n), 1);
    assert_int_equal(OSSL_PARAM_BLD_push_BN(b, "e", e), 1);
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    EVP_PKEY *k = NULL;
    assert_int_equal(EVP_PKEY_fromdata_init(ctx), 1);
    assert_int_equal(EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params), 1);
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(b);
    BN_free(n);
    BN_free(e);
    return k;
}

/* RSA exponents: odd, 65537 <= e <= 2^31-1 (what Go's crypto/x509 accepts); an
 * exponent >= n used to be signed and Go clients then rejected the certificate. */
static void test_inv5_rsa_exponent(void **state)
{
    static const struct {
        const char *e, *msg; /* msg NULL: accepted */
    } cases[] = {
        {"3", "invariant 5: RSA exponent must be in [65537, 2^31-1]"},
        {"10000", "invariant 5: RSA exponent must be odd"},
        {"10001", NULL},
        {"7FFFFFFF", NULL},
        {"80000001", "invariant 5: RSA exponent must be in [65537, 2^31-1]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tbs_opts o = tbs_opts_default();
        o.key = rsa_with_e(cases[i].e);
        size_t len;
        uint8_t *der = build_tbs(&o, &len);
        tbs_facts f;
        if (cases[i].msg)
            expect_refusal(der, len, HSMCA_EPERM, cases[i].msg);
        else
            expect_ok(der, len, PROFILE_WORKLOAD, &g.pol, &f);
        OPENSSL_free(der);
        EVP_PKEY_free(o.key);
    }
    /* An exponent above the modulus: n itself plus 2 (odd, and far over 2^31). */
    BIGNUM *n = NULL;
    assert_int_equal(EVP_PKEY_get_bn_param(g.rsa_ca_key, "n", &n), 1);
    assert_int_equal(BN_add_word(n, 2), 1);
    char *hex = BN_bn2hex(n);
    tbs_opts o = tbs_opts_default();
    o.key = rsa_with_e(hex);
    size_t len;
    uint8_t *der = build_tbs(&o, &len);
    expect_refusal(der, len, HSMCA_EPERM, "invariant 5: RSA exponent must be in [65537, 2^31-1]");
    OPENSSL_free(der);
    OPENSSL_free(hex);
    BN_free(n);
    EVP_PKEY_free(o.key);
}

/* ---- invariant 6 --------------------------------------------------------------- */

static void test_inv6_serial(void **state)
{
    tbs_opts o = tbs_opts_default();
    o.serial_len = 4;
    refuse_opts(&o, HSMCA_EPERM, "invariant 6: serial of 4 octets (8-20 allowed)");
    o.serial_len = 21;
    memset(o.serial, 0x11, 21);
    refuse_opts(&o, HSMCA_EPERM, "invariant 6: serial of 21 octets (8-20 allowed)");
    o.serial_len = 20;
    memset(o.serial, 0x81, 20); /* 20 bytes plus the 0x00 for the sign: 21 */
    refuse_opts(&o, HSMCA_EPERM, "invariant 6: serial of 21 octets (8-20 allowed)");
    o = tbs_opts_default();
    o.serial_negative = true;
    refuse_opts(&o, HSMCA_EPERM, "invariant 6: serial must be positive");
    o.serial_negative = false;
    o.serial_len = 1;
    o.serial[0] = 0;
    refuse_opts(&o, HSMCA_EPERM, "invariant 6: serial must be positive");

    /* A padded (non-minimal) INTEGER. */
    o = tbs_opts_default();
    size_t len, fsz, n2;
    uint8_t *der = build_tbs(&o, &len);
    size_t at = t_field(der, 1, &fsz);
    uint8_t ser[19] = {0x02, 17, 0x00};
    memcpy(ser + 3, o.serial, 16);
    uint8_t *bad = t_splice(der, at, fsz, ser, sizeof(ser), &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 6: serialNumber: not DER");
    free(bad);
    OPENSSL_free(der);
}

/* ---- strict DER at the top --------------------------------------------------- */

static void test_der_framing(void **state)
{
    tbs_opts o = tbs_opts_default();
    size_t len, n2, fsz;
    uint8_t *der = build_tbs(&o, &len);
    assert_true(len > 255 && der[0] == 0x30 && der[1] == 0x82);

    uint8_t *buf = malloc(PROFILE_TBS_MAX + 8);
    memcpy(buf, der, len);
    buf[len] = 0x00;
    expect_refusal(buf, len + 1, HSMCA_EINVAL, "invariant 0: TBSCertificate: not DER");
    expect_refusal(der, len - 1, HSMCA_EINVAL, "invariant 0: TBSCertificate: not DER");
    expect_refusal(der, len / 2, HSMCA_EINVAL, "invariant 0: TBSCertificate: not DER");
    expect_refusal(der, 1, HSMCA_EINVAL, "invariant 0: TBSCertificate: not DER");
    expect_refusal(der, 0, HSMCA_EINVAL, "invariant 0: empty TBS");
    expect_refusal(NULL, 10, HSMCA_EINVAL, "invariant 0: empty TBS");
    memset(buf + len, 0, PROFILE_TBS_MAX + 8 - len);
    expect_refusal(buf, PROFILE_TBS_MAX + 1, HSMCA_EINVAL, "invariant 0: TBS of 16385 bytes exceeds");

    /* Outer length in long form with a leading zero octet: 30 83 00 hi lo. */
    buf[0] = 0x30;
    buf[1] = 0x83;
    buf[2] = 0x00;
    memcpy(buf + 3, der + 2, len - 2);
    expect_refusal(buf, len + 1, HSMCA_EINVAL,
                   "invariant 0: TBSCertificate: not DER");
    /* Indefinite length with end-of-contents. */
    buf[0] = 0x30;
    buf[1] = 0x80;
    memcpy(buf + 2, der + 4, len - 4);
    buf[len - 2] = buf[len - 1] = 0;
    expect_refusal(buf, len, HSMCA_EINVAL, "invariant 0: TBSCertificate: not DER");
    free(buf);

    /* The version's length in long form although it is below 128: A0 81 03. */
    uint8_t *bad = t_splice(der, 4, 2, (const uint8_t *)"\xa0\x81\x03", 3, &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 1: version: not DER");
    free(bad);
    /* Something after the extensions. */
    size_t at = t_field(der, 7, &fsz);
    bad = t_splice(der, at + fsz, 0, (const uint8_t *)"\x05\x00", 2, &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 0: TBSCertificate (bytes after the extensions): not DER");
    free(bad);
    /* Trailing bytes inside the extension value. */
    at = t_find(der, len, (const uint8_t *)"\x06\x03\x55\x1d\x13\x01\x01\xff\x04\x02\x30\x00", 12);
    bad = t_splice(der, at + 10, 2, (const uint8_t *)"\x30\x00\x00", 3, &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 3: basicConstraints: not DER");
    free(bad);
    /* Subject as a SET instead of a SEQUENCE. */
    at = t_field(der, 5, &fsz);
    bad = t_splice(der, at, fsz, (const uint8_t *)"\x31\x00", 2, &n2);
    expect_refusal(bad, n2, HSMCA_EINVAL, "invariant 4: subject: not DER");
    free(bad);
    OPENSSL_free(der);

    /* No usable policy is an internal error, not an acceptance. */
    tbs_policy none = {0};
    hsmca_err e;
    assert_int_equal(
        tbs_validate((const uint8_t *)"\x30\x00", 2, PROFILE_WORKLOAD, &none, g.now, NULL, &e),
        HSMCA_EINTERNAL);
    assert_int_equal(
        tbs_validate((const uint8_t *)"\x30\x00", 2, (profile_id)7, &g.pol, g.now, NULL, &e),
        HSMCA_EPERM);
}

/* ---- the policy file (issuance.policy_file) ------------------------------------- */

/* The signer's own copy of the policy: DNS SANs granted per identity, wherever they
 * stand in the SAN, other rules named with their invariant; the serving profile
 * keeps its own list. */
static void test_policy_file_rules(void **state)
{
    static const char text[] = "denied_namespaces: [kube-system]\n"
                               "namespace_max_ttl: {payments: 1h}\n"
                               "dns_names: {sleep.default: [sleep.example.com]}\n"
                               "key_types: {ec_curves: [P-256]}\n";
    policy_set *pf = NULL;
    hsmca_err e;
    assert_int_equal(policy_file_parse("p.yaml", text, strlen(text), &pf, &e), HSMCA_OK);
    tbs_policy pol = g.pol;
    pol.policy_file = pf;
    tbs_opts o = tbs_opts_default();
    size_t len;
    tbs_facts f;
    o.san = "critical,DNS:sleep.example.com,URI:spiffe://cluster.local/ns/default/sa/sleep";
    uint8_t *der = build_tbs(&o, &len);
    expect_ok(der, len, PROFILE_WORKLOAD, &pol, &f);
    assert_string_equal(f.sans,
                        "uri:spiffe://cluster.local/ns/default/sa/sleep,dns:sleep.example.com");
    assert_int_equal(f.n_sans, 2);
    /* Without the policy file the same TBS is refused as before. */
    expect_refusal(der, len, HSMCA_EPERM,
                   "invariant 4: DNS SAN not granted to workload identities");
    OPENSSL_free(der);
    struct {
        const char *san;
        long ttl;
        const char *msg;
    } bad[] = {
        {"critical,URI:spiffe://cluster.local/ns/default/sa/sleep,DNS:evil.example", 3600,
         "invariant 4: policy rule dns_names: DNS SAN 'evil.example' is not granted to "
         "sleep.default"},
        {"critical,DNS:sleep.example.com,URI:spiffe://cluster.local/ns/default/sa/other", 3600,
         "invariant 4: policy rule dns_names: DNS SAN 'sleep.example.com' is not granted to "
         "other.default"},
        {"critical,DNS:sleep.example.com", 3600,
         "invariant 4: an X509-SVID has exactly one URI SAN"},
        {"critical,URI:spiffe://cluster.local/ns/kube-system/sa/sleep", 3600,
         "invariant 4: policy rule denied_namespaces: namespace 'kube-system'"},
        {"critical,URI:spiffe://cluster.local/ns/payments/sa/api", 3600 + 1,
         "invariant 2: policy rule namespace_max_ttl: validity 3721 s exceeds 3600 s"},
        {"critical,URI:spiffe://cluster.local/app", 3600,
         "invariant 4: policy: URI SAN spiffe://cluster.local/app is not"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.san = bad[i].san;
        o.na = g.now + bad[i].ttl;
        der = build_tbs(&o, &len);
        expect_refusal_as(der, len, PROFILE_WORKLOAD, &pol, HSMCA_EPERM, bad[i].msg);
        OPENSSL_free(der);
    }
    o.san = "critical,URI:spiffe://cluster.local/ns/payments/sa/api";
    o.na = g.now + 3600 - 120;
    der = build_tbs(&o, &len);
    expect_ok(der, len, PROFILE_WORKLOAD, &pol, &f);
    OPENSSL_free(der);
    /* key_types: P-384 is left out. */
    o = tbs_opts_default();
    o.key = g.p384_key;
    der = build_tbs(&o, &len);
    expect_refusal_as(der, len, PROFILE_WORKLOAD, &pol, HSMCA_EPERM,
                      "invariant 5: policy rule key_types: EC P-384 keys are not allowed");
    expect_ok(der, len, PROFILE_WORKLOAD, &g.pol, &f);
    OPENSSL_free(der);
    /* A name the policy grants a workload is no serving name. */
    o = tbs_opts_default();
    o.san = "critical,DNS:sleep.example.com";
    der = build_tbs(&o, &len);
    expect_refusal_as(der, len, PROFILE_SERVING, &pol, HSMCA_EPERM,
                      "invariant 4: DNS SAN not in the serving list");
    OPENSSL_free(der);
    policy_set_free(pf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_workload),
        cmocka_unit_test(test_accept_variants),
        cmocka_unit_test(test_accept_rsa_ca),
        cmocka_unit_test(test_inv1),
        cmocka_unit_test(test_inv2),
        cmocka_unit_test(test_inv2_time_encoding),
        cmocka_unit_test(test_inv3_basic_constraints),
        cmocka_unit_test(test_inv3_usages),
        cmocka_unit_test(test_inv3_extension_list),
        cmocka_unit_test(test_inv4_workload_san),
        cmocka_unit_test(test_policy_file_rules),
        cmocka_unit_test(test_serving_profile),
        cmocka_unit_test(test_inv5_key),
        cmocka_unit_test(test_inv5_rsa_exponent),
        cmocka_unit_test(test_inv6_serial),
        cmocka_unit_test(test_der_framing),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
