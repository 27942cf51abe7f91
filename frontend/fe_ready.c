/* fe_ready.c - see fe_ready.h. The signer's conditions (token, audit log) come from its
 * latest figures (fe_ready_signer.c); the rest are this process's own. */
#include "fe_ready.h"

#include "fe_metrics.h"
#include "fe_ready_signer.h"
#include "fe_reload.h"
#include "util.h"

static void say(mbuf *b, int ok, const char *good, const char *bad)
{
    if (b)
        mbuf_put(b, "%s: %s\n", ok ? "ok" : "not ready", ok ? good : bad);
}

int fe_health(const fe_app *app, mbuf *b)
{
    int up = app->ipc && fe_ipc_connected(app->ipc);
    if (b)
        mbuf_put(b, "%s\n",
                 up ? "ok: the front end answers and a signer is connected"
                    : "unhealthy: the front end answers but no signer is connected");
    return up;
}

/* What an operator should know that does not make this replica unready: one
 * "warning: ..." line each after the conditions; the answer stays 200. */
static void warnings(const fe_app *app, mbuf *b)
{
    char why[FE_RELOAD_WHY_MAX + 32];
    fe_ready_signer_warnings(app, b);
    if (b && fe_reload_failed(why, sizeof(why)))
        mbuf_put(b, "warning: %s (the policy in force stays)\n", why);
}

int fe_ready(const fe_app *app, mbuf *b)
{
    int all = 1, ok;
    ok = app->ipc && fe_ipc_connected(app->ipc);
    say(b, ok, "signer connected", "no signer connected");
    all &= ok;
    all &= fe_ready_signer(app, ok, b);
    fe_metrics_snap s;
    fe_metrics_snapshot(&s);
    int64_t now = util_wall_now();
    ok = s.serving_not_after > now;
    say(b, ok, "serving certificate valid",
        s.serving_not_after ? "the serving certificate has expired"
                            : "no serving certificate yet (the signer has not issued one)");
    all &= ok;
    if (config_cluster_has_jwt(app->cfg, 0) && app->keys[0]) {
        ok = tok_keys_generation(app->keys[0]) > 0;
        say(b, ok, "issuer keys loaded for the local cluster",
            "no issuer keys for the local cluster yet (auth.jwt.issuer or auth.jwt.jwks_file)");
        all &= ok;
    }
    warnings(app, b);
    return all;
}
