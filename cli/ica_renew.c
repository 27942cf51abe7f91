/* ica_renew.c - see ica_renew.h. */
#include "ica_renew.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "audit_ica_renew.h"
#include "util.h"

static X509_REQ *csr_of(const char *csr_pem)
{
    BIO *b = BIO_new_mem_buf(csr_pem, (int)strlen(csr_pem));
    X509_REQ *csr = b ? PEM_read_bio_X509_REQ(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return csr;
}

/* The renewal message over the CSR's DER, into a new buffer *msg. */
static HSMCA_MUSTCHECK hsmca_code message_of(const char *csr_pem, const char *origin, uint64_t id,
                                             const char *cluster, uint8_t **msg, size_t *len,
                                             hsmca_err *e)
{
    X509_REQ *csr = csr_of(csr_pem);
    HSMCA_ENSURE(csr, e, HSMCA_EINVAL, "--csr: not a PEM certificate request");
    unsigned char *der = NULL;
    int n = i2d_X509_REQ(csr, &der);
    X509_REQ_free(csr);
    *msg = n > 0 ? audit_ica_renew_message(origin, id, cluster, der, (size_t)n, len) : NULL;
    OPENSSL_free(der);
    HSMCA_ENSURE(*msg, e, HSMCA_ENOMEM, "out of memory");
    return HSMCA_OK;
}

EVP_PKEY *ica_renew_key(const char *csr_pem, const char *cert_file, const char *key_file,
                        hsmca_err *e)
{
    FILE *f = cert_file ? fopen(cert_file, "r") : NULL;
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    X509_REQ *csr = cert_file ? NULL : csr_of(csr_pem);
    f = fopen(key_file, "r");
    EVP_PKEY *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    hsmca_err_clear(e);
    if (cert_file && !x)
        hsmca_fail(e, HSMCA_EINVAL, "--renew-with-cert %s: not a PEM certificate", cert_file);
    else if (!cert_file && !csr)
        hsmca_fail(e, HSMCA_EINVAL, "--csr: not a PEM certificate request");
    else if (!k)
        hsmca_fail(e, HSMCA_EINVAL, "--renew-with-key %s: not a PEM private key", key_file);
    else if (x && X509_check_private_key(x, k) != 1)
        hsmca_fail(e, HSMCA_EINVAL,
                   "--renew-with-key %s is not the private key of --renew-with-cert %s",
                   key_file, cert_file);
    else if (csr && EVP_PKEY_eq(X509_REQ_get0_pubkey(csr), k) != 1)
        hsmca_fail(e, HSMCA_EINVAL,
                   "--renew-with-key %s is not the key of --csr (a renewal onto a new key "
                   "needs --renew-with-cert: the current intermediate's certificate)",
                   key_file);
    X509_free(x);
    X509_REQ_free(csr);
    if (e->code != HSMCA_OK) {
        EVP_PKEY_free(k);
        return NULL;
    }
    return k;
}

hsmca_code ica_renew_proof(EVP_PKEY *k, const char *csr_pem, const char *origin, uint64_t id,
                           const char *cluster, char **out, hsmca_err *e)
{
    uint8_t *msg = NULL;
    size_t len = 0, siglen = 0;
    *out = NULL;
    hsmca_err_clear(e);
    hsmca_code rc = message_of(csr_pem, origin, id, cluster, &msg, &len, e);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *sig = NULL;
    if (rc == HSMCA_OK &&
        (!ctx || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k) != 1 ||
         EVP_DigestSign(ctx, NULL, &siglen, msg, len) != 1 || !(sig = malloc(siglen)) ||
         EVP_DigestSign(ctx, sig, &siglen, msg, len) != 1))
        rc = hsmca_fail(e, HSMCA_EINVAL, "--renew-with-key: cannot sign with it");
    if (rc == HSMCA_OK && !(*out = util_b64_encode(sig, siglen)))
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    free(sig);
    EVP_MD_CTX_free(ctx);
    free(msg);
    return rc;
}
