/* testutil.h - helpers shared by the unit, hostile and integration C tests. */
#ifndef HSMCA_TESTUTIL_H
#define HSMCA_TESTUTIL_H

#include <stddef.h>

/* A new empty directory under $HSMCA_TEST_TMP (or /tmp), named after prefix.
 * The base is made 0711 (as root) so that a signer that dropped root reaches a
 * dev CA's token in it; /tmp/hsmca-test when a parent of $HSMCA_TEST_TMP is not
 * searchable by other users. Returns a malloc'd path (caller frees). Aborts on
 * failure. */
char *tu_mkdtemp(const char *prefix);

/* Path of the hsmca binary under test ($HSMCA_BIN, else "hsmca" in PATH). */
const char *tu_hsmca_bin(void);

/* Runs a shell command (printf-style), returns its exit status (or -1). */
int tu_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sets up a dev CA in dir with `hsmca dev init --dir DIR --ca-key KEYTYPE`
 * (keytype "ec-p256" or "rsa-2048"): SoftHSM token, CA key, root cert, config.
 * Also exports SOFTHSM2_CONF=DIR/softhsm2.conf into this process's environment.
 * Returns 0 on success. */
int tu_dev_init(const char *dir, const char *keytype);

#endif
