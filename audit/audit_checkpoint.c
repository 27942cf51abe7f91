/* audit_checkpoint.c - C2SP tlog-checkpoint bodies: format, strict parse, and open (verify
 * the note, then parse its text). See audit_note.h; written from c2sp.org/tlog-checkpoint. */
#include "audit_note.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_internal.h"
#include "util.h"

#define ROOT_B64_LEN 44 /* padded base64 of 32 bytes */

/* Extension lines ext[0..len): each non-empty and ending in '\n', UTF-8 without control
 * characters, AUDIT_CHECKPOINT_EXT_MAX in all. */
static HSMCA_MUSTCHECK hsmca_code ext_check(const char *ext, size_t len, hsmca_err *e)
{
    HSMCA_ENSURE(len <= AUDIT_CHECKPOINT_EXT_MAX, e, HSMCA_EINVAL,
                 "checkpoint: extension lines longer than %d bytes", AUDIT_CHECKPOINT_EXT_MAX);
    HSMCA_ENSURE(len == 0 || ext[len - 1] == '\n', e, HSMCA_EINVAL,
                 "checkpoint: extension lines end in a newline");
    for (size_t i = 0; i < len; i++)
        HSMCA_ENSURE(ext[i] != '\n' || (i > 0 && ext[i - 1] != '\n'), e, HSMCA_EINVAL,
                     "checkpoint: extension lines must not be empty");
    return audit_text_check(ext, len, 1, "checkpoint: extension lines", e);
}

hsmca_code audit_checkpoint_body(const audit_checkpoint *c, char **out, size_t *len, hsmca_err *e)
{
    size_t olen = strnlen(c->origin, sizeof(c->origin));
    HSMCA_GUARD(audit_name_check_as(c->origin, olen, "checkpoint: the origin", e));
    HSMCA_ENSURE(c->size <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "checkpoint: size past the 2^63-1 cap");
    HSMCA_ENSURE(c->ext_len <= AUDIT_CHECKPOINT_EXT_MAX, e, HSMCA_EINVAL,
                 "checkpoint: extension lines longer than %d bytes", AUDIT_CHECKPOINT_EXT_MAX);
    HSMCA_GUARD(ext_check(c->ext, c->ext_len, e));
    char *root = util_b64_encode(c->root.b, AUDIT_HASH_LEN);
    HSMCA_ENSURE(root, e, HSMCA_ENOMEM, "checkpoint: out of memory");
    size_t cap = olen + 1 + 20 + 1 + ROOT_B64_LEN + 1 + c->ext_len + 1;
    char *s = malloc(cap);
    int n =
        s ? snprintf(s, cap, "%s\n%llu\n%s\n", c->origin, (unsigned long long)c->size, root) : -1;
    free(root);
    if (n < 0 || (size_t)n + c->ext_len >= cap) {
        free(s);
        return hsmca_fail(e, HSMCA_ENOMEM, "checkpoint: out of memory");
    }
    memcpy(s + n, c->ext, c->ext_len);
    s[(size_t)n + c->ext_len] = '\0';
    *out = s;
    *len = (size_t)n + c->ext_len;
    return HSMCA_OK;
}

/* The line at text[*at..len), without its '\n', into *line and *llen; moves *at past it. */
static HSMCA_MUSTCHECK hsmca_code next_line(const char *text, size_t len, size_t *at,
                                            const char *what, const char **line, size_t *llen,
                                            hsmca_err *e)
{
    const char *nl = *at < len ? memchr(text + *at, '\n', len - *at) : NULL;
    HSMCA_ENSURE(nl, e, HSMCA_EINVAL, "checkpoint: no %s line ending in a newline", what);
    *line = text + *at;
    *llen = (size_t)(nl - *line);
    *at += *llen + 1;
    return HSMCA_OK;
}

/* Decimal tree size: digits only, no leading zero but "0", at most AUDIT_TREE_SIZE_MAX. */
static HSMCA_MUSTCHECK hsmca_code parse_size(const char *s, size_t len, uint64_t *out, hsmca_err *e)
{
    HSMCA_ENSURE(len > 0 && len <= 19, e, HSMCA_EINVAL,
                 "checkpoint: the size must be 1-19 decimal digits");
    HSMCA_ENSURE(s[0] != '0' || len == 1, e, HSMCA_EINVAL,
                 "checkpoint: the size has no leading zeros");
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        HSMCA_ENSURE(s[i] >= '0' && s[i] <= '9', e, HSMCA_EINVAL,
                     "checkpoint: the size must be decimal digits only");
        v = v * 10 + (uint64_t)(s[i] - '0'); /* 19 digits fit in 64 bits */
    }
    HSMCA_ENSURE(v <= AUDIT_TREE_SIZE_MAX, e, HSMCA_EINVAL,
                 "checkpoint: the size is past the 2^63-1 cap");
    *out = v;
    return HSMCA_OK;
}

hsmca_code audit_checkpoint_parse(const char *text, size_t len, audit_checkpoint *c, hsmca_err *e)
{
    HSMCA_ENSURE(len <= AUDIT_CHECKPOINT_MAX, e, HSMCA_EINVAL, "checkpoint: longer than %d bytes",
                 AUDIT_CHECKPOINT_MAX);
    size_t at = 0, olen = 0, slen = 0, rlen = 0;
    const char *origin = NULL, *size = NULL, *root = NULL;
    HSMCA_GUARD(next_line(text, len, &at, "origin", &origin, &olen, e));
    HSMCA_GUARD(next_line(text, len, &at, "size", &size, &slen, e));
    HSMCA_GUARD(next_line(text, len, &at, "root hash", &root, &rlen, e));
    HSMCA_ENSURE(olen > 0, e, HSMCA_EINVAL, "checkpoint: the origin must not be empty");
    HSMCA_GUARD(audit_name_check_as(origin, olen, "checkpoint: the origin", e));
    audit_checkpoint tmp;
    memset(&tmp, 0, sizeof(tmp));
    HSMCA_GUARD(parse_size(size, slen, &tmp.size, e));
    HSMCA_ENSURE(rlen == ROOT_B64_LEN, e, HSMCA_EINVAL,
                 "checkpoint: the root hash must be %d base64 characters", ROOT_B64_LEN);
    size_t n;
    uint8_t *h = util_b64_decode(root, rlen, &n);
    HSMCA_ENSURE(h, e, HSMCA_EINVAL, "checkpoint: the root hash is not canonical base64");
    int ok = n == AUDIT_HASH_LEN;
    if (ok)
        memcpy(tmp.root.b, h, AUDIT_HASH_LEN);
    free(h);
    HSMCA_ENSURE(ok, e, HSMCA_EINVAL, "checkpoint: the root hash must be 32 bytes");
    HSMCA_GUARD(ext_check(text + at, len - at, e));
    memcpy(tmp.origin, origin, olen);
    memcpy(tmp.ext, text + at, len - at);
    tmp.ext_len = len - at;
    *c = tmp;
    return HSMCA_OK;
}

hsmca_code audit_checkpoint_open(const char *note, size_t len, const audit_vkey *k,
                                 audit_checkpoint *c, hsmca_err *e)
{
    size_t tlen;
    HSMCA_GUARD(audit_note_verify(note, len, k, &tlen, e));
    return audit_checkpoint_parse(note, tlen, c, e);
}
