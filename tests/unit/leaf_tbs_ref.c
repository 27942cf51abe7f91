/* leaf_tbs_ref.c - see leaf_tbs_ref.h: the front end's TBS builder as it was before
 * the DER template (frontend/fe_tbs.c at 9c23dd8), with the serial given. */
#include "leaf_tbs_ref.h"

#include <string.h>
#include <time.h>

#include <openssl/x509v3.h>

#include "certasm.h"
#include "profile.h"

#define LEAF_TBS_SERIAL_LEN 16
#define LEAF_TBS_BACKDATE PROFILE_BACKDATE_S

/* The serial given (16 content octets, as leaf_tbs_build draws them). */
static HSMCA_MUSTCHECK hsmca_code set_serial(X509 *x, const uint8_t b[16], hsmca_err *e)
{
    ASN1_INTEGER *sn = X509_get_serialNumber(x);
    if (!ASN1_STRING_set(sn, b, 16))
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory setting the serial");
    sn->type = V_ASN1_INTEGER; /* positive */
    return HSMCA_OK;
}

/* Appends one extension; takes no ownership of value. */
static HSMCA_MUSTCHECK hsmca_code add_ext(X509 *x, int nid, void *value, int crit, hsmca_err *e)
{
    if (!value || X509_add1_ext_i2d(x, nid, value, crit, X509V3_ADD_DEFAULT) != 1)
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot add the %s extension", OBJ_nid2sn(nid));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_basic_ext(X509 *x, hsmca_err *e)
{
    BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new(); /* ca = FALSE, no pathlen */
    hsmca_code rc = add_ext(x, NID_basic_constraints, bc, 1, e);
    BASIC_CONSTRAINTS_free(bc);
    if (rc != HSMCA_OK)
        return rc;

    /* keyEncipherment for an RSA key only (RFC 8813 3). */
    ASN1_OBJECT *alg = NULL;
    X509_PUBKEY_get0_param(&alg, NULL, NULL, NULL, X509_get_X509_PUBKEY(x));
    int rsa = alg && OBJ_obj2nid(alg) == NID_rsaEncryption;
    ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new();
    if (ku && (!ASN1_BIT_STRING_set_bit(ku, 0, 1) ||         /* digitalSignature */
               (rsa && !ASN1_BIT_STRING_set_bit(ku, 2, 1)))) { /* keyEncipherment */
        ASN1_BIT_STRING_free(ku);
        ku = NULL;
    }
    rc = add_ext(x, NID_key_usage, ku, 1, e);
    ASN1_BIT_STRING_free(ku);
    if (rc != HSMCA_OK)
        return rc;

    EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
    if (eku && (!sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth)) ||
                !sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_client_auth)))) {
        sk_ASN1_OBJECT_free(eku);
        eku = NULL;
    }
    rc = add_ext(x, NID_ext_key_usage, eku, 0, e);
    sk_ASN1_OBJECT_free(eku); /* the objects are OpenSSL's static table entries */
    return rc;
}

/* Copies a parsed SubjectPublicKeyInfo (algorithm, named-curve or NULL
 * parameters, key bits) into x without a decode/encode round trip. */
static int copy_spki(X509 *x, const X509_PUBKEY *from)
{
    ASN1_OBJECT *alg = NULL;
    const unsigned char *bits = NULL;
    int nbits = 0;
    X509_ALGOR *pa = NULL;
    const ASN1_OBJECT *pobj;
    int ptype;
    const void *pval;
    if (!X509_PUBKEY_get0_param(&alg, &bits, &nbits, &pa, from) || !bits || nbits <= 0)
        return 0;
    X509_ALGOR_get0(&pobj, &ptype, &pval, pa);
    void *param = NULL;
    if (ptype == V_ASN1_OBJECT)
        param = OBJ_dup(pval);
    else if (ptype != V_ASN1_NULL && ptype != V_ASN1_UNDEF)
        return 0; /* explicit curve parameters: never accepted from a CSR */
    ASN1_OBJECT *obj = OBJ_dup(pobj);
    unsigned char *copy = OPENSSL_memdup(bits, (size_t)nbits);
    if (!obj || !copy || (ptype == V_ASN1_OBJECT && !param) ||
        !X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), obj, ptype, param, copy, nbits)) {
        ASN1_OBJECT_free(obj);
        ASN1_OBJECT_free(param);
        OPENSSL_free(copy);
        return 0;
    }
    return 1;
}

/* SKI = SHA-1 of the subjectPublicKey BIT STRING (RFC 5280 4.2.1.2 method 1);
 * AKI = keyIdentifier only, the CA's own SKI, so chains link by key id. */
static HSMCA_MUSTCHECK hsmca_code add_key_ids(X509 *x, X509 *ca, hsmca_err *e)
{
    const unsigned char *pk = NULL;
    int pklen = 0;
    unsigned char md[20];
    unsigned int mdlen = 0;
    if (!X509_PUBKEY_get0_param(NULL, &pk, &pklen, NULL, X509_get_X509_PUBKEY(x)) || !pk ||
        !EVP_Digest(pk, (size_t)pklen, md, &mdlen, EVP_sha1(), NULL))
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot hash the subject public key");
    ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
    if (ski && !ASN1_OCTET_STRING_set(ski, md, (int)mdlen)) {
        ASN1_OCTET_STRING_free(ski);
        ski = NULL;
    }
    hsmca_code rc = add_ext(x, NID_subject_key_identifier, ski, 0, e);
    ASN1_OCTET_STRING_free(ski);
    if (rc != HSMCA_OK)
        return rc;

    const ASN1_OCTET_STRING *ca_ski = X509_get0_subject_key_id(ca);
    if (!ca_ski || ASN1_STRING_length(ca_ski) <= 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CA certificate has no subjectKeyIdentifier");
    AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
    if (aki && !(aki->keyid = ASN1_OCTET_STRING_dup(ca_ski))) {
        AUTHORITY_KEYID_free(aki);
        aki = NULL;
    }
    rc = add_ext(x, NID_authority_key_identifier, aki, 0, e);
    AUTHORITY_KEYID_free(aki);
    return rc;
}

/* Pushes one name of type (GEN_URI or GEN_DNS) holding text as an IA5String. */
static HSMCA_MUSTCHECK hsmca_code push_ia5(GENERAL_NAMES *gens, int type, const char *text,
                                           hsmca_err *e)
{
    size_t n = text ? strlen(text) : 0;
    if (n == 0 || n > 1024)
        return hsmca_fail(e, HSMCA_EINVAL, "TBS: %s SAN is empty or longer than 1024 bytes",
                          type == GEN_URI ? "URI" : "DNS");
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_IA5STRING *s = ASN1_IA5STRING_new();
    if (!g || !s || !ASN1_STRING_set(s, text, (int)n)) {
        GENERAL_NAME_free(g);
        ASN1_IA5STRING_free(s);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory building a SAN");
    }
    GENERAL_NAME_set0_value(g, type, s);
    if (!sk_GENERAL_NAME_push(gens, g)) {
        GENERAL_NAME_free(g);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory building a SAN");
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_san(X509 *x, const leaf_tbs_params *p, hsmca_err *e)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    hsmca_code rc = HSMCA_OK;
    if (!gens)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory building a SAN");
    if (p->uri_san)
        rc = push_ia5(gens, GEN_URI, p->uri_san, e);
    for (int i = 0; rc == HSMCA_OK && i < p->n_dns; i++)
        rc = push_ia5(gens, GEN_DNS, p->dns[i], e);
    for (int i = 0; rc == HSMCA_OK && i < p->n_ips; i++) {
        ASN1_OCTET_STRING *ip = p->ips[i] ? a2i_IPADDRESS(p->ips[i]) : NULL;
        GENERAL_NAME *g = ip ? GENERAL_NAME_new() : NULL;
        if (!g) {
            ASN1_OCTET_STRING_free(ip);
            rc = hsmca_fail(e, HSMCA_EINVAL, "TBS: IP SAN %d is not an IP address", i);
            break;
        }
        GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
        if (!sk_GENERAL_NAME_push(gens, g)) {
            GENERAL_NAME_free(g);
            rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory building a SAN");
        }
    }
    /* Critical: the subject is empty, so the SAN is the whole identity (RFC 5280 4.2.1.6). */
    if (rc == HSMCA_OK)
        rc = add_ext(x, NID_subject_alt_name, gens, 1, e);
    GENERAL_NAMES_free(gens);
    return rc;
}

/* The backdate absorbs clock skew between us and relying parties; it is part of
 * the TTL, because the signer caps notAfter - notBefore (invariant 2). */
static HSMCA_MUSTCHECK hsmca_code set_validity(X509 *x, const X509 *ca, int64_t now,
                                               uint32_t ttl, hsmca_err *e)
{
    int64_t not_before = now - LEAF_TBS_BACKDATE, not_after = not_before + (int64_t)ttl;
    /* Never past the CA certificate's notAfter (cut to it, as istiod does). */
    int day = 0, sec = 0;
    ASN1_TIME *nb = ASN1_TIME_set(NULL, (time_t)not_after);
    int cmp = nb ? ASN1_TIME_diff(&day, &sec, nb, X509_get0_notAfter(ca)) : 0;
    ASN1_TIME_free(nb);
    if (cmp && (day < 0 || sec < 0)) {
        if ((int64_t)day * 86400 + sec + not_after <= now)
            return hsmca_fail(e, HSMCA_EUNAVAIL, "the CA certificate has expired: nothing can be "
                                                 "issued under it");
        not_after += (int64_t)day * 86400 + sec;
    }
    if (!ASN1_TIME_set(X509_getm_notBefore(x), (time_t)not_before) ||
        !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)not_after))
        return hsmca_fail(e, HSMCA_EINTERNAL, "cannot set the validity");
    return HSMCA_OK;
}

hsmca_code leaf_tbs_ref_build(const leaf_tbs_params *p, const uint8_t serial[16], uint8_t **der,
                            size_t *len, hsmca_err *e)
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

    X509 *x = X509_new();
    if (!x)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory building a TBS");
    hsmca_code rc;
    /* The subject stays X509_new's empty name: identity lives in the SAN only. */
    if (!X509_set_version(x, X509_VERSION_3) ||
        !X509_set_issuer_name(x, X509_get_subject_name(p->ca_cert)) ||
        !(p->subject_spki ? copy_spki(x, p->subject_spki) : X509_set_pubkey(x, p->subject_key))) {
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "cannot set version, issuer or key of the TBS");
        goto out;
    }
    /* Extension order: BC, KU, EKU, SKI, AKI, SAN (what the signer expects to see). */
    if ((rc = set_serial(x, serial, e)) != HSMCA_OK ||
        (rc = set_validity(x, p->ca_cert, p->now, p->ttl, e)) != HSMCA_OK ||
        (rc = add_basic_ext(x, e)) != HSMCA_OK ||
        (rc = add_key_ids(x, p->ca_cert, e)) != HSMCA_OK || (rc = add_san(x, p, e)) != HSMCA_OK)
        goto out;
    rc = certasm_tbs_der(x, p->sig_nid, der, len, e);
out:
    X509_free(x);
    return rc;
}
