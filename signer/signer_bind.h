/* signer_bind.h - identity binding (docs/ARCHITECTURE.md §3.2): the signer's own check that a
 * workload TBS names the identity of the bearer token the caller presented.
 *
 * The front end forwards a jwt caller's token with the TBS (SignRequest.token); the
 * signer verifies it again with the issuer keys the supervisor pushes it (never
 * fetched here: the signer opens no connection for them) against the issuer,
 * audiences and skew of its own config, and requires the TBS's URI SAN to be
 * spiffe://<td>/ns/<ns>/sa/<sa> of the token, for one of the trust domains the
 * signer's policy allows (issuance.trust_domain and the policy file's aliases). A
 * compromised front end can then replay a token it saw, never mint an identity.
 *
 * What cannot be bound: a caller accepted by client_cert or tokenreview (the signer
 * cannot check a TLS handshake it did not see, nor ask the API server). The front end
 * says which authenticator accepted the caller, and a compromised one can lie and say
 * client_cert: that residual is bounded by the signer's rate limit (invariant 7), or
 * closed by auth.jwt.bind_required for JWT-only deployments (every unbound workload
 * request refused). */
#ifndef HSMCA_SIGNER_BIND_H
#define HSMCA_SIGNER_BIND_H

#include "config.h"
#include "hsmca_err.h"
#include "signer_tbs.h"
#include <stddef.h>
#include <stdint.h>

typedef struct signer_bind signer_bind;

/* The binder for cfg (which must outlive it), or *out = NULL when binding is off
 * (auth.jwt.bind false, or no jwt in auth.chain). Until keys arrive
 * (signer_bind_load_fd), a request that needs binding is UNAVAILABLE. */
HSMCA_MUSTCHECK hsmca_code signer_bind_new(const hsmca_config *cfg, signer_bind **out,
                                           hsmca_err *e);
void signer_bind_free(signer_bind *b);

/* The supervisor's CTL_KEYS / CTL_KEYS_CLUSTER push for cluster (0 local, i + 1
 * auth.clusters[i]): a sealed memfd holding the JWKS (tok_keys_load_fd). Does not close
 * fd. On error the current keys stay; keys for a cluster without jwt are refused. */
HSMCA_MUSTCHECK hsmca_code signer_bind_load_fd(signer_bind *b, int cluster, int fd, hsmca_err *e);

/* Binds a workload request at time now: authenticator, token[0..token_len) and cluster
 * (SignRequest.cluster: the ClusterID whose issuer keys and issuer verify the token; NULL
 * or "" for the local cluster; unknown or without jwt: UNAUTHENTICATED) as the front end
 * sent them, sans the validated TBS's SAN text (tbs_facts.sans: the URI SAN
 * first). *bound = 1 when the token verified and names the URI SAN's identity; 0 when
 * the request is not bindable and may go on (binding off, or a client_cert/tokenreview
 * caller without auth.jwt.bind_required). Refusals, all "identity binding: ...":
 * UNAUTHENTICATED (HSMCA_EAUTH) when a jwt caller's token is missing or does not verify
 * (forged, expired, another issuer or audience); PERMISSION_DENIED (HSMCA_EPERM) when it
 * verifies but names another identity than the URI SAN, or when bind_required refuses an
 * unbound request; UNAVAILABLE (HSMCA_EUNAVAIL) before the keys arrived. */
HSMCA_MUSTCHECK hsmca_code signer_bind_check(signer_bind *b, const tbs_policy *pol,
                                             const char *authenticator, const char *token,
                                             size_t token_len, const char *cluster,
                                             const char *sans, int64_t now, int *bound,
                                             hsmca_err *e);

#endif
