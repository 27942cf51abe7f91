/* fe_ready.h - the front end's health and readiness (docs/OPERATIONS.md "Health"), for
 * /healthz and /readyz (the metrics process asks over its link) and grpc.health.v1. */
#ifndef HSMCA_FE_READY_H
#define HSMCA_FE_READY_H

#include "fe_app.h"
#include "fe_metrics_buf.h"

/* Healthy: this process answers and a signer is connected. 1 when so; writes one line
 * saying which into b (b may be NULL). */
int fe_health(const fe_app *app, mbuf *b);

/* Ready: a signer connected, its token logged in, the audit log writable with a recent
 * checkpoint (or explicitly off), the serving certificate valid, the local cluster's
 * issuer keys loaded (when auth.chain names jwt). 1 when all hold; writes one line per
 * condition ("ok: ..." or "not ready: ...") into b (b may be NULL), and "warning: ..."
 * lines for what does not stop workloads (a closed CA profile). */
int fe_ready(const fe_app *app, mbuf *b);

#endif
