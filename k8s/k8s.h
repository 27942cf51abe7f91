/* k8s.h - a client of the Kubernetes API server, for the programs that talk to it
 * (publish/ today): JSON over HTTPS with libcurl loaded with dlopen (http/curl_dl.h),
 * and the coordination.k8s.io/v1 Lease that elects one writer among replicas. Where the
 * server is and the credentials come from kubeconfig.h.
 *
 * One job per file: k8s_api.c (the requests), k8s_lease.c (the Lease),
 * kubeconfig.c (the target). What is written with them is the caller's. */
#ifndef HSMCA_K8S_H
#define HSMCA_K8S_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hsmca_err.h"
#include "kubeconfig.h"

#define K8S_MAX_BODY (8 * 1024 * 1024) /* an answer over this is refused (a list page) */

/* ---- the API server (k8s_api.c) ---- */

typedef struct k8s_client k8s_client;

/* Loads libcurl (dlopen) and keeps one connection to t->server, its certificate
 * verified against t->ca_pem, t's bearer token or client certificate sent; timeout_s
 * (0: 10) bounds each call; agent ends the User-Agent ("hsmca/VERSION agent"). t must
 * outlive the client (its blobs are not copied). Free with k8s_client_free. */
HSMCA_MUSTCHECK hsmca_code k8s_client_new(const k8s_target *t, uint32_t timeout_s,
                                          const char *agent, k8s_client **out, hsmca_err *e);
void k8s_client_free(k8s_client *c);

/* One call: method ("GET", "POST", "PUT") on path (from "/", query included), body
 * sent as JSON when not NULL. *status is the HTTP status, every one returned rather
 * than refused; *resp the answer parsed (NULL when it was not JSON; caller decrefs).
 * HSMCA_EUNAVAIL when no answer came. */
HSMCA_MUSTCHECK hsmca_code k8s_call(k8s_client *c, const char *method, const char *path,
                                    json_t *body, long *status, json_t **resp, hsmca_err *e);

/* k8s_call with GET and no body. */
HSMCA_MUSTCHECK hsmca_code k8s_get(k8s_client *c, const char *path, long *status, json_t **resp,
                                   hsmca_err *e);

/* k8s_call with PUT (an update of the object read, resourceVersion kept). */
HSMCA_MUSTCHECK hsmca_code k8s_put(k8s_client *c, const char *path, json_t *body, long *status,
                                   json_t **resp, hsmca_err *e);

/* k8s_call with POST (a create). */
HSMCA_MUSTCHECK hsmca_code k8s_post(k8s_client *c, const char *path, json_t *body, long *status,
                                    json_t **resp, hsmca_err *e);

/* s percent-encoded for a query value into out (outsz bytes); 0, or -1 when too long. */
int k8s_query_escape(const char *s, char *out, size_t outsz);

/* ---- the Lease (k8s_lease.c) ---- */

typedef struct {
    char ns[256], name[256], identity[256];
    uint32_t duration;  /* leaseDurationSeconds */
    int held;           /* this process holds it (as of renewed_at) */
    double renewed_at;  /* monotonic seconds of the last successful acquire or renew */
    char observed[600]; /* the other holder's record last seen (holder, renewTime) */
    double observed_at; /* monotonic seconds when it was first seen */
} k8s_lease;

/* One round: acquires the Lease when absent or expired, renews it when held. A failed
 * renewal clears held (the holder must stop writing until the Lease is taken again).
 * Returns held. now is monotonic seconds. */
int k8s_lease_step(k8s_client *c, k8s_lease *l, double now);

/* 1 while the holder may write: held, and renewed less than two thirds of the lease
 * duration ago. */
int k8s_lease_valid(const k8s_lease *l, double now);

/* Gives the Lease up (holderIdentity emptied) when held: a stopping holder's successor
 * need not wait for the expiry. */
void k8s_lease_release(k8s_client *c, k8s_lease *l);

/* Now as a Kubernetes MicroTime (RFC 3339, microseconds, UTC) into out[32]. */
void k8s_microtime(char out[32]);

#endif
