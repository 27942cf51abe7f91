/* kubeconfig.h - where the Kubernetes API server is and how hsmca talks to it
 * (k8s.h), for publish-roots and the TokenReview authenticator
 * (frontend/fe_tokenreview.h): from a kubeconfig file or from the in-cluster service
 * account. Everything is read here, before any sandbox: the front end cannot open files
 * once confined. `hsmca config check` and serve's start read the file with the same
 * code. */
#ifndef HSMCA_KUBECONFIG_H
#define HSMCA_KUBECONFIG_H

#include <stddef.h>

#include "hsmca_err.h"

#define K8S_MAX_FILE (1024 * 1024) /* kubeconfig, CA bundle, token, key: each capped */
#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct {
    char server[512]; /* https://host[:port], no path */
    char *ca_pem;     /* the cluster CA bundle (PEM); required */
    size_t ca_len;
    char *token;    /* hsmca's own bearer token, or NULL */
    char *cert_pem; /* hsmca's own client certificate and key (PEM), or NULL */
    size_t cert_len;
    char *key_pem;
    size_t key_len;
} k8s_target;

/* The current context of the kubeconfig at path: its cluster's server and
 * certificate-authority[-data], its user's token, tokenFile or
 * client-certificate[-data] + client-key[-data] (relative paths against the
 * file's directory). Refused with EINVAL naming the key: a missing context,
 * cluster or user, a server that is not https, no CA, insecure-skip-tls-verify,
 * exec and auth-provider plugins (they would run programs or need files later). */
HSMCA_MUSTCHECK hsmca_code kubeconfig_load(const char *path, k8s_target *t, hsmca_err *e);

/* In a pod: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, with
 * sa_dir/token and sa_dir/ca.crt (sa_dir NULL: K8S_SA_DIR). */
HSMCA_MUSTCHECK hsmca_code k8s_incluster(const char *sa_dir, k8s_target *t, hsmca_err *e);

/* Frees and wipes (the token and key are secrets). */
void k8s_target_clear(k8s_target *t);

#endif
