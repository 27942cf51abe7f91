/* fe_clientcert.c - see fe_clientcert.h. */
#include "fe_clientcert.h"

#include <stdlib.h>
#include <string.h>

#include <grpc/grpc_security_constants.h>
#include <openssl/err.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "policy_spiffe.h"

struct fe_clientcert {
    X509_STORE *roots;          /* trusted: the root bundle */
    STACK_OF(X509) * untrusted; /* our CA certificate and the intermediates above it */
    X509 *ca_cert;              /* the only issuer a client certificate may have */
    char trust_domain[SPIFFE_TD_MAX + 1];
};

/* Every certificate of a PEM text, in order; NULL when there is none. */
static STACK_OF(X509) * read_certs(const char *pem)
{
    STACK_OF(X509) *sk = sk_X509_new_null();
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x;
    while (sk && b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        if (!sk_X509_push(sk, x)) {
            X509_free(x);
            break;
        }
    }
    ERR_clear_error(); /* the end of the text reads as an error */
    BIO_free(b);
    if (sk && sk_X509_num(sk) == 0) {
        sk_X509_free(sk);
        sk = NULL;
    }
    return sk;
}

static HSMCA_MUSTCHECK hsmca_code build(fe_clientcert *cc, X509 *ca_cert, const char *chain_pem,
                                        const char *roots_pem, hsmca_err *e)
{
    STACK_OF(X509) *roots = read_certs(roots_pem);
    HSMCA_ENSURE(roots, e, HSMCA_EINVAL, "client certificates: no certificate in the root bundle");
    int ok = (cc->roots = X509_STORE_new()) != NULL;
    for (int i = 0; ok && i < sk_X509_num(roots); i++)
        ok = X509_STORE_add_cert(cc->roots, sk_X509_value(roots, i));
    sk_X509_pop_free(roots, X509_free);
    HSMCA_ENSURE(ok, e, HSMCA_EINTERNAL, "client certificates: cannot load the root bundle");
    if (chain_pem && chain_pem[0]) {
        cc->untrusted = read_certs(chain_pem);
        HSMCA_ENSURE(cc->untrusted, e, HSMCA_EINVAL,
                     "client certificates: no certificate in the chain file");
    } else {
        HSMCA_ENSURE((cc->untrusted = sk_X509_new_null()), e, HSMCA_ENOMEM, "out of memory");
    }
    HSMCA_ENSURE(X509_up_ref(ca_cert), e, HSMCA_EINTERNAL, "X509_up_ref failed");
    cc->ca_cert = ca_cert;
    HSMCA_ENSURE(X509_up_ref(ca_cert), e, HSMCA_EINTERNAL, "X509_up_ref failed");
    if (!sk_X509_insert(cc->untrusted, ca_cert, 0)) {
        X509_free(ca_cert);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    return HSMCA_OK;
}

hsmca_code fe_clientcert_new(X509 *ca_cert, const char *chain_pem, const char *roots_pem,
                             const char *trust_domain, fe_clientcert **out, hsmca_err *e)
{
    *out = NULL;
    HSMCA_ENSURE(ca_cert && roots_pem && trust_domain, e, HSMCA_EINVAL,
                 "client certificates: no CA certificate, root bundle or trust domain");
    HSMCA_ENSURE(strlen(trust_domain) <= SPIFFE_TD_MAX, e, HSMCA_EINVAL,
                 "client certificates: trust domain longer than %d bytes", SPIFFE_TD_MAX);
    fe_clientcert *cc = calloc(1, sizeof(*cc));
    HSMCA_ENSURE(cc, e, HSMCA_ENOMEM, "out of memory");
    strcpy(cc->trust_domain, trust_domain);
    hsmca_code rc = build(cc, ca_cert, chain_pem, roots_pem, e);
    if (rc != HSMCA_OK) {
        fe_clientcert_free(cc);
        return rc;
    }
    *out = cc;
    return HSMCA_OK;
}

void fe_clientcert_free(fe_clientcert *cc)
{
    if (!cc)
        return;
    X509_STORE_free(cc->roots);
    sk_X509_pop_free(cc->untrusted, X509_free);
    X509_free(cc->ca_cert);
    free(cc);
}

/* The path from leaf to a root, built by OpenSSL with our intermediates only
 * (the peer's own chain is ignored: it can add nothing we would accept), at
 * time now, for clientAuth; then the issuer must be our CA itself, so a leaf
 * of another CA under the same root (an istiod intermediate we issued) is
 * refused. */
static HSMCA_MUSTCHECK hsmca_code verify_path(const fe_clientcert *cc, X509 *leaf, int64_t now,
                                              hsmca_err *e)
{
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    HSMCA_ENSURE(ctx, e, HSMCA_ENOMEM, "out of memory");
    hsmca_code rc = HSMCA_OK;
    if (!X509_STORE_CTX_init(ctx, cc->roots, leaf, cc->untrusted) ||
        !X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT)) {
        rc = hsmca_fail(e, HSMCA_EINTERNAL, "client certificate: cannot set up the verification");
    } else {
        X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), (time_t)now);
        if (X509_verify_cert(ctx) != 1) {
            int err = X509_STORE_CTX_get_error(ctx);
            rc = hsmca_fail(
                e, HSMCA_EAUTH, "client certificate: does not verify to our roots at depth %d: %s",
                X509_STORE_CTX_get_error_depth(ctx), X509_verify_cert_error_string(err));
        } else {
            STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(ctx);
            if (sk_X509_num(chain) < 2 || X509_cmp(sk_X509_value(chain, 1), cc->ca_cert) != 0)
                rc = hsmca_fail(e, HSMCA_EAUTH, "client certificate: not issued by this CA");
        }
    }
    X509_STORE_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

/* Exactly one URI SAN, a SPIFFE ID in our trust domain (policy_spiffe_id_check,
 * the signer's own rule): the identity the certificate was issued for. */
static HSMCA_MUSTCHECK hsmca_code spiffe_uri(const fe_clientcert *cc, X509 *leaf, char *identity,
                                             size_t idsz, hsmca_err *e)
{
    int crit = 0;
    GENERAL_NAMES *gens = X509_get_ext_d2i(leaf, NID_subject_alt_name, &crit, NULL);
    HSMCA_ENSURE(crit != -2, e, HSMCA_EAUTH, "client certificate: more than one SAN extension");
    HSMCA_ENSURE(gens, e, HSMCA_EAUTH, "client certificate: no SAN extension");
    const ASN1_IA5STRING *uri = NULL;
    int n_uris = 0;
    for (int i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        if (g->type == GEN_URI) {
            uri = g->d.uniformResourceIdentifier;
            n_uris++;
        }
    }
    hsmca_code rc = HSMCA_OK;
    if (n_uris != 1) {
        rc = hsmca_fail(e, HSMCA_EAUTH, "client certificate: %d URI SANs (exactly one needed)",
                        n_uris);
    } else {
        const char *s = (const char *)ASN1_STRING_get0_data(uri);
        size_t len = (size_t)ASN1_STRING_length(uri);
        const char *tds[1] = {cc->trust_domain};
        hsmca_err pe;
        if (policy_spiffe_id_check(s, len, tds, 1, &pe) != HSMCA_OK)
            rc = hsmca_fail(e, HSMCA_EAUTH, "client certificate: URI SAN: %s", pe.msg);
        else if (len >= idsz)
            rc = hsmca_fail(e, HSMCA_EAUTH, "client certificate: URI SAN of %zu bytes is too long",
                            len);
        else {
            memcpy(identity, s, len);
            identity[len] = '\0';
        }
    }
    GENERAL_NAMES_free(gens);
    return rc;
}

hsmca_code fe_clientcert_verify_pem(const fe_clientcert *cc, const char *pem, size_t len,
                                    int64_t now, char *identity, size_t idsz, hsmca_err *e)
{
    if (idsz)
        identity[0] = '\0';
    HSMCA_ENSURE(pem && len > 0, e, HSMCA_EAUTH, "client certificate: empty");
    HSMCA_ENSURE(len <= FE_CLIENTCERT_MAX_PEM, e, HSMCA_EAUTH,
                 "client certificate: %zu bytes of PEM exceeds %d", len, FE_CLIENTCERT_MAX_PEM);
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    HSMCA_ENSURE(b, e, HSMCA_ENOMEM, "out of memory");
    X509 *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    ERR_clear_error();
    HSMCA_ENSURE(leaf, e, HSMCA_EAUTH, "client certificate: not a PEM X.509 certificate");
    hsmca_code rc = verify_path(cc, leaf, now, e);
    if (rc == HSMCA_OK && X509_check_ca(leaf) != 0)
        rc =
            hsmca_fail(e, HSMCA_EAUTH, "client certificate: is a CA certificate, not a workload's");
    if (rc == HSMCA_OK)
        rc = spiffe_uri(cc, leaf, identity, idsz, e);
    X509_free(leaf);
    return rc;
}

static const grpc_auth_property *pem_property(const grpc_auth_context *ctx)
{
    if (!ctx)
        return NULL;
    grpc_auth_property_iterator it =
        grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_PEM_CERT_PROPERTY_NAME);
    return grpc_auth_property_iterator_next(&it);
}

int fe_clientcert_presented(const grpc_auth_context *ctx)
{
    const grpc_auth_property *p = pem_property(ctx);
    return p && p->value && p->value_length > 0;
}

hsmca_code fe_clientcert_identity(const fe_clientcert *cc, const grpc_auth_context *ctx,
                                  int64_t now, char *identity, size_t idsz, hsmca_err *e)
{
    if (idsz)
        identity[0] = '\0';
    const grpc_auth_property *p = pem_property(ctx);
    HSMCA_ENSURE(p && p->value && p->value_length > 0, e, HSMCA_EAUTH,
                 "client certificate: none presented");
    return fe_clientcert_verify_pem(cc, p->value, p->value_length, now, identity, idsz, e);
}

hsmca_code fe_clientcert_ref(const grpc_auth_context *ctx, uint8_t serial[20],
                             size_t *serial_len, uint8_t issuer_sha256[32], hsmca_err *e)
{
    *serial_len = 0;
    const grpc_auth_property *p = pem_property(ctx);
    HSMCA_ENSURE(p && p->value && p->value_length > 0 &&
                     p->value_length <= FE_CLIENTCERT_MAX_PEM,
                 e, HSMCA_EAUTH, "client certificate: none presented");
    BIO *b = BIO_new_mem_buf(p->value, (int)p->value_length);
    HSMCA_ENSURE(b, e, HSMCA_ENOMEM, "out of memory");
    X509 *leaf = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    ERR_clear_error();
    HSMCA_ENSURE(leaf, e, HSMCA_EAUTH, "client certificate: not a PEM X.509 certificate");
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
    const unsigned char *der = NULL;
    size_t der_len = 0;
    int n = bn && !BN_is_negative(bn) ? BN_num_bytes(bn) : -1;
    hsmca_code rc = HSMCA_OK;
    if (n < 1 || n > 20 || !X509_NAME_get0_der(X509_get_issuer_name(leaf), &der, &der_len))
        rc = hsmca_fail(e, HSMCA_EAUTH, "client certificate: serial is not 1 to 20 octets");
    else {
        *serial_len = (size_t)BN_bn2bin(bn, serial);
        SHA256(der, der_len, issuer_sha256);
    }
    BN_free(bn);
    X509_free(leaf);
    return rc;
}
