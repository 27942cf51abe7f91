/* signer_limits.h - the issued-serial set (invariant 6) and the signing rate
 * limiter (invariant 7). Both are shared by the signing threads. */
#ifndef HSMCA_SIGNER_LIMITS_H
#define HSMCA_SIGNER_LIMITS_H

#include "config.h"
#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

/* The serials this CA key has signed whose certificates have not expired
 * (thread-safe). Filled as the signer signs, rebuilt at start from the audit log
 * (docs/ARCHITECTURE.md §7.4) with serial_set_restore. Each serial is kept with its notAfter and
 * dropped once expired: lazily, when the table would grow (a rebuild that keeps only
 * live serials, at a load of at most 1/4, so the set follows the live count instead of
 * growing forever), or on serial_set_prune. A serial is refused at least until its
 * certificate expires. */
typedef struct serial_set serial_set;

/* An empty set; NULL when out of memory. */
serial_set *serial_set_new(void);
void serial_set_free(serial_set *s);

/* Records a serial about to be signed, valid until not_after (unix seconds), at wall
 * time now: HSMCA_OK, or HSMCA_EPERM when it was signed (or restored) before and has
 * not expired, HSMCA_EINVAL when not 1..20 octets. */
HSMCA_MUSTCHECK hsmca_code serial_set_insert(serial_set *s, const uint8_t *serial, size_t len,
                                             int64_t not_after, int64_t now, hsmca_err *e);

/* Records a serial signed in an earlier life (replayed from the audit log): a
 * serial seen twice there is reported (HSMCA_EPERM) but stays recorded (with the
 * later of the two not_after). */
HSMCA_MUSTCHECK hsmca_code serial_set_restore(serial_set *s, const uint8_t *serial, size_t len,
                                              int64_t not_after, int64_t now, hsmca_err *e);

/* Drops every serial whose not_after is at or before now (and shrinks the table when
 * it can); returns how many were dropped. */
size_t serial_set_prune(serial_set *s, int64_t now);

/* How many serials the set holds (expired ones not yet pruned included). */
size_t serial_set_count(serial_set *s);
/* The table's slots (for the test that shows the set stays bounded). */
size_t serial_set_capacity(serial_set *s);

/* SipHash-2-4 of in[0..n) under the 16-byte key (the set's keyed hash, exposed
 * so the unit test can check it against the reference vectors). */
uint64_t serial_set_siphash(const uint8_t key[16], const uint8_t *in, size_t n);

/* A token bucket (thread-safe): rate tokens per second, up to burst. */
typedef struct rate_limiter rate_limiter;
/* Starts full (burst tokens). NULL when rate or burst is 0, or out of memory. */
rate_limiter *rate_limiter_new(uint32_t rate, uint32_t burst);
void rate_limiter_free(rate_limiter *r);
/* Takes one token at monotonic time now; HSMCA_ERATE when the bucket is empty. */
HSMCA_MUSTCHECK hsmca_code rate_limiter_take(rate_limiter *r, double now, hsmca_err *e);

/* The queue's bounds (invariant 7): in requests, and in the bytes the queued
 * requests hold once unpacked, so a flooding front end cannot grow the signer. */
#define SIGNER_MAX_QUEUE 8192
#define SIGNER_MAX_QUEUE_BYTES (16u << 20)
/* The signer's threads besides the main one (which reads the front end): one checker,
 * which validates each request and appends its intent, and one signing worker per
 * PKCS#11 session, which signs what the audit log's syncer made durable (invariant 8).
 * A worker never waits for a session (each has one to itself), and the checker
 * fills the next sync while the sessions sign, so the log does not idle the token
 * (bench_signer, docs/PERFORMANCE.md §4). Index 0 is the checker. */
#define SIGNER_MAX_WORKERS (CONFIG_MAX_SESSIONS + 1)

/* The threads a signer with `sessions` sessions runs: the checker and a worker each. */
static inline unsigned signer_worker_count(unsigned sessions)
{
    unsigned n = sessions + 1;
    return n < SIGNER_MAX_WORKERS ? n : SIGNER_MAX_WORKERS;
}

/* Requests checked and logged but not yet signed (parked for the sync, or durable and
 * waiting for a session), at most: enough for the sync of a busy second to cover a few
 * hundred intents, and bounded, so a token that hangs holds this many at most. */
#define SIGNER_MAX_STAGED 512

/* A time this far past now is past every window of the refusal and summary limiters
 * (each at most a minute): flushing "as of now + this" writes every count held. */
#define SIGNER_PAST_EVERY_WINDOW_S 3600.0

#endif
