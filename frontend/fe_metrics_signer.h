/* fe_metrics_signer.h - the signer's figures (its sessions, token state, audit log, signing
 * latencies) as the front end last received them over the IPC, in the exposition format. */
#ifndef HSMCA_FE_METRICS_SIGNER_H
#define HSMCA_FE_METRICS_SIGNER_H

#include "fe_app.h"
#include "fe_metrics_buf.h"

void fe_metrics_signer_render(mbuf *b, const fe_app *app);

#endif
