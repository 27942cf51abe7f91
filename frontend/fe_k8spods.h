/* fe_k8spods.h - the pure parts of ztunnel impersonation:
 * Istio's NodeAuthorizer (security/pkg/server/ca/node_authorizer.go,
 * authenticateImpersonation) decides whether a trusted node agent (ztunnel)
 * may ask for another identity's certificate:
 *   1. the caller's service account "ns/sa" is in CA_TRUSTED_NODE_ACCOUNTS;
 *   2. the requested identity parses as a SPIFFE ID spiffe://td/ns/NS/sa/SA
 *      (we also require our own trust domain: Istio's CA signs only for it);
 *   3. the caller's pod (name and uid from its token) exists and is on a node;
 *   4. a pod of account NS/SA is on that same node (Istio: any pod in its
 *      informer's node+sa index; hsmca: a Running one, by field selector).
 * Here: the checks of 1 and 2, and the parsers of the two Kubernetes API
 * answers 3 and 4 need (GET Pod, GET PodList by fieldSelector). No I/O. */
#ifndef HSMCA_FE_K8SPODS_H
#define HSMCA_FE_K8SPODS_H

#include <stddef.h>

#include "hsmca_err.h"
#include "policy.h"

#define FE_K8S_MAX_PODLIST (1024 * 1024)           /* a longer API server answer is UNAVAILABLE */
#define FE_K8S_NODE_MAX 253                        /* a node name is a DNS-1123 subdomain */
#define FE_IMPERSONATED_KEY "ImpersonatedIdentity" /* the request metadata Struct's key */
/* The authenticator an impersonated request is reported under (audit log, SignRequest):
 * the signer signs it unbound, as it cannot check the node's right (signer_bind.h). */
#define FE_IMPERSONATION_AUTHENTICATOR "impersonation"

/* 1 when "ns/sa" is one of the n entries of trusted (Istio's format). */
int fe_k8s_trusted_node(const char *const *trusted, int n, const char *ns, const char *sa);

/* requested (len bytes, not NUL-terminated) as spiffe://td/ns/NS/sa/SA of trust
 * domain td: NS and SA (Kubernetes names) into ns/sa. HSMCA_EPERM naming why
 * ("impersonation: ... is not a SPIFFE ID of trust domain td"). */
HSMCA_MUSTCHECK hsmca_code fe_k8s_parse_impersonated(const char *td, const char *requested,
                                                     size_t len, char ns[POLICY_NS_MAX + 1],
                                                     char sa[POLICY_SA_MAX + 1], hsmca_err *e);

/* The body of GET /api/v1/namespaces/NS/pods/NAME (a v1 Pod): its metadata.uid
 * must be want_uid (the token's pod uid: a pod of the same name created again
 * is another pod) and its spec.serviceAccountName want_sa (Istio checks both),
 * its spec.nodeName (scheduled) into node. HSMCA_EPERM when
 * it is a Pod that does not qualify (other uid, not scheduled), HSMCA_EUNAVAIL
 * when it is not a v1 Pod at all. */
HSMCA_MUSTCHECK hsmca_code fe_k8s_parse_pod(const char *body, size_t len, const char *want_uid,
                                            const char *want_sa, char node[FE_K8S_NODE_MAX + 1],
                                            hsmca_err *e);

/* The body of GET /api/v1/namespaces/NS/pods?fieldSelector=spec.nodeName=N,
 * status.phase=Running (a v1 PodList): *found = 1 when one item is in
 * namespace ns, on node, Running, with spec.serviceAccountName sa (checked
 * again here: the answer is not trusted to have applied the selector).
 * HSMCA_EUNAVAIL when it is not a v1 PodList. */
HSMCA_MUSTCHECK hsmca_code fe_k8s_parse_podlist(const char *body, size_t len, const char *ns,
                                                const char *sa, const char *node, int *found,
                                                hsmca_err *e);

#endif
