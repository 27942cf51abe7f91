/* config.h - the YAML configuration of `hsmca serve` (libyaml).
 *
 * Unknown keys and wrong types are refused with their line number. Every field
 * has a default (config_defaults) so a file names only what it changes.
 * Relative paths are resolved against the config file's directory. */
#ifndef HSMCA_CONFIG_H
#define HSMCA_CONFIG_H

#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

#define CONFIG_MAX_LIST 16
#define CONFIG_MAX_STR 512
/* Bounds of server.max_connections and server.max_queued_requests (the latter is the
 * size of the front end's table of requests waiting for the signer). */
#define CONFIG_MAX_CONNECTIONS 1000000
#define CONFIG_MAX_QUEUED 4096
/* Bound of pkcs11.sessions: the signer runs a signing thread per session. */
#define CONFIG_MAX_SESSIONS 64

typedef struct {
    char items[CONFIG_MAX_LIST][CONFIG_MAX_STR];
    int n;
} config_list;

/* pkcs11.env: at most CONFIG_MAX_ENV variables for the signer (and its PKCS#11 module)
 * alone. A name is 1-CONFIG_MAX_ENV_NAME - 1 bytes of [A-Za-z_][A-Za-z0-9_]* and not one
 * config_env_name_problem refuses; a value is a string of fewer than CONFIG_MAX_STR bytes
 * without NUL. */
#define CONFIG_MAX_ENV 32
#define CONFIG_MAX_ENV_NAME 64
typedef struct {
    char name[CONFIG_MAX_ENV_NAME];
    char value[CONFIG_MAX_STR];
} config_env_var;

typedef struct {
    config_env_var vars[CONFIG_MAX_ENV];
    int n;
} config_env;

/* auth.clusters: at most CONFIG_MAX_CLUSTERS remote clusters (Istio multicluster). A
 * cluster id is 1-CONFIG_MAX_CLUSTER_ID bytes of [A-Za-z0-9._-]. */
#define CONFIG_MAX_CLUSTERS 8
#define CONFIG_MAX_CLUSTER_ID 63

/* One remote cluster: where its authenticators find its tokens' keys and its API
 * server. Everything else (audiences, skew, refresh, timeouts, cache sizes) is the
 * local auth.jwt / auth.tokenreview setting, as Istio's one set of flags is. */
typedef struct {
    char id[CONFIG_MAX_CLUSTER_ID + 1]; /* the ClusterID its istio-agents send */
    /* auth.clusters[].jwt: ("" issuer: this cluster has no jwt authenticator) */
    char jwt_issuer[CONFIG_MAX_STR];
    char jwks_file[CONFIG_MAX_STR];
    int jwt_discovery;
    char jwt_ca_bundle[CONFIG_MAX_STR];
    char jwt_fetch_token_file[CONFIG_MAX_STR];
    /* auth.clusters[].tokenreview: ("": this cluster has no tokenreview authenticator) */
    char tr_kubeconfig[CONFIG_MAX_STR];
} config_cluster;

typedef struct {
    /* server: */
    char listen[CONFIG_MAX_STR];  /* "127.0.0.1:15012" */
    config_list dns_names;        /* extra DNS SANs of the serving cert */
    config_list ip_addresses;     /* extra IP SANs of the serving cert */
    uint32_t serving_cert_ttl;    /* seconds, default 86400 */
    uint32_t max_request_bytes;   /* default 65536 */
    uint32_t handshake_timeout;   /* seconds a connection has to finish its TLS
                                     handshake, default 10 (1-300) */
    uint32_t idle_timeout;        /* seconds a connection with no call stays open,
                                     default 600 (the client reconnects) */
    uint32_t max_connections;     /* TCP connections at once; beyond, a new one is
                                     closed at once. Default 2048 (1-1000000) */
    uint32_t memory_limit_mib;    /* gRPC resource quota of the front end, MiB,
                                     default 160 (16-65536) */
    uint32_t max_queued_requests; /* calls received and not yet answered; beyond,
                                     RESOURCE_EXHAUSTED at once. Default 1024
                                     (1-CONFIG_MAX_QUEUED) */

    /* pkcs11: */
    char module_path[CONFIG_MAX_STR];   /* /usr/lib/softhsm/libsofthsm2.so */
    char pin_file[CONFIG_MAX_STR];      /* file holding the user PIN */
    char ca_key_uri[CONFIG_MAX_STR];    /* pkcs11:token=hsmca;object=ca-key;type=private */
    char audit_key_uri[CONFIG_MAX_STR]; /* the audit key (docs/ARCHITECTURE.md §7.6: Ed25519 or EC P-256/P-384),
                                           in audit_module; "" (default): none yet */
    char softhsm2_conf[CONFIG_MAX_STR]; /* optional: SOFTHSM2_CONF for the signer only */
    uint32_t sessions;                  /* signing session pool size, default 4 */
    uint32_t sign_timeout;              /* seconds a token call may take before its request
                                           is answered UNAVAILABLE, default 10 */
    char audit_module[CONFIG_MAX_STR];   /* the audit key's module; "" (default): module */
    char audit_pin_file[CONFIG_MAX_STR]; /* the audit key's PIN; "" (default): pin_file */

    /* ca: */
    char ca_cert[CONFIG_MAX_STR];     /* PEM: the certificate of the CA key */
    char root_bundle[CONFIG_MAX_STR]; /* PEM: roots sent last in cert_chain (default ca_cert) */
    char chain[CONFIG_MAX_STR];       /* PEM: intermediates between ca_cert and root, optional */
    /* ca.next_* / ca.previous_*: a root rotation's other CA (docs/ROTATION.md), written by
     * `hsmca ca rotate`; the signer serves with pkcs11.ca_key and ca.cert only */
    char ca_next_key[CONFIG_MAX_STR], ca_next_cert[CONFIG_MAX_STR];
    char ca_previous_key[CONFIG_MAX_STR], ca_previous_cert[CONFIG_MAX_STR];
    /* a rotation under an offline root (rotate import-next): the new CA's intermediates
     * and root; ca.chain of the old CA after switch */
    char ca_next_chain[CONFIG_MAX_STR], ca_next_root[CONFIG_MAX_STR];
    char ca_previous_chain[CONFIG_MAX_STR];

    /* issuance: */
    char trust_domain[CONFIG_MAX_STR]; /* default "cluster.local" */
    uint32_t default_ttl;              /* default 86400 */
    uint32_t max_ttl;                  /* default 86400; the signer refuses longer */
    uint32_t rate_per_second;          /* token bucket rate, default 1000 */
    uint32_t rate_burst;               /* bucket size, default 2000 */

    /* auth: */
    config_list auth_chain; /* authenticators in order, the first that succeeds wins;
                               default [client_cert, jwt] (CONFIG_AUTHENTICATORS) */

    /* auth.jwt: */
    char jwt_issuer[CONFIG_MAX_STR];    /* required "iss" */
    config_list jwt_audiences;          /* default ["istio-ca"] */
    char jwks_file[CONFIG_MAX_STR];     /* JWKS (RS256/ES256 keys), re-read when it changes */
    uint32_t jwt_skew;                  /* seconds of clock skew allowed, default 60 */
    int jwt_discovery;                  /* keys from the issuer's OpenID discovery document
                                           (issuer/.well-known/openid-configuration, then its
                                           jwks_uri) instead of jwks_file; default false */
    char jwt_ca_bundle[CONFIG_MAX_STR]; /* PEM CAs the issuer's TLS certificate must chain
                                           to; "" (default): the system's trust store */
    uint32_t jwt_refresh;               /* seconds between scheduled fetches, default 3600 */
    uint32_t jwt_min_refresh;           /* fewest seconds between two fetches, default 30 */
    uint32_t jwt_fetch_timeout;         /* seconds one fetch may take, default 10 */
    char jwt_fetch_token_file[CONFIG_MAX_STR]; /* a bearer token sent with the discovery
                                                  and JWKS requests (a Kubernetes API
                                                  server wants one), re-read at every
                                                  fetch; "" (default): none */
    int jwt_bind;          /* identity binding (docs/ARCHITECTURE.md §3.2): the front end forwards a jwt
                              caller's token with the TBS and the signer verifies it again
                              against the keys the supervisor pushes it, and that the URI SAN
                              is the token's identity; default true */
    int jwt_bind_required; /* the signer refuses every workload request it cannot bind (from
                              client_cert or tokenreview callers): for JWT-only deployments;
                              default false */

    config_list trusted_node_accounts; /* auth.trusted_node_accounts: "ns/sa" that may ask
                                          for another identity (ztunnel, fe_k8spods.h);
                                          default empty: impersonation off */

    /* auth.tokenreview: (frontend/fe_tokenreview.h) on when auth.chain names tokenreview */
    char tr_kubeconfig[CONFIG_MAX_STR]; /* kubeconfig file; "" = in-cluster config */
    config_list tr_audiences;           /* spec.audiences, default ["istio-ca"] */
    uint32_t tr_timeout;                /* seconds per TokenReview, default 5, 1..60 */
    uint32_t tr_cache_ttl;              /* seconds an answer is kept, default 300; 0 = none */
    uint32_t tr_cache_entries;          /* default 4096; 0 = no cache */
    uint32_t tr_max_concurrent;         /* TokenReviews in flight, default 8, 1..64 */

    /* frontend: (only when started as root) */
    char fe_user[CONFIG_MAX_STR];   /* default "nobody" */
    char fe_chroot[CONFIG_MAX_STR]; /* default "/var/empty" (created 0755 if missing) */

    /* signer: */
    char signer_user[CONFIG_MAX_STR]; /* default "hsmca-signer"; switched to when root */
    int signer_allow_network;         /* seccomp_allow_network, default 0 (false): deprecated,
                                         true is signer.sandbox.network: inet */
    /* signer.sandbox: what the signer's seccomp filter lets the PKCS#11 module do besides
     * signing (signer/signer_sandbox.c); config_signer_network() is the mode in force. */
    char signer_sandbox_network[16]; /* network: none, unix or inet; "" (not written):
                                        none, or inet for seccomp_allow_network: true */
    int signer_sysv_ipc;             /* sysv_ipc, default 0: SysV shared memory, semaphores */
    int signer_allow_network_false;  /* not a key: the file wrote seccomp_allow_network: false */

    /* audit: */
    char audit_dir[CONFIG_MAX_STR];    /* the signing log (docs/ARCHITECTURE.md §7); required unless
                                          audit.disabled */
    char audit_origin[CONFIG_MAX_STR]; /* checkpoint origin and audit key name; unique per
                                          replica; "": config_default_origin() */
    int audit_disabled; /* audit.disabled: true, the only way to serve without audit.dir */
    char audit_replica[CONFIG_MAX_STR]; /* this replica's id, appended to the origin at load
                                           (config_replica_origin); "": none */

    /* issuance.policy_file (at the end to ease merges): the SAN policy file
     * (policy/policy_file.h), loaded by the front end and the signer each; "" = none. */
    char policy_file[CONFIG_MAX_STR];

    /* auth.cluster_id and auth.clusters (at the end to ease merges): this cluster's ID
     * (default "Kubernetes", Istio's CLUSTER_ID default) and the remote clusters whose
     * tokens are checked by their own authenticators, chosen by the call's ClusterID
     * metadata (config_cluster_index). */
    char cluster_id[CONFIG_MAX_CLUSTER_ID + 1];
    config_cluster clusters[CONFIG_MAX_CLUSTERS];
    int n_clusters;

    /* Not a key: SHA-256 of the file config_load read (the bytes in force), for the
     * signing log's config entry; zero after config_parse alone. */
    uint8_t source_sha256[32];

    /* pkcs11.env and signer.groups (at the end to ease merges): the variables the signer
     * gets besides the supervisor's few (supervisor/sup_env.h), and the groups (names or numeric
     * gids) it keeps as supplementary groups after switching to signer.user. */
    config_env pkcs11_env;
    config_list signer_groups;

    /* admin: the signer's admin socket (signer/signer_admin.h); "" (default): none. */
    char admin_socket[CONFIG_MAX_STR];
    char admin_group[CONFIG_MAX_STR]; /* may use it besides root; "": root only */
    /* approval: istiod intermediates (signer/signer_ica.h) */
    uint32_t approval_required;    /* distinct approvers, default 2 (1..CONFIG_MAX_APPROVALS) */
    uint32_t approval_pending_ttl; /* seconds a request waits for them, default 86400 */
    uint32_t approval_max_pending_per_user; /* requests of one user waiting at once, default 4 */
    uint32_t approval_max_pending;          /* requests waiting at once, default 64 */
    int approval_auto_renew;       /* a renewal of the current intermediate, proved by its key
                                      (audit_ica_renew.h), approved without approvers; default 0 */
    /* intermediate: the CA profile of an istiod intermediate */
    char ica_subject_prefix[CONFIG_MAX_STR]; /* "O=Example,OU=Mesh"; CN is the cluster name */
    config_list ica_dns_suffixes;            /* DNS name constraints; default none */
    config_list ica_istiod_names;  /* DNS names of istiod's serving certificate, permitted
                                      besides the suffixes; default istiod's in istio-system */
    config_list ica_ip_ranges;     /* CIDR ranges permitted; default none: every IP excluded */
    config_list ica_email_domains; /* e-mail hosts permitted; default none: no e-mail name */
    uint32_t ica_max_ttl;                    /* seconds, default 365d */
    /* crl: the CA's CRL, signed in the token (signer/signer_crl.h) */
    char crl_path[CONFIG_MAX_STR]; /* where the signer writes it (PEM); "" (default): off */
    uint32_t crl_validity;         /* seconds from thisUpdate to nextUpdate, default 7d */
    /* publish: `hsmca k8s publish-roots`, hsmca-publish (publish/k8s_publish.h) */
    char publish_kubeconfig[CONFIG_MAX_STR];      /* "" (default): the in-cluster config */
    char publish_ns_selector[CONFIG_MAX_STR];     /* a label selector; "" (default): all */
    uint32_t publish_interval;                    /* seconds between full passes, default 60 */
    int publish_ctb;                              /* also the ClusterTrustBundle, default false */
    char publish_lease_namespace[CONFIG_MAX_STR]; /* default "istio-system" */
    char publish_lease_name[CONFIG_MAX_STR];      /* default "hsmca-publish-roots" */
    uint32_t publish_lease_duration;              /* seconds, default 30 */
    uint32_t publish_timeout;                     /* seconds per API call, default 10 */
    int publish_enabled;               /* serve runs publish-roots as a child, default false */
    char publish_user[CONFIG_MAX_STR]; /* that child's user when root; "" = frontend.user */

    /* metrics: the metrics and health listener (metrics/mx_main.c) */
    char metrics_listen[CONFIG_MAX_STR]; /* host:port, default "127.0.0.1:15014"; "" = off */
    char metrics_user[CONFIG_MAX_STR];   /* its user when root; "" (default) = frontend.user */
} hsmca_config;

/* The most approvals an intermediate may need (approval.required). */
#define CONFIG_MAX_APPROVALS 16

/* The authenticator names auth.chain accepts (the front end maps each to its code). */
#define CONFIG_AUTHENTICATORS                                                                      \
    {                                                                                              \
        "client_cert", "jwt", "tokenreview"                                                        \
    }

/* 1 when the configured auth.chain contains name. */
int config_chain_has(const hsmca_config *c, const char *name);

/* The default audit.origin, "<hostname>/hsmca/<trust_domain>", into out (outsz bytes): a
 * C2SP origin (a schema-less URL) naming this host's log. */
void config_default_origin(const char *trust_domain, char *out, size_t outsz);

/* With audit.replica set (config_parse calls it): audit.origin becomes "<name>/<replica>",
 * name being audit.origin or, unset, "hsmca/<issuance.trust_domain>", and replica the
 * value, or this host's name for "hostname" (a StatefulSet pod's, stable across restarts).
 * HSMCA_EINVAL naming audit.replica when it is not 1-63 characters of [A-Za-z0-9._-] or
 * the origin would not fit. */
HSMCA_MUSTCHECK hsmca_code config_replica_origin(hsmca_config *c, hsmca_err *e);

/* The names the front end's serving certificate carries, which are also the only
 * ones the signer's serving profile allows: "localhost" and "127.0.0.1", then
 * server.dns_names and server.ip_addresses. One function for both sides, so the
 * two processes cannot disagree. The pointers point into c (or are literals). */
#define CONFIG_MAX_SERVING_NAMES (CONFIG_MAX_LIST + 1)
void config_serving_names(const hsmca_config *c, const char *dns[CONFIG_MAX_SERVING_NAMES],
                          int *n_dns, const char *ips[CONFIG_MAX_SERVING_NAMES], int *n_ips);

/* The cluster a call's ClusterID (id[0..len), not terminated) names: 0 for the local
 * cluster (no ClusterID, len 0, or auth.cluster_id), i + 1 for auth.clusters[i], -1
 * when unknown. */
int config_cluster_index(const hsmca_config *c, const char *id, size_t len);

/* The ID of cluster idx (0: auth.cluster_id). */
const char *config_cluster_name(const hsmca_config *c, int idx);

/* 1 when id[0..len) is a valid cluster id (1-CONFIG_MAX_CLUSTER_ID of [A-Za-z0-9._-]). */
int config_cluster_id_ok(const char *id, size_t len);

/* *out = *c with cluster idx's jwt and tokenreview sources in place of the local ones
 * (auth.jwt.issuer, jwks_file, discovery, ca_bundle, fetch_token_file and
 * auth.tokenreview.kubeconfig); idx 0 copies c. So the per-config code (the key
 * fetcher, the TokenReview client, the signer's binder) serves each cluster unchanged. */
void config_cluster_view(const hsmca_config *c, int idx, hsmca_config *out);

/* 1 when cluster idx has a jwt authenticator (jwt in auth.chain and an issuer). */
int config_cluster_has_jwt(const hsmca_config *c, int idx);

/* 1 when cluster idx has a tokenreview authenticator (tokenreview in auth.chain, and
 * for a remote cluster a kubeconfig: the in-cluster config is the local cluster's). */
int config_cluster_has_tokenreview(const hsmca_config *c, int idx);

/* 1 when the TokenReview authenticator is on (auth.chain names tokenreview). */
int config_tokenreview_on(const hsmca_config *c);

/* A number as the config writes it (also the SAN policy file's TTLs): decimal digits,
 * no sign, no leading zero, at most UINT32_MAX; with duration, it may end in s, m, h or
 * d. Returns 0 on success. */
int config_parse_u32(const char *s, size_t len, int duration, uint32_t *out);

/* The signer's network modes (signer.sandbox.network): no socket; unix sockets only (a
 * local daemon: a TPM resource manager, p11-kit's remote client, an HSM's hardserver);
 * unix, IPv4, IPv6 and netlink (a network HSM's client, getaddrinfo). */
typedef enum { CONFIG_NET_NONE, CONFIG_NET_UNIX, CONFIG_NET_INET } config_net;

/* The mode a name ("none", "unix", "inet") stands for, or -1. */
int config_net_parse(const char *name);

/* The name of mode n ("none", "unix", "inet"). */
const char *config_net_name(config_net n);

/* The mode in force: signer.sandbox.network when written, else inet when the deprecated
 * signer.seccomp_allow_network is true, else none. */
config_net config_signer_network(const hsmca_config *c);

/* Why name may not be a pkcs11.env variable, or NULL when it may. Refused: names not of
 * [A-Za-z_][A-Za-z0-9_]* or of CONFIG_MAX_ENV_NAME bytes or more; what changes the code
 * the signer runs or the files its libraries open behind the module's back (every LD_*,
 * MALLOC_* and OPENSSL_* name, and glibc's list of variables unsafe for a privileged
 * process: GCONV_PATH, GETCONF_DIR, GLIBC_TUNABLES, HOSTALIASES, LOCALDOMAIN, LOCPATH,
 * NIS_PATH, NLSPATH, RESOLV_HOST_CONF, RES_OPTIONS, TMPDIR, TZDIR); and what hsmca sets
 * itself (HSMCA_*, TZ and the sanitizers' *SAN_OPTIONS, passed from the supervisor's
 * environment). SOFTHSM2_CONF is refused by config_validate when pkcs11.softhsm2_conf
 * is set too. */
const char *config_env_name_problem(const char *name, size_t len);

/* The value pkcs11.env gives name, or NULL when it names none. */
const char *config_env_get(const config_env *env, const char *name);

/* Fills *c with the defaults above. */
void config_defaults(hsmca_config *c);

/* Parses the YAML file at path over the defaults. On error, e->msg names the
 * file, the line and the key ("hsmca.yaml:12: unknown key 'foo' in 'pkcs11'").
 * The file is capped at 1 MiB; relative paths are resolved against the
 * realpath of the file's directory.
 *
 * Rules (config_load and config_parse alike):
 * - *c is first reset to config_defaults; on error *c is left untouched.
 * - Booleans are true or false (YAML 1.2; also True/TRUE/False/FALSE); YAML 1.1's
 *   yes/no/on/off are refused rather than guessed.
 * - Integers are decimal, 1..UINT32_MAX (no sign, no leading zero), and the limits
 *   server.max_connections, memory_limit_mib and max_queued_requests within their
 *   ranges (config_validate's) already here, with their line; durations
 *   (serving_cert_ttl, default_ttl, max_ttl, skew) also take 90s/15m/24h/7d;
 *   only auth.jwt.skew may be 0.
 * - A list replaces its default; an empty value (null) empties it. An empty
 *   string value, or a section with no keys, keeps/sets "" / the defaults.
 * - Refused with their line: unknown keys, duplicate keys, wrong shapes,
 *   more than CONFIG_MAX_LIST items, strings of CONFIG_MAX_STR bytes or more,
 *   embedded NULs, anchors/aliases, tags, a non-mapping document, a second
 *   document, YAML syntax errors. Invalid UTF-8 is reported by byte offset.
 * - After parsing, an empty ca.root_bundle is set to ca.cert (so the roots sent
 *   last in cert_chain default to the CA certificate). An empty audit.origin stays
 *   empty: its user takes config_default_origin(issuance.trust_domain) then. */
HSMCA_MUSTCHECK hsmca_code config_load(const char *path, hsmca_config *c, hsmca_err *e);

/* (With audit.replica, audit.origin is made its replica's: config_replica_origin.)
 * Same, from a buffer (tests); base_dir resolves relative paths (NULL: none). */
HSMCA_MUSTCHECK hsmca_code config_parse(const char *name, const char *buf, size_t len,
                                        const char *base_dir, hsmca_config *c, hsmca_err *e);

/* Checks cross-field rules (required files named, ttl <= max, sessions >= 1,
 * signer.user not frontend.user). auth.jwt.issuer and jwks_file may both be
 * empty when TokenReview is on; its timeout is 1s-60s, max_concurrent 1-64,
 * cache_entries at most 1000000. */
HSMCA_MUSTCHECK hsmca_code config_validate(const hsmca_config *c, hsmca_err *e);

#endif
