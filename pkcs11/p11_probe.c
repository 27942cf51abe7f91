/* p11_probe.c - a pool's health check while it is idle (p11.h, p11_pool_probe): one
 * C_GetSessionInfo on a free session through the pool's own recovery, so that a token
 * removed or gone away is seen (the pool reconnecting) without a request, and one back
 * is reconnected to. */
#include "p11.h"
#include "p11_int.h"

#include "log.h"

static CK_RV probe_op(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, void *arg)
{
    (void)key;
    (void)arg;
    CK_SESSION_INFO info;
    return m->fl->C_GetSessionInfo(s, &info);
}

p11_pool_state p11_pool_probe(p11_pool *p)
{
    p11_pool_figures f;
    p11_pool_figures_get(p, &f);
    /* Busy: signing finds a fault itself, and the probe must not wait for a session.
     * Refused PIN: nothing is tried again (p11_pool_state). */
    int idle = f.state == P11_POOL_READY ? f.open > f.busy
                                         : f.state == P11_POOL_RECONNECTING && f.busy == 0;
    if (!idle)
        return f.state;
    hsmca_err e;
    /* What failed is the pool's state now (the pool logged the fault). */
    if (p11_pool_run(p, probe_op, NULL, "probe: C_GetSessionInfo", &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_DEBUG, "pkcs11: probe failed", LOG_STR("error", e.msg));
    return p11_pool_get_state(p);
}
