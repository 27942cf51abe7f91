/* fe_metrics_link.h - the front end's side of the link to the metrics process
 * (common/mx_contract.h): a thread answers each request with the exposition text, the
 * health line or the readiness report. */
#ifndef HSMCA_FE_METRICS_LINK_H
#define HSMCA_FE_METRICS_LINK_H

#include "fe_app.h"
#include "hsmca_err.h"

/* Starts the thread on fd (the --metrics-fd socket; -1: no metrics process, nothing is
 * started). Before the seccomp filter: it needs only poll, recv and send after. At
 * start-up: a thread that cannot start is fatal (thread_start.h). */
HSMCA_MUSTCHECK hsmca_code fe_metrics_link_start(int fd, const fe_app *app, hsmca_err *e);

#endif
