/* certfile.c - see certfile.h. */
#include "certfile.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "certasm.h"
#include "util.h"

/* The certificates in buf: every PEM block must be a CERTIFICATE. */
static STACK_OF(X509) *parse_certs(const char *buf, size_t len, const char *path,
                                   const char *what, hsmca_err *e)
{
    STACK_OF(X509) *certs = sk_X509_new_null();
    BIO *b = BIO_new_mem_buf(buf, (int)len);
    char *name = NULL, *header = NULL;
    unsigned char *der = NULL;
    long n;
    while (certs && b && PEM_read_bio(b, &name, &header, &der, &n)) {
        const unsigned char *p = der;
        X509 *x = strcmp(name, "CERTIFICATE") == 0 ? d2i_X509(NULL, &p, n) : NULL;
        int ok = x && p == der + n && sk_X509_push(certs, x);
        if (!ok)
            X509_free(x);
        OPENSSL_free(name);
        OPENSSL_free(header);
        OPENSSL_free(der);
        if (!ok) {
            sk_X509_pop_free(certs, X509_free);
            certs = NULL;
            hsmca_fail(e, HSMCA_EINVAL, "%s %s: a PEM block that is not a certificate, or one "
                                        "that does not parse", what, path);
        }
    }
    ERR_clear_error();
    BIO_free(b);
    if (certs && sk_X509_num(certs) == 0) {
        sk_X509_free(certs);
        certs = NULL;
        hsmca_fail(e, HSMCA_EINVAL, "%s %s: no PEM certificate in it", what, path);
    } else if (!b && certs) {
        sk_X509_pop_free(certs, X509_free);
        certs = NULL;
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    return certs;
}

STACK_OF(X509) *certfile_load(const char *path, const char *what, hsmca_err *e)
{
    char *buf = NULL;
    size_t len = 0;
    hsmca_err why;
    if (util_read_file(path, CERTFILE_MAX, &buf, &len, &why) != HSMCA_OK) {
        hsmca_fail(e, HSMCA_EIO, "%s: %s", what, why.msg);
        return NULL;
    }
    STACK_OF(X509) *certs = parse_certs(buf, len, path, what, e);
    free(buf);
    return certs;
}

char *certfile_pem(STACK_OF(X509) *certs)
{
    BIO *b = BIO_new(BIO_s_mem());
    int ok = b != NULL;
    for (int i = 0; ok && i < sk_X509_num(certs); i++)
        ok = PEM_write_bio_X509(b, sk_X509_value(certs, i));
    char *pem = ok ? certasm_bio_string(b) : NULL;
    BIO_free(b);
    return pem;
}
