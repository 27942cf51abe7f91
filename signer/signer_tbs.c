/* signer_tbs.c - the signer's strict TBSCertificate validator (docs/ARCHITECTURE.md §3.1):
 * the fields in their DER order. The extensions are in signer_tbs_ext.c.
 *
 * The front end may be compromised, so every byte of the TBS is either parsed
 * here with the strict DER cursor (signer_der.h) or compared byte for byte with
 * an encoding the signer trusts (issuer name, algorithm identifiers). Serial
 * uniqueness and the rate limit live in signer_limits.c. */
#include "signer_tbs_int.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include <openssl/asn1.h>
#include <openssl/ec.h>

#include "sigalg.h"

/* ---- invariant 1: version, signature algorithm, issuer ---------------------------- */

static HSMCA_MUSTCHECK hsmca_code tbs_check_version(der_cur *in, hsmca_err *e)
{
    static const uint8_t V3[] = {0x02};
    der_cur wrap, v;
    HSMCA_ENSURE(der_peek(in, DER_CTX_CONS(0)), e, HSMCA_EPERM,
                 "invariant 1: version must be v3 (version absent)");
    TBS_DER(der_get(in, DER_CTX_CONS(0), &wrap) && der_get_integer(&wrap, &v) && der_empty(&wrap),
            e, 1, "version");
    HSMCA_ENSURE(der_eq(&v, V3, sizeof(V3)), e, HSMCA_EPERM, "invariant 1: version must be v3");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code tbs_check_sigalg(const tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    const sigalg *want = sigalg_by_nid(c->pol->ca_sig_nid);
    der_cur alg;
    HSMCA_ENSURE(want, e, HSMCA_EINTERNAL, "tbs policy: unsupported CA signature algorithm");
    TBS_DER(der_get_element(in, DER_SEQUENCE, &alg), e, 1, "signature algorithm");
    HSMCA_ENSURE(der_eq(&alg, want->alg_der, want->alg_der_len), e, HSMCA_EPERM,
                 "invariant 1: signature algorithm must equal the CA key's (%s)", want->name);
    return HSMCA_OK;
}

/* The issuer must be the CA's subject exactly as the CA certificate encodes it, so
 * the Name need not be parsed here: the trusted encoding is the only one accepted. */
static HSMCA_MUSTCHECK hsmca_code tbs_check_issuer(const tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    der_cur iss;
    TBS_DER(der_get_element(in, DER_SEQUENCE, &iss), e, 1, "issuer");
    /* The name's cached encoding (as parsed from the CA certificate): no copy. */
    const unsigned char *want = NULL;
    size_t n = 0;
    HSMCA_ENSURE(X509_NAME_get0_der(X509_get_subject_name(c->pol->ca_cert), &want, &n) == 1 &&
                     n > 0,
                 e, HSMCA_EINTERNAL, "tbs policy: cannot encode the CA subject");
    HSMCA_ENSURE(der_eq(&iss, want, n), e, HSMCA_EPERM,
                 "invariant 1: issuer must equal the CA subject");
    return HSMCA_OK;
}

/* ---- invariant 2: validity ------------------------------------------------------- */

static bool tbs_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (year >= 1). */
static int64_t tbs_days_from_civil(int64_t y, int m, int d)
{
    static const int cum[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    int64_t py = y - 1;
    int64_t days = py * 365 + py / 4 - py / 100 + py / 400; /* days before Jan 1 of y */
    days += cum[m - 1] + (m > 2 && tbs_leap(y)) + (d - 1);
    return days - 719162; /* days from 0001-01-01 to 1970-01-01 */
}

static int tbs_days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return dim[m - 1] + (m == 2 && tbs_leap(y));
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
static HSMCA_MUSTCHECK hsmca_code tbs_parse_time(der_cur *in, const char *what, int64_t *out,
                                                 hsmca_err *e)
{
    uint8_t tag;
    der_cur t;
    TBS_DER(der_get_any(in, &tag, &t), e, 2, what);
    int64_t year;
    const uint8_t *s = t.p;
    if (tag == DER_UTCTIME && t.len == 13) {
        int yy = tbs_digits(s, 2);
        year = yy < 0 ? -1 : (yy >= 50 ? 1900 + yy : 2000 + yy);
        s += 2;
    } else if (tag == DER_GENTIME && t.len == 15) {
        year = tbs_digits(s, 4);
        HSMCA_ENSURE(year < 0 || year >= 2050, e, HSMCA_EINVAL,
                     "invariant 2: %s: GeneralizedTime before 2050 (must be UTCTime)", what);
        s += 4;
    } else {
        return hsmca_fail(e, HSMCA_EINVAL,
                          "invariant 2: %s: not UTCTime YYMMDDHHMMSSZ or GeneralizedTime "
                          "YYYYMMDDHHMMSSZ",
                          what);
    }
    int mo = tbs_digits(s, 2), d = tbs_digits(s + 2, 2), h = tbs_digits(s + 4, 2);
    int mi = tbs_digits(s + 6, 2), sec = tbs_digits(s + 8, 2);
    HSMCA_ENSURE(year >= 0 && mo >= 1 && mo <= 12 && d >= 1 && h >= 0 && h <= 23 && mi >= 0 &&
                     mi <= 59 && sec >= 0 && sec <= 59 && s[10] == 'Z' &&
                     d <= tbs_days_in_month(year, mo),
                 e, HSMCA_EINVAL, "invariant 2: %s: malformed time", what);
    *out = tbs_days_from_civil(year, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code tbs_ca_not_after(const tbs_ctx *c, int64_t *out, hsmca_err *e)
{
    struct tm tm;
    HSMCA_ENSURE(ASN1_TIME_to_tm(X509_get0_notAfter(c->pol->ca_cert), &tm) == 1, e, HSMCA_EINTERNAL,
                 "tbs policy: cannot read the CA notAfter");
    *out = tbs_days_from_civil((int64_t)tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday) * 86400 +
           tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code tbs_check_validity(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    der_cur val;
    int64_t nb = 0, na = 0, ca_na = 0;
    TBS_DER(der_get(in, DER_SEQUENCE, &val), e, 2, "validity");
    HSMCA_GUARD(tbs_parse_time(&val, "notBefore", &nb, e));
    HSMCA_GUARD(tbs_parse_time(&val, "notAfter", &na, e));
    TBS_DER(der_empty(&val), e, 2, "validity");
    HSMCA_GUARD(tbs_ca_not_after(c, &ca_na, e));
    uint32_t max = c->profile == PROFILE_SERVING ? c->pol->serving_max_ttl : c->pol->max_ttl;
    HSMCA_ENSURE(nb >= c->now - PROFILE_NOT_BEFORE_PAST_S, e, HSMCA_EPERM,
                 "invariant 2: notBefore more than %d s in the past", PROFILE_NOT_BEFORE_PAST_S);
    HSMCA_ENSURE(nb <= c->now + PROFILE_NOT_BEFORE_FUTURE_S, e, HSMCA_EPERM,
                 "invariant 2: notBefore more than %d s in the future",
                 PROFILE_NOT_BEFORE_FUTURE_S);
    HSMCA_ENSURE(na > nb, e, HSMCA_EPERM, "invariant 2: notAfter must be after notBefore");
    HSMCA_ENSURE(na - nb <= (int64_t)max, e, HSMCA_EPERM,
                 "invariant 2: validity %lld s exceeds the profile max TTL %u s",
                 (long long)(na - nb), (unsigned)max);
    HSMCA_ENSURE(na <= ca_na, e, HSMCA_EPERM, "invariant 2: notAfter beyond the CA notAfter");
    c->facts->not_before = nb;
    c->facts->not_after = na;
    return HSMCA_OK;
}

/* ---- invariant 4 (subject) and 5: subject public key ------------------------------- */

static HSMCA_MUSTCHECK hsmca_code tbs_check_subject(der_cur *in, hsmca_err *e)
{
    der_cur subj;
    TBS_DER(der_get(in, DER_SEQUENCE, &subj), e, 4, "subject");
    /* We issue empty subjects only: identity is in the SAN, never in a CN. */
    HSMCA_ENSURE(der_empty(&subj), e, HSMCA_EPERM, "invariant 4: subject must be empty");
    return HSMCA_OK;
}

static const uint8_t SPKI_RSA[] = {0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86,
                                   0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00};
static const uint8_t SPKI_P256[] = {0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48,
                                    0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
                                    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const uint8_t SPKI_P384[] = {0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d,
                                    0x02, 0x01, 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};

/* Bits in a positive INTEGER's minimal contents. */
static size_t tbs_int_bits(const der_cur *v)
{
    const uint8_t *m = v->p;
    size_t n = v->len;
    if (n > 1 && m[0] == 0) {
        m++;
        n--;
    }
    size_t bits = n * 8;
    for (uint8_t top = m[0]; bits > 0 && !(top & 0x80); top <<= 1)
        bits--;
    return bits;
}

/* RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER } (RFC 8017).
 * Bounds from common/profile.h (the front end's CSR check uses the same). */
static HSMCA_MUSTCHECK hsmca_code tbs_check_rsa_key(tbs_ctx *c, der_cur k, hsmca_err *e)
{
    der_cur seq, n, x;
    TBS_DER(der_get_only(&k, DER_SEQUENCE, &seq) && der_get_integer(&seq, &n) &&
                der_get_integer(&seq, &x) && der_empty(&seq),
            e, 5, "RSA public key");
    HSMCA_ENSURE(!(n.p[0] & 0x80) && !(x.p[0] & 0x80), e, HSMCA_EPERM,
                 "invariant 5: RSA modulus and exponent must be positive");
    size_t bits = tbs_int_bits(&n);
    HSMCA_ENSURE(bits >= PROFILE_RSA_BITS_MIN && bits <= PROFILE_RSA_BITS_MAX, e, HSMCA_EPERM,
                 "invariant 5: RSA key of %zu bits (%d-%d allowed)", bits, PROFILE_RSA_BITS_MIN,
                 PROFILE_RSA_BITS_MAX);
    HSMCA_ENSURE(n.p[n.len - 1] & 1, e, HSMCA_EPERM, "invariant 5: RSA modulus must be odd");
    HSMCA_ENSURE(x.p[x.len - 1] & 1, e, HSMCA_EPERM, "invariant 5: RSA exponent must be odd");
    size_t ebits = tbs_int_bits(&x);
    uint64_t ev = 0;
    for (size_t i = 0; ebits <= 31 && i < x.len; i++)
        ev = (ev << 8) | x.p[i];
    HSMCA_ENSURE(ebits <= 31 && ev >= PROFILE_RSA_E_MIN && ev <= PROFILE_RSA_E_MAX, e, HSMCA_EPERM,
                 "invariant 5: RSA exponent must be in [65537, 2^31-1]");
    c->key = (policy_key){POLICY_KEY_RSA, (unsigned)bits};
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

static HSMCA_MUSTCHECK hsmca_code tbs_check_ec_point(int p384, der_cur k, hsmca_err *e)
{
    HSMCA_ENSURE(k.len == (p384 ? 97u : 65u) && k.p[0] == 0x04, e, HSMCA_EPERM,
                 "invariant 5: EC point must be uncompressed"); /* RFC 5480's one MUST */
    pthread_once(&tbs_groups_once, tbs_groups_init);
    const EC_GROUP *g = tbs_groups[p384];
    HSMCA_ENSURE(g, e, HSMCA_EINTERNAL, "invariant 5: no EC group");
    EC_POINT *pt = EC_POINT_new(g);
    int ok = pt && EC_POINT_oct2point(g, pt, k.p, k.len, NULL) == 1 &&
             EC_POINT_is_on_curve(g, pt, NULL) == 1 && !EC_POINT_is_at_infinity(g, pt);
    EC_POINT_free(pt);
    HSMCA_ENSURE(ok, e, HSMCA_EPERM, "invariant 5: EC point is not on the curve");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code tbs_check_spki(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    der_cur spki, alg, bits;
    TBS_DER(der_get(in, DER_SEQUENCE, &spki) && der_get_element(&spki, DER_SEQUENCE, &alg) &&
                der_get(&spki, DER_BIT_STRING, &bits) && der_empty(&spki),
            e, 5, "subjectPublicKeyInfo");
    HSMCA_ENSURE(bits.len >= 2 && bits.p[0] == 0, e, HSMCA_EINVAL,
                 "invariant 5: subjectPublicKey BIT STRING malformed");
    der_cur key = der_cur_init(bits.p + 1, bits.len - 1);
    c->subject_key = key;
    if (der_eq(&alg, SPKI_RSA, sizeof(SPKI_RSA)))
        return tbs_check_rsa_key(c, key, e);
    if (der_eq(&alg, SPKI_P256, sizeof(SPKI_P256))) {
        c->key.type = POLICY_KEY_P256;
        return tbs_check_ec_point(0, key, e);
    }
    if (der_eq(&alg, SPKI_P384, sizeof(SPKI_P384))) {
        c->key.type = POLICY_KEY_P384;
        return tbs_check_ec_point(1, key, e);
    }
    return hsmca_fail(e, HSMCA_EPERM, "invariant 5: key must be RSA 2048-8192 or EC P-256/P-384");
}

/* ---- invariant 6: serial --------------------------------------------------------- */

static HSMCA_MUSTCHECK hsmca_code tbs_check_serial(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    der_cur s;
    TBS_DER(der_get_integer(in, &s), e, 6, "serialNumber");
    HSMCA_ENSURE(!(s.p[0] & 0x80) && !(s.len == 1 && s.p[0] == 0), e, HSMCA_EPERM,
                 "invariant 6: serial must be positive");
    /* RFC 5280 caps at 20 octets, counting a leading 0x00. */
    HSMCA_ENSURE(s.len >= PROFILE_SERIAL_MIN && s.len <= PROFILE_SERIAL_MAX, e, HSMCA_EPERM,
                 "invariant 6: serial of %zu octets (%d-%d allowed)", s.len, PROFILE_SERIAL_MIN,
                 PROFILE_SERIAL_MAX);
    memcpy(c->facts->serial, s.p, s.len);
    c->facts->serial_len = s.len;
    return HSMCA_OK;
}

/* ---- the TBSCertificate ---------------------------------------------------------- */

static HSMCA_MUSTCHECK hsmca_code tbs_check_policy(const tbs_policy *p, profile_id profile,
                                                   hsmca_err *e)
{
    HSMCA_ENSURE(p && p->ca_cert, e, HSMCA_EINTERNAL, "tbs policy: no CA certificate");
    HSMCA_ENSURE(profile == PROFILE_WORKLOAD || profile == PROFILE_SERVING, e, HSMCA_EPERM,
                 "invariant 0: unknown profile %d", (int)profile);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code tbs_check_all(tbs_ctx *c, const uint8_t *tbs, size_t len,
                                                hsmca_err *e)
{
    HSMCA_ENSURE(tbs && len > 0, e, HSMCA_EINVAL, "invariant 0: empty TBS");
    HSMCA_ENSURE(len <= PROFILE_TBS_MAX, e, HSMCA_EINVAL, "invariant 0: TBS of %zu bytes exceeds %d",
                 len, PROFILE_TBS_MAX);
    der_cur top = der_cur_init(tbs, len), in;
    TBS_DER(der_get_only(&top, DER_SEQUENCE, &in), e, 0, "TBSCertificate");
    /* The fields in their DER order; each check moves the cursor past its field. */
    HSMCA_GUARD(tbs_check_version(&in, e));
    HSMCA_GUARD(tbs_check_serial(c, &in, e));
    HSMCA_GUARD(tbs_check_sigalg(c, &in, e));
    HSMCA_GUARD(tbs_check_issuer(c, &in, e));
    HSMCA_GUARD(tbs_check_validity(c, &in, e));
    HSMCA_GUARD(tbs_check_subject(&in, e));
    HSMCA_GUARD(tbs_check_spki(c, &in, e));
    HSMCA_ENSURE(!der_peek(&in, DER_CTX(1)) && !der_peek(&in, DER_CTX_CONS(1)) &&
                     !der_peek(&in, DER_CTX(2)) && !der_peek(&in, DER_CTX_CONS(2)),
                 e, HSMCA_EPERM, "invariant 1: issuer/subject unique IDs not allowed");
    HSMCA_GUARD(tbs_check_extensions(c, &in, e));
    TBS_DER(der_empty(&in), e, 0, "TBSCertificate (bytes after the extensions)");
    return tbs_check_policy_file(c, e);
}

hsmca_code tbs_validate(const uint8_t *tbs, size_t len, profile_id profile,
                        const tbs_policy *policy, int64_t now, tbs_facts *facts, hsmca_err *e)
{
    tbs_facts scratch;
    if (!facts)
        facts = &scratch;
    memset(facts, 0, sizeof(*facts));
    HSMCA_GUARD(tbs_check_policy(policy, profile, e));
    tbs_ctx c = {.pol = policy, .profile = profile, .now = now, .facts = facts};
    hsmca_code rc = tbs_check_all(&c, tbs, len, e);
    if (rc != HSMCA_OK)
        memset(facts, 0, sizeof(*facts));
    return rc;
}
