/* config_validate.c - config_validate (config.h): the rules across fields that the
 * parser (config.c) cannot check one key at a time: required files, the listen
 * address, TTLs and limits, the authenticator chain and what each authenticator needs,
 * the users the two processes run as. */
#include "config.h"
#include "profile.h"
#include "util.h"

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int valid_port(const char *p)
{
    uint32_t v;
    return *p && config_parse_u32(p, strlen(p), 0, &v) == 0 && v >= 1 && v <= 65535;
}

/* host:port, [v6]:port; the host is not empty and not an unbracketed v6. */
static int valid_listen(const char *s)
{
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close == s + 1 || close[1] != ':')
            return 0;
        return valid_port(close + 2);
    }
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s)))
        return 0;
    return valid_port(colon + 1);
}

/* Every required key that is empty, named at once: a minimal config is fixed in one
 * edit, not one key per try. One missing key keeps its own message (with its hint). */
static HSMCA_MUSTCHECK hsmca_code validate_required(const hsmca_config *c, hsmca_err *e)
{
    static const struct {
        const char *name;
        size_t off;
    } req[] = {
        {"pkcs11.module", offsetof(hsmca_config, module_path)},
        {"pkcs11.pin_file", offsetof(hsmca_config, pin_file)},
        {"pkcs11.ca_key", offsetof(hsmca_config, ca_key_uri)},
        {"ca.cert", offsetof(hsmca_config, ca_cert)},
        {"issuance.trust_domain", offsetof(hsmca_config, trust_domain)},
        {"frontend.user", offsetof(hsmca_config, fe_user)},
        {"signer.user", offsetof(hsmca_config, signer_user)},
    };
    const char *missing[sizeof(req) / sizeof(req[0]) + 3], *single = NULL;
    size_t n = 0;
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        if (((const char *)c + req[i].off)[0] == '\0')
            missing[n++] = req[i].name;
    int jwt = c->auth_chain.n > 0 && config_chain_has(c, "jwt");
    if (jwt && !c->jwt_issuer[0])
        missing[n++] = "auth.jwt.issuer";
    if (jwt && !c->jwt_discovery && !c->jwks_file[0] && (single = "auth.jwt.jwks_file"))
        missing[n++] = "auth.jwt.jwks_file (or auth.jwt.discovery: true)";
    if (!c->audit_dir[0] && !c->audit_disabled && (single = "audit.dir"))
        missing[n++] = "audit.dir (or audit.disabled: true)";
    if (n == 0)
        return HSMCA_OK;
    if (n == 1 && single)
        return HSMCA_OK; /* the later check says it with its hint */
    if (n == 1)
        return hsmca_fail(e, HSMCA_EINVAL, "config: %s is required", missing[0]);
    char list[256] = "";
    for (size_t i = 0, at = 0; i < n && at < sizeof(list); i++)
        at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s", i ? ", " : "", missing[i]);
    return hsmca_fail(e, HSMCA_EINVAL, "config: %zu required keys are missing: %s", n, list);
}

static HSMCA_MUSTCHECK hsmca_code validate_tokenreview(const hsmca_config *c, hsmca_err *e)
{
    if (!config_tokenreview_on(c))
        return HSMCA_OK;
    if (c->tr_audiences.n < 1)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.tokenreview.audiences must name an audience");
    if (c->tr_timeout < 1 || c->tr_timeout > 60)
        return hsmca_fail(e, HSMCA_EINVAL, "config: auth.tokenreview.timeout must be 1s-60s");
    if (c->tr_max_concurrent < 1 || c->tr_max_concurrent > 64)
        return hsmca_fail(e, HSMCA_EINVAL, "config: auth.tokenreview.max_concurrent must be 1-64");
    if (c->tr_cache_entries > 1000000)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.tokenreview.cache_entries must be at most 1000000");
    return HSMCA_OK;
}

/* auth.trusted_node_accounts: "ns/sa" each (Istio's CA_TRUSTED_NODE_ACCOUNTS);
 * the pod checks ask the TokenReview authenticator's API server. */
static HSMCA_MUSTCHECK hsmca_code validate_trusted_nodes(const hsmca_config *c, hsmca_err *e)
{
    for (int i = 0; i < c->trusted_node_accounts.n; i++) {
        const char *t = c->trusted_node_accounts.items[i], *slash = strchr(t, '/');
        /* The names themselves are matched exactly at request time (fe_k8spods.h). */
        if (!slash || slash == t || !slash[1] || strchr(slash + 1, '/'))
            return hsmca_fail(e, HSMCA_EINVAL,
                              "config: auth.trusted_node_accounts entry '%.64s' must be "
                              "namespace/serviceaccount",
                              t);
    }
    if (c->trusted_node_accounts.n > 0 && !config_tokenreview_on(c))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.trusted_node_accounts needs tokenreview in auth.chain "
                          "(its API server is asked where the pods run)");
    /* The signer cannot check a node's right to impersonate: such requests are unbound. */
    if (c->trusted_node_accounts.n > 0 && c->jwt_bind_required)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.trusted_node_accounts and auth.jwt.bind_required exclude "
                          "each other (impersonated requests cannot be bound)");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code validate_server(const hsmca_config *c, hsmca_err *e)
{
    if (!valid_listen(c->listen))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: server.listen '%.64s' must be host:port (port 1-65535)",
                          c->listen);
    /* 2 minutes of it are backdating; it is renewed at 2/3 of what is left. */
    if (c->serving_cert_ttl < 300)
        return hsmca_fail(e, HSMCA_EINVAL, "config: server.serving_cert_ttl must be >= 300");
    if (c->max_request_bytes < 1)
        return hsmca_fail(e, HSMCA_EINVAL, "config: server.max_request_bytes must be >= 1");
    /* A connection that never finishes its handshake holds memory and a descriptor. */
    if (c->handshake_timeout < 1 || c->handshake_timeout > 300)
        return hsmca_fail(e, HSMCA_EINVAL, "config: server.handshake_timeout must be 1s-300s");
    /* Each connection holds memory and a descriptor; the front end raises its
     * descriptor limit to fit (frontend/fe_main.c). */
    if (c->max_connections < 1 || c->max_connections > CONFIG_MAX_CONNECTIONS)
        return hsmca_fail(e, HSMCA_EINVAL, "config: server.max_connections must be 1-%d",
                          CONFIG_MAX_CONNECTIONS);
    if (c->memory_limit_mib < 16 || c->memory_limit_mib > 65536)
        return hsmca_fail(e, HSMCA_EINVAL, "config: server.memory_limit_mib must be 16-65536");
    if (c->max_queued_requests < 1 || c->max_queued_requests > CONFIG_MAX_QUEUED)
        return hsmca_fail(e, HSMCA_EINVAL, "config: server.max_queued_requests must be 1-%d",
                          CONFIG_MAX_QUEUED);
    for (int i = 0; i < c->ip_addresses.n; i++) {
        unsigned char bin[16];
        const char *a = c->ip_addresses.items[i];
        if (inet_pton(AF_INET, a, bin) != 1 && inet_pton(AF_INET6, a, bin) != 1)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "config: server.ip_addresses[%d] '%.64s' is not an IP address", i, a);
    }
    return HSMCA_OK;
}

/* auth: the chain names someone; the JWT authenticator, when in it, has an issuer and
 * exactly one source of keys. */
static HSMCA_MUSTCHECK hsmca_code validate_auth(const hsmca_config *c, hsmca_err *e)
{
    if (c->auth_chain.n < 1)
        return hsmca_fail(e, HSMCA_EINVAL, "config: auth.chain must name an authenticator");
    /* Only a jwt caller's request can be bound: requiring it otherwise refuses everyone. */
    if (c->jwt_bind_required && (!c->jwt_bind || !config_chain_has(c, "jwt")))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.jwt.bind_required needs auth.jwt.bind: true and jwt in "
                          "auth.chain");
    if (!config_chain_has(c, "jwt"))
        return HSMCA_OK;
    if (!c->jwt_issuer[0])
        return hsmca_fail(e, HSMCA_EINVAL, "config: auth.jwt.issuer is required");
    if (c->jwt_discovery && c->jwks_file[0])
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.jwt.jwks_file and auth.jwt.discovery: true exclude each "
                          "other (one source of keys)");
    if (!c->jwt_discovery && !c->jwks_file[0])
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.jwt.jwks_file is required (or auth.jwt.discovery: true)");
    if (c->jwt_discovery && strncmp(c->jwt_issuer, "https://", 8) != 0)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.jwt.issuer must be an https:// URL with "
                          "auth.jwt.discovery: true");
    if (c->jwt_min_refresh > c->jwt_refresh)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.jwt.min_refresh must not exceed auth.jwt.refresh");
    if (c->jwt_fetch_token_file[0] && !c->jwt_discovery)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: auth.jwt.fetch_token_file needs auth.jwt.discovery: true");
    if (c->jwt_fetch_timeout > 300)
        return hsmca_fail(e, HSMCA_EINVAL, "config: auth.jwt.fetch_timeout must be 1s-300s");
    return HSMCA_OK;
}

/* auth.clusters: each a cluster other than this one, with an authenticator of the chain,
 * its jwt source as complete as auth.jwt's must be. */
static HSMCA_MUSTCHECK hsmca_code validate_cluster(const hsmca_config *c, const config_cluster *cl,
                                                   hsmca_err *e)
{
    HSMCA_ENSURE(strcmp(cl->id, c->cluster_id) != 0, e, HSMCA_EINVAL,
                 "config: auth.clusters: '%s' is auth.cluster_id, this cluster", cl->id);
    int jwt = cl->jwt_issuer[0] != '\0', tr = cl->tr_kubeconfig[0] != '\0';
    HSMCA_ENSURE(jwt || tr, e, HSMCA_EINVAL,
                 "config: auth.clusters '%s' needs jwt.issuer or tokenreview.kubeconfig", cl->id);
    HSMCA_ENSURE(!jwt || config_chain_has(c, "jwt"), e, HSMCA_EINVAL,
                 "config: auth.clusters '%s' has a jwt section but auth.chain has no jwt", cl->id);
    HSMCA_ENSURE(!tr || config_tokenreview_on(c), e, HSMCA_EINVAL,
                 "config: auth.clusters '%s' has a tokenreview section but auth.chain has no "
                 "tokenreview",
                 cl->id);
    HSMCA_ENSURE(jwt || (!cl->jwks_file[0] && !cl->jwt_discovery && !cl->jwt_ca_bundle[0] &&
                         !cl->jwt_fetch_token_file[0]),
                 e, HSMCA_EINVAL, "config: auth.clusters '%s': jwt.issuer is required", cl->id);
    if (!jwt)
        return HSMCA_OK;
    HSMCA_ENSURE(!(cl->jwt_discovery && cl->jwks_file[0]), e, HSMCA_EINVAL,
                 "config: auth.clusters '%s': jwt.jwks_file and jwt.discovery: true exclude each "
                 "other",
                 cl->id);
    HSMCA_ENSURE(cl->jwt_discovery || cl->jwks_file[0], e, HSMCA_EINVAL,
                 "config: auth.clusters '%s': jwt.jwks_file is required (or jwt.discovery: true)",
                 cl->id);
    HSMCA_ENSURE(!cl->jwt_discovery || !strncmp(cl->jwt_issuer, "https://", 8), e, HSMCA_EINVAL,
                 "config: auth.clusters '%s': jwt.issuer must be an https:// URL with "
                 "jwt.discovery: true",
                 cl->id);
    HSMCA_ENSURE(!cl->jwt_fetch_token_file[0] || cl->jwt_discovery, e, HSMCA_EINVAL,
                 "config: auth.clusters '%s': jwt.fetch_token_file needs jwt.discovery: true",
                 cl->id);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code validate_clusters(const hsmca_config *c, hsmca_err *e)
{
    HSMCA_ENSURE(config_cluster_id_ok(c->cluster_id, strlen(c->cluster_id)), e, HSMCA_EINVAL,
                 "config: auth.cluster_id must be 1-%d characters of A-Z a-z 0-9 . _ -",
                 CONFIG_MAX_CLUSTER_ID);
    HSMCA_ENSURE(c->n_clusters >= 0 && c->n_clusters <= CONFIG_MAX_CLUSTERS, e, HSMCA_EINVAL,
                 "config: auth.clusters has more than %d items", CONFIG_MAX_CLUSTERS);
    for (int i = 0; i < c->n_clusters; i++)
        HSMCA_GUARD(validate_cluster(c, &c->clusters[i], e));
    return HSMCA_OK;
}

/* intermediate.subject_prefix: ATTR=value parts joined by commas, ATTR one of C, ST, L, O,
 * OU (the CN is the cluster's name), each value non-empty and without '=' or ','. */
static int subject_prefix_ok(const char *p)
{
    static const char *const attrs[] = {"C=", "ST=", "L=", "O=", "OU="};
    while (*p) {
        size_t a = 0, n = sizeof(attrs) / sizeof(attrs[0]);
        while (a < n && strncmp(p, attrs[a], strlen(attrs[a])) != 0)
            a++;
        if (a == n)
            return 0;
        p += strlen(attrs[a]);
        size_t v = strcspn(p, ",=");
        if (v == 0 || p[v] == '=')
            return 0;
        p += v + (p[v] == ',');
        if (p[-1] == ',' && !*p)
            return 0;
    }
    return 1;
}

/* admin.*, approval.*, intermediate.*, crl.* (signer/signer_admin.h, signer_ica.h,
 * signer_crl.h). */
static HSMCA_MUSTCHECK hsmca_code validate_admin(const hsmca_config *c, hsmca_err *e)
{
    HSMCA_ENSURE(strlen(c->admin_socket) < 100, e, HSMCA_EINVAL,
                 "config: admin.socket must be a path of fewer than 100 bytes (a unix socket's)");
    HSMCA_ENSURE(c->admin_socket[0] || !c->admin_group[0], e, HSMCA_EINVAL,
                 "config: admin.group needs admin.socket (the socket it may use)");
    HSMCA_ENSURE(c->approval_max_pending_per_user <= c->approval_max_pending, e, HSMCA_EINVAL,
                 "config: approval.max_pending_per_user must not exceed approval.max_pending");
    HSMCA_ENSURE(c->ica_max_ttl >= 3600, e, HSMCA_EINVAL,
                 "config: intermediate.max_ttl must be at least 1h");
    HSMCA_ENSURE(subject_prefix_ok(c->ica_subject_prefix), e, HSMCA_EINVAL,
                 "config: intermediate.subject_prefix must be ATTR=value parts joined by commas, "
                 "ATTR one of C, ST, L, O, OU (e.g. \"O=Example,OU=Mesh\")");
    for (int i = 0; i < c->ica_dns_suffixes.n; i++) {
        const char *d = c->ica_dns_suffixes.items[i];
        HSMCA_ENSURE(d[0] && strspn(d, "abcdefghijklmnopqrstuvwxyz0123456789.-") == strlen(d), e,
                     HSMCA_EINVAL,
                     "config: intermediate.dns_suffixes item '%.64s' must be a lower-case DNS "
                     "name or suffix",
                     d);
    }
    /* crl.* (signer/signer_crl.h): the CRL's number and revocations live in the log. */
    HSMCA_ENSURE(c->crl_validity >= 3600, e, HSMCA_EINVAL, "config: crl.validity must be at least 1h");
    HSMCA_ENSURE(!c->crl_path[0] || c->audit_dir[0], e, HSMCA_EINVAL,
                 "config: crl.path needs audit.dir (the revocations and the CRL's number are "
                 "its entries)");
    HSMCA_ENSURE(strlen(c->crl_path) + 5 < CONFIG_MAX_STR, e, HSMCA_EINVAL,
                 "config: crl.path is too long (its PATH.tmp must fit)");
    return HSMCA_OK;
}

/* intermediate.*'s name constraints (signer/signer_ica_sign.c): the permitted DNS names
 * are istiod_names and dns_suffixes together, and never none (a type without a permitted
 * subtree would be unconstrained); IP ranges are CIDRs; e-mail hosts DNS names. */
static HSMCA_MUSTCHECK hsmca_code validate_ica_names(const hsmca_config *c, hsmca_err *e)
{
    static const char dns_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789.-";
    const struct {
        const config_list *l;
        const char *key;
    } names[] = {{&c->ica_istiod_names, "istiod_names"}, {&c->ica_email_domains, "email_domains"}};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        for (int i = 0; i < names[k].l->n; i++) {
            const char *d = names[k].l->items[i];
            HSMCA_ENSURE(d[0] && strspn(d, dns_chars) == strlen(d), e, HSMCA_EINVAL,
                         "config: intermediate.%s item '%.64s' must be a lower-case DNS name",
                         names[k].key, d);
        }
    HSMCA_ENSURE(c->ica_istiod_names.n + c->ica_dns_suffixes.n > 0, e, HSMCA_EINVAL,
                 "config: intermediate.istiod_names and intermediate.dns_suffixes are both "
                 "empty: an intermediate must permit istiod's own DNS names");
    for (int i = 0; i < c->ica_ip_ranges.n; i++) {
        uint8_t range[32];
        size_t n;
        HSMCA_ENSURE(util_cidr_parse(c->ica_ip_ranges.items[i], range, &n), e, HSMCA_EINVAL,
                     "config: intermediate.ip_ranges item '%.64s' must be an address range "
                     "ADDR/BITS without host bits (10.1.0.0/16, fd00::/8)",
                     c->ica_ip_ranges.items[i]);
    }
    return HSMCA_OK;
}

/* The signing log is on unless the config says otherwise in so many words: a config
 * that merely leaves audit.dir out (an old one, a typo) does not sign unlogged. */
static HSMCA_MUSTCHECK hsmca_code validate_audit(const hsmca_config *c, hsmca_err *e)
{
    if (!c->audit_dir[0] && !c->audit_disabled)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: audit.dir is required (the signing log's directory); to "
                          "sign without a log, say audit.disabled: true");
    if (c->audit_dir[0] && c->audit_disabled)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: audit.dir and audit.disabled: true together: remove one");
    HSMCA_GUARD(validate_ica_names(c, e));
    return validate_admin(c, e);
}

/* metrics.listen is host:port (or "" for none); its process is never the signer's user:
 * it parses HTTP from the network. */
static HSMCA_MUSTCHECK hsmca_code validate_metrics(const hsmca_config *c, hsmca_err *e)
{
    const char *colon = strrchr(c->metrics_listen, ':');
    if (c->metrics_listen[0] && (!colon || colon == c->metrics_listen || !colon[1]))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: metrics.listen must be host:port or \"\" (off), not '%.64s'",
                          c->metrics_listen);
    const char *user = c->metrics_user[0] ? c->metrics_user : c->fe_user;
    if (!strcmp(user, c->signer_user))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: metrics.user must differ from signer.user (both are '%.64s')",
                          user);
    return HSMCA_OK;
}

/* The publish-roots child serve runs (publish.enabled) holds the API server's
 * credentials: never as the signer's user, which holds the token's session. */
static HSMCA_MUSTCHECK hsmca_code validate_publish(const hsmca_config *c, hsmca_err *e)
{
    const char *user = c->publish_user[0] ? c->publish_user : c->fe_user;
    if (c->publish_enabled && !strcmp(user, c->signer_user))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: publish.user must differ from signer.user (both are '%.64s')",
                          user);
    return HSMCA_OK;
}

/* pkcs11.softhsm2_conf is the signer's SOFTHSM2_CONF (a path resolved against the
 * config's directory): one source for it, so pkcs11.env may not name it too. Group names
 * are looked up at start (sandbox_user_groups); here only their shape. */
static HSMCA_MUSTCHECK hsmca_code validate_signer_env(const hsmca_config *c, hsmca_err *e)
{
    if (c->softhsm2_conf[0] && config_env_get(&c->pkcs11_env, "SOFTHSM2_CONF"))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: pkcs11.env names SOFTHSM2_CONF and pkcs11.softhsm2_conf is "
                          "set too: keep one (pkcs11.softhsm2_conf sets SOFTHSM2_CONF)");
    for (int i = 0; i < c->signer_groups.n; i++) {
        const char *g = c->signer_groups.items[i];
        if (strlen(g) > 32 || strchr(g, ':') || strchr(g, '/'))
            return hsmca_fail(e, HSMCA_EINVAL,
                              "config: signer.groups item '%.40s' is not a group name or gid", g);
        for (int j = 0; j < i; j++)
            if (!strcmp(g, c->signer_groups.items[j]))
                return hsmca_fail(e, HSMCA_EINVAL, "config: signer.groups names '%s' twice", g);
    }
    return HSMCA_OK;
}

hsmca_code config_validate(const hsmca_config *c, hsmca_err *e)
{
    hsmca_code rc = validate_required(c, e);
    if (rc != HSMCA_OK)
        return rc;
    if ((rc = validate_auth(c, e)) != HSMCA_OK)
        return rc;
    if ((rc = validate_server(c, e)) != HSMCA_OK)
        return rc;
    if ((rc = validate_audit(c, e)) != HSMCA_OK)
        return rc;
    if (strncmp(c->ca_key_uri, "pkcs11:", 7) != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "config: pkcs11.ca_key must be a pkcs11: URI");
    if (c->audit_key_uri[0] && strncmp(c->audit_key_uri, "pkcs11:", 7) != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "config: pkcs11.audit_key must be a pkcs11: URI");
    if (!c->audit_key_uri[0] && (c->audit_module[0] || c->audit_pin_file[0]))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: pkcs11.audit_module and pkcs11.audit_pin_file need "
                          "pkcs11.audit_key (the key they are for)");
    if (c->audit_key_uri[0] && !strcmp(c->audit_key_uri, c->ca_key_uri))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: pkcs11.audit_key must name another key than pkcs11.ca_key");
    if (c->sessions < 1 || c->sessions > CONFIG_MAX_SESSIONS)
        return hsmca_fail(e, HSMCA_EINVAL, "config: pkcs11.sessions must be 1-%d",
                          CONFIG_MAX_SESSIONS);
    if (c->default_ttl < PROFILE_MIN_TTL_S || c->default_ttl > c->max_ttl)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: issuance.default_ttl must be 600..issuance.max_ttl");
    if (c->rate_per_second < 1)
        return hsmca_fail(e, HSMCA_EINVAL, "config: issuance.rate_per_second must be >= 1");
    if (c->rate_burst < 1)
        return hsmca_fail(e, HSMCA_EINVAL, "config: issuance.rate_burst must be >= 1");
    if (config_chain_has(c, "jwt") && c->jwt_audiences.n < 1)
        return hsmca_fail(e, HSMCA_EINVAL, "config: auth.jwt.audiences must name an audience");
    if ((rc = validate_tokenreview(c, e)) != HSMCA_OK)
        return rc;
    if ((rc = validate_trusted_nodes(c, e)) != HSMCA_OK)
        return rc;
    if ((rc = validate_clusters(c, e)) != HSMCA_OK)
        return rc;
    if ((rc = validate_signer_env(c, e)) != HSMCA_OK)
        return rc;
    if (c->signer_sandbox_network[0] && config_net_parse(c->signer_sandbox_network) < 0)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: signer.sandbox.network must be none, unix or inet, not '%.15s'",
                          c->signer_sandbox_network);
    if (c->fe_chroot[0] != '/')
        return hsmca_fail(e, HSMCA_EINVAL, "config: frontend.chroot must be an absolute path");
    /* The signer's user must not be the one whose process parses the network's
     * input: a compromised front end could otherwise signal, trace or read the
     * signer and its token files. (The signer also compares the uids at start.) */
    if (!strcmp(c->signer_user, c->fe_user))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "config: signer.user and frontend.user must be different users "
                          "(both are '%.64s')",
                          c->signer_user);
    HSMCA_GUARD(validate_metrics(c, e));
    return validate_publish(c, e);
}

hsmca_code config_replica_origin(hsmca_config *c, hsmca_err *e)
{
    char host[256], name[CONFIG_MAX_STR];
    const char *id = c->audit_replica;
    if (strcmp(id, "hostname") == 0) {
        if (gethostname(host, sizeof(host)) != 0)
            host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        id = host;
    }
    HSMCA_ENSURE(config_cluster_id_ok(id, strlen(id)), e, HSMCA_EINVAL,
                 "config: audit.replica '%.64s' must be 1-63 characters of [A-Za-z0-9._-] (or "
                 "\"hostname\": this host's name)",
                 id);
    if (c->audit_origin[0])
        snprintf(name, sizeof(name), "%s", c->audit_origin);
    else
        snprintf(name, sizeof(name), "hsmca/%.200s", c->trust_domain);
    int n = snprintf(c->audit_origin, sizeof(c->audit_origin), "%s/%s", name, id);
    HSMCA_ENSURE(n > 0 && (size_t)n < sizeof(c->audit_origin), e, HSMCA_EINVAL,
                 "config: audit.origin with audit.replica is too long");
    return HSMCA_OK;
}
