/* signer_stage.h - staged requests: checked and logged, waiting for the audit log's
 * sync (parked), then durable and waiting for a worker (ready); the syncer thread and
 * the pool of stages. Private to signer/. */
#ifndef HSMCA_SIGNER_STAGE_H
#define HSMCA_SIGNER_STAGE_H

#include "signer_ctx.h"

/* The pool of stages (max_staged and n_workers set); fatal when out of memory. */
void signer_stages_init(signer_ctx *s);
void signer_stages_free(signer_ctx *s);

/* A job's intent_seq before its intent is appended. */
#define SIGNER_NO_INTENT UINT64_MAX

/* Under s->lock: the checker's next job, a queued one with a stage from the pool, taken
 * only while there is room to stage it; NULL at a stop (it takes nothing more). */
signer_job *signer_next_to_check(signer_ctx *s);

/* Under s->lock: a signing worker's next job, a staged one (durable; its front end
 * checked again: j->current); NULL at a stop once every staged job was signed (their
 * intents are in the log), the one the checker holds included. */
signer_job *signer_next_to_sign(signer_ctx *s);

/* Hands j, checked by the checker, on: parked for the syncer with the audit log (its
 * intent appended), ready for a worker without it. The checker lets go of it. */
void signer_stage_checked(signer_ctx *s, signer_job *j);

/* The syncer thread (with the audit log): arg is the signer_ctx. */
void *signer_syncer(void *arg);

#endif
