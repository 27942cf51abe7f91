/* mx_link.h - the metrics process's side of the link to the front end
 * (common/mx_contract.h). */
#ifndef HSMCA_MX_LINK_H
#define HSMCA_MX_LINK_H

#include <stddef.h>

#include "hsmca_err.h"

/* Takes fd as the link (closing the one before); thread-safe. */
void mx_link_set(int fd);

/* Asks the front end (kind: MX_KIND_*) and waits at most MX_TIMEOUT_MS for the whole
 * answer: 0 with *text (malloc'd, NUL-terminated, *len bytes) and *ok (MX_OK), or -1
 * when the front end did not answer in time (no link, gone, stalled). One at a time. */
int mx_link_ask(char kind, char **text, size_t *len, int *ok);

/* Starts the thread that reads the control channel: a CTL_NEW_PEER replaces the link;
 * the channel's end (the supervisor gone) sends SIGTERM to the process. */
HSMCA_MUSTCHECK hsmca_code mx_link_watch_ctl(int ctl_fd, hsmca_err *e);

#endif
