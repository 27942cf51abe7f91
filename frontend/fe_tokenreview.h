/* fe_tokenreview.h - the Kubernetes TokenReview authenticator.
 *
 * A bearer token is sent to the API server as a TokenReview
 * (POST /apis/authentication.k8s.io/v1/tokenreviews, spec.token and
 * spec.audiences); only `authenticated: true`, the group system:serviceaccounts,
 * a username system:serviceaccount:<ns>:<sa> and, when audiences were asked
 * for, one of them in status.audiences make an identity. The API server
 * unreachable, slow, or refusing hsmca's own credentials is HSMCA_EUNAVAIL
 * (istio-agent retries it), never HSMCA_EAUTH. Positive answers are cached
 * by SHA-256 of the token (fe_trcache.h).
 *
 * fe_tokenreview_identity blocks for up to the timeout: call it from an
 * authentication thread, never from a gRPC completion-queue thread. Messages
 * never contain the token. */
#ifndef HSMCA_FE_TOKENREVIEW_H
#define HSMCA_FE_TOKENREVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "fe_trcache.h"
#include "hsmca_err.h"

#define FE_TR_MAX_TOKEN 8192           /* a longer bearer token is refused unsent */
#define FE_TR_MAX_RESPONSE (64 * 1024) /* a longer API server answer is UNAVAILABLE */
#define FE_TR_GROUP "system:serviceaccounts"
#define FE_TR_POD_NAME "authentication.kubernetes.io/pod-name"
#define FE_TR_POD_UID "authentication.kubernetes.io/pod-uid"

typedef struct {
    const char *kubeconfig;       /* a kubeconfig file; NULL or "": in-cluster */
    const char *sa_dir;           /* in-cluster token and ca.crt (NULL: K8S_SA_DIR) */
    const char *const *audiences; /* spec.audiences (n_audiences >= 1) */
    int n_audiences;
    uint32_t timeout_ms;    /* whole request: connect, TLS, answer */
    uint32_t cache_ttl;     /* seconds; 0: no cache */
    uint32_t cache_entries; /* 0: no cache */
} fe_tokenreview_options;

typedef struct fe_tokenreview fe_tokenreview;

/* Reads the kubeconfig (or the in-cluster service account), the CA, hsmca's
 * own credentials, and resolves the API server's host name, all now: after
 * this the front end is confined and can neither open files nor read
 * /etc/resolv.conf. HSMCA_EINVAL names what is missing or refused. */
HSMCA_MUSTCHECK hsmca_code fe_tokenreview_new(const fe_tokenreview_options *o, fe_tokenreview **out,
                                              hsmca_err *e);
void fe_tokenreview_free(fe_tokenreview *tr);

/* The cache alone, without blocking: 1 and *id for a cached positive answer. */
int fe_tokenreview_cached(fe_tokenreview *tr, const char *token, size_t len, int64_t now,
                          fe_tr_identity *id);

/* The identity of a bearer token (len bytes, without "Bearer "): from the cache,
 * else from one TokenReview (cached when positive). HSMCA_EAUTH when the API
 * server says no ("tokenreview: <why>"); HSMCA_EUNAVAIL when it cannot be asked
 * or its answer is not a TokenReview. */
HSMCA_MUSTCHECK hsmca_code fe_tokenreview_identity(fe_tokenreview *tr, const char *token,
                                                   size_t len, int64_t now, fe_tr_identity *id,
                                                   hsmca_err *e);

/* GET path (with its query) from the same API server with hsmca's own
 * credentials (ztunnel impersonation, fe_k8spods.h); blocks like a review. The
 * status and body (caller frees) of at most max_body bytes; HSMCA_EUNAVAIL
 * when it cannot be asked. */
HSMCA_MUSTCHECK hsmca_code fe_tokenreview_api_get(fe_tokenreview *tr, const char *path,
                                                  size_t max_body, int *status, char **resp,
                                                  size_t *resp_len, hsmca_err *e);

/* TokenReviews sent so far (tests, logs). */
uint64_t fe_tokenreview_calls(fe_tokenreview *tr);

/* --- the parts, exposed for the unit tests and the fuzz target --- */

/* The response body of a TokenReview create: HSMCA_EAUTH for a well-formed
 * review that does not authenticate a service account (status.error quoted
 * printable and cut); HSMCA_EUNAVAIL when it is not a TokenReview at all. */
HSMCA_MUSTCHECK hsmca_code fe_tokenreview_parse(const char *body, size_t len,
                                                const char *const *audiences, int n_audiences,
                                                fe_tr_identity *id, hsmca_err *e);

/* The request body for token (len bytes) and audiences; a new string (caller
 * wipes and frees). NULL when out of memory. */
char *fe_tokenreview_request_body(const char *token, size_t len, const char *const *audiences,
                                  int n_audiences);

/* The token's own exp when it is a JWT with an integer exp claim, else 0. Not
 * verified: used only to cut a cache entry's life short, after the API server
 * said yes. */
int64_t fe_tokenreview_token_exp(const char *token, size_t len);

#endif
