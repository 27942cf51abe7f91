/* leaf_csr.c - see leaf_csr.h.
 *
 * The CSR comes from the network, so every step is strict: one PEM block and
 * nothing else, canonical base64, DER with no trailing bytes, a key from the
 * allowlist, and a self-signature that verifies (proof of possession). */
#include "leaf_csr.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/obj_mac.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "leaf_csr_der.h"
#include "profile.h"
#include "util.h"

#define PEM_BEGIN "-----BEGIN CERTIFICATE REQUEST-----"
#define PEM_END "-----END CERTIFICATE REQUEST-----"

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Consumes one line ending ("\n" or "\r\n") at *pos; 0 if there is none. */
static int eat_eol(const char *s, size_t len, size_t *pos)
{
    if (*pos < len && s[*pos] == '\r')
        (*pos)++;
    if (*pos < len && s[*pos] == '\n') {
        (*pos)++;
        return 1;
    }
    return 0;
}

/* Finds the one PEM block in pem[0..len) and decodes its body into a new
 * buffer (caller frees). Lines of base64 only: no PEM headers, no blank lines. */
static HSMCA_MUSTCHECK hsmca_code pem_unwrap(const char *pem, size_t len, uint8_t **der,
                                             size_t *derlen, hsmca_err *e)
{
    const size_t bl = sizeof(PEM_BEGIN) - 1, el = sizeof(PEM_END) - 1;
    size_t pos = 0;
    while (pos < len && is_ws(pem[pos]))
        pos++;
    if (len - pos < bl || memcmp(pem + pos, PEM_BEGIN, bl) != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR is not a PEM block labelled CERTIFICATE REQUEST");
    pos += bl;
    if (!eat_eol(pem, len, &pos))
        return hsmca_fail(e, HSMCA_EINVAL, "CSR PEM: no line break after the BEGIN line");

    /* The base64 characters, line breaks removed; never longer than the input. */
    char *b64 = malloc(len);
    uint8_t *buf = NULL;
    size_t nb = 0;
    hsmca_code rc = HSMCA_EINVAL;
    if (!b64) {
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory parsing a CSR");
        goto out;
    }
    for (;;) {
        if (pos >= len) {
            rc = hsmca_fail(e, HSMCA_EINVAL, "CSR PEM: no END CERTIFICATE REQUEST line");
            goto out;
        }
        if (len - pos >= el && memcmp(pem + pos, PEM_END, el) == 0)
            break;
        size_t start = pos;
        pos += util_b64_span(pem + pos, len - pos);
        while (pos < len && pem[pos] == '=')
            pos++;
        size_t n = pos - start;
        if (n == 0 || !eat_eol(pem, len, &pos)) {
            rc = hsmca_fail(e, HSMCA_EINVAL,
                            "CSR PEM: body line is not base64 (headers, blank lines or "
                            "stray characters)");
            goto out;
        }
        memcpy(b64 + nb, pem + start, n);
        nb += n;
    }
    pos += el;
    while (pos < len && is_ws(pem[pos]))
        pos++;
    if (pos != len) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "CSR has data after the PEM block");
        goto out;
    }
    if (nb == 0 || !(buf = util_b64_decode(b64, nb, derlen))) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "CSR PEM body is not canonical base64");
        goto out;
    }
    *der = buf;
    buf = NULL;
    rc = HSMCA_OK;
out:
    free(b64);
    free(buf);
    return rc;
}

/* RSA within the profile's bounds (common/profile.h: 2048..8192 bits, an odd
 * exponent in [65537, 2^31-1], as the signer checks), or EC on P-256 / P-384 (named
 * curve, valid point). Cheap checks only: a modulus is not primality-tested. kctx
 * is a context of k (or NULL: none could be made). */
static HSMCA_MUSTCHECK hsmca_code check_key(EVP_PKEY *k, EVP_PKEY_CTX *kctx, hsmca_err *e)
{
    int id = EVP_PKEY_get_base_id(k);
    int bits = EVP_PKEY_get_bits(k);
    if (id == EVP_PKEY_RSA) {
        if (bits < PROFILE_RSA_BITS_MIN || bits > PROFILE_RSA_BITS_MAX)
            return hsmca_fail(e, HSMCA_EINVAL, "CSR key type/size not allowed: RSA-%d", bits);
        BIGNUM *ex = NULL;
        int ok = EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_E, &ex) && BN_is_odd(ex) &&
                 BN_num_bits(ex) <= 32 && BN_get_word(ex) >= PROFILE_RSA_E_MIN &&
                 BN_get_word(ex) <= PROFILE_RSA_E_MAX;
        BN_free(ex);
        if (!ok)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "CSR key type/size not allowed: RSA exponent (odd, 65537 to "
                              "2^31-1)");
        return HSMCA_OK;
    }
    if (id == EVP_PKEY_EC) {
        char group[64] = "", enc[32] = "";
        size_t gl = 0, encl = 0;
        if (!EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_EC_ENCODING, enc, sizeof(enc),
                                            &encl) ||
            strcmp(enc, OSSL_PKEY_EC_ENCODING_GROUP) != 0)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "CSR key type/size not allowed: EC with explicit parameters");
        if (!EVP_PKEY_get_group_name(k, group, sizeof(group), &gl))
            return hsmca_fail(e, HSMCA_EINVAL, "CSR key type/size not allowed: EC unknown curve");
        if (strcmp(group, SN_X9_62_prime256v1) != 0 && strcmp(group, SN_secp384r1) != 0)
            return hsmca_fail(e, HSMCA_EINVAL, "CSR key type/size not allowed: EC %s", group);
        /* P-256 and P-384 have cofactor 1: a point on the curve, not at infinity,
         * with coordinates in range already has the group's order, so the quick
         * check is the whole check (the full one adds a scalar multiplication by
         * the order, about as costly as the signature verification). */
        int ok = kctx && EVP_PKEY_public_check_quick(kctx) == 1;
        if (!ok)
            return hsmca_fail(e, HSMCA_EINVAL, "CSR key type/size not allowed: EC point invalid");
        return HSMCA_OK;
    }
    const char *name = OBJ_nid2sn(id);
    return hsmca_fail(e, HSMCA_EINVAL, "CSR key type/size not allowed: %s",
                      name ? name : "unknown");
}

/* A DNS SAN, kept for the policy file's dns_names rule (which checks its form). */
static HSMCA_MUSTCHECK hsmca_code collect_dns(const ASN1_IA5STRING *d, leaf_csr *out, hsmca_err *e)
{
    int n = ASN1_STRING_length(d);
    const unsigned char *p = ASN1_STRING_get0_data(d);
    if (n <= 0 || !p || memchr(p, '\0', (size_t)n))
        return hsmca_fail(e, HSMCA_EINVAL, "CSR DNS SAN is empty or contains a NUL byte");
    if (out->n_dns >= LEAF_CSR_MAX_SANS)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR carries more than %d DNS SANs", LEAF_CSR_MAX_SANS);
    char *s = malloc((size_t)n + 1);
    if (!s)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory parsing a CSR");
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    out->dns[out->n_dns++] = s;
    return HSMCA_OK;
}

/* URI SANs (exact length, no NUL), DNS SANs, and a count of every SAN that is not
 * a URI, from the extensionRequest attribute. */
static HSMCA_MUSTCHECK hsmca_code collect_sans(const STACK_OF(X509_ATTRIBUTE) * attrs, leaf_csr *out,
                                               hsmca_err *e)
{
    int nattr = X509at_get_attr_by_NID(attrs, NID_ext_req, -1);
    if (nattr < 0)
        return HSMCA_OK; /* no extensions at all: policy refuses the missing SAN */
    if (X509at_get_attr_by_NID(attrs, NID_ext_req, nattr) >= 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR has more than one extensionRequest attribute");
    /* As X509_REQ_get_extensions: the attribute's first value, a SEQUENCE of
     * extensions; no value at all means no extensions. */
    ASN1_TYPE *v = X509_ATTRIBUTE_get0_type(X509at_get_attr(attrs, nattr), 0);
    if (!v)
        return HSMCA_OK;
    STACK_OF(X509_EXTENSION) *exts = NULL;
    if (v->type == V_ASN1_SEQUENCE) {
        const unsigned char *p = v->value.sequence->data;
        exts = (STACK_OF(X509_EXTENSION) *)ASN1_item_d2i(NULL, &p, v->value.sequence->length,
                                                         ASN1_ITEM_rptr(X509_EXTENSIONS));
    }
    if (!exts)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR extensionRequest is malformed");
    hsmca_code rc = HSMCA_OK;
    int crit = -1;
    GENERAL_NAMES *gens = X509V3_get_d2i(exts, NID_subject_alt_name, &crit, NULL);
    if (!gens) {
        if (crit == -2)
            rc = hsmca_fail(e, HSMCA_EINVAL, "CSR carries more than one subjectAltName");
        else if (crit != -1)
            rc = hsmca_fail(e, HSMCA_EINVAL, "CSR subjectAltName is malformed");
        goto out;
    }
    for (int i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        if (g->type == GEN_DNS) {
            rc = collect_dns(g->d.dNSName, out, e);
            if (rc != HSMCA_OK)
                goto out;
        }
        if (g->type != GEN_URI) {
            out->n_other_sans++;
            continue;
        }
        const ASN1_IA5STRING *u = g->d.uniformResourceIdentifier;
        int n = ASN1_STRING_length(u);
        const unsigned char *d = ASN1_STRING_get0_data(u);
        if (n <= 0 || !d) {
            rc = hsmca_fail(e, HSMCA_EINVAL, "CSR URI SAN is empty");
            goto out;
        }
        if (memchr(d, '\0', (size_t)n)) {
            rc = hsmca_fail(e, HSMCA_EINVAL, "CSR URI SAN contains a NUL byte");
            goto out;
        }
        if (out->n_uris >= LEAF_CSR_MAX_SANS) {
            rc = hsmca_fail(e, HSMCA_EINVAL, "CSR carries more than %d URI SANs", LEAF_CSR_MAX_SANS);
            goto out;
        }
        char *s = malloc((size_t)n + 1);
        if (!s) {
            rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory parsing a CSR");
            goto out;
        }
        memcpy(s, d, (size_t)n);
        s[n] = '\0';
        out->uris[out->n_uris++] = s;
    }
out:
    GENERAL_NAMES_free(gens);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    return rc;
}

static HSMCA_MUSTCHECK hsmca_code parse_der(const uint8_t *der, size_t derlen, leaf_csr *out,
                                            hsmca_err *e)
{
    size_t used = 0;
    leaf_csr_der *req = leaf_csr_der_decode(der, derlen, &used);
    if (!req)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR is not a DER PKCS#10 request");
    hsmca_code rc = HSMCA_EINVAL;
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *kctx = NULL; /* one context of k for its check and the verify */
    if (used != derlen) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "CSR DER has trailing bytes");
        goto out;
    }
    if (leaf_csr_der_version(req) != X509_REQ_VERSION_1) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "CSR version is not v1");
        goto out;
    }
    if (!(k = leaf_csr_der_pubkey(req))) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "CSR public key does not decode");
        goto out;
    }
    /* Key first: refusing an odd key is cheaper than verifying with it. */
    kctx = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);
    if ((rc = check_key(k, kctx, e)) != HSMCA_OK)
        goto out;
    if (!leaf_csr_der_verify(req, k, kctx)) {
        rc = hsmca_fail(e, HSMCA_EINVAL, "CSR signature does not verify");
        goto out;
    }
    if ((rc = collect_sans(leaf_csr_der_attributes(req), out, e)) != HSMCA_OK)
        goto out;
    if (!(out->spki = leaf_csr_der_spki(req))) {
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "cannot keep the CSR key");
        goto out;
    }
    out->pubkey = k;
    k = NULL;
    rc = HSMCA_OK;
out:
    EVP_PKEY_CTX_free(kctx);
    EVP_PKEY_free(k);
    leaf_csr_der_free(req);
    return rc;
}

hsmca_code leaf_csr_parse(const char *pem, size_t len, leaf_csr *out, hsmca_err *e)
{
    if (!out)
        return hsmca_fail(e, HSMCA_EINTERNAL, "leaf_csr_parse: no output");
    memset(out, 0, sizeof(*out));
    if (!pem || len == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR is empty");
    if (len > LEAF_CSR_MAX_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "CSR is larger than %d bytes", LEAF_CSR_MAX_LEN);

    uint8_t *der = NULL;
    size_t derlen = 0;
    hsmca_code rc = pem_unwrap(pem, len, &der, &derlen, e);
    if (rc == HSMCA_OK)
        rc = parse_der(der, derlen, out, e);
    if (rc == HSMCA_OK && !EVP_Digest(der, derlen, out->der_sha256, NULL, EVP_sha256(), NULL))
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "SHA-256 of the CSR failed");
    free(der);
    if (rc != HSMCA_OK)
        leaf_csr_free(out);
    return rc;
}

void leaf_csr_free(leaf_csr *c)
{
    if (!c)
        return;
    EVP_PKEY_free(c->pubkey);
    X509_PUBKEY_free(c->spki);
    for (int i = 0; i < c->n_uris && i < LEAF_CSR_MAX_SANS; i++)
        free(c->uris[i]);
    for (int i = 0; i < c->n_dns && i < LEAF_CSR_MAX_SANS; i++)
        free(c->dns[i]);
    memset(c, 0, sizeof(*c));
}
