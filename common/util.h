/* util.h - small helpers shared by every module: files, randomness, base64. */
#ifndef HSMCA_UTIL_H
#define HSMCA_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "hsmca_err.h"

/* Reads a whole file of at most max bytes into a new NUL-terminated buffer
 * (caller frees; *len excludes the NUL). Refuses larger files. */
hsmca_code util_read_file(const char *path, size_t max, char **out, size_t *len, hsmca_err *e);

/* Writes data to path atomically (temp file in the same dir, fsync, rename)
 * with the given mode. Used for keys, certs, configs: nothing half-written. */
hsmca_code util_write_file_atomic(const char *path, const void *data, size_t len,
                                  unsigned mode, hsmca_err *e);

/* Reads a secret (PIN) file: first line, trailing CR/LF stripped, at most 255 bytes
 * into buf (NUL-terminated). The caller wipes buf with OPENSSL_cleanse. */
hsmca_code util_read_secret(const char *path, char *buf, size_t bufsz, hsmca_err *e);

/* Fills buf with len bytes from the kernel CSPRNG (getrandom). Aborts on failure. */
void util_random(void *buf, size_t len);

/* base64url without padding (JWT). Encode returns a new NUL-terminated string
 * (caller frees) or NULL on OOM. Decode accepts only the unpadded url alphabet;
 * returns new buffer (caller frees) and its length, or NULL when malformed. */
char *util_b64url_encode(const uint8_t *in, size_t len);
uint8_t *util_b64url_decode(const char *in, size_t inlen, size_t *outlen);

/* Standard base64 with padding (PEM bodies, checkpoints). Same ownership. */
char *util_b64_encode(const uint8_t *in, size_t len);

/* Monotonic and wall clocks in seconds. */
double util_mono_now(void);
int64_t util_wall_now(void);

/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void util_hex(const uint8_t *in, size_t len, char *out);

#endif
