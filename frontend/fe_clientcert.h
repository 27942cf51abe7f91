/* fe_clientcert.h - the client-certificate authenticator (docs/ARCHITECTURE.md §4 step 2):
 * a workload renews with its current certificate and no token, as istio-agent
 * does. The TLS port requests a client certificate but does not require or
 * verify it (gRPC would turn a foreign or expired certificate into a failed
 * handshake, which the caller sees as UNAVAILABLE with no reason); this module
 * verifies it with OpenSSL against our roots and our CA, for every call. */
#ifndef HSMCA_FE_CLIENTCERT_H
#define HSMCA_FE_CLIENTCERT_H

#include "hsmca_err.h"
#include <grpc/grpc_security.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

/* A client certificate's PEM (gRPC's x509_pem_cert) is refused above this. */
#define FE_CLIENTCERT_MAX_PEM (16 * 1024)

/* What a client certificate is checked against; read-only once built, so
 * shared by every call and thread. */
typedef struct fe_clientcert fe_clientcert;

/* Builds the verifier: roots_pem (the root bundle, one or more certificates)
 * is trusted; ca_cert (not owned, kept referenced) must be the leaf's issuer;
 * chain_pem (the intermediates between ca_cert and a root, may be NULL or "")
 * completes the path. trust_domain is copied. *out is freed with
 * fe_clientcert_free. HSMCA_EINVAL names the input that does not parse. */
HSMCA_MUSTCHECK hsmca_code fe_clientcert_new(X509 *ca_cert, const char *chain_pem,
                                             const char *roots_pem, const char *trust_domain,
                                             fe_clientcert **out, hsmca_err *e);

void fe_clientcert_free(fe_clientcert *cc);

/* Verifies one PEM leaf at time now (Unix seconds): it parses, chains to a
 * root through ca_cert (its issuer) and nothing else, is within its validity,
 * is valid for clientAuth and not a CA, and has exactly one URI SAN, a SPIFFE ID
 * in the trust domain; that URI goes to identity (idsz bytes, NUL-terminated).
 * Otherwise HSMCA_EAUTH with "client certificate: <the check that failed>". */
HSMCA_MUSTCHECK hsmca_code fe_clientcert_verify_pem(const fe_clientcert *cc, const char *pem,
                                                    size_t len, int64_t now, char *identity,
                                                    size_t idsz, hsmca_err *e);

/* 1 when the call's peer presented a certificate in the TLS handshake. */
int fe_clientcert_presented(const grpc_auth_context *ctx);

/* The caller's identity from the certificate it presented on this call's
 * connection (ctx from grpc_call_auth_context; NULL: none): as
 * fe_clientcert_verify_pem, and HSMCA_EAUTH when none was presented. */
HSMCA_MUSTCHECK hsmca_code fe_clientcert_identity(const fe_clientcert *cc,
                                                  const grpc_auth_context *ctx, int64_t now,
                                                  char *identity, size_t idsz, hsmca_err *e);

/* The serial octets (at most 20, *serial_len) and SHA-256 of the issuer Name's DER of
 * the certificate the call's peer presented, once fe_clientcert_identity accepted it:
 * what the signer's revocation check needs. HSMCA_EAUTH when none parses or its serial
 * is longer than 20 octets. */
HSMCA_MUSTCHECK hsmca_code fe_clientcert_ref(const grpc_auth_context *ctx, uint8_t serial[20],
                                             size_t *serial_len, uint8_t issuer_sha256[32],
                                             hsmca_err *e);

#endif
