/* fuzz_clientcert.c - libFuzzer target for fe_clientcert_verify_pem
 * (frontend/fe_clientcert.h), with fuzz_ca's CA as our CA and only root, trust
 * domain cluster.local, at FUZZ_NOW.
 *
 * The first input byte picks how the rest reaches the verifier (byte % 3):
 *   0: the bytes are the PEM text gRPC hands over (x509_pem_cert);
 *   1: the bytes are DER, wrapped here in a PEM block (the ASN.1 parser);
 *   2: the bytes are DER; a certificate that parses is signed here with the CA
 *      key first, so the mutations reach what comes after the signature: the
 *      path, validity, purpose and CA checks and the SAN walk. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "fe_clientcert.h"
#include "fuzz_ca.h"
#include "fuzz_common.h"
#include "policy_spiffe.h"

static X509 *ca;
static EVP_PKEY *ca_key;
static fe_clientcert *cc;

static char *pem_of(X509 *x, size_t *len)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    if (b && PEM_write_bio_X509(b, x)) {
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n))) {
            memcpy(out, data, (size_t)n);
            *len = (size_t)n;
        }
    }
    BIO_free(b);
    return out;
}

static void init(void)
{
    size_t len = 0;
    char *pem = (ca = fuzz_ca_new(&ca_key)) ? pem_of(ca, &len) : NULL;
    char *roots = pem ? malloc(len + 1) : NULL;
    if (!roots)
        abort();
    memcpy(roots, pem, len);
    roots[len] = '\0';
    hsmca_err e;
    if (fe_clientcert_new(ca, NULL, roots, FUZZ_TRUST_DOMAIN, &cc, &e) != HSMCA_OK)
        abort();
    free(roots);
    free(pem);
}

/* The PEM text for the input, per the mode byte; NULL to skip it. */
static char *text_for(uint8_t mode, const uint8_t *p, size_t n, size_t *len)
{
    if (mode == 0) { /* a private copy of exactly n bytes: ASan sees any read past it */
        char *t = malloc(n ? n : 1);
        if (t)
            memcpy(t, p, n);
        *len = n;
        return t;
    }
    const unsigned char *q = p;
    X509 *x = d2i_X509(NULL, &q, (long)n);
    if (!x) {
        ERR_clear_error(); /* the queue's entries would outlive the input */
        return NULL;
    }
    char *t = NULL;
    if (mode == 1 || X509_sign(x, ca_key, EVP_sha256()) > 0)
        t = pem_of(x, len);
    X509_free(x);
    ERR_clear_error(); /* a failed signature's: libFuzzer counts what an input leaves */
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!cc)
        init();
    if (size < 1 || size > 2 * FE_CLIENTCERT_MAX_PEM)
        return 0;
    size_t len = 0;
    char *text = text_for(data[0] % 3, data + 1, size - 1, &len);
    if (!text)
        return 0;
    char id[512];
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = fe_clientcert_verify_pem(cc, text, len, FUZZ_NOW, id, sizeof(id), &e);
    if (ERR_peek_error() != 0)
        abort(); /* left on gRPC's thread, a stale error fails its next TLS call */
    if (rc == HSMCA_OK) {
        /* An accepted certificate yields one SPIFFE ID of our trust domain. */
        const char *tds[1] = {FUZZ_TRUST_DOMAIN};
        hsmca_err pe;
        if (policy_spiffe_id_check(id, strlen(id), tds, 1, &pe) != HSMCA_OK)
            abort();
    } else if (e.code != rc || e.msg[0] == '\0' || id[0] != '\0' ||
               (rc != HSMCA_EAUTH && rc != HSMCA_ENOMEM)) {
        abort(); /* a refusal is UNAUTHENTICATED, names its check, and names nobody */
    }
    free(text);
    return 0;
}
