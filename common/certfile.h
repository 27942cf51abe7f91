/* certfile.h - PEM files of certificates (a root bundle, a chain): read every
 * certificate in one, and write a set of them as PEM. The ceremony commands, config
 * check and publish-roots read them alike. */
#ifndef HSMCA_CERTFILE_H
#define HSMCA_CERTFILE_H

#include <openssl/x509.h>

#include "hsmca_err.h"

#define CERTFILE_MAX (1024 * 1024) /* a certificate file over this is refused */

/* Every certificate in the PEM file at path (at most CERTFILE_MAX; anything else in
 * it, or no certificate at all, is refused naming what). A new stack (caller frees
 * with sk_X509_pop_free), or NULL with e. */
STACK_OF(X509) *certfile_load(const char *path, const char *what, hsmca_err *e);

/* The PEM of certs[0..), each ending in "\n" (new string, caller frees); NULL when out
 * of memory. */
char *certfile_pem(STACK_OF(X509) *certs);

#endif
