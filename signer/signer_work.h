/* signer_work.h - the signer's queue and its threads: requests wait in the queue
 * (invariant 7's bounds), the checker validates and logs each, the workers sign and
 * reply, the watchdog answers a token call that hangs. Private to signer/. */
#ifndef HSMCA_SIGNER_WORK_H
#define HSMCA_SIGNER_WORK_H

#include <stdint.h>

#include "hsmca_err.h"
#include "signer.pb-c.h"
#include "signer_request.h"

typedef struct signer_ctx signer_ctx;

/* Before unpacking a request of this shape: HSMCA_OK when the queue has room;
 * otherwise HSMCA_ERATE, and the front end has been answered RESOURCE_EXHAUSTED
 * for request id. */
HSMCA_MUSTCHECK hsmca_code signer_queue_reserve(signer_ctx *s, const signer_request_shape *shape,
                                                uint64_t id);

/* Queues a request for the workers; takes ownership of req. When req is NULL (protobuf-c
 * could not allocate it) or the job cannot be allocated, request id is answered
 * HSMCA_ENOMEM instead (hsmca_err.h's out-of-memory rule). */
void signer_submit(signer_ctx *s, uint64_t id, Hsmca__Ipc__SignRequest *req,
                   const signer_request_shape *shape);

typedef struct {
    signer_ctx *s;
    int idx;
} signer_worker_arg;

/* A thread of the signer: arg is a malloc'd signer_worker_arg, freed by it. The checker
 * (index 0) validates requests and stages them; the others sign staged requests. */
void *signer_checker(void *arg);
void *signer_worker(void *arg);

/* The watchdog: answers UNAVAILABLE for requests whose token call is overdue. */
void signer_answer_overdue(signer_ctx *s);

#endif
