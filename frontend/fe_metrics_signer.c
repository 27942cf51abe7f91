/* fe_metrics_signer.c - see fe_metrics_signer.h. The figures are the signer's latest
 * StatusReply (fe_sigstat.h, polled once a second): without one (no signer yet, or an old
 * signer) only hsmca_signer_figures_age_seconds is left out, and the rest are absent, so
 * an alert on them fires on absence rather than on stale values. */
#include "fe_metrics_signer.h"

#include "fe_sigstat.h"
#include "util.h"

static void tokens(mbuf *b, const fe_sigstat_figures *f)
{
    mbuf_family(b, "hsmca_token_state", "gauge",
                "The state of each token key (1 for the current state): ok, reconnecting, "
                "pin_refused; none for a key that is not configured.");
    const uint32_t st[2] = {f->ca_token, f->audit_token};
    static const char *const keys[2] = {"ca", "audit"};
    for (int k = 0; k < 2; k++)
        for (unsigned s = 0; s < SIGSTAT_TOKEN_STATES; s++)
            mbuf_put(b, "hsmca_token_state{key=\"%s\",state=\"%s\"} %d\n", keys[k],
                     sigstat_token_name(s), st[k] == s);
    mbuf_family(b, "hsmca_pkcs11_sessions", "gauge",
                "The signer's PKCS#11 sessions of the CA key: open, and busy signing.");
    mbuf_put(b, "hsmca_pkcs11_sessions{state=\"open\"} %u\n", f->sessions_open);
    mbuf_put(b, "hsmca_pkcs11_sessions{state=\"busy\"} %u\n", f->sessions_busy);
    mbuf_family(b, "hsmca_token_reconnects_total", "counter",
                "Times the signer reconnected to its token after it went away.");
    mbuf_put(b, "hsmca_token_reconnects_total %llu\n", (unsigned long long)f->reconnects);
}

static void signing(mbuf *b, const fe_sigstat_figures *f)
{
    mbuf_family(b, "hsmca_signer_signatures_total", "counter",
                "Signatures the signer made with the CA key, by what they sign.");
    for (unsigned p = 0; p < SIGSTAT_PROFILES; p++)
        mbuf_put(b, "hsmca_signer_signatures_total{profile=\"%s\",ca_key=\"%s\"} %llu\n",
                 sigstat_profile_name(p), f->ca_key_type[0] ? f->ca_key_type : "unknown",
                 (unsigned long long)f->issued[p]);
    mbuf_family(b, "hsmca_signer_refusals_total", "counter",
                "Requests the signer refused, by reason: the invariant that failed "
                "(invariant_1..8), the rate limit, its queue, the identity binding, the "
                "policy file, the token, the signing log, other.");
    for (unsigned r = 0; r < SIGSTAT_REFUSALS; r++)
        mbuf_put(b, "hsmca_signer_refusals_total{reason=\"%s\"} %llu\n", sigstat_refusal_name(r),
                 (unsigned long long)f->refused[r]);
    mbuf_hist(b, "hsmca_sign_duration_seconds", "C_Sign with the CA key, per signature.",
              &f->c_sign);
    mbuf_hist(b, "hsmca_signer_queue_wait_seconds",
              "Time a request waited in the signer for a token session.", &f->queue_wait);
}

static void audit(mbuf *b, const fe_sigstat_figures *f)
{
    mbuf_family(b, "hsmca_audit_state", "gauge",
                "The signing log (1 for the current state): disabled, writable, failing.");
    for (unsigned s = 0; s < SIGSTAT_AUDIT_STATES; s++)
        mbuf_put(b, "hsmca_audit_state{state=\"%s\"} %d\n", sigstat_audit_name(s),
                 f->audit_state == s);
    mbuf_family(b, "hsmca_audit_entries", "gauge", "Entries in the signing log.");
    mbuf_put(b, "hsmca_audit_entries %llu\n", (unsigned long long)f->audit_entries);
    mbuf_family(b, "hsmca_audit_bytes", "gauge", "The signing log's size.");
    mbuf_put(b, "hsmca_audit_bytes %llu\n", (unsigned long long)f->audit_bytes);
    mbuf_family(b, "hsmca_audit_checkpoint_size", "gauge",
                "Tree size of the latest signed checkpoint (0: none yet).");
    mbuf_put(b, "hsmca_audit_checkpoint_size %llu\n", (unsigned long long)f->checkpoint_size);
    mbuf_family(b, "hsmca_audit_checkpoint_timestamp_seconds", "gauge",
                "When the latest checkpoint was signed, as a Unix time (0: none yet).");
    mbuf_put(b, "hsmca_audit_checkpoint_timestamp_seconds %lld\n", (long long)f->checkpoint_time);
    if (f->checkpoint_time) {
        mbuf_family(b, "hsmca_audit_checkpoint_age_seconds", "gauge",
                    "Seconds since the latest checkpoint was signed.");
        mbuf_put(b, "hsmca_audit_checkpoint_age_seconds %lld\n",
                 (long long)(util_wall_now() - f->checkpoint_time));
    }
    mbuf_hist(b, "hsmca_audit_sync_duration_seconds",
              "fdatasync of the signing log, per entry written.", &f->audit_sync);
}

void fe_metrics_signer_render(mbuf *b, const fe_app *app)
{
    fe_sigstat_figures f;
    fe_sigstat_get(app->sigstat, &f);
    if (!f.valid)
        return;
    mbuf_family(b, "hsmca_signer_figures_age_seconds", "gauge",
                "Seconds since the signer's figures below came (they are asked once a second).");
    mbuf_put(b, "hsmca_signer_figures_age_seconds %.3f\n", f.age);
    mbuf_family(b, "hsmca_signer_uptime_seconds", "gauge", "Seconds the signer has been up.");
    mbuf_put(b, "hsmca_signer_uptime_seconds %.3f\n", f.signer_uptime);
    tokens(b, &f);
    signing(b, &f);
    audit(b, &f);
}
