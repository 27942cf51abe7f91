/* k8s_publish.h - `hsmca k8s publish-roots`: keeps the CA's roots where Istio reads them
 * in a Kubernetes cluster (docs/KUBERNETES.md):
 *   - the ConfigMap istio-ca-root-cert (key root-cert.pem) in every namespace the label
 *     selector publish.namespace_selector matches, namespaces being deleted skipped;
 *   - with publish.cluster_trust_bundle, the certificates.k8s.io/v1beta1
 *     ClusterTrustBundle istio.io:istiod-ca:root-cert (signerName istio.io/istiod-ca),
 *     which Istio reads with ENABLE_CLUSTER_TRUST_BUNDLE_API;
 *   - once crl.path exists, the ConfigMap istio-ca-crl (key ca-crl.pem) beside the roots.
 * Several replicas may run it: only the holder of the coordination.k8s.io/v1 Lease
 * publish.lease_namespace/publish.lease_name writes (k8s_publish_lease.c).
 *
 * The pieces, one job per file: k8s_publish_api.c (HTTPS to the API server, libcurl
 * loaded with dlopen (cli/curl_dl.h)), k8s_publish_lease.c (the Lease),
 * k8s_publish_objects.c (the roots and the objects written), k8s_publish.c (the
 * command and its loop). */
#ifndef HSMCA_K8S_PUBLISH_H
#define HSMCA_K8S_PUBLISH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hsmca_err.h"
#include "kubeconfig.h"

#define KP_ROOT_CM "istio-ca-root-cert"
#define KP_ROOT_KEY "root-cert.pem"
#define KP_CRL_CM "istio-ca-crl"
#define KP_CRL_KEY "ca-crl.pem"
#define KP_CTB_NAME "istio.io:istiod-ca:root-cert"
#define KP_CTB_SIGNER "istio.io/istiod-ca"
#define KP_CTB_PATH "/apis/certificates.k8s.io/v1beta1/clustertrustbundles"
#define KP_MAX_BODY (8 * 1024 * 1024) /* an answer over this is refused (a namespace page) */
#define KP_CONFLICT_TRIES 5           /* re-reads of an object whose update conflicted */

/* `hsmca k8s ...`: 0, 1 (a failed --once pass), 2 usage, 78 (EXIT_CONFIG) config. */
int k8s_main(int argc, char **argv);

/* ---- the API server (k8s_publish_api.c) ---- */

typedef struct kp_api kp_api;

/* Loads libcurl (dlopen) and keeps one connection to t->server, its certificate
 * verified against t->ca_pem, hsmca's bearer token or client certificate sent;
 * timeout_s bounds each call. */
HSMCA_MUSTCHECK hsmca_code kp_api_new(const k8s_target *t, uint32_t timeout_s, kp_api **out,
                                      hsmca_err *e);
void kp_api_free(kp_api *a);

/* One call: method ("GET", "POST", "PUT") on path (from "/", query included), body
 * sent as JSON when not NULL. *status is the HTTP status; *resp the answer parsed
 * (NULL when it was not JSON; caller decrefs). HSMCA_EUNAVAIL when no answer came. */
HSMCA_MUSTCHECK hsmca_code kp_api_call(kp_api *a, const char *method, const char *path,
                                       json_t *body, long *status, json_t **resp, hsmca_err *e);

/* s percent-encoded for a query value into out (outsz bytes); 0, or -1 when too long. */
int kp_query_escape(const char *s, char *out, size_t outsz);

/* ---- the Lease (k8s_publish_lease.c) ---- */

typedef struct {
    char ns[256], name[256], identity[256];
    uint32_t duration;  /* leaseDurationSeconds */
    int held;           /* this process holds it (as of renewed_at) */
    double renewed_at;  /* monotonic seconds of the last successful acquire or renew */
    char observed[600]; /* the other holder's record last seen (holder, renewTime) */
    double observed_at; /* monotonic seconds when it was first seen */
} kp_lease;

/* One round: acquires the Lease when absent or expired, renews it when held. A failed
 * renewal clears held (nothing more is written until the Lease is taken again).
 * Returns held. now is monotonic seconds. */
int kp_lease_step(kp_api *a, kp_lease *l, double now);

/* 1 while writes are allowed: held, and renewed less than two thirds of the lease
 * duration ago. */
int kp_lease_valid(const kp_lease *l, double now);

/* Gives the Lease up (holderIdentity emptied) when held: a stopping holder's successor
 * need not wait for the expiry. */
void kp_lease_release(kp_api *a, kp_lease *l);

/* Now as a Kubernetes MicroTime (RFC 3339, microseconds, UTC) into out[32]. */
void kp_microtime(char out[32]);

/* ---- the roots and the objects (k8s_publish_objects.c) ---- */

typedef struct {
    char *pem;             /* every root, PEM, each ending in "\n" */
    char ctb_problem[256]; /* why the ClusterTrustBundle must not hold them, or "" */
} kp_roots;

/* The certificates of the PEM file at path (ca.root_bundle), and whether a
 * ClusterTrustBundle may hold them: every one a CA, none twice. */
HSMCA_MUSTCHECK hsmca_code kp_roots_load(const char *path, kp_roots *r, hsmca_err *e);
void kp_roots_clear(kp_roots *r);

/* The CRL at path as PEM (checked to parse) into *pem, or *pem NULL when the file does
 * not exist yet. */
HSMCA_MUSTCHECK hsmca_code kp_crl_load(const char *path, char **pem, hsmca_err *e);

/* The names of the namespaces selector matches ("" all), those being deleted left
 * out: a new NULL-terminated array (kp_names_free). */
HSMCA_MUSTCHECK hsmca_code kp_namespaces(kp_api *a, const char *selector, char ***names,
                                         hsmca_err *e);
void kp_names_free(char **names);

/* ConfigMap ns/name holds data[key] = value afterwards: created, or updated (other keys
 * kept) when it differs, a conflicting update re-read and retried. *wrote is 1 when
 * something was written. */
HSMCA_MUSTCHECK hsmca_code kp_put_configmap(kp_api *a, const char *ns, const char *name,
                                            const char *key, const char *value, int *wrote,
                                            hsmca_err *e);

/* The ClusterTrustBundle KP_CTB_NAME holds roots (refused when r->ctb_problem is set). */
HSMCA_MUSTCHECK hsmca_code kp_put_ctb(kp_api *a, const kp_roots *r, int *wrote, hsmca_err *e);

#endif
