/* leaf_tbs.c - see leaf_tbs.h.
 *
 * The TBS is written as DER directly, from the end of one buffer towards its
 * start: each SEQUENCE's contents are written first, so its length is known
 * when its header is prepended, and nothing is encoded twice. Building it with
 * OpenSSL's X509 object (X509_add1_ext_i2d per extension, then i2d) cost
 * several times as much (docs/PERFORMANCE.md §4). What it
 * writes is byte for byte what that builder wrote: tests/unit/test_leaf_tbs.c
 * compares the two (leaf_tbs_ref.c keeps the old one), and the signer checks
 * every TBS's fields again (signer/signer_tbs.c). SANs are written as
 * IA5String bytes, never through X509V3 config strings, so no value from a
 * request can be read as config syntax. */
#include "leaf_tbs.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "der_tags.h"
#include "profile.h"
#include "sigalg.h"

#define LEAF_TBS_SERIAL_LEN 16
#define LEAF_TBS_BACKDATE PROFILE_BACKDATE_S
#define LEAF_TBS_SAN_MAX 1024
/* Room beyond the variable parts (issuer, key, SANs): version, serial, the
 * algorithm, validity, the fixed extensions and every header is under 300 bytes. */
#define LEAF_TBS_FIXED_ROOM 512

/* Extensions whose value never changes: the whole Extension, DER (RFC 5280 4.2). */
static const uint8_t EXT_BC[] = {/* basicConstraints, critical, CA:FALSE (empty SEQUENCE) */
                                 0x30, 0x0c, 0x06, 0x03, 0x55, 0x1d, 0x13,
                                 0x01, 0x01, 0xff, 0x04, 0x02, 0x30, 0x00};
/* keyUsage, critical: one fixed usage per key type (RFC 8813 3 forbids keyEncipherment
 * on an EC key; an RSA key in TLS 1.2 RSA key exchange needs it). */
static const uint8_t EXT_KU_RSA[] = {/* digitalSignature|keyEncipherment */
                                     0x30, 0x0e, 0x06, 0x03, 0x55, 0x1d, 0x0f, 0x01,
                                     0x01, 0xff, 0x04, 0x04, 0x03, 0x02, 0x05, 0xa0};
static const uint8_t EXT_KU_EC[] = {/* digitalSignature */
                                    0x30, 0x0e, 0x06, 0x03, 0x55, 0x1d, 0x0f, 0x01,
                                    0x01, 0xff, 0x04, 0x04, 0x03, 0x02, 0x07, 0x80};
static const uint8_t EXT_EKU[] = {/* extKeyUsage: serverAuth, clientAuth */
                                  0x30, 0x1d, 0x06, 0x03, 0x55, 0x1d, 0x25, 0x04, 0x16, 0x30, 0x14,
                                  0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01, 0x06,
                                  0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02};
static const uint8_t OID_SKI[] = {0x06, 0x03, 0x55, 0x1d, 0x0e};
static const uint8_t OID_AKI[] = {0x06, 0x03, 0x55, 0x1d, 0x23};
static const uint8_t OID_SAN_CRIT[] = {0x06, 0x03, 0x55, 0x1d, 0x11, 0x01, 0x01, 0xff};
static const uint8_t VERSION_3[] = {DER_CTX_CONS(0), 0x03, DER_INTEGER, 0x01, 0x02};
static const uint8_t EMPTY_NAME[] = {DER_SEQUENCE, 0x00};

/* A DER writer that fills buf from its end towards its start. Writing past the
 * start sets err (the room is computed beforehand, so that is a bug, reported). */
typedef struct {
    uint8_t *buf;
    size_t pos; /* the next write ends here */
    int err;
} der_w;

static void put(der_w *w, const void *p, size_t n)
{
    if (w->err || n > w->pos) {
        w->err = 1;
        return;
    }
    w->pos -= n;
    memcpy(w->buf + w->pos, p, n);
}

/* Prepends tag and the DER length of what was written since mark (a pos). */
static void wrap(der_w *w, uint8_t tag, size_t mark)
{
    size_t n = mark - w->pos;
    uint8_t h[1 + 1 + sizeof(size_t)];
    size_t k = 0;
    if (n >= 0x80)
        for (size_t m = n; m; m >>= 8)
            k++;
    h[0] = tag;
    if (k == 0) {
        h[1] = (uint8_t)n;
    } else {
        h[1] = (uint8_t)(0x80 | k);
        for (size_t i = 0; i < k; i++)
            h[1 + k - i] = (uint8_t)(n >> (8 * i));
    }
    put(w, h, 2 + k);
}

static void put_prim(der_w *w, uint8_t tag, const void *p, size_t n)
{
    size_t mark = w->pos;
    put(w, p, n);
    wrap(w, tag, mark);
}

/* Random bytes for serials, drawn from OpenSSL's DRBG a pool at a time: each
 * RAND_bytes call costs a getpid() system call (the DRBG's fork check) and its
 * locking, a visible share of the front end's profile (docs/PERFORMANCE.md §4); one
 * call per 64 serials makes that negligible. Per thread, so no lock; a byte handed
 * out is wiped from the pool. What is left in it is as secret as the DRBG's own
 * state, which lives in the same process. A program that builds TBSs never forks once
 * serving (a forked child would repeat the parent's pool: the signer's serial set
 * would refuse the repeats, invariant 6). */
#define LEAF_TBS_SERIAL_POOL (64 * LEAF_TBS_SERIAL_LEN)

static _Thread_local struct {
    uint8_t b[LEAF_TBS_SERIAL_POOL];
    size_t left; /* bytes not yet handed out, at the end of b */
} serial_pool;

static HSMCA_MUSTCHECK int take_random(uint8_t *out, size_t n)
{
    if (serial_pool.left < n) {
        if (RAND_bytes(serial_pool.b, sizeof(serial_pool.b)) != 1)
            return 0;
        serial_pool.left = sizeof(serial_pool.b);
    }
    uint8_t *from = serial_pool.b + sizeof(serial_pool.b) - serial_pool.left;
    memcpy(out, from, n);
    OPENSSL_cleanse(from, n);
    serial_pool.left -= n;
    return 1;
}

/* 128 random bits as a positive DER INTEGER of exactly 16 content octets: the
 * first octet in [0x01, 0x7f] (no sign bit, no leading zero to strip). */
static HSMCA_MUSTCHECK hsmca_code put_serial(der_w *w, hsmca_err *e)
{
    uint8_t b[LEAF_TBS_SERIAL_LEN];
    if (!take_random(b, sizeof(b)))
        return hsmca_fail(e, HSMCA_EINTERNAL, "RAND_bytes failed drawing a serial");
    b[0] &= 0x7f;
    while (b[0] == 0) {
        if (!take_random(b, 1))
            return hsmca_fail(e, HSMCA_EINTERNAL, "RAND_bytes failed drawing a serial");
        b[0] &= 0x7f;
    }
    put_prim(w, DER_INTEGER, b, sizeof(b));
    OPENSSL_cleanse(b, sizeof(b));
    return HSMCA_OK;
}

/* A Time as ASN1_TIME_set chooses it: UTCTime YYMMDDHHMMSSZ for 1950-2049
 * (RFC 5280 4.1.2.5), GeneralizedTime YYYYMMDDHHMMSSZ otherwise (up to 9999). */
typedef struct {
    uint8_t tag;
    char s[16];
    size_t n;
} tbs_time;

static int format_time(int64_t t, tbs_time *out)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if ((int64_t)tt != t || !OPENSSL_gmtime(&tt, &tm))
        return 0;
    int year = tm.tm_year + 1900;
    if (year < 0 || year > 9999)
        return 0;
    int utc = year >= 1950 && year < 2050;
    int n = utc ? snprintf(out->s, sizeof(out->s), "%02d%02d%02d%02d%02d%02dZ", year % 100,
                           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
                : snprintf(out->s, sizeof(out->s), "%04d%02d%02d%02d%02d%02dZ", year, tm.tm_mon + 1,
                           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    out->tag = utc ? DER_UTCTIME : DER_GENTIME;
    out->n = (size_t)n;
    return n == (utc ? 13 : 15);
}

/* What the TBS needs beyond the parameters, all checked before anything is
 * written, in the order the X509-API builder refused them (same messages). */
typedef struct {
    const sigalg *alg;
    const X509_PUBKEY *spki;
    X509_PUBKEY *own_spki; /* made from subject_key, freed with the rest */
    unsigned char *spki_der, *issuer_der;
    int spki_len, issuer_len;
    tbs_time not_before, not_after;
    const ASN1_OCTET_STRING *ca_ski;
    unsigned char ski[20];
    unsigned int ski_len;
    int rsa; /* the subject key is RSA (else EC): picks the keyUsage */
} tbs_parts;

static void parts_free(tbs_parts *t)
{
    X509_PUBKEY_free(t->own_spki);
    OPENSSL_free(t->spki_der);
    OPENSSL_free(t->issuer_der);
}

/* The SubjectPublicKeyInfo to certify: the CSR's as parsed (algorithm, named-curve
 * or NULL parameters, key bits: copied as is), or one made from subject_key. */
static int take_spki(const leaf_tbs_params *p, tbs_parts *t)
{
    if (!p->subject_spki) {
        if (!X509_PUBKEY_set(&t->own_spki, p->subject_key))
            return 0;
        t->spki = t->own_spki;
        return 1;
    }
    const unsigned char *bits = NULL;
    int nbits = 0, ptype = 0;
    X509_ALGOR *pa = NULL;
    if (!X509_PUBKEY_get0_param(NULL, &bits, &nbits, &pa, p->subject_spki) || !bits || nbits <= 0)
        return 0;
    X509_ALGOR_get0(NULL, &ptype, NULL, pa);
    if (ptype != V_ASN1_OBJECT && ptype != V_ASN1_NULL && ptype != V_ASN1_UNDEF)
        return 0; /* explicit curve parameters: never accepted from a CSR */
    t->spki = p->subject_spki;
    return 1;
}

/* Each SAN: URI and DNS names of 1 to 1024 bytes, IP addresses that parse. */
static HSMCA_MUSTCHECK hsmca_code check_sans(const leaf_tbs_params *p, hsmca_err *e)
{
    size_t n = p->uri_san ? strlen(p->uri_san) : 1;
    if (n == 0 || n > LEAF_TBS_SAN_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "TBS: URI SAN is empty or longer than 1024 bytes");
    for (int i = 0; i < p->n_dns; i++) {
        n = p->dns[i] ? strlen(p->dns[i]) : 0;
        if (n == 0 || n > LEAF_TBS_SAN_MAX)
            return hsmca_fail(e, HSMCA_EINVAL, "TBS: DNS SAN is empty or longer than 1024 bytes");
    }
    for (int i = 0; i < p->n_ips; i++) {
        ASN1_OCTET_STRING *ip = p->ips[i] ? a2i_IPADDRESS(p->ips[i]) : NULL;
        if (!ip)
            return hsmca_fail(e, HSMCA_EINVAL, "TBS: IP SAN %d is not an IP address", i);
        ASN1_OCTET_STRING_free(ip);
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code prepare(const leaf_tbs_params *p, tbs_parts *t, hsmca_err *e)
{
    if (!take_spki(p, t) ||
        (t->issuer_len = i2d_X509_NAME(X509_get_subject_name(p->ca_cert), &t->issuer_der)) <= 0 ||
        (t->spki_len = i2d_X509_PUBKEY(t->spki, &t->spki_der)) <= 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot set version, issuer or key of the TBS");
    /* The backdate absorbs clock skew between us and relying parties; it is part of
     * the TTL, because the signer caps notAfter - notBefore (invariant 2). */
    int64_t not_before = p->now - LEAF_TBS_BACKDATE, not_after = not_before + (int64_t)p->ttl;
    /* As istiod does: a TTL that would outlive the CA certificate is cut to its notAfter
     * (the signer refuses a notAfter past it, invariant 2). */
    struct tm ca_tm;
    if (!ASN1_TIME_to_tm(X509_get0_notAfter(p->ca_cert), &ca_tm))
        return hsmca_fail(e, HSMCA_EINTERNAL, "the CA certificate's notAfter cannot be read");
    int64_t ca_end = (int64_t)timegm(&ca_tm);
    if (ca_end < not_after && ca_end <= p->now)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "the CA certificate has expired: nothing can be "
                                             "issued under it");
    if (ca_end < not_after)
        not_after = ca_end;
    if (!format_time(not_before, &t->not_before) || !format_time(not_after, &t->not_after))
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot set the validity");
    /* SKI = SHA-1 of the subjectPublicKey BIT STRING (RFC 5280 4.2.1.2 method 1). */
    const unsigned char *pk = NULL;
    int pklen = 0;
    ASN1_OBJECT *pk_alg = NULL;
    if (!X509_PUBKEY_get0_param(&pk_alg, &pk, &pklen, NULL, t->spki) || !pk ||
        !EVP_Digest(pk, (size_t)pklen, t->ski, &t->ski_len, EVP_sha1(), NULL))
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot hash the subject public key");
    t->rsa = OBJ_obj2nid(pk_alg) == NID_rsaEncryption;
    /* AKI = keyIdentifier only, the CA's own SKI, so chains link by key id. */
    t->ca_ski = X509_get0_subject_key_id(p->ca_cert);
    if (!t->ca_ski || ASN1_STRING_length(t->ca_ski) <= 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CA certificate has no subjectKeyIdentifier");
    hsmca_code rc = check_sans(p, e);
    if (rc != HSMCA_OK)
        return rc;
    if (!(t->alg = sigalg_by_nid(p->sig_nid)))
        return hsmca_fail(e, HSMCA_EINTERNAL, "unknown signature algorithm %d", p->sig_nid);
    return HSMCA_OK;
}

/* One Extension: SEQUENCE { oid [critical], OCTET STRING { what was written
 * since mark } }. */
static void wrap_ext(der_w *w, const uint8_t *oid_crit, size_t oid_crit_len, size_t mark)
{
    wrap(w, DER_OCTET_STRING, mark);
    put(w, oid_crit, oid_crit_len);
    wrap(w, DER_SEQUENCE, mark);
}

/* Critical: the subject is empty, so the SAN is the whole identity (RFC 5280
 * 4.2.1.6). The URI, then DNS names, then IP addresses (written last first). */
static void put_san(der_w *w, const leaf_tbs_params *p)
{
    size_t mark = w->pos;
    for (int i = p->n_ips - 1; i >= 0; i--) {
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(p->ips[i]); /* parsed in check_sans */
        if (!ip) {
            w->err = 1;
            return;
        }
        put_prim(w, DER_GN_IP, ASN1_STRING_get0_data(ip), (size_t)ASN1_STRING_length(ip));
        ASN1_OCTET_STRING_free(ip);
    }
    for (int i = p->n_dns - 1; i >= 0; i--)
        put_prim(w, DER_GN_DNS, p->dns[i], strlen(p->dns[i]));
    if (p->uri_san)
        put_prim(w, DER_GN_URI, p->uri_san, strlen(p->uri_san));
    wrap(w, DER_SEQUENCE, mark); /* GeneralNames */
    wrap_ext(w, OID_SAN_CRIT, sizeof(OID_SAN_CRIT), mark);
}

/* The whole TBS, last field first; the serial is drawn here. */
static HSMCA_MUSTCHECK hsmca_code put_tbs(der_w *w, const leaf_tbs_params *p, const tbs_parts *t,
                                          hsmca_err *e)
{
    size_t mark = w->pos;
    /* Extension order: BC, KU, EKU, SKI, AKI, SAN (what the signer expects to see). */
    put_san(w, p);
    size_t aki = w->pos;
    put_prim(w, DER_CTX(0), ASN1_STRING_get0_data(t->ca_ski), (size_t)ASN1_STRING_length(t->ca_ski));
    wrap(w, DER_SEQUENCE, aki); /* AuthorityKeyIdentifier */
    wrap_ext(w, OID_AKI, sizeof(OID_AKI), aki);
    size_t ski = w->pos;
    put_prim(w, DER_OCTET_STRING, t->ski, t->ski_len);
    wrap_ext(w, OID_SKI, sizeof(OID_SKI), ski);
    put(w, EXT_EKU, sizeof(EXT_EKU));
    put(w, t->rsa ? EXT_KU_RSA : EXT_KU_EC, sizeof(EXT_KU_RSA));
    put(w, EXT_BC, sizeof(EXT_BC));
    wrap(w, DER_SEQUENCE, mark);
    wrap(w, DER_CTX_CONS(3), mark);
    put(w, t->spki_der, (size_t)t->spki_len);
    put(w, EMPTY_NAME, sizeof(EMPTY_NAME)); /* identity lives in the SAN only */
    size_t validity = w->pos;
    put_prim(w, t->not_after.tag, t->not_after.s, t->not_after.n);
    put_prim(w, t->not_before.tag, t->not_before.s, t->not_before.n);
    wrap(w, DER_SEQUENCE, validity);
    put(w, t->issuer_der, (size_t)t->issuer_len);
    put(w, t->alg->alg_der, t->alg->alg_der_len); /* the inner algorithm: the table's bytes */
    hsmca_code rc = put_serial(w, e);
    if (rc != HSMCA_OK)
        return rc;
    put(w, VERSION_3, sizeof(VERSION_3));
    wrap(w, DER_SEQUENCE, mark);
    if (w->err)
        return hsmca_fail(e, HSMCA_EINTERNAL, "TBS larger than its buffer");
    return HSMCA_OK;
}

hsmca_code leaf_tbs_build(const leaf_tbs_params *p, uint8_t **der, size_t *len, hsmca_err *e)
{
    if (!der || !len)
        return hsmca_fail(e, HSMCA_EINTERNAL, "leaf_tbs_build: missing parameter");
    *der = NULL;
    *len = 0;
    if (!p || !p->ca_cert || (!p->subject_key && !p->subject_spki))
        return hsmca_fail(e, HSMCA_EINTERNAL, "leaf_tbs_build: missing parameter");
    if (!p->uri_san && p->n_dns <= 0 && p->n_ips <= 0)
        return hsmca_fail(e, HSMCA_EINVAL, "TBS: no SAN (neither URI nor DNS/IP) requested");
    if (p->n_dns < 0 || p->n_ips < 0 || (p->n_dns > 0 && !p->dns) || (p->n_ips > 0 && !p->ips))
        return hsmca_fail(e, HSMCA_EINVAL, "TBS: malformed DNS/IP SAN list");
    if (p->ttl == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "TBS: TTL is 0");

    tbs_parts t;
    memset(&t, 0, sizeof(t));
    uint8_t *buf = NULL;
    hsmca_code rc = prepare(p, &t, e);
    if (rc != HSMCA_OK)
        goto out;
    /* Room: the fixed parts, the issuer and key, each SAN's bytes and at most 4 of
     * header (a 1024-byte name: 82 82 04 00), 18 for an IP address. */
    size_t cap = LEAF_TBS_FIXED_ROOM + (size_t)t.issuer_len + (size_t)t.spki_len +
                 (size_t)ASN1_STRING_length(t.ca_ski);
    cap += p->uri_san ? strlen(p->uri_san) + 4 : 0;
    for (int i = 0; i < p->n_dns; i++)
        cap += strlen(p->dns[i]) + 4;
    cap += (size_t)p->n_ips * (16 + 2);
    if (!(buf = OPENSSL_malloc(cap))) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory building a TBS");
        goto out;
    }
    der_w w = {buf, cap, 0};
    if ((rc = put_tbs(&w, p, &t, e)) != HSMCA_OK)
        goto out;
    *len = cap - w.pos;
    memmove(buf, buf + w.pos, *len);
    *der = buf;
    buf = NULL;
out:
    OPENSSL_free(buf);
    parts_free(&t);
    return rc;
}
