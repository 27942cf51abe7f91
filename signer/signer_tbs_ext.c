/* signer_tbs_ext.c - the extensions of a TBS the signer will sign: an X509-SVID
 * (SPIFFE X509-SVID §4) for workloads, the same shape with DNS/IP names for the
 * front end's serving certificate (docs/ARCHITECTURE.md §3.1, invariants 1, 3 and 4).
 *
 * Every extension of the allowlist is required, exactly once, with the one
 * criticality the profile gives it; anything else is refused. */
#include "signer_tbs_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "policy_spiffe.h"

typedef enum { EXT_SKI, EXT_KU, EXT_SAN, EXT_BC, EXT_AKI, EXT_EKU, EXT_COUNT } tbs_ext_kind;

typedef hsmca_code (*tbs_ext_fn)(tbs_ctx *c, der_cur val, hsmca_err *e);

static HSMCA_MUSTCHECK hsmca_code tbs_ext_ski(tbs_ctx *c, der_cur val, hsmca_err *e);
static HSMCA_MUSTCHECK hsmca_code tbs_ext_ku(tbs_ctx *c, der_cur val, hsmca_err *e);
static HSMCA_MUSTCHECK hsmca_code tbs_ext_san(tbs_ctx *c, der_cur val, hsmca_err *e);
static HSMCA_MUSTCHECK hsmca_code tbs_ext_bc(tbs_ctx *c, der_cur val, hsmca_err *e);
static HSMCA_MUSTCHECK hsmca_code tbs_ext_aki(tbs_ctx *c, der_cur val, hsmca_err *e);
static HSMCA_MUSTCHECK hsmca_code tbs_ext_eku(tbs_ctx *c, der_cur val, hsmca_err *e);

/* The allowlist. Every id-ce OID is 2.5.29.x = 55 1D x. Criticality: RFC 5280
 * 4.2.1.1/4.2.1.2 forbid it for AKI and SKI; X509-SVID §4.3 requires it for KU
 * and BC; the subject is always empty, so SAN is critical (RFC 5280 4.2.1.6);
 * EKU is non-critical, as the front end builds it. */
static const struct {
    uint8_t last_arc;
    const char *name;
    int inv;
    bool critical;
    tbs_ext_fn check;
} tbs_exts[EXT_COUNT] = {
    [EXT_SKI] = {0x0e, "subjectKeyIdentifier", 3, false, tbs_ext_ski},
    [EXT_KU] = {0x0f, "keyUsage", 3, true, tbs_ext_ku},
    [EXT_SAN] = {0x11, "subjectAltName", 4, true, tbs_ext_san},
    [EXT_BC] = {0x13, "basicConstraints", 3, true, tbs_ext_bc},
    [EXT_AKI] = {0x23, "authorityKeyIdentifier", 1, false, tbs_ext_aki},
    [EXT_EKU] = {0x25, "extKeyUsage", 3, false, tbs_ext_eku},
};

/* basicConstraints: CA:FALSE without pathLen, which DER encodes as an empty SEQUENCE. */
static HSMCA_MUSTCHECK hsmca_code tbs_ext_bc(tbs_ctx *c, der_cur val, hsmca_err *e)
{
    der_cur seq;
    bool ca = false;
    TBS_DER(der_get_only(&val, DER_SEQUENCE, &seq), e, 3, "basicConstraints");
    if (der_peek(&seq, DER_BOOLEAN)) {
        TBS_DER(der_get_bool(&seq, &ca), e, 3, "basicConstraints cA");
        /* DEFAULT FALSE must be omitted in DER. */
        HSMCA_ENSURE(ca, e, HSMCA_EINVAL,
                     "invariant 3: basicConstraints cA FALSE encoded (not DER)");
        return hsmca_fail(e, HSMCA_EPERM, "invariant 3: basicConstraints must be CA:FALSE");
    }
    HSMCA_ENSURE(!der_peek(&seq, DER_INTEGER), e, HSMCA_EPERM,
                 "invariant 3: basicConstraints pathLen not allowed");
    TBS_DER(der_empty(&seq), e, 3, "basicConstraints");
    return HSMCA_OK;
}

/* keyUsage: a named BIT STRING, so DER drops trailing zero bits (X.690 11.2.2). One
 * fixed usage per key type (RFC 8813 3: keyEncipherment never on an EC key): EC
 * digitalSignature (bit 0, 0x80) alone; RSA digitalSignature and keyEncipherment (bit 2,
 * 0x20). The key (before the extensions in DER order) was checked by then. */
static HSMCA_MUSTCHECK hsmca_code tbs_ext_ku(tbs_ctx *c, der_cur val, hsmca_err *e)
{
    der_cur b;
    TBS_DER(der_get_only(&val, DER_BIT_STRING, &b), e, 3, "keyUsage");
    HSMCA_ENSURE(b.len >= 2 && b.p[0] <= 7, e, HSMCA_EINVAL,
                 "invariant 3: keyUsage BIT STRING empty or malformed");
    uint8_t unused = b.p[0], last = b.p[b.len - 1];
    HSMCA_ENSURE((last & ((1u << unused) - 1)) == 0 && ((last >> unused) & 1), e, HSMCA_EINVAL,
                 "invariant 3: keyUsage BIT STRING not minimal DER");
    HSMCA_ENSURE(b.len == 2 && (b.p[1] & ~0xa0u) == 0, e, HSMCA_EPERM,
                 "invariant 3: keyUsage allows only digitalSignature, keyEncipherment");
    HSMCA_ENSURE(b.p[1] & 0x80, e, HSMCA_EPERM, "invariant 3: keyUsage must have digitalSignature");
    if (c->key.type == POLICY_KEY_RSA)
        HSMCA_ENSURE(b.p[1] & 0x20, e, HSMCA_EPERM,
                     "invariant 3: keyUsage of an RSA key must be digitalSignature, "
                     "keyEncipherment");
    else
        HSMCA_ENSURE(!(b.p[1] & 0x20), e, HSMCA_EPERM,
                     "invariant 3: keyUsage of an EC key must be digitalSignature alone "
                     "(RFC 8813: no keyEncipherment)");
    return HSMCA_OK;
}

/* extKeyUsage: exactly id-kp-serverAuth (1.3.6.1.5.5.7.3.1) and id-kp-clientAuth
 * (.2), each once, in any order: an SVID is used on both ends of mTLS. */
static HSMCA_MUSTCHECK hsmca_code tbs_ext_eku(tbs_ctx *c, der_cur val, hsmca_err *e)
{
    static const uint8_t KP[] = {0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03};
    der_cur seq, oid;
    unsigned seen = 0;
    TBS_DER(der_get_only(&val, DER_SEQUENCE, &seq), e, 3, "extKeyUsage");
    while (!der_empty(&seq)) {
        TBS_DER(der_get_oid(&seq, &oid), e, 3, "extKeyUsage purpose");
        uint8_t arc = oid.len == sizeof(KP) + 1 ? oid.p[sizeof(KP)] : 0;
        HSMCA_ENSURE(oid.len == sizeof(KP) + 1 && memcmp(oid.p, KP, sizeof(KP)) == 0 &&
                         (arc == 1 || arc == 2),
                     e, HSMCA_EPERM, "invariant 3: extKeyUsage allows only serverAuth, clientAuth");
        HSMCA_ENSURE(!(seen & (1u << arc)), e, HSMCA_EPERM,
                     "invariant 3: extKeyUsage purpose repeated");
        seen |= 1u << arc;
    }
    HSMCA_ENSURE(seen == ((1u << 1) | (1u << 2)), e, HSMCA_EPERM,
                 "invariant 3: extKeyUsage must have both serverAuth and clientAuth");
    return HSMCA_OK;
}

/* SKI bound to the key: SHA-1 of the subjectPublicKey BIT STRING's contents
 * (RFC 5280 4.2.1.2 method 1), so it cannot name another key. */
static HSMCA_MUSTCHECK hsmca_code tbs_ext_ski(tbs_ctx *c, der_cur val, hsmca_err *e)
{
    der_cur id;
    uint8_t want[SHA_DIGEST_LENGTH];
    TBS_DER(der_get_only(&val, DER_OCTET_STRING, &id), e, 3, "subjectKeyIdentifier");
    SHA1(c->subject_key.p, c->subject_key.len, want);
    HSMCA_ENSURE(der_eq(&id, want, sizeof(want)), e, HSMCA_EPERM,
                 "invariant 3: subjectKeyIdentifier must be the SHA-1 of the subject key");
    return HSMCA_OK;
}

/* AKI must be exactly SEQUENCE { [0] keyIdentifier } holding the CA's SKI. */
static HSMCA_MUSTCHECK hsmca_code tbs_ext_aki(tbs_ctx *c, der_cur val, hsmca_err *e)
{
    der_cur seq, kid;
    TBS_DER(der_get_only(&val, DER_SEQUENCE, &seq), e, 1, "authorityKeyIdentifier");
    HSMCA_ENSURE(der_peek(&seq, DER_CTX(0)), e, HSMCA_EPERM,
                 "invariant 1: authorityKeyIdentifier must hold only keyIdentifier");
    TBS_DER(der_get(&seq, DER_CTX(0), &kid), e, 1, "authorityKeyIdentifier");
    HSMCA_ENSURE(der_empty(&seq), e, HSMCA_EPERM,
                 "invariant 1: authorityKeyIdentifier must hold only keyIdentifier");
    const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(c->pol->ca_cert);
    HSMCA_ENSURE(ski, e, HSMCA_EINTERNAL, "tbs policy: CA certificate has no SKI");
    HSMCA_ENSURE(der_eq(&kid, ASN1_STRING_get0_data(ski), (size_t)ASN1_STRING_length(ski)), e,
                 HSMCA_EPERM, "invariant 1: authorityKeyIdentifier must equal the CA's SKI");
    return HSMCA_OK;
}

/* ---- invariant 4: subject alternative names -------------------------------------- */

/* Appends "kind:name" to the facts' SAN text; the names were checked first, so
 * they hold only bytes the profile allows. */
static void tbs_note_san(tbs_ctx *c, const char *kind, const char *s, size_t n)
{
    tbs_facts *f = c->facts;
    size_t have = strlen(f->sans), need = (have ? 1 : 0) + strlen(kind) + 1 + n;
    f->n_sans++;
    if (f->sans_truncated || have + need >= sizeof(f->sans)) {
        f->sans_truncated = true;
        return;
    }
    snprintf(f->sans + have, sizeof(f->sans) - have, "%s%s:%.*s", have ? "," : "", kind, (int)n, s);
}

static HSMCA_MUSTCHECK hsmca_code tbs_san_uri(tbs_ctx *c, der_cur t, hsmca_err *e)
{
    hsmca_err why;
    HSMCA_ENSURE(c->profile == PROFILE_WORKLOAD, e, HSMCA_EPERM,
                 "invariant 4: URI SAN not allowed in the serving profile");
    HSMCA_ENSURE(c->facts->n_sans == 0, e, HSMCA_EPERM,
                 "invariant 4: an X509-SVID has exactly one URI SAN");
    if (policy_spiffe_id_check((const char *)t.p, t.len, c->pol->trust_domains,
                               c->pol->n_trust_domains, &why) != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: %s", why.msg);
    tbs_note_san(c, "uri", (const char *)t.p, t.len);
    c->uri = t;
    return HSMCA_OK;
}

/* A workload's DNS SANs wait for tbs_check_policy_file, which knows the identity
 * (the URI SAN may come after them); only a policy file that grants DNS names
 * lets one that far. */
static HSMCA_MUSTCHECK hsmca_code tbs_san_dns_workload(tbs_ctx *c, der_cur t, hsmca_err *e)
{
    HSMCA_ENSURE(policy_set_grants_dns(c->pol->policy_file), e, HSMCA_EPERM,
                 "invariant 4: DNS SAN not granted to workload identities");
    HSMCA_ENSURE(c->n_dns < PROFILE_MAX_NAMES, e, HSMCA_EPERM, "invariant 4: more than %d DNS SANs",
                 PROFILE_MAX_NAMES);
    c->dns[c->n_dns++] = t;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code tbs_san_dns(tbs_ctx *c, der_cur t, hsmca_err *e)
{
    if (c->profile == PROFILE_WORKLOAD)
        return tbs_san_dns_workload(c, t, e);
    HSMCA_ENSURE(c->profile == PROFILE_SERVING, e, HSMCA_EPERM,
                 "invariant 4: DNS SAN not granted to workload identities");
    for (int i = 0; i < c->pol->n_serving_dns && i < PROFILE_MAX_NAMES; i++) {
        const char *want = c->pol->serving_dns[i];
        if (want && strlen(want) == t.len && strncasecmp(want, (const char *)t.p, t.len) == 0) {
            tbs_note_san(c, "dns", want, t.len);
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EPERM, "invariant 4: DNS SAN not in the serving list");
}

static HSMCA_MUSTCHECK hsmca_code tbs_san_ip(tbs_ctx *c, der_cur t, hsmca_err *e)
{
    HSMCA_ENSURE(c->profile == PROFILE_SERVING, e, HSMCA_EPERM,
                 "invariant 4: IP SAN not granted to workload identities");
    HSMCA_ENSURE(t.len == 4 || t.len == 16, e, HSMCA_EPERM,
                 "invariant 4: IP SAN must be 4 or 16 octets");
    int af = t.len == 4 ? AF_INET : AF_INET6;
    for (int i = 0; i < c->pol->n_serving_ips && i < PROFILE_MAX_NAMES; i++) {
        uint8_t want[16];
        const char *txt = c->pol->serving_ips[i];
        if (txt && inet_pton(af, txt, want) == 1 && der_eq(&t, want, t.len)) {
            tbs_note_san(c, "ip", txt, strlen(txt));
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EPERM, "invariant 4: IP SAN not in the serving list");
}

static HSMCA_MUSTCHECK hsmca_code tbs_ext_san(tbs_ctx *c, der_cur val, hsmca_err *e)
{
    der_cur seq, name;
    uint8_t tag;
    SHA256(val.p, val.len, c->facts->san_sha256);
    TBS_DER(der_get_only(&val, DER_SEQUENCE, &seq), e, 4, "subjectAltName");
    HSMCA_ENSURE(!der_empty(&seq), e, HSMCA_EINVAL, "invariant 4: subjectAltName empty");
    while (!der_empty(&seq)) {
        TBS_DER(der_get_any(&seq, &tag, &name), e, 4, "GeneralName");
        if (tag == DER_GN_URI)
            HSMCA_GUARD(tbs_san_uri(c, name, e));
        else if (tag == DER_GN_DNS)
            HSMCA_GUARD(tbs_san_dns(c, name, e));
        else if (tag == DER_GN_IP)
            HSMCA_GUARD(tbs_san_ip(c, name, e));
        else
            return hsmca_fail(e, HSMCA_EPERM, "invariant 4: SAN type [%u] not allowed",
                              (unsigned)(tag & 0x1f));
    }
    return HSMCA_OK;
}

/* ---- the extension list ---------------------------------------------------------- */

/* The allowlist entry of an extension OID, or -1 (with its dotted form in txt). */
static int tbs_ext_lookup(der_cur oid, char *txt, size_t txtsz)
{
    if (oid.len == 3 && oid.p[0] == 0x55 && oid.p[1] == 0x1d)
        for (int k = 0; k < EXT_COUNT; k++)
            if (tbs_exts[k].last_arc == oid.p[2])
                return k;
    /* Only for the message: the OID has passed der_get_oid. */
    ASN1_OBJECT *o = NULL;
    uint8_t buf[2 + 64];
    buf[0] = DER_OID;
    buf[1] = (uint8_t)oid.len;
    memcpy(buf + 2, oid.p, oid.len);
    const uint8_t *p = buf;
    snprintf(txt, txtsz, "?");
    if (d2i_ASN1_OBJECT(&o, &p, (long)(oid.len + 2)))
        OBJ_obj2txt(txt, (int)txtsz, o, 1);
    ASN1_OBJECT_free(o);
    return -1;
}

/* Extension ::= SEQUENCE { extnID OID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING } */
static HSMCA_MUSTCHECK hsmca_code tbs_check_one_ext(tbs_ctx *c, der_cur *list, unsigned *seen,
                                                    hsmca_err *e)
{
    der_cur ext, oid, val;
    bool critical = false;
    TBS_DER(der_get(list, DER_SEQUENCE, &ext) && der_get_oid(&ext, &oid), e, 3, "extension");
    if (der_peek(&ext, DER_BOOLEAN)) {
        TBS_DER(der_get_bool(&ext, &critical), e, 3, "extension critical");
        /* DEFAULT FALSE must be omitted in DER. */
        HSMCA_ENSURE(critical, e, HSMCA_EINVAL, "invariant 3: critical FALSE encoded (not DER)");
    }
    TBS_DER(der_get_only(&ext, DER_OCTET_STRING, &val), e, 3, "extension value");
    char txt[80];
    int k = tbs_ext_lookup(oid, txt, sizeof(txt));
    HSMCA_ENSURE(k >= 0, e, HSMCA_EPERM, "invariant 3: extension %s not in the allowlist", txt);
    HSMCA_ENSURE(!(*seen & (1u << k)), e, HSMCA_EPERM, "invariant 3: duplicate extension %s",
                 tbs_exts[k].name);
    *seen |= 1u << k;
    HSMCA_ENSURE(critical == tbs_exts[k].critical, e, HSMCA_EPERM,
                 "invariant %d: %s must %sbe critical", tbs_exts[k].inv, tbs_exts[k].name,
                 tbs_exts[k].critical ? "" : "not ");
    return tbs_exts[k].check(c, val, e);
}

hsmca_code tbs_check_extensions(tbs_ctx *c, der_cur *in, hsmca_err *e)
{
    der_cur wrap, list;
    unsigned seen = 0;
    /* What stands where the extensions belong is named, not taken for their absence. */
    HSMCA_ENSURE(!der_peek_high_tag(in), e, HSMCA_EINVAL,
                 "invariant 3: high tag number (31 or more) where the extensions belong: not "
                 "allowed");
    HSMCA_ENSURE(der_empty(in) || der_peek(in, DER_CTX_CONS(3)), e, HSMCA_EPERM,
                 "invariant 3: unexpected tag 0x%02x where the extensions belong", in->p[0]);
    HSMCA_ENSURE(der_peek(in, DER_CTX_CONS(3)), e, HSMCA_EPERM, "invariant 3: extensions missing");
    TBS_DER(der_get(in, DER_CTX_CONS(3), &wrap) && der_get_only(&wrap, DER_SEQUENCE, &list), e, 3,
            "extensions");
    HSMCA_ENSURE(!der_empty(&list), e, HSMCA_EINVAL, "invariant 3: empty extensions list");
    while (!der_empty(&list))
        HSMCA_GUARD(tbs_check_one_ext(c, &list, &seen, e));
    for (int k = 0; k < EXT_COUNT; k++)
        HSMCA_ENSURE(seen & (1u << k), e, HSMCA_EPERM, "invariant %d: %s missing", tbs_exts[k].inv,
                     tbs_exts[k].name);
    return HSMCA_OK;
}

/* ---- the policy file (issuance.policy_file) on a workload TBS -------------------- */

hsmca_code tbs_check_policy_file(tbs_ctx *c, hsmca_err *e)
{
    const policy_set *pf = c->pol->policy_file;
    if (!pf || c->profile != PROFILE_WORKLOAD)
        return HSMCA_OK;
    hsmca_err why;
    policy_who who;
    HSMCA_ENSURE(c->uri.len > 0, e, HSMCA_EPERM,
                 "invariant 4: an X509-SVID has exactly one URI SAN");
    /* The trust domain was checked with the aliases already (trust_domains). */
    if (policy_identity(pf, c->pol->trust_domains[0], (const char *)c->uri.p, c->uri.len, &who,
                        &why) != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 4: %s", why.msg);
    for (int i = 0; i < c->n_dns; i++) {
        if (policy_check_dns(pf, &who, (const char *)c->dns[i].p, c->dns[i].len, &why) != HSMCA_OK)
            return hsmca_fail(e, HSMCA_EPERM, "invariant 4: %s", why.msg);
        tbs_note_san(c, "dns", (const char *)c->dns[i].p, c->dns[i].len);
    }
    if (policy_check_key(pf, c->key, &why) != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EPERM, "invariant 5: %s", why.msg);
    uint32_t cap = policy_ns_max_ttl(pf, who.ns);
    int64_t ttl = c->facts->not_after - c->facts->not_before;
    HSMCA_ENSURE(cap == 0 || ttl <= (int64_t)cap, e, HSMCA_EPERM,
                 "invariant 2: policy rule namespace_max_ttl: validity %lld s exceeds %u s for "
                 "namespace '%s'",
                 (long long)ttl, (unsigned)cap, who.ns);
    return HSMCA_OK;
}
