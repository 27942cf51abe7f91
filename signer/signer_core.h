/* signer_core.h - the signer's state: token pool, CA, profile, the current
 * front end connection and the workers that sign. */
#ifndef HSMCA_SIGNER_CORE_H
#define HSMCA_SIGNER_CORE_H

#include <stdint.h>
#include "config.h"
#include "hsmca_err.h"
#include "signer.pb-c.h"

typedef struct signer_ctx signer_ctx;

/* Loads the module, logs in, checks the CA key (sensitive, not extractable) and
 * that the CA certificate's key is the token key, builds the profile and starts
 * one worker per session. NULL with e naming the failed check. */
signer_ctx *signer_start(const hsmca_config *cfg, hsmca_err *e);

/* Stops the workers and releases everything (the PIN is wiped). */
void signer_stop_all(signer_ctx *s);

/* The current front end connection (-1 when none). */
int signer_conn_fd(signer_ctx *s);
/* Replaces the connection (the old one is closed once no worker uses it). */
void signer_conn_set(signer_ctx *s, int fd);
/* Closes the connection; replies still in flight for it are dropped. */
void signer_conn_close(signer_ctx *s);

/* Queues a request for the workers; takes ownership of req. */
void signer_submit(signer_ctx *s, uint64_t id, Hsmca__Ipc__SignRequest *req);

#endif
