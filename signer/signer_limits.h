/* signer_limits.h - the issued-serial set (invariant 6) and the signing rate
 * limiter (invariant 7). Both are shared by the signing threads. */
#ifndef HSMCA_SIGNER_LIMITS_H
#define HSMCA_SIGNER_LIMITS_H

#include <stddef.h>
#include <stdint.h>
#include "hsmca_err.h"

/* The serials this CA key has signed (thread-safe). Today it is filled as the
 * signer signs and forgets on restart; the audit log (DESIGN.md §6) will rebuild
 * it at start with serial_set_restore for every serial the log holds. */
typedef struct serial_set serial_set;

/* An empty set; NULL when out of memory. */
serial_set *serial_set_new(void);
void serial_set_free(serial_set *s);

/* Records a serial about to be signed: HSMCA_OK, or HSMCA_EPERM when it was
 * signed (or restored) before, HSMCA_EINVAL when not 1..20 octets. */
HSMCA_MUSTCHECK hsmca_code serial_set_insert(serial_set *s, const uint8_t *serial, size_t len,
                                             hsmca_err *e);

/* Records a serial signed in an earlier life (replayed from the audit log): a
 * serial seen twice there is reported (HSMCA_EPERM) but stays recorded. */
HSMCA_MUSTCHECK hsmca_code serial_set_restore(serial_set *s, const uint8_t *serial, size_t len,
                                              hsmca_err *e);

/* How many serials the set holds. */
size_t serial_set_count(serial_set *s);

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

#endif
