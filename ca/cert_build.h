/* cert_build.h - CA certificates and CSRs signed by the CA key in its token: the TBS
 * (or the CSR's CertificationRequestInfo) is built here with OpenSSL, its digest is
 * signed through hsmca's own PKCS#11 code (p11_pool_sign_digest: the signer's key
 * checks and recovery), and the result is verified with the key's public half before
 * it is returned. Shared by `hsmca dev` (its dev root) and `hsmca ca init`. */
#ifndef HSMCA_CERT_BUILD_H
#define HSMCA_CERT_BUILD_H

#include <openssl/x509.h>

#include "hsmca_err.h"
#include "p11.h"

/* A self-signed root for the pool's key: version 3, a random 128-bit serial, subject
 * and issuer `name`, valid from 5 minutes ago for `validity` seconds, basicConstraints
 * critical CA:TRUE, keyUsage critical keyCertSign|cRLSign|digitalSignature,
 * subjectKeyIdentifier (SHA-1 of the key) and authorityKeyIdentifier (the same key
 * id). *out is a new certificate (caller X509_free's). */
HSMCA_MUSTCHECK hsmca_code cert_build_root(p11_pool *pool, const X509_NAME *name,
                                           long long validity, X509 **out, hsmca_err *e);

/* The new root cross-signed by the old CA key (old_pool, which must be old_root's key):
 * new_root's subject, public key, subjectKeyIdentifier and CA extensions (as a root
 * above), issuer old_root's subject, authorityKeyIdentifier old_root's key id, a random
 * 128-bit serial, valid from 5 minutes ago until the earlier of the two roots' notAfter.
 * A client trusting only the old root verifies the new CA's certificates through it. */
HSMCA_MUSTCHECK hsmca_code cert_build_cross(p11_pool *old_pool, X509 *old_root, X509 *new_root,
                                            X509 **out, hsmca_err *e);

/* A PKCS#10 CSR for the pool's key with subject `name`, asking (extensionRequest)
 * for the root's basicConstraints and keyUsage above. *out is new (X509_REQ_free). */
HSMCA_MUSTCHECK hsmca_code cert_build_csr(p11_pool *pool, const X509_NAME *name,
                                          X509_REQ **out, hsmca_err *e);

/* cert_build_csr's CSR in PEM (a new string, caller frees): what `ca init --csr` and
 * `ca rotate prepare --csr` write. */
HSMCA_MUSTCHECK hsmca_code cert_build_csr_pem(p11_pool *pool, const X509_NAME *name, char **pem,
                                              hsmca_err *e);

/* Parses "/O=Example/OU=Mesh/CN=Root CA" (OpenSSL's -subj form: a backslash takes
 * the next character as is) into *out (new). Attribute names are OpenSSL's short or
 * long names; values are UTF-8; at least one attribute. */
HSMCA_MUSTCHECK hsmca_code cert_build_parse_subject(const char *s, X509_NAME **out,
                                                    hsmca_err *e);

#endif
