/* audit_internal.h - helpers shared by the audit/ sources; not part of the module's API. */
#ifndef HSMCA_AUDIT_INTERNAL_H
#define HSMCA_AUDIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"

/* SHA-256 of a[0..al) ‖ b[0..bl) ‖ c[0..cl) into out (32 bytes; may alias the inputs).
 * Any part may be empty (NULL, 0). The EVP_MD is fetched once per process. */
HSMCA_MUSTCHECK hsmca_code audit_sha256(const void *a, size_t al, const void *b, size_t bl,
                                        const void *c, size_t cl, uint8_t *out, hsmca_err *e);

/* HSMCA_OK when s[0..len) is valid UTF-8 (as Go's utf8.DecodeRune sees it: no overlong
 * forms, surrogates or code points past U+10FFFF) with no ASCII control character other
 * than '\n' (and not even that unless newline_ok); else HSMCA_EINVAL naming what. */
HSMCA_MUSTCHECK hsmca_code audit_text_check(const char *s, size_t len, int newline_ok,
                                            const char *what, hsmca_err *e);

/* audit_name_check with the rule's name in what ("checkpoint: the origin"), so a refusal
 * names the field that broke it. */
HSMCA_MUSTCHECK hsmca_code audit_name_check_as(const char *name, size_t len, const char *what,
                                               hsmca_err *e);

#endif
