/* fe_ready_signer.h - the readiness conditions the signer's figures decide: its token
 * logged in, its audit log writable with a recent checkpoint (or explicitly off). */
#ifndef HSMCA_FE_READY_SIGNER_H
#define HSMCA_FE_READY_SIGNER_H

#include "fe_app.h"
#include "fe_metrics_buf.h"

/* 1 when they hold; one line per condition into b (may be NULL). connected: a signer is
 * connected now (without one, nothing the signer said is current). */
int fe_ready_signer(const fe_app *app, int connected, mbuf *b);

/* The signer's "warning: ..." lines into b (may be NULL): what does not make the replica
 * unready, such as a closed CA profile. */
void fe_ready_signer_warnings(const fe_app *app, mbuf *b);

#endif
