/* dev_ca.h - creating (or reusing) a development CA in a directory. */
#ifndef HSMCA_DEV_CA_H
#define HSMCA_DEV_CA_H

#include "hsmca_err.h"
#include "p11.h"

#define DEV_TOKEN_LABEL "hsmca"
#define DEV_CA_KEY_LABEL "ca-key"
#define DEV_AUDIT_KEY_LABEL "audit-key"
#define DEV_SOFTHSM_MODULE "/usr/lib/softhsm/libsofthsm2.so"

/* Creates on first use, reuses after: DIR/softhsm2.conf and DIR/tokens, DIR/pin
 * and DIR/so-pin (0600), the token, the CA key and the audit key (both
 * sensitive, never extractable; the audit key is also made in a DIR from before
 * it existed): audit_type P11_KEY_ED25519 or P11_KEY_EC_P256 names the audit key
 * to make and requires an existing one to be of that type; P11_KEY_UNSET keeps
 * the one DIR holds, else makes Ed25519. DIR/root-cert.pem signed by the CA key in the token, the dev JWT issuer, and
 * DIR/hsmca.yaml for `hsmca serve` listening on listen (metrics.listen: metrics). Runs the PKCS#11 work in
 * a child process so the caller never loads the module. As root, then hands the
 * token to the signer's user (dev_signer_grant), which must exist. */
HSMCA_MUSTCHECK hsmca_code dev_ca_init(const char *dir, p11_key_type key_type,
                                       p11_key_type audit_type, const char *listen,
                                       const char *metrics, hsmca_err *e);

#endif
