/* fe_ready_signer.c - see fe_ready_signer.h. */
#include "fe_ready_signer.h"

#include <stdio.h>

#include "fe_sigstat.h"
#include "util.h"

/* Figures older than this are not the signer's state now: it stopped answering. */
#define FE_READY_FIGURES_MAX_AGE_S (2 * FE_SIGSTAT_TIMEOUT_S)
/* The signer signs a checkpoint each second while entries come (signer_core.c); entries a
 * checkpoint has not covered for five of those intervals mean the publisher is stuck. */
#define FE_READY_CHECKPOINT_MAX_AGE_S 5

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
    return say(b, covered || (f->checkpoint_time && age <= FE_READY_CHECKPOINT_MAX_AGE_S),
               "audit log writable, checkpoint current", bad);
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
