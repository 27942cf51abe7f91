/* config_fields.h - the table of config keys (section, key, type, member) that config.c's
 * parser walks; included by config.c alone. A new key is one line here, its member in
 * config.h, its default in config_defaults.c. */
#ifndef HSMCA_CONFIG_FIELDS_H
#define HSMCA_CONFIG_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef enum {
    CT_SECTION, /* a mapping of further keys */
    CT_STR,     /* a scalar copied as is */
    CT_PATH,    /* a scalar; relative values are resolved against base_dir */
    CT_U32,     /* a decimal integer, 1..UINT32_MAX */
    CT_DUR,     /* seconds, or a number with s/m/h/d, 1..UINT32_MAX */
    CT_LIST,    /* a sequence of non-empty scalars */
    CT_BOOL,    /* true or false, into an int */
    CT_CLUSTERS, /* auth.clusters: a sequence of mappings, each a config_cluster */
    CT_ENV       /* pkcs11.env: a mapping of NAME: value (config_env.c) */
} config_type;

#define CF_ZERO_OK 1u /* the integer may be 0 (clock skew) */
#define CF_AUTHN 2u   /* list items must be CONFIG_AUTHENTICATORS, each once */
#define CF_ID 4u      /* a cluster id (config_cluster_id_ok) */
#define CF_NET 8u     /* a signer.sandbox.network mode (config_net_parse) */

typedef struct {
    const char *section; /* "" for the top level, "auth.jwt" for nested */
    const char *key;
    config_type type;
    size_t off;
    size_t size;
    unsigned flags;
    uint32_t min, max; /* CT_U32 with max > 0: refused outside min..max, with its line */
} config_field;

#define F(sec, key, type, member, flags)                                                           \
    {                                                                                              \
        sec, key, type, offsetof(hsmca_config, member), sizeof(((hsmca_config *)0)->member),       \
            flags, 0, 0                                                                            \
    }
#define FR(sec, key, member, min, max)                                                             \
    {                                                                                              \
        sec, key, CT_U32, offsetof(hsmca_config, member), sizeof(((hsmca_config *)0)->member), 0,  \
            min, max                                                                               \
    }
/* A key of one auth.clusters item: its offset is into the config_cluster. */
#define FC(sec, key, type, member, flags)                                                          \
    {                                                                                              \
        sec, key, type, offsetof(config_cluster, member), sizeof(((config_cluster *)0)->member),   \
            flags, 0, 0                                                                            \
    }
#define CLUSTER_SEC "auth.clusters[]" /* the section name of an auth.clusters item */
#define S(sec, key)                                                                                \
    {                                                                                              \
        sec, key, CT_SECTION, 0, 0, 0, 0, 0                                                        \
    }

static const config_field fields[] = {
    S("", "server"),
    F("server", "listen", CT_STR, listen, 0),
    F("server", "dns_names", CT_LIST, dns_names, 0),
    F("server", "ip_addresses", CT_LIST, ip_addresses, 0),
    F("server", "serving_cert_ttl", CT_DUR, serving_cert_ttl, 0),
    F("server", "max_request_bytes", CT_U32, max_request_bytes, 0),
    F("server", "handshake_timeout", CT_DUR, handshake_timeout, 0),
    F("server", "idle_timeout", CT_DUR, idle_timeout, 0),
    FR("server", "max_connections", max_connections, 1, CONFIG_MAX_CONNECTIONS),
    FR("server", "memory_limit_mib", memory_limit_mib, 16, 65536),
    FR("server", "max_queued_requests", max_queued_requests, 1, CONFIG_MAX_QUEUED),
    S("", "pkcs11"),
    F("pkcs11", "module", CT_STR, module_path, 0),
    F("pkcs11", "pin_file", CT_PATH, pin_file, 0),
    F("pkcs11", "ca_key", CT_STR, ca_key_uri, 0),
    F("pkcs11", "audit_key", CT_STR, audit_key_uri, 0),
    F("pkcs11", "softhsm2_conf", CT_PATH, softhsm2_conf, 0),
    F("pkcs11", "sessions", CT_U32, sessions, 0),
    F("pkcs11", "sign_timeout", CT_DUR, sign_timeout, 0),
    F("pkcs11", "audit_module", CT_STR, audit_module, 0),
    F("pkcs11", "audit_pin_file", CT_PATH, audit_pin_file, 0),
    S("", "ca"),
    F("ca", "cert", CT_PATH, ca_cert, 0),
    F("ca", "root_bundle", CT_PATH, root_bundle, 0),
    F("ca", "chain", CT_PATH, chain, 0),
    F("ca", "next_key", CT_STR, ca_next_key, 0),
    F("ca", "next_cert", CT_PATH, ca_next_cert, 0),
    F("ca", "previous_key", CT_STR, ca_previous_key, 0),
    F("ca", "previous_cert", CT_PATH, ca_previous_cert, 0),
    F("ca", "next_chain", CT_PATH, ca_next_chain, 0),
    F("ca", "next_root", CT_PATH, ca_next_root, 0),
    F("ca", "previous_chain", CT_PATH, ca_previous_chain, 0),
    S("", "issuance"),
    F("issuance", "trust_domain", CT_STR, trust_domain, 0),
    F("issuance", "default_ttl", CT_DUR, default_ttl, 0),
    F("issuance", "max_ttl", CT_DUR, max_ttl, 0),
    F("issuance", "rate_per_second", CT_U32, rate_per_second, 0),
    F("issuance", "rate_burst", CT_U32, rate_burst, 0),
    S("", "auth"),
    F("auth", "chain", CT_LIST, auth_chain, CF_AUTHN),
    F("auth", "trusted_node_accounts", CT_LIST, trusted_node_accounts, 0),
    S("auth", "jwt"),
    F("auth.jwt", "issuer", CT_STR, jwt_issuer, 0),
    F("auth.jwt", "audiences", CT_LIST, jwt_audiences, 0),
    F("auth.jwt", "jwks_file", CT_PATH, jwks_file, 0),
    F("auth.jwt", "skew", CT_DUR, jwt_skew, CF_ZERO_OK),
    F("auth.jwt", "discovery", CT_BOOL, jwt_discovery, 0),
    F("auth.jwt", "ca_bundle", CT_PATH, jwt_ca_bundle, 0),
    F("auth.jwt", "refresh", CT_DUR, jwt_refresh, 0),
    F("auth.jwt", "min_refresh", CT_DUR, jwt_min_refresh, 0),
    F("auth.jwt", "fetch_timeout", CT_DUR, jwt_fetch_timeout, 0),
    F("auth.jwt", "fetch_token_file", CT_PATH, jwt_fetch_token_file, 0),
    F("auth.jwt", "bind", CT_BOOL, jwt_bind, 0),
    F("auth.jwt", "bind_required", CT_BOOL, jwt_bind_required, 0),
    S("auth", "tokenreview"),
    F("auth.tokenreview", "kubeconfig", CT_PATH, tr_kubeconfig, 0),
    F("auth.tokenreview", "audiences", CT_LIST, tr_audiences, 0),
    F("auth.tokenreview", "timeout", CT_DUR, tr_timeout, 0),
    F("auth.tokenreview", "cache_ttl", CT_DUR, tr_cache_ttl, CF_ZERO_OK),
    F("auth.tokenreview", "cache_entries", CT_U32, tr_cache_entries, CF_ZERO_OK),
    F("auth.tokenreview", "max_concurrent", CT_U32, tr_max_concurrent, 0),
    S("", "frontend"),
    F("frontend", "user", CT_STR, fe_user, 0),
    F("frontend", "chroot", CT_STR, fe_chroot, 0),
    S("", "signer"),
    F("signer", "user", CT_STR, signer_user, 0),
    F("signer", "seccomp_allow_network", CT_BOOL, signer_allow_network, 0),
    S("signer", "sandbox"),
    F("signer.sandbox", "network", CT_STR, signer_sandbox_network, CF_NET),
    F("signer.sandbox", "sysv_ipc", CT_BOOL, signer_sysv_ipc, 0),
    S("", "audit"),
    F("audit", "dir", CT_PATH, audit_dir, 0),
    F("audit", "origin", CT_STR, audit_origin, 0),
    F("audit", "replica", CT_STR, audit_replica, 0),
    F("audit", "disabled", CT_BOOL, audit_disabled, 0),
    F("issuance", "policy_file", CT_PATH, policy_file, 0),
    F("auth", "cluster_id", CT_STR, cluster_id, CF_ID),
    F("auth", "clusters", CT_CLUSTERS, clusters, 0),
    FC(CLUSTER_SEC, "id", CT_STR, id, CF_ID),
    S(CLUSTER_SEC, "jwt"),
    FC(CLUSTER_SEC ".jwt", "issuer", CT_STR, jwt_issuer, 0),
    FC(CLUSTER_SEC ".jwt", "jwks_file", CT_PATH, jwks_file, 0),
    FC(CLUSTER_SEC ".jwt", "discovery", CT_BOOL, jwt_discovery, 0),
    FC(CLUSTER_SEC ".jwt", "ca_bundle", CT_PATH, jwt_ca_bundle, 0),
    FC(CLUSTER_SEC ".jwt", "fetch_token_file", CT_PATH, jwt_fetch_token_file, 0),
    S(CLUSTER_SEC, "tokenreview"),
    FC(CLUSTER_SEC ".tokenreview", "kubeconfig", CT_PATH, tr_kubeconfig, 0),
    F("pkcs11", "env", CT_ENV, pkcs11_env, 0),
    F("signer", "groups", CT_LIST, signer_groups, 0),
    S("", "admin"),
    F("admin", "socket", CT_PATH, admin_socket, 0),
    F("admin", "group", CT_STR, admin_group, 0),
    S("", "approval"),
    FR("approval", "required", approval_required, 1, CONFIG_MAX_APPROVALS),
    FR("approval", "max_pending_per_user", approval_max_pending_per_user, 1, 1024),
    FR("approval", "max_pending", approval_max_pending, 1, 65536),
    F("approval", "pending_ttl", CT_DUR, approval_pending_ttl, 0),
    F("approval", "auto_renew", CT_BOOL, approval_auto_renew, 0),
    S("", "intermediate"),
    F("intermediate", "subject_prefix", CT_STR, ica_subject_prefix, 0),
    F("intermediate", "dns_suffixes", CT_LIST, ica_dns_suffixes, 0),
    F("intermediate", "istiod_names", CT_LIST, ica_istiod_names, 0),
    F("intermediate", "ip_ranges", CT_LIST, ica_ip_ranges, 0),
    F("intermediate", "email_domains", CT_LIST, ica_email_domains, 0),
    F("intermediate", "max_ttl", CT_DUR, ica_max_ttl, 0),
    S("", "crl"),
    F("crl", "path", CT_PATH, crl_path, 0),
    F("crl", "validity", CT_DUR, crl_validity, 0),
    S("", "publish"),
    F("publish", "kubeconfig", CT_PATH, publish_kubeconfig, 0),
    F("publish", "namespace_selector", CT_STR, publish_ns_selector, 0),
    F("publish", "interval", CT_DUR, publish_interval, 0),
    F("publish", "cluster_trust_bundle", CT_BOOL, publish_ctb, 0),
    F("publish", "lease_namespace", CT_STR, publish_lease_namespace, 0),
    F("publish", "lease_name", CT_STR, publish_lease_name, 0),
    F("publish", "lease_duration", CT_DUR, publish_lease_duration, 0),
    F("publish", "timeout", CT_DUR, publish_timeout, 0),
    F("publish", "enabled", CT_BOOL, publish_enabled, 0),
    F("publish", "user", CT_STR, publish_user, 0),
    S("", "metrics"),
    F("metrics", "listen", CT_STR, metrics_listen, 0),
    F("metrics", "user", CT_STR, metrics_user, 0),
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))
_Static_assert(sizeof(((hsmca_config *)0)->signer_allow_network) == sizeof(int) &&
                   sizeof(((hsmca_config *)0)->audit_disabled) == sizeof(int),
               "CT_BOOL fields are ints");
_Static_assert(sizeof(((hsmca_config *)0)->jwt_discovery) == sizeof(int) &&
                   sizeof(((hsmca_config *)0)->signer_sysv_ipc) == sizeof(int),
               "CT_BOOL fields are ints");

#endif
