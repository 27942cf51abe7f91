/* config_defaults.c - see config.h: the values a config starts from, numbers as a config
 * writes them, and what is derived from a loaded one (serving names, the log's default
 * origin, the chain, the signer's network mode). */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int config_chain_has(const hsmca_config *c, const char *name)
{
    for (int i = 0; i < c->auth_chain.n; i++)
        if (!strcmp(c->auth_chain.items[i], name))
            return 1;
    return 0;
}

int config_tokenreview_on(const hsmca_config *c)
{
    return config_chain_has(c, "tokenreview");
}

int config_parse_u32(const char *s, size_t len, int duration, uint32_t *out)
{
    uint64_t mult = 1;
    if (duration && len > 1) {
        switch (s[len - 1]) {
        case 's':
            mult = 1;
            len--;
            break;
        case 'm':
            mult = 60;
            len--;
            break;
        case 'h':
            mult = 3600;
            len--;
            break;
        case 'd':
            mult = 86400;
            len--;
            break;
        default: break;
        }
    }
    if (len == 0 || (len > 1 && s[0] == '0'))
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > UINT32_MAX)
            return -1;
    }
    v *= mult; /* v <= 2^32 and mult < 2^17: no uint64 overflow */
    if (v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static const char *const net_names[] = {"none", "unix", "inet"};

int config_net_parse(const char *name)
{
    for (size_t i = 0; i < sizeof(net_names) / sizeof(net_names[0]); i++)
        if (!strcmp(name, net_names[i]))
            return (int)i;
    return -1;
}

const char *config_net_name(config_net n)
{
    return (size_t)n < sizeof(net_names) / sizeof(net_names[0]) ? net_names[n] : "none";
}

config_net config_signer_network(const hsmca_config *c)
{
    int n = c->signer_sandbox_network[0] ? config_net_parse(c->signer_sandbox_network) : -1;
    if (n >= 0)
        return (config_net)n;
    /* A value the parser refused never gets here; an unknown one is the closed mode. */
    return c->signer_allow_network && !c->signer_sandbox_network[0] ? CONFIG_NET_INET
                                                                    : CONFIG_NET_NONE;
}

static void set_str(char *dst, const char *src)
{
    /* Callers pass literals that fit; the cap keeps it safe regardless. */
    snprintf(dst, CONFIG_MAX_STR, "%s", src);
}

void config_serving_names(const hsmca_config *c, const char *dns[CONFIG_MAX_SERVING_NAMES],
                          int *n_dns, const char *ips[CONFIG_MAX_SERVING_NAMES], int *n_ips)
{
    *n_dns = *n_ips = 0;
    dns[(*n_dns)++] = "localhost";
    for (int i = 0; i < c->dns_names.n && i < CONFIG_MAX_LIST; i++)
        dns[(*n_dns)++] = c->dns_names.items[i];
    ips[(*n_ips)++] = "127.0.0.1";
    for (int i = 0; i < c->ip_addresses.n && i < CONFIG_MAX_LIST; i++)
        ips[(*n_ips)++] = c->ip_addresses.items[i];
}

void config_default_origin(const char *trust_domain, char *out, size_t outsz)
{
    char host[256];
    if (gethostname(host, sizeof(host)) != 0 || !host[0])
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(out, outsz, "%.200s/hsmca/%.200s", host, trust_domain);
}

void config_defaults(hsmca_config *c)
{
    memset(c, 0, sizeof(*c));
    set_str(c->listen, "127.0.0.1:15012");
    c->serving_cert_ttl = 86400;
    c->max_request_bytes = 65536;
    c->handshake_timeout = 10;
    c->idle_timeout = 600;
    c->max_connections = 2048;
    c->memory_limit_mib = 160;
    c->max_queued_requests = 1024;
    c->sessions = 4;
    c->sign_timeout = 10;
    set_str(c->trust_domain, "cluster.local");
    c->default_ttl = 86400;
    c->max_ttl = 86400;
    c->rate_per_second = 1000;
    c->rate_burst = 2000;
    set_str(c->auth_chain.items[0], "client_cert");
    set_str(c->auth_chain.items[1], "jwt");
    c->auth_chain.n = 2;
    set_str(c->jwt_audiences.items[0], "istio-ca");
    c->jwt_audiences.n = 1;
    c->jwt_skew = 60;
    c->jwt_discovery = 0;
    c->jwt_refresh = 3600;
    c->jwt_min_refresh = 30;
    c->jwt_fetch_timeout = 10;
    c->jwt_bind = 1;
    c->approval_required = 2;
    c->approval_pending_ttl = 86400;
    c->approval_max_pending_per_user = 4;
    c->approval_max_pending = 64;
    c->ica_max_ttl = 365 * 86400;
    /* The names istiod's own serving certificate carries (Istio's getDNSNames for the
     * default revision in istio-system); a revision or another namespace configures its own. */
    set_str(c->ica_istiod_names.items[0], "istiod.istio-system.svc");
    set_str(c->ica_istiod_names.items[1], "istiod-remote.istio-system.svc");
    set_str(c->ica_istiod_names.items[2], "istio-pilot.istio-system.svc");
    c->ica_istiod_names.n = 3;
    c->crl_validity = 7 * 86400;
    set_str(c->metrics_listen, "127.0.0.1:15014");
    c->metrics_user[0] = '\0'; /* frontend.user */
    c->jwt_bind_required = 0;
    set_str(c->tr_audiences.items[0], "istio-ca");
    c->tr_audiences.n = 1;
    c->tr_timeout = 5;
    c->tr_cache_ttl = 300;
    c->tr_cache_entries = 4096;
    c->tr_max_concurrent = 8;
    set_str(c->fe_user, "nobody");
    set_str(c->fe_chroot, "/var/empty");
    set_str(c->signer_user, "hsmca-signer");
    snprintf(c->cluster_id, sizeof(c->cluster_id), "Kubernetes");
    c->signer_allow_network = 0;
    c->signer_sandbox_network[0] = '\0'; /* none, unless the deprecated key says inet */
    c->signer_sysv_ipc = 0;
    c->signer_allow_network_false = 0;
    c->pkcs11_env.n = 0;    /* the signer gets only what hsmca passes on (supervisor/sup_env.h) */
    c->signer_groups.n = 0; /* no supplementary group after the switch */
    c->publish_interval = 60;
    set_str(c->publish_lease_namespace, "istio-system");
    set_str(c->publish_lease_name, "hsmca-publish-roots");
    c->publish_lease_duration = 30;
    c->publish_timeout = 10;
    c->publish_enabled = 0;
    c->publish_user[0] = '\0'; /* frontend.user */
}
