/* util.h - small helpers shared by every module: files, randomness, base64, messages. */
#ifndef HSMCA_UTIL_H
#define HSMCA_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "hsmca_err.h"

/* Reads a whole regular file of at most max bytes into a new NUL-terminated buffer
 * (caller frees; *len excludes the NUL). Refuses larger files, and anything else (a
 * FIFO, a device: "PATH is not a regular file") without blocking on it. */
HSMCA_MUSTCHECK hsmca_code util_read_file(const char *path, size_t max, char **out, size_t *len, hsmca_err *e);

/* The one atomic file writer: data to path through a new temp file in the same dir
 * (fsync, rename, fsync of the dir) with exactly the given mode. Used for keys, certs,
 * configs, CRLs: nothing half-written, nothing lost to a crash once it returns. */
HSMCA_MUSTCHECK hsmca_code util_write_file_atomic(const char *path, const void *data, size_t len,
                                  unsigned mode, hsmca_err *e);

/* util_write_file_atomic with mode less the process's umask, and no chmod call: for a
 * process whose sandbox allows none (the signer's crl.path). */
HSMCA_MUSTCHECK hsmca_code util_write_file_umask(const char *path, const void *data, size_t len,
                                                 unsigned mode, hsmca_err *e);

/* util_write_file_atomic for a path a user named (--out): refuses a symbolic link or any
 * non-regular file at path, which the rename would otherwise replace. */
HSMCA_MUSTCHECK hsmca_code util_write_out(const char *path, const void *data, size_t len,
                                          unsigned mode, hsmca_err *e);

/* The longest PIN, and the longest secret util_read_secret reads: a PIN buffer is
 * UTIL_PIN_MAX + 1 bytes, and the PKCS#11 layer refuses a longer PIN. */
#define UTIL_PIN_MAX 255

/* Reads a secret (PIN) file: first line, trailing CR/LF stripped, at most UTIL_PIN_MAX
 * bytes into buf (NUL-terminated). The caller wipes buf with OPENSSL_cleanse. */
HSMCA_MUSTCHECK hsmca_code util_read_secret(const char *path, char *buf, size_t bufsz, hsmca_err *e);

/* Fills buf with len bytes from the kernel CSPRNG (getrandom). Aborts on failure. */
void util_random(void *buf, size_t len);

/* Unpadded base64url (JWT) as a new NUL-terminated string (caller frees); NULL on OOM. */
char *util_b64url_encode(const uint8_t *in, size_t len);
/* Canonical unpadded base64url -> new buffer (caller frees) of *outlen bytes; NULL if not. */
uint8_t *util_b64url_decode(const char *in, size_t inlen, size_t *outlen);
/* Padded standard base64 (PEM) as a new NUL-terminated string (caller frees); NULL on OOM. */
char *util_b64_encode(const uint8_t *in, size_t len);
/* util_b64_encode into the caller's out (cap bytes, NUL-terminated): the characters
 * written, 0 when they and the NUL do not fit (out untouched). */
size_t util_b64_encode_to(const uint8_t *in, size_t len, char *out, size_t cap);
/* Canonical padded standard base64 -> new buffer (caller frees) of *outlen bytes; NULL if not. */
uint8_t *util_b64_decode(const char *in, size_t inlen, size_t *outlen);
/* Both decoders are strict: no whitespace, '=' only as the exact padding (std only), no 4k+1
 * length, zero spare bits, so each byte string has exactly one accepted encoding. */

/* Length of the leading run of s[0..len) in the standard alphabet (A-Za-z0-9+/, no '='). */
size_t util_b64_span(const char *s, size_t len);

/* s[0..len) for a message into out (caller's, outsz bytes), NUL-terminated; returns out.
 * Printable ASCII stays; anything else and ' " \ show as '?'; a cut ends in "...". */
const char *util_printable(const char *s, size_t len, char *out, size_t outsz);

/* Monotonic and wall clocks in seconds. */
double util_mono_now(void);
int64_t util_wall_now(void);

/* The CLOCK_MONOTONIC time `seconds` from now (>= 0), for pthread_cond_timedwait on a
 * condition made by util_cond_init_monotonic: a wall-clock step never moves the wait. */
struct timespec util_mono_deadline(double seconds);
/* Initializes c to time its waits on CLOCK_MONOTONIC. */
void util_cond_init_monotonic(pthread_cond_t *c);

/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void util_hex(const uint8_t *in, size_t len, char *out);
/* The one hex decoder: the n digits at hex (lowercase only, as util_hex writes and the
 * signing log requires: one spelling per value) into out. 1 with *outlen = n / 2; 0 when n
 * is odd, a character is not a lowercase hex digit, or n / 2 exceeds cap. */
int util_unhex(const char *hex, size_t n, uint8_t *out, size_t cap, size_t *outlen);
/* An address range as "ADDR/BITS" (IPv4 or IPv6; no host bits set, no leading zero in
 * BITS) into out as a name constraint's iPAddress takes it: the address, then the mask
 * (RFC 5280 4.2.1.10). 1 with *len = 8 or 32; 0 when it is not such a range. */
int util_cidr_parse(const char *s, uint8_t out[32], size_t *len);

#endif
