/* ica_crl.h - the CRLs of an istiod cacerts directory (docs/CEREMONY.md "Revocation and
 * CRLs"): `hsmca intermediate crl` makes the empty CRL istiod's intermediate key signs
 * (in this process, from the key file: the key lives with istiod, never in the token), and
 * fetch's ca-crl.pem, the CA's CRL and the intermediate's, each verified against its
 * issuer before it is written. Istio ignores a root-signed CRL unless the intermediate's
 * own CRL comes with it, and an invalid ca-crl.pem blocks istiod's key rotation. */
#ifndef HSMCA_ICA_CRL_H
#define HSMCA_ICA_CRL_H

#include <jansson.h>

/* `hsmca intermediate crl --cert ca-cert.pem --key ca-key.pem --out F`: exit status 0
 * written, 1 refused (a key that is not the certificate's, a certificate that is not a CA
 * with cRLSign), 2 bad usage. */
int ica_crl_make(const char *cert, const char *key, const char *out);

/* fetch's ca-crl.pem in dir: the CA's current CRL (crl.path of config when readable,
 * else crl-get over the admin socket of config or sock), verified under a certificate of the fetched chain or roots, then the
 * CRL at ica_crl (may be NULL), verified under the fetched intermediate (reply's
 * ca_cert). Nothing is written when no CRL is available (said on stdout). 0 written or
 * nothing to write, 1 a CRL failed its check or the file could not be written. */
int ica_crl_fetch(const char *config, const char *sock, json_t *reply, const char *ica_crl,
                  const char *dir);

#endif
