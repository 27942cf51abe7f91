/* signer_conn.h - the signer's link to its peers: the current front end connection,
 * which a newer one replaces while replies for the old one are still in flight, and
 * the control channel to the supervisor. */
#ifndef HSMCA_SIGNER_CONN_H
#define HSMCA_SIGNER_CONN_H

typedef struct signer_ctx signer_ctx;
typedef struct signer_conn signer_conn;

/* The current front end connection (-1 when none). */
int signer_conn_fd(signer_ctx *s);
/* Replaces the connection (the old one is closed once no worker uses it). */
void signer_conn_set(signer_ctx *s, int fd);
/* Closes the connection; replies still in flight for it are dropped. */
void signer_conn_close(signer_ctx *s);

/* Drops a reference to c (closing it with the last one); s->lock held. */
void signer_conn_unref_locked(signer_conn *c);

/* How long the main thread (which also serves the control channel and signals)
 * waits for a front end to take a queue-full reply. */
#define SIGNER_MAIN_SEND_TIMEOUT_MS 100

/* The supervisor's control channel, to ask for a new front end when the
 * current one stops reading. */
void signer_set_ctl_fd(signer_ctx *s, int ctl_fd);

/* Asks the supervisor (byte CTL_RESTART_PEER on the control channel) for a new
 * front end: after a protocol violation, or when the current one stopped reading. */
void signer_ask_new_frontend(signer_ctx *s);

#endif
