/* siphash.h - SipHash-2-4 (Aumasson, Bernstein), the keyed hash of the tables whose keys
 * an attacker chooses (serials: the front end picks them, and the audit log repeats
 * them), so that nobody who lacks the table's random key can steer every key into one
 * probe chain. */
#ifndef HSMCA_SIPHASH_H
#define HSMCA_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of in[0..n) under the 16-byte key. */
uint64_t hsmca_siphash24(const uint8_t key[16], const uint8_t *in, size_t n);

#endif
