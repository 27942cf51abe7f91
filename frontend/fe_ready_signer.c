/* fe_ready_signer.c - see fe_ready_signer.h. */
#include "fe_ready_signer.h"

#include <pthread.h>
#include <stdio.h>

#include "fe_sigstat.h"
#include "util.h"

/* Figures older than this are not the signer's state now: it stopped answering. */
#define FE_READY_FIGURES_MAX_AGE_S (2 * FE_SIGSTAT_TIMEOUT_S)
/* The signer signs a checkpoint each second while entries come (signer_core.c); entries a
 * checkpoint has not covered for five of those intervals mean the publisher is stuck. */
#define FE_READY_CHECKPOINT_MAX_AGE_S 5

/* Since when (monotonic seconds) the front end has seen entries that no checkpoint covers,
 * while the checkpoint's size stayed uncovered_size; 0: none seen. After an idle spell the
 * first entries wait up to a second for the next checkpoint, the latest being old by then:
 * uncovered entries make the CA unready only once they stay so, without progress, for
 * FE_READY_CHECKPOINT_MAX_AGE_S (otherwise /readyz would flap after every quiet minute). */
static pthread_mutex_t uncovered_lock = PTHREAD_MUTEX_INITIALIZER;
static double uncovered_since;
static uint64_t uncovered_size;

static double uncovered_for(const fe_sigstat_figures *f)
{
    double now = util_mono_now(), d = 0;
    pthread_mutex_lock(&uncovered_lock);
    if (f->checkpoint_size >= f->audit_entries) {
        uncovered_since = 0;
    } else if (!uncovered_since || f->checkpoint_size != uncovered_size) {
        uncovered_since = now;
        uncovered_size = f->checkpoint_size;
    } else {
        d = now - uncovered_since;
    }
    pthread_mutex_unlock(&uncovered_lock);
    return d;
}

static int say(mbuf *b, int ok, const char *good, const char *bad)
{
    if (b)
        mbuf_put(b, "%s: %s\n", ok ? "ok" : "not ready", ok ? good : bad);
    return ok;
}

static int audit_ok(const fe_app *app, const fe_sigstat_figures *f, mbuf *b)
{
    if (f->audit_state == SIGSTAT_AUDIT_DISABLED)
        return say(b, app->cfg->audit_disabled, "audit log disabled (audit.disabled: true)",
                   "the signer has no audit log, but audit.disabled is not set");
    if (f->audit_state != SIGSTAT_AUDIT_WRITABLE)
        return say(b, 0, "", "the audit log cannot be written (audit.dir: see the signer's log)");
    int64_t age = f->checkpoint_time ? util_wall_now() - f->checkpoint_time : 0;
    int covered = f->checkpoint_size >= f->audit_entries;
    char bad[160];
    snprintf(bad, sizeof(bad),
             "%llu audit entries not covered by a checkpoint, the latest signed %lld s ago",
             (unsigned long long)(covered ? 0 : f->audit_entries - f->checkpoint_size),
             (long long)age);
    int fresh = f->checkpoint_time && age <= FE_READY_CHECKPOINT_MAX_AGE_S;
    int waiting = uncovered_for(f) <= FE_READY_CHECKPOINT_MAX_AGE_S;
    return say(b, covered || fresh || waiting, "audit log writable, checkpoint current", bad);
}

int fe_ready_signer(const fe_app *app, int connected, mbuf *b)
{
    fe_sigstat_figures f;
    fe_sigstat_get(app->sigstat, &f);
    if (!connected)
        return 0; /* said already: nothing the signer reported is current */
    if (!f.valid || f.age < 0 || f.age > FE_READY_FIGURES_MAX_AGE_S)
        return say(b, 0, "", "no current figures from the signer (it does not answer)");
    char bad[96];
    snprintf(bad, sizeof(bad), "the CA key's token is not logged in (%s)",
             sigstat_token_name(f.ca_token));
    int ok = say(b, f.ca_token == SIGSTAT_TOKEN_OK, "token logged in", bad);
    return audit_ok(app, &f, b) && ok;
}

void fe_ready_signer_warnings(const fe_app *app, mbuf *b)
{
    fe_sigstat_figures f;
    fe_sigstat_get(app->sigstat, &f);
    if (b && f.valid && f.ca_closed) /* a warning, not unready: workloads are served */
        mbuf_put(b, "warning: the CA profile is closed: the signing log breaks a CA-profile "
                    "rule at seq %llu (intermediates and CRLs refused, workloads served; "
                    "hsmca admin status, docs/OPERATIONS.md)\n",
                 (unsigned long long)f.ca_closed_seq);
}
