/* fe_metrics_text.c - the figures in the Prometheus text exposition format (0.0.4): a
 * HELP and a TYPE line per family, the hsmca_ prefix, counters ending in _total, times
 * in seconds. Labels take only bounded values (profiles, stages, gRPC codes, key
 * types, cluster ids from the config): never a caller's identity. */
#include "fe_metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_metrics_buf.h"
#include "fe_metrics_signer.h"
#include "fe_reload.h"
#include "util.h"

#ifndef HSMCA_COMMIT
#define HSMCA_COMMIT "unknown"
#endif

static const char *const stage_names[FE_STAGE_N] = {"authentication", "policy", "signer", "limit"};
static const char *const code_names[17] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

static void issuance(mbuf *b, const fe_metrics_snap *s)
{
    mbuf_family(b, "hsmca_build_info", "gauge", "hsmca's version and commit (always 1).");
    mbuf_put(b, "hsmca_build_info{version=\"%s\",commit=\"%s\"} 1\n", HSMCA_VERSION, HSMCA_COMMIT);
    mbuf_family(b, "hsmca_certificates_issued_total", "counter",
                "Certificates issued, by profile and CA key type.");
    static const char *const profiles[2] = {"workload", "serving"};
    for (int i = 0; i < 2; i++)
        mbuf_put(b, "hsmca_certificates_issued_total{profile=\"%s\",ca_key=\"%s\"} %llu\n",
                 profiles[i], s->ca_key, (unsigned long long)s->issued[i]);
    mbuf_family(b, "hsmca_requests_refused_total", "counter",
                "CreateCertificate requests refused, by stage and gRPC code.");
    for (int st = 0; st < FE_STAGE_N; st++)
        for (int c = 1; c < 17; c++)
            if (s->refused[st][c])
                mbuf_put(b, "hsmca_requests_refused_total{stage=\"%s\",code=\"%s\"} %llu\n",
                         stage_names[st], code_names[c], (unsigned long long)s->refused[st][c]);
    mbuf_family(b, "hsmca_rate_limited_total", "counter",
                "Requests refused RESOURCE_EXHAUSTED, by the limit that refused them.");
    mbuf_put(b, "hsmca_rate_limited_total{limit=\"issuance.rate_per_second\"} %llu\n",
             (unsigned long long)s->refused[FE_STAGE_SIGNER][8]);
    mbuf_put(b, "hsmca_rate_limited_total{limit=\"server.max_queued_requests\"} %llu\n",
             (unsigned long long)s->refused[FE_STAGE_LIMIT][8]);
    mbuf_hist(b, "hsmca_request_duration_seconds",
              "CreateCertificate from its arrival to its answer.", &s->hist[FE_HIST_REQUEST]);
    mbuf_hist(b, "hsmca_authentication_duration_seconds", "The authenticator chain, per request.",
              &s->hist[FE_HIST_AUTH]);
}

static void connections(mbuf *b, const fe_metrics_snap *s)
{
    if (!s->have_conns)
        return;
    mbuf_family(b, "hsmca_connections_open", "gauge", "gRPC connections open.");
    mbuf_put(b, "hsmca_connections_open %u\n", s->conns_open);
    mbuf_family(b, "hsmca_connections_refused_total", "counter",
                "Connections closed at once by server.max_connections.");
    mbuf_put(b, "hsmca_connections_refused_total %llu\n", (unsigned long long)s->conns_refused);
}

static void tokenreview(mbuf *b, const fe_metrics_snap *s)
{
    uint64_t calls = 0;
    for (int cl = 0; cl < IPC_KEYSETS; cl++)
        if (s->app->tokenreview[cl])
            calls += fe_tokenreview_calls(s->app->tokenreview[cl]);
    mbuf_family(b, "hsmca_tokenreview_calls_total", "counter",
                "TokenReviews sent to the Kubernetes API server.");
    mbuf_put(b, "hsmca_tokenreview_calls_total %llu\n", (unsigned long long)calls);
    mbuf_family(b, "hsmca_tokenreview_cache_hits_total", "counter",
                "Tokens whose TokenReview answer came from the cache.");
    mbuf_put(b, "hsmca_tokenreview_cache_hits_total %llu\n",
             (unsigned long long)s->ctr[FE_CTR_TR_CACHE_HITS]);
    mbuf_family(b, "hsmca_tokenreview_failures_total", "counter",
                "TokenReviews without a usable answer (unavailable) or that refused the token.");
    mbuf_put(b, "hsmca_tokenreview_failures_total{reason=\"unavailable\"} %llu\n",
             (unsigned long long)s->ctr[FE_CTR_TR_FAILURES]);
    mbuf_put(b, "hsmca_tokenreview_failures_total{reason=\"refused\"} %llu\n",
             (unsigned long long)s->ctr[FE_CTR_TR_REFUSED]);
}

static void times(mbuf *b, const fe_metrics_snap *s)
{
    mbuf_family(b, "hsmca_ca_not_after_timestamp_seconds", "gauge",
                "The CA certificate's notAfter, as a Unix time.");
    mbuf_put(b, "hsmca_ca_not_after_timestamp_seconds %lld\n", (long long)s->ca_not_after);
    mbuf_family(b, "hsmca_root_not_after_timestamp_seconds", "gauge",
                "The earliest notAfter of the root bundle, as a Unix time.");
    mbuf_put(b, "hsmca_root_not_after_timestamp_seconds %lld\n", (long long)s->root_not_after);
    mbuf_family(b, "hsmca_serving_cert_not_after_timestamp_seconds", "gauge",
                "The front end's TLS serving certificate's notAfter (0: none yet).");
    mbuf_put(b, "hsmca_serving_cert_not_after_timestamp_seconds %lld\n",
             (long long)s->serving_not_after);
    double now = (double)util_wall_now();
    mbuf_family(b, "hsmca_issuer_keys_loads_total", "counter",
                "Issuer key sets (JWKS) the supervisor pushed and the front end loaded, by "
                "cluster.");
    for (int cl = 0; cl < IPC_KEYSETS; cl++)
        if (s->app->keys[cl])
            mbuf_put(b, "hsmca_issuer_keys_loads_total{cluster=\"%s\"} %llu\n",
                     config_cluster_name(s->app->cfg, cl), (unsigned long long)s->keys_pushes[cl]);
    mbuf_family(b, "hsmca_issuer_keys_age_seconds", "gauge",
                "Seconds since the cluster's issuer keys were last pushed (absent: never).");
    for (int cl = 0; cl < IPC_KEYSETS; cl++)
        if (s->app->keys[cl] && s->keys_at[cl] > 0)
            mbuf_put(b, "hsmca_issuer_keys_age_seconds{cluster=\"%s\"} %.3f\n",
                     config_cluster_name(s->app->cfg, cl), now - s->keys_at[cl]);
}

static void reload(mbuf *b)
{
    uint64_t failures;
    int64_t ok_at;
    int failed = fe_reload_stats(&failures, &ok_at);
    mbuf_family(b, "hsmca_policy_reload_failures_total", "counter",
                "SIGHUP reloads of the policy file that kept the policy in force.");
    mbuf_put(b, "hsmca_policy_reload_failures_total %llu\n", (unsigned long long)failures);
    mbuf_family(b, "hsmca_policy_reload_failed", "gauge",
                "1 while the last reload of the policy file failed.");
    mbuf_put(b, "hsmca_policy_reload_failed %d\n", failed);
    mbuf_family(b, "hsmca_policy_reload_last_success_timestamp_seconds", "gauge",
                "When the policy in force was loaded (start or reload), as a Unix time.");
    mbuf_put(b, "hsmca_policy_reload_last_success_timestamp_seconds %lld\n", (long long)ok_at);
}

char *fe_metrics_render(size_t *len)
{
    fe_metrics_snap s;
    fe_metrics_snapshot(&s);
    fe_metrics_count(FE_CTR_RENDERS);
    mbuf b;
    if (mbuf_init(&b, 32768) != 0)
        return NULL;
    issuance(&b, &s);
    connections(&b, &s);
    tokenreview(&b, &s);
    times(&b, &s);
    reload(&b);
    mbuf_family(&b, "hsmca_signer_connected", "gauge", "1 while a signer is connected.");
    mbuf_put(&b, "hsmca_signer_connected %d\n", s.app->ipc && fe_ipc_connected(s.app->ipc));
    mbuf_family(&b, "hsmca_metrics_renders_total", "counter",
                "Expositions the front end rendered (this one included).");
    mbuf_put(&b, "hsmca_metrics_renders_total %llu\n",
             (unsigned long long)s.ctr[FE_CTR_RENDERS] + 1);
    fe_metrics_signer_render(&b, s.app);
    return mbuf_finish(&b, len);
}
