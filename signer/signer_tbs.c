/* signer_tbs.c - the signer's strict TBSCertificate validator (DESIGN.md §2).
 *
 * The front end may be compromised, so every byte of the TBS is either parsed
 * here with the strict DER reader (signer_der.h) or compared byte for byte with
 * an encoding the signer trusts (issuer name, algorithm identifiers). OpenSSL
 * is used only as a second opinion on the public key. Serial uniqueness and
 * the rate limit live in signer_limits.c. */
#include "signer_tbs.h"

#include <pthread.h>

#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/ec.h>
#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include "signer_der.h"

/* State of one validation: the policy, the clock, and what was seen so far. */
typedef struct {
    const tbs_policy *pol;
    tbs_profile profile;
    int64_t now;
    tbs_facts *facts;
    unsigned seen; /* bit per extension kind (tbs_ext_kind) */
} tbs_ctx;

/* The extension allowlist (invariant 3). Every id-ce OID is 2.5.29.x = 55 1D x. */
typedef enum { EXT_SKI, EXT_KU, EXT_SAN, EXT_BC, EXT_AKI, EXT_EKU, EXT_COUNT } tbs_ext_kind;

typedef hsmca_code (*tbs_ext_fn)(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);

static hsmca_code tbs_ext_ski(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);
static hsmca_code tbs_ext_ku(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);
static hsmca_code tbs_ext_san(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);
static hsmca_code tbs_ext_bc(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);
static hsmca_code tbs_ext_aki(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);
static hsmca_code tbs_ext_eku(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e);

static const struct {
    uint8_t last_arc;
    const char *name;
    tbs_ext_fn check;
} tbs_exts[EXT_COUNT] = {
    [EXT_SKI] = {0x0e, "subjectKeyIdentifier", tbs_ext_ski},
    [EXT_KU] = {0x0f, "keyUsage", tbs_ext_ku},
    [EXT_SAN] = {0x11, "subjectAltName", tbs_ext_san},
    [EXT_BC] = {0x13, "basicConstraints", tbs_ext_bc},
    [EXT_AKI] = {0x23, "authorityKeyIdentifier", tbs_ext_aki},
    [EXT_EKU] = {0x25, "extKeyUsage", tbs_ext_eku},
};

/* ---- invariant 1: version, signature algorithm, issuer ---------------------------- */

/* The exact AlgorithmIdentifier DER for each CA signature algorithm: RFC 5758 says
 * ECDSA has no parameters, RFC 4055 says RSA PKCS#1 v1.5 carries NULL. */
static const uint8_t ALG_ECDSA_SHA256[] = {0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86,
                                           0x48, 0xce, 0x3d, 0x04, 0x03, 0x02};
static const uint8_t ALG_ECDSA_SHA384[] = {0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86,
                                           0x48, 0xce, 0x3d, 0x04, 0x03, 0x03};
static const uint8_t ALG_RSA_SHA256[] = {0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86,
                                         0xf7, 0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00};

static hsmca_code tbs_check_version(der_cur *in, hsmca_err *e)
{
    in->inv = 1;
    static const uint8_t V3[] = {0x02, 0x01, 0x02};
    if (der_peek_tag(in) != DER_CTX_CONS(0))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 1: version must be v3 (version absent)");
    der_tlv ver;
    hsmca_code rc = der_expect(in, DER_CTX_CONS(0), &ver, "version", e);
    if (rc != HSMCA_OK)
        return rc;
    der_cur vc = der_cur_of(&ver, 1);
    der_tlv v;
    if ((rc = der_expect(&vc, DER_INTEGER, &v, "version", e)) != HSMCA_OK ||
        (rc = der_check_integer(&vc, &v, "version", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "version", e)) != HSMCA_OK)
        return rc;
    if (!der_raw_eq(&v, V3, sizeof(V3)))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 1: version must be v3");
    return HSMCA_OK;
}

static hsmca_code tbs_check_sigalg(const tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    in->inv = 1;
    const uint8_t *want;
    size_t want_len;
    switch (c->pol->ca_sig_nid) {
    case NID_ecdsa_with_SHA256:
        want = ALG_ECDSA_SHA256;
        want_len = sizeof(ALG_ECDSA_SHA256);
        break;
    case NID_ecdsa_with_SHA384:
        want = ALG_ECDSA_SHA384;
        want_len = sizeof(ALG_ECDSA_SHA384);
        break;
    case NID_sha256WithRSAEncryption:
        want = ALG_RSA_SHA256;
        want_len = sizeof(ALG_RSA_SHA256);
        break;
    default:
        return hsmca_fail(e, HSMCA_EINTERNAL, "tbs policy: unsupported CA signature algorithm");
    }
    der_tlv alg;
    hsmca_code rc = der_expect(in, DER_SEQUENCE, &alg, "signature algorithm", e);
    if (rc != HSMCA_OK)
        return rc;
    if (!der_raw_eq(&alg, want, want_len))
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 1: signature algorithm must equal the CA key's (%s)",
                          OBJ_nid2sn(c->pol->ca_sig_nid));
    return HSMCA_OK;
}

/* The issuer must be the CA's subject exactly as the CA certificate encodes it, so
 * the Name need not be parsed here: the trusted encoding is the only one accepted. */
static hsmca_code tbs_check_issuer(const tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    in->inv = 1;
    der_tlv iss;
    hsmca_code rc = der_expect(in, DER_SEQUENCE, &iss, "issuer", e);
    if (rc != HSMCA_OK)
        return rc;
    uint8_t *want = NULL;
    int n = i2d_X509_NAME(X509_get_subject_name(c->pol->ca_cert), &want);
    if (n <= 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "tbs policy: cannot encode the CA subject");
    bool same = der_raw_eq(&iss, want, (size_t)n);
    OPENSSL_free(want);
    if (!same)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 1: issuer must equal the CA subject");
    return HSMCA_OK;
}

/* ---- invariant 2: validity ------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (year >= 1). */
static int64_t tbs_days_from_civil(int64_t y, int m, int d)
{
    static const int cum[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    int64_t py = y - 1;
    int64_t days = py * 365 + py / 4 - py / 100 + py / 400; /* days before Jan 1 of y */
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    days += cum[m - 1] + (m > 2 && leap) + (d - 1);
    return days - 719162; /* days from 0001-01-01 to 1970-01-01 */
}

static int tbs_days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return dim[m - 1] + (m == 2 && leap);
}

/* n decimal digits at s, or -1 when any is not a digit. */
static int tbs_digits(const uint8_t *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* RFC 5280 4.1.2.5: UTCTime YYMMDDHHMMSSZ before 2050, GeneralizedTime
 * YYYYMMDDHHMMSSZ from 2050 on; seconds present, no fractions, always Z. */
static hsmca_code tbs_parse_time(der_cur *in, const char *what, int64_t *out, hsmca_err *e)
{
    der_tlv t;
    hsmca_code rc = der_next(in, &t, what, e);
    if (rc != HSMCA_OK)
        return rc;
    int64_t year;
    const uint8_t *s = t.val;
    if (t.tag == DER_UTCTIME && t.len == 13) {
        int yy = tbs_digits(s, 2);
        year = yy < 0 ? -1 : (yy >= 50 ? 1900 + yy : 2000 + yy);
        s += 2;
    } else if (t.tag == DER_GENTIME && t.len == 15) {
        year = tbs_digits(s, 4);
        if (year >= 0 && year < 2050)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "invariant 2: %s: GeneralizedTime before 2050 (must be UTCTime)",
                              what);
        s += 4;
    } else {
        return hsmca_fail(e, HSMCA_EINVAL,
                          "invariant 2: %s: not UTCTime YYMMDDHHMMSSZ or GeneralizedTime "
                          "YYYYMMDDHHMMSSZ",
                          what);
    }
    int mo = tbs_digits(s, 2), d = tbs_digits(s + 2, 2), h = tbs_digits(s + 4, 2);
    int mi = tbs_digits(s + 6, 2), sec = tbs_digits(s + 8, 2);
    if (year < 0 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 ||
        sec > 59 || s[10] != 'Z' || d > tbs_days_in_month(year, mo))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 2: %s: malformed time", what);
    *out = tbs_days_from_civil(year, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    return HSMCA_OK;
}

static hsmca_code tbs_ca_not_after(const tbs_ctx *c, int64_t *out, hsmca_err *e)
{
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(c->pol->ca_cert), &tm) != 1)
        return hsmca_fail(e, HSMCA_EINTERNAL, "tbs policy: cannot read the CA notAfter");
    *out = tbs_days_from_civil((int64_t)tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday) * 86400 +
           tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
    return HSMCA_OK;
}

static hsmca_code tbs_check_validity(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    in->inv = 2;
    der_tlv val;
    int64_t nb = 0, na = 0, ca_na = 0;
    hsmca_code rc = der_expect(in, DER_SEQUENCE, &val, "validity", e);
    if (rc != HSMCA_OK)
        return rc;
    der_cur vc = der_cur_of(&val, 2);
    if ((rc = tbs_parse_time(&vc, "notBefore", &nb, e)) != HSMCA_OK ||
        (rc = tbs_parse_time(&vc, "notAfter", &na, e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "validity", e)) != HSMCA_OK ||
        (rc = tbs_ca_not_after(c, &ca_na, e)) != HSMCA_OK)
        return rc;
    uint32_t max = c->profile == TBS_PROFILE_SERVING ? c->pol->serving_max_ttl : c->pol->max_ttl;
    if (nb < c->now - 300)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 2: notBefore more than 5 min in the past");
    if (nb > c->now + 60)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 2: notBefore more than 1 min in the future");
    if (na <= nb)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 2: notAfter must be after notBefore");
    if (na - nb > (int64_t)max)
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 2: validity %lld s exceeds the profile max TTL %u s",
                          (long long)(na - nb), (unsigned)max);
    if (na > ca_na)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 2: notAfter beyond the CA notAfter");
    c->facts->not_before = nb;
    c->facts->not_after = na;
    return HSMCA_OK;
}

/* ---- invariant 5: subject public key --------------------------------------------- */

static const uint8_t SPKI_RSA[] = {0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86,
                                   0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00};
static const uint8_t SPKI_P256[] = {0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48,
                                    0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
                                    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const uint8_t SPKI_P384[] = {0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d,
                                    0x02, 0x01, 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};

/* RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER } (RFC 8017). */
static hsmca_code tbs_check_rsa_key(const uint8_t *k, size_t klen, hsmca_err *e)
{
    der_cur kc = der_cur_init(k, klen, 5);
    der_tlv seq, n, x;
    hsmca_code rc;
    if ((rc = der_expect(&kc, DER_SEQUENCE, &seq, "RSA key", e)) != HSMCA_OK ||
        (rc = der_expect_end(&kc, "RSA key", e)) != HSMCA_OK)
        return rc;
    der_cur sc = der_cur_of(&seq, 5);
    if ((rc = der_expect(&sc, DER_INTEGER, &n, "RSA modulus", e)) != HSMCA_OK ||
        (rc = der_check_integer(&sc, &n, "RSA modulus", e)) != HSMCA_OK ||
        (rc = der_expect(&sc, DER_INTEGER, &x, "RSA exponent", e)) != HSMCA_OK ||
        (rc = der_check_integer(&sc, &x, "RSA exponent", e)) != HSMCA_OK ||
        (rc = der_expect_end(&sc, "RSA key", e)) != HSMCA_OK)
        return rc;
    if ((n.val[0] & 0x80) || (x.val[0] & 0x80))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 5: RSA modulus and exponent must be positive");
    const uint8_t *m = n.val;
    size_t mlen = n.len;
    if (mlen > 1 && m[0] == 0) {
        m++;
        mlen--;
    }
    size_t bits = mlen * 8;
    for (uint8_t top = m[0]; bits > 0 && !(top & 0x80); top <<= 1)
        bits--;
    if (bits < 2048 || bits > 8192)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 5: RSA key of %zu bits (2048-8192 allowed)",
                          bits);
    if (!(m[mlen - 1] & 1))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 5: RSA modulus must be odd");
    if (!(x.val[x.len - 1] & 1) || (x.len == 1 && x.val[0] < 3))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 5: RSA exponent must be odd and >= 3");
    return HSMCA_OK;
}

/* Our DER walk has already pinned the algorithm bytes and the point's form; what
 * is left for EC is that the point lies on the curve (with 0x04 it is not the
 * point at infinity, and P-256/P-384 have cofactor 1, so on the curve means in
 * the right subgroup). The groups are built once: OpenSSL's generic key decoder
 * (d2i_PUBKEY) costs more CPU than the token's signature. */
static EC_GROUP *tbs_groups[2];
static pthread_once_t tbs_groups_once = PTHREAD_ONCE_INIT;

static void tbs_groups_init(void)
{
    tbs_groups[0] = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    tbs_groups[1] = EC_GROUP_new_by_curve_name(NID_secp384r1);
}

static hsmca_code tbs_check_ec_point(int p384, const uint8_t *k, size_t klen, hsmca_err *e)
{
    pthread_once(&tbs_groups_once, tbs_groups_init);
    const EC_GROUP *g = tbs_groups[p384];
    EC_POINT *pt = g ? EC_POINT_new(g) : NULL;
    int ok = pt && EC_POINT_oct2point(g, pt, k, klen, NULL) == 1 &&
             EC_POINT_is_on_curve(g, pt, NULL) == 1 && !EC_POINT_is_at_infinity(g, pt);
    EC_POINT_free(pt);
    if (!g)
        return hsmca_fail(e, HSMCA_EINTERNAL, "invariant 5: no EC group");
    return ok ? HSMCA_OK
              : hsmca_fail(e, HSMCA_EPERM, "invariant 5: subject public key fails the key check");
}

static hsmca_code tbs_check_spki(der_cur *in, hsmca_err *e)
{
    in->inv = 5;
    der_tlv spki, alg, bits;
    hsmca_code rc = der_expect(in, DER_SEQUENCE, &spki, "subjectPublicKeyInfo", e);
    if (rc != HSMCA_OK)
        return rc;
    der_cur sc = der_cur_of(&spki, 5);
    if ((rc = der_expect(&sc, DER_SEQUENCE, &alg, "key algorithm", e)) != HSMCA_OK ||
        (rc = der_expect(&sc, DER_BIT_STRING, &bits, "subjectPublicKey", e)) != HSMCA_OK ||
        (rc = der_expect_end(&sc, "subjectPublicKeyInfo", e)) != HSMCA_OK)
        return rc;
    if (bits.len < 2 || bits.val[0] != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 5: subjectPublicKey BIT STRING malformed");
    const uint8_t *k = bits.val + 1;
    size_t klen = bits.len - 1;
    if (der_raw_eq(&alg, SPKI_RSA, sizeof(SPKI_RSA))) {
        rc = tbs_check_rsa_key(k, klen, e);
    } else if (der_raw_eq(&alg, SPKI_P256, sizeof(SPKI_P256)) ||
               der_raw_eq(&alg, SPKI_P384, sizeof(SPKI_P384))) {
        /* Uncompressed points only (RFC 5480 makes them the one MUST). */
        int p384 = alg.raw_len != sizeof(SPKI_P256);
        if (klen != (p384 ? 97u : 65u) || k[0] != 0x04)
            return hsmca_fail(e, HSMCA_EPERM, "invariant 5: EC point must be uncompressed");
        rc = tbs_check_ec_point(p384, k, klen, e);
    } else {
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 5: key must be RSA 2048-8192 or EC P-256/P-384");
    }
    return rc;
}

/* ---- invariant 6: serial --------------------------------------------------------- */

static hsmca_code tbs_check_serial(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    in->inv = 6;
    der_tlv s;
    hsmca_code rc;
    if ((rc = der_expect(in, DER_INTEGER, &s, "serialNumber", e)) != HSMCA_OK ||
        (rc = der_check_integer(in, &s, "serialNumber", e)) != HSMCA_OK)
        return rc;
    if ((s.val[0] & 0x80) || (s.len == 1 && s.val[0] == 0))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 6: serial must be positive");
    /* RFC 5280 caps at 20 octets, counting a leading 0x00. */
    if (s.len < 8 || s.len > 20)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 6: serial of %zu octets (8-20 allowed)",
                          s.len);
    memcpy(c->facts->serial, s.val, s.len);
    c->facts->serial_len = s.len;
    return HSMCA_OK;
}

/* ---- invariant 3 (and 1, 4): extensions ------------------------------------------ */

static hsmca_code tbs_ext_bc(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e)
{
    der_cur vc = der_cur_of(val, 3);
    der_tlv seq, f;
    hsmca_code rc;
    if ((rc = der_expect(&vc, DER_SEQUENCE, &seq, "basicConstraints", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "basicConstraints", e)) != HSMCA_OK)
        return rc;
    der_cur sc = der_cur_of(&seq, 3);
    if (der_peek_tag(&sc) == DER_BOOLEAN) {
        bool ca;
        if ((rc = der_next(&sc, &f, "basicConstraints cA", e)) != HSMCA_OK ||
            (rc = der_read_bool(&sc, &f, &ca, "basicConstraints cA", e)) != HSMCA_OK)
            return rc;
        if (!ca) /* DEFAULT FALSE must be omitted in DER */
            return hsmca_fail(e, HSMCA_EINVAL,
                              "invariant 3: basicConstraints cA FALSE encoded (not DER)");
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: basicConstraints must be CA:FALSE");
    }
    if (der_peek_tag(&sc) == DER_INTEGER)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: basicConstraints pathLen not allowed");
    if ((rc = der_expect_end(&sc, "basicConstraints", e)) != HSMCA_OK)
        return rc;
    if (!critical)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: basicConstraints must be critical");
    return HSMCA_OK;
}

/* keyUsage: a named BIT STRING, so DER drops trailing zero bits (X.690 11.2.2). */
static hsmca_code tbs_ext_ku(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e)
{
    der_cur vc = der_cur_of(val, 3);
    der_tlv b;
    hsmca_code rc;
    if ((rc = der_expect(&vc, DER_BIT_STRING, &b, "keyUsage", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "keyUsage", e)) != HSMCA_OK)
        return rc;
    if (b.len < 2 || b.val[0] > 7)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 3: keyUsage BIT STRING empty or malformed");
    uint8_t unused = b.val[0], last = b.val[b.len - 1];
    if ((last & ((1u << unused) - 1)) != 0 || !((last >> unused) & 1))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 3: keyUsage BIT STRING not minimal DER");
    /* digitalSignature is bit 0 (0x80), keyEncipherment bit 2 (0x20). */
    if (b.len != 2 || (b.val[1] & ~0xa0u) != 0)
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 3: keyUsage allows only digitalSignature, keyEncipherment");
    return HSMCA_OK;
}

static hsmca_code tbs_ext_eku(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e)
{
    /* id-kp-serverAuth 1.3.6.1.5.5.7.3.1, id-kp-clientAuth 1.3.6.1.5.5.7.3.2 */
    static const uint8_t KP[] = {0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03};
    der_cur vc = der_cur_of(val, 3);
    der_tlv seq, oid;
    hsmca_code rc;
    if ((rc = der_expect(&vc, DER_SEQUENCE, &seq, "extKeyUsage", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "extKeyUsage", e)) != HSMCA_OK)
        return rc;
    der_cur sc = der_cur_of(&seq, 3);
    if (der_at_end(&sc))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 3: extKeyUsage empty");
    unsigned seen = 0;
    while (!der_at_end(&sc)) {
        if ((rc = der_expect(&sc, DER_OID, &oid, "extKeyUsage purpose", e)) != HSMCA_OK ||
            (rc = der_check_oid(&sc, &oid, "extKeyUsage purpose", e)) != HSMCA_OK)
            return rc;
        if (oid.len != sizeof(KP) + 1 || memcmp(oid.val, KP, sizeof(KP)) != 0 ||
            (oid.val[sizeof(KP)] != 1 && oid.val[sizeof(KP)] != 2))
            return hsmca_fail(e, HSMCA_EPERM,
                              "invariant 3: extKeyUsage allows only serverAuth, clientAuth");
        unsigned bit = 1u << oid.val[sizeof(KP)];
        if (seen & bit)
            return hsmca_fail(e, HSMCA_EPERM, "invariant 3: extKeyUsage purpose repeated");
        seen |= bit;
    }
    return HSMCA_OK;
}

static hsmca_code tbs_ext_ski(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e)
{
    der_cur vc = der_cur_of(val, 3);
    der_tlv id;
    hsmca_code rc;
    if ((rc = der_expect(&vc, DER_OCTET_STRING, &id, "subjectKeyIdentifier", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "subjectKeyIdentifier", e)) != HSMCA_OK)
        return rc;
    if (id.len < 1 || id.len > 64)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: subjectKeyIdentifier of bad length");
    if (critical) /* RFC 5280 4.2.1.2 */
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: subjectKeyIdentifier must not be critical");
    return HSMCA_OK;
}

/* AKI must be exactly SEQUENCE { [0] keyIdentifier } holding the CA's SKI. */
static hsmca_code tbs_ext_aki(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e)
{
    der_cur vc = der_cur_of(val, 1);
    der_tlv seq, kid;
    hsmca_code rc;
    if ((rc = der_expect(&vc, DER_SEQUENCE, &seq, "authorityKeyIdentifier", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "authorityKeyIdentifier", e)) != HSMCA_OK)
        return rc;
    der_cur sc = der_cur_of(&seq, 1);
    if (der_peek_tag(&sc) != DER_CTX(0))
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 1: authorityKeyIdentifier must hold "
                          "only keyIdentifier");
    if ((rc = der_next(&sc, &kid, "authorityKeyIdentifier", e)) != HSMCA_OK)
        return rc;
    if (!der_at_end(&sc))
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 1: authorityKeyIdentifier must hold "
                          "only keyIdentifier");
    const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(c->pol->ca_cert);
    if (!ski)
        return hsmca_fail(e, HSMCA_EINTERNAL, "tbs policy: CA certificate has no SKI");
    if (!der_val_eq(&kid, ASN1_STRING_get0_data(ski), (size_t)ASN1_STRING_length(ski)))
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 1: authorityKeyIdentifier must equal the CA's SKI");
    if (critical) /* RFC 5280 4.2.1.1 */
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 1: authorityKeyIdentifier must not be critical");
    return HSMCA_OK;
}

/* ---- invariant 4: subject alternative names -------------------------------------- */

static bool tbs_printable(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    return true;
}

static void tbs_note_san(tbs_ctx *c, const char *s, size_t n)
{
    if (c->facts->first_san[0] != '\0')
        return;
    if (n >= sizeof(c->facts->first_san))
        n = sizeof(c->facts->first_san) - 1;
    memcpy(c->facts->first_san, s, n);
    c->facts->first_san[n] = '\0';
}

/* spiffe://<trust domain>/<path>: the trust domain one we serve, the path made of
 * non-empty segments, nothing that a later consumer might decode or normalise. */
static hsmca_code tbs_san_uri(tbs_ctx *c, const der_tlv *t, hsmca_err *e)
{
    static const char PFX[] = "spiffe://";
    const size_t pfx = sizeof(PFX) - 1;
    const char *u = (const char *)t->val;
    size_t n = t->len;
    if (n == 0 || n > 2048 || !tbs_printable(t->val, n) || memchr(u, '%', n) || memchr(u, '?', n) ||
        memchr(u, '#', n) || memchr(u, '\\', n))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: URI SAN has forbidden characters");
    if (n <= pfx || memcmp(u, PFX, pfx) != 0)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: URI SAN is not a SPIFFE ID");
    const char *td = u + pfx;
    const char *slash = memchr(td, '/', n - pfx);
    if (!slash || slash == td || slash + 1 == u + n)
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 4: SPIFFE ID needs a trust domain and a non-empty path");
    size_t tdlen = (size_t)(slash - td);
    bool ok = false;
    for (int i = 0; i < c->pol->n_trust_domains && i < TBS_MAX_NAMES; i++) {
        const char *want = c->pol->trust_domains[i];
        if (want && strlen(want) == tdlen && memcmp(want, td, tdlen) == 0)
            ok = true;
    }
    if (!ok)
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 4: SPIFFE ID trust domain not a configured one");
    const char *end = u + n;
    if (memmem(slash, (size_t)(end - slash), "..", 2))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: SPIFFE ID path contains '..'");
    for (const char *p = slash; p < end;) {
        const char *seg = p + 1;
        const char *next = seg < end ? memchr(seg, '/', (size_t)(end - seg)) : NULL;
        if (!next)
            next = end;
        size_t sl = (size_t)(next - seg);
        if (sl == 0 || (sl == 1 && seg[0] == '.'))
            return hsmca_fail(e, HSMCA_EPERM,
                              "invariant 4: SPIFFE ID path has an empty or '.' segment");
        p = next;
    }
    tbs_note_san(c, u, n);
    return HSMCA_OK;
}

static hsmca_code tbs_san_dns(tbs_ctx *c, const der_tlv *t, hsmca_err *e)
{
    if (t->len == 0 || t->len > 253 || !tbs_printable(t->val, t->len))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: DNS SAN malformed");
    for (int i = 0; i < c->pol->n_serving_dns && i < TBS_MAX_NAMES; i++) {
        const char *want = c->pol->serving_dns[i];
        if (want && strlen(want) == t->len &&
            strncasecmp(want, (const char *)t->val, t->len) == 0) {
            tbs_note_san(c, (const char *)t->val, t->len);
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EPERM, "invariant 4: DNS SAN not in the serving list");
}

static hsmca_code tbs_san_ip(tbs_ctx *c, const der_tlv *t, hsmca_err *e)
{
    if (t->len != 4 && t->len != 16)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: IP SAN must be 4 or 16 octets");
    int af = t->len == 4 ? AF_INET : AF_INET6;
    for (int i = 0; i < c->pol->n_serving_ips && i < TBS_MAX_NAMES; i++) {
        uint8_t want[16];
        const char *txt = c->pol->serving_ips[i];
        if (txt && inet_pton(af, txt, want) == 1 && memcmp(want, t->val, t->len) == 0) {
            char buf[INET6_ADDRSTRLEN];
            if (inet_ntop(af, t->val, buf, sizeof(buf)))
                tbs_note_san(c, buf, strlen(buf));
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EPERM, "invariant 4: IP SAN not in the serving list");
}

static hsmca_code tbs_ext_san(tbs_ctx *c, const der_tlv *val, bool critical, hsmca_err *e)
{
    der_cur vc = der_cur_of(val, 4);
    der_tlv seq, gn;
    hsmca_code rc;
    if ((rc = der_expect(&vc, DER_SEQUENCE, &seq, "subjectAltName", e)) != HSMCA_OK ||
        (rc = der_expect_end(&vc, "subjectAltName", e)) != HSMCA_OK)
        return rc;
    der_cur sc = der_cur_of(&seq, 4);
    if (der_at_end(&sc))
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 4: subjectAltName empty");
    bool serving = c->profile == TBS_PROFILE_SERVING;
    while (!der_at_end(&sc)) {
        if ((rc = der_next(&sc, &gn, "GeneralName", e)) != HSMCA_OK)
            return rc;
        if (gn.tag == DER_CTX(6) && !serving)
            rc = tbs_san_uri(c, &gn, e);
        else if (gn.tag == DER_CTX(2) && serving)
            rc = tbs_san_dns(c, &gn, e);
        else if (gn.tag == DER_CTX(7) && serving)
            rc = tbs_san_ip(c, &gn, e);
        else
            rc = hsmca_fail(e, HSMCA_EPERM,
                            "invariant 4: SAN type [%u] not allowed in the %s profile",
                            (unsigned)(gn.tag & 0x1f), serving ? "serving" : "workload");
        if (rc != HSMCA_OK)
            return rc;
    }
    /* The subject is always empty (tbs_check_subject), so RFC 5280 4.2.1.6 applies. */
    if (!critical)
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 4: subjectAltName must be critical with an empty subject");
    return HSMCA_OK;
}

/* ---- the extension list ---------------------------------------------------------- */

/* Extension ::= SEQUENCE { extnID OID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING } */
static hsmca_code tbs_check_one_ext(tbs_ctx *c, der_cur *list, hsmca_err *e)
{
    der_tlv ext, oid, f, val;
    hsmca_code rc;
    if ((rc = der_expect(list, DER_SEQUENCE, &ext, "extension", e)) != HSMCA_OK)
        return rc;
    der_cur xc = der_cur_of(&ext, 3);
    if ((rc = der_expect(&xc, DER_OID, &oid, "extension id", e)) != HSMCA_OK ||
        (rc = der_check_oid(&xc, &oid, "extension id", e)) != HSMCA_OK)
        return rc;
    bool critical = false;
    if (der_peek_tag(&xc) == DER_BOOLEAN) {
        if ((rc = der_next(&xc, &f, "extension critical", e)) != HSMCA_OK ||
            (rc = der_read_bool(&xc, &f, &critical, "extension critical", e)) != HSMCA_OK)
            return rc;
        if (!critical) /* DEFAULT FALSE must be omitted in DER */
            return hsmca_fail(e, HSMCA_EINVAL, "invariant 3: critical FALSE encoded (not DER)");
    }
    if ((rc = der_expect(&xc, DER_OCTET_STRING, &val, "extension value", e)) != HSMCA_OK ||
        (rc = der_expect_end(&xc, "extension", e)) != HSMCA_OK)
        return rc;
    int kind = -1;
    if (oid.len == 3 && oid.val[0] == 0x55 && oid.val[1] == 0x1d)
        for (int k = 0; k < EXT_COUNT; k++)
            if (tbs_exts[k].last_arc == oid.val[2])
                kind = k;
    if (kind < 0) {
        char txt[80] = "?";
        ASN1_OBJECT *o = NULL;
        const uint8_t *p = oid.raw;
        if (d2i_ASN1_OBJECT(&o, &p, (long)oid.raw_len))
            OBJ_obj2txt(txt, sizeof(txt), o, 1);
        ASN1_OBJECT_free(o);
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: extension %s not in the allowlist", txt);
    }
    if (c->seen & (1u << kind))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: duplicate extension %s",
                          tbs_exts[kind].name);
    c->seen |= 1u << kind;
    return tbs_exts[kind].check(c, &val, critical, e);
}

static hsmca_code tbs_check_extensions(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    in->inv = 3;
    der_tlv wrap, list;
    hsmca_code rc;
    if (der_peek_tag(in) == DER_CTX(1) || der_peek_tag(in) == DER_CTX_CONS(1) ||
        der_peek_tag(in) == DER_CTX(2) || der_peek_tag(in) == DER_CTX_CONS(2))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 1: issuer/subject unique IDs not allowed");
    if (der_peek_tag(in) != DER_CTX_CONS(3))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: extensions missing");
    if ((rc = der_expect(in, DER_CTX_CONS(3), &wrap, "extensions", e)) != HSMCA_OK)
        return rc;
    der_cur wc = der_cur_of(&wrap, 3);
    if ((rc = der_expect(&wc, DER_SEQUENCE, &list, "extensions", e)) != HSMCA_OK ||
        (rc = der_expect_end(&wc, "extensions", e)) != HSMCA_OK)
        return rc;
    der_cur lc = der_cur_of(&list, 3);
    if (der_at_end(&lc)) /* SIZE (1..MAX) */
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 3: empty extensions list");
    while (!der_at_end(&lc))
        if ((rc = tbs_check_one_ext(c, &lc, e)) != HSMCA_OK)
            return rc;
    if (!(c->seen & (1u << EXT_BC)))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: basicConstraints missing");
    if (!(c->seen & (1u << EXT_AKI)))
        return hsmca_fail(e, HSMCA_EPERM, "invariant 1: authorityKeyIdentifier missing");
    if (!(c->seen & (1u << EXT_SAN)))
        return hsmca_fail(e, HSMCA_EPERM,
                          "invariant 4: subjectAltName required with an empty subject");
    return HSMCA_OK;
}

/* ---- the TBSCertificate ---------------------------------------------------------- */

static hsmca_code tbs_check_subject(der_cur *in, hsmca_err *e)
{
    in->inv = 4;
    der_tlv subj;
    hsmca_code rc = der_expect(in, DER_SEQUENCE, &subj, "subject", e);
    if (rc != HSMCA_OK)
        return rc;
    /* We issue empty subjects only: identity is in the SAN, never in a CN. */
    if (subj.len != 0)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: subject must be empty");
    return HSMCA_OK;
}

static hsmca_code tbs_check_policy(const tbs_policy *p, tbs_profile profile, hsmca_err *e)
{
    if (!p || !p->ca_cert)
        return hsmca_fail(e, HSMCA_EINTERNAL, "tbs policy: no CA certificate");
    if (profile != TBS_PROFILE_WORKLOAD && profile != TBS_PROFILE_SERVING)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 0: unknown profile %d", (int)profile);
    return HSMCA_OK;
}

hsmca_code tbs_validate(const uint8_t *tbs, size_t len, tbs_profile profile,
                        const tbs_policy *policy, int64_t now, tbs_facts *facts, hsmca_err *e)
{
    tbs_facts scratch;
    if (!facts)
        facts = &scratch;
    memset(facts, 0, sizeof(*facts));
    hsmca_code rc = tbs_check_policy(policy, profile, e);
    if (rc != HSMCA_OK)
        return rc;
    if (!tbs || len == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 0: empty TBS");
    if (len > TBS_MAX_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "invariant 0: TBS of %zu bytes exceeds %d", len,
                          TBS_MAX_LEN);
    tbs_ctx c = {policy, profile, now, facts, 0};
    der_cur top = der_cur_init(tbs, len, 0);
    der_tlv seq;
    if ((rc = der_expect(&top, DER_SEQUENCE, &seq, "TBSCertificate", e)) != HSMCA_OK ||
        (rc = der_expect_end(&top, "TBSCertificate", e)) != HSMCA_OK)
        return rc;
    /* The fields in their DER order; each check moves the cursor past its field and
     * sets the invariant that DER errors inside it are reported under. */
    der_cur in = der_cur_of(&seq, 0);
    if ((rc = tbs_check_version(&in, e)) != HSMCA_OK ||
        (rc = tbs_check_serial(&c, &in, e)) != HSMCA_OK ||
        (rc = tbs_check_sigalg(&c, &in, e)) != HSMCA_OK ||
        (rc = tbs_check_issuer(&c, &in, e)) != HSMCA_OK ||
        (rc = tbs_check_validity(&c, &in, e)) != HSMCA_OK ||
        (rc = tbs_check_subject(&in, e)) != HSMCA_OK || (rc = tbs_check_spki(&in, e)) != HSMCA_OK ||
        (rc = tbs_check_extensions(&c, &in, e)) != HSMCA_OK)
        goto refuse;
    in.inv = 0;
    if ((rc = der_expect_end(&in, "TBSCertificate fields", e)) != HSMCA_OK)
        goto refuse;
    return HSMCA_OK;
refuse:
    memset(facts, 0, sizeof(*facts));
    return rc;
}
