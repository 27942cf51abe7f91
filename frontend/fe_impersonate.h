/* fe_impersonate.h - ztunnel impersonation, Istio's
 * NodeAuthorizer: a caller whose service account is in
 * auth.trusted_node_accounts may ask, with the request metadata's
 * "ImpersonatedIdentity", for a certificate of another SPIFFE identity of our
 * trust domain, when the Kubernetes API shows the caller's pod (name and uid
 * from its token) on a node where a Running pod of that service account is.
 * The checks are in fe_k8spods.h; this runs them against the API server of
 * the TokenReview authenticator. */
#ifndef HSMCA_FE_IMPERSONATE_H
#define HSMCA_FE_IMPERSONATE_H

#include <stddef.h>

#include "fe_auth.h"
#include "hsmca_err.h"

struct fe_app;

/* who (the authenticated caller) asks for requested (len bytes). On HSMCA_OK
 * either *deferred = 1 (the API must be asked and c->may_block is 0: run again
 * on an authentication thread) or who->ids is the requested identity alone.
 * HSMCA_EPERM names the refused check; HSMCA_EUNAVAIL when the API server
 * cannot be asked. */
HSMCA_MUSTCHECK hsmca_code fe_impersonate(const struct fe_app *app, const fe_auth_creds *c,
                                          fe_auth_result *who, const char *requested, size_t len,
                                          int *deferred, hsmca_err *e);

#endif
