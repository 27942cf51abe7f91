/* config_defaults.c - see config.h: the values a config starts from, and what is
 * derived from a loaded one (serving names, the log's default origin, the chain). */
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
}
