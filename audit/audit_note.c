/* audit_note.c - C2SP signed-note: names, key IDs, verifier keys, assembly, parsing and
 * Ed25519 verification (see audit_note.h). Written from c2sp.org/signed-note. */
#include "audit_note.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "audit_internal.h"
#include "util.h"

#define SIG_TYPE_ED25519 0x01
static const char EM_DASH_SP[] = "\xe2\x80\x94 "; /* U+2014 then a space */
#define EM_DASH_SP_LEN 4
#define SIG_B64_LEN 92 /* base64 of 4 + 64 bytes */

/* ---- UTF-8 and names ------------------------------------------------------------------ */

/* Decodes one UTF-8 sequence at s[0..len) into *cp; its length, or 0 when invalid. */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t v, lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        n = 2, v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, v = c & 0x0f;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, v = c & 0x07;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        if (c == 0xf4)
            hi = 0x8f; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (len < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

/* Unicode White_Space (Go's unicode.IsSpace). */
static int is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

hsmca_code audit_text_check(const char *s, size_t len, int newline_ok, const char *what,
                            hsmca_err *e)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(u + i, len - i, &cp);
        HSMCA_ENSURE(n > 0, e, HSMCA_EINVAL, "%s: not valid UTF-8 at byte %zu", what, i);
        HSMCA_ENSURE(cp >= 0x20 || (cp == '\n' && newline_ok), e, HSMCA_EINVAL,
                     "%s: control character 0x%02x at byte %zu", what, (unsigned)cp, i);
        i += n;
    }
    return HSMCA_OK;
}

hsmca_code audit_name_check_as(const char *name, size_t len, const char *what, hsmca_err *e)
{
    HSMCA_ENSURE(len > 0 && len <= AUDIT_NAME_MAX, e, HSMCA_EINVAL, "%s must be 1-%d bytes", what,
                 AUDIT_NAME_MAX);
    HSMCA_GUARD(audit_text_check(name, len, 0, what, e));
    const unsigned char *u = (const unsigned char *)name;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = utf8_decode(u + i, len - i, &cp); /* valid: checked above */
        HSMCA_ENSURE(!is_space(cp) && cp != '+', e, HSMCA_EINVAL,
                     "%s has no spaces and no '+' (byte %zu)", what, i);
        i += n;
    }
    return HSMCA_OK;
}

hsmca_code audit_name_check(const char *name, size_t len, hsmca_err *e)
{
    return audit_name_check_as(name, len, "signed-note: a key name", e);
}

/* ---- verifier keys -------------------------------------------------------------------- */

static HSMCA_MUSTCHECK hsmca_code key_id(const char *name, size_t len, const uint8_t *pub,
                                         uint32_t *id, hsmca_err *e)
{
    static const uint8_t sep[2] = {'\n', SIG_TYPE_ED25519};
    uint8_t h[32];
    HSMCA_GUARD(audit_sha256(name, len, sep, 2, pub, AUDIT_ED25519_PUB_LEN, h, e));
    *id = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    return HSMCA_OK;
}

hsmca_code audit_vkey_from_pub(const char *name, const uint8_t pub[AUDIT_ED25519_PUB_LEN],
                               audit_vkey *k, hsmca_err *e)
{
    size_t len = strnlen(name, AUDIT_NAME_MAX + 1);
    HSMCA_GUARD(audit_name_check(name, len, e));
    audit_vkey tmp;
    memset(&tmp, 0, sizeof(tmp));
    memcpy(tmp.name, name, len);
    memcpy(tmp.pub, pub, AUDIT_ED25519_PUB_LEN);
    HSMCA_GUARD(key_id(name, len, pub, &tmp.id, e));
    *k = tmp;
    return HSMCA_OK;
}

hsmca_code audit_vkey_parse(const char *s, size_t len, audit_vkey *k, hsmca_err *e)
{
    HSMCA_ENSURE(len <= AUDIT_VKEY_MAX, e, HSMCA_EINVAL, "vkey: longer than %d bytes",
                 AUDIT_VKEY_MAX);
    const char *p1 = memchr(s, '+', len);
    HSMCA_ENSURE(p1, e, HSMCA_EINVAL, "vkey: must be name+keyid+key");
    size_t nlen = (size_t)(p1 - s), rest = len - nlen - 1;
    HSMCA_GUARD(audit_name_check_as(s, nlen, "vkey: the name", e));
    HSMCA_ENSURE(rest > 9 && p1[9] == '+', e, HSMCA_EINVAL,
                 "vkey: the key ID must be 8 hex digits between two '+'");
    uint8_t idb[4];
    size_t idn;
    HSMCA_ENSURE(util_unhex(p1 + 1, 8, idb, sizeof(idb), &idn), e, HSMCA_EINVAL,
                 "vkey: the key ID must be lowercase hex");
    uint32_t id = (uint32_t)idb[0] << 24 | (uint32_t)idb[1] << 16 | (uint32_t)idb[2] << 8 | idb[3];
    size_t klen;
    uint8_t *key = util_b64_decode(p1 + 10, rest - 9, &klen);
    HSMCA_ENSURE(key, e, HSMCA_EINVAL, "vkey: the key is not canonical padded base64");
    int ok = klen == 1 + AUDIT_ED25519_PUB_LEN && key[0] == SIG_TYPE_ED25519;
    audit_vkey tmp;
    memset(&tmp, 0, sizeof(tmp));
    if (ok)
        memcpy(tmp.pub, key + 1, AUDIT_ED25519_PUB_LEN);
    free(key);
    HSMCA_ENSURE(ok, e, HSMCA_EINVAL, "vkey: the key must be 0x01 and a 32-byte Ed25519 key");
    memcpy(tmp.name, s, nlen);
    HSMCA_GUARD(key_id(tmp.name, nlen, tmp.pub, &tmp.id, e));
    HSMCA_ENSURE(tmp.id == id, e, HSMCA_EINVAL,
                 "vkey: key ID %08x does not match the name and key (%08x)", id, tmp.id);
    *k = tmp;
    return HSMCA_OK;
}

hsmca_code audit_vkey_format(const audit_vkey *k, char **out, hsmca_err *e)
{
    HSMCA_GUARD(
        audit_name_check_as(k->name, strnlen(k->name, sizeof(k->name)), "vkey: the name", e));
    uint8_t raw[1 + AUDIT_ED25519_PUB_LEN] = {SIG_TYPE_ED25519};
    memcpy(raw + 1, k->pub, AUDIT_ED25519_PUB_LEN);
    char *b64 = util_b64_encode(raw, sizeof(raw));
    HSMCA_ENSURE(b64, e, HSMCA_ENOMEM, "vkey: out of memory");
    size_t n = strlen(k->name) + 1 + 8 + 1 + strlen(b64) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s+%08x+%s", k->name, k->id, b64);
    free(b64);
    HSMCA_ENSURE(s, e, HSMCA_ENOMEM, "vkey: out of memory");
    *out = s;
    return HSMCA_OK;
}

/* ---- Ed25519 ---------------------------------------------------------------------------- */

/* HSMCA_OK when sig is k's Ed25519 signature over msg[0..len). */
static HSMCA_MUSTCHECK hsmca_code ed25519_verify(const audit_vkey *k, const char *msg, size_t len,
                                                 const uint8_t *sig, hsmca_err *e)
{
    EVP_PKEY *pk =
        EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, k->pub, AUDIT_ED25519_PUB_LEN);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int init = pk && ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1;
    int ok =
        init && EVP_DigestVerify(ctx, sig, AUDIT_ED25519_SIG_LEN, (const uint8_t *)msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pk);
    HSMCA_ENSURE(init, e, HSMCA_EINVAL, "signed-note: %s+%08x is not a usable Ed25519 key", k->name,
                 k->id);
    HSMCA_ENSURE(ok, e, HSMCA_EPERM, "signed-note: the signature by %s+%08x does not verify",
                 k->name, k->id);
    return HSMCA_OK;
}

/* ---- notes -------------------------------------------------------------------------- */

static HSMCA_MUSTCHECK hsmca_code text_check(const char *text, size_t len, hsmca_err *e)
{
    HSMCA_ENSURE(len > 0 && text[len - 1] == '\n', e, HSMCA_EINVAL,
                 "signed-note: the text must end in a newline");
    return audit_text_check(text, len, 1, "signed-note", e);
}

hsmca_code audit_note_assemble(const char *text, size_t len, const audit_vkey *k,
                               const uint8_t sig[AUDIT_ED25519_SIG_LEN], char **out, size_t *outlen,
                               hsmca_err *e)
{
    size_t nlen = strnlen(k->name, sizeof(k->name));
    HSMCA_GUARD(audit_name_check(k->name, nlen, e));
    HSMCA_ENSURE(len <= AUDIT_NOTE_MAX - (1 + EM_DASH_SP_LEN + nlen + 1 + SIG_B64_LEN + 1), e,
                 HSMCA_EINVAL, "signed-note: the text is too long");
    HSMCA_GUARD(text_check(text, len, e));
    HSMCA_GUARD(ed25519_verify(k, text, len, sig, e));
    uint8_t raw[4 + AUDIT_ED25519_SIG_LEN] = {(uint8_t)(k->id >> 24), (uint8_t)(k->id >> 16),
                                              (uint8_t)(k->id >> 8), (uint8_t)k->id};
    memcpy(raw + 4, sig, AUDIT_ED25519_SIG_LEN);
    char *b64 = util_b64_encode(raw, sizeof(raw));
    HSMCA_ENSURE(b64, e, HSMCA_ENOMEM, "signed-note: out of memory");
    size_t n = len + 1 + EM_DASH_SP_LEN + nlen + 1 + strlen(b64) + 1;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, text, len);
        snprintf(s + len, n + 1 - len, "\n%s%s %s\n", EM_DASH_SP, k->name, b64);
    }
    free(b64);
    HSMCA_ENSURE(s, e, HSMCA_ENOMEM, "signed-note: out of memory");
    *out = s;
    *outlen = n;
    return HSMCA_OK;
}

hsmca_code audit_note_sign(const char *text, size_t len, const audit_vkey *k,
                           audit_note_signer sign, void *ctx, char **out, size_t *outlen,
                           hsmca_err *e)
{
    uint8_t sig[AUDIT_ED25519_SIG_LEN];
    HSMCA_GUARD(text_check(text, len, e));
    HSMCA_GUARD(sign(ctx, (const uint8_t *)text, len, sig, e));
    return audit_note_assemble(text, len, k, sig, out, outlen, e);
}

/* One signature line line[0..len) (without its '\n') into *sig. */
static HSMCA_MUSTCHECK hsmca_code parse_sig_line(const char *line, size_t len, audit_note_sig *sig,
                                                 hsmca_err *e)
{
    HSMCA_ENSURE(len > EM_DASH_SP_LEN && memcmp(line, EM_DASH_SP, EM_DASH_SP_LEN) == 0, e,
                 HSMCA_EINVAL, "signed-note: a signature line starts with an em dash and a space");
    const char *name = line + EM_DASH_SP_LEN;
    size_t rest = len - EM_DASH_SP_LEN;
    const char *sp = memchr(name, ' ', rest);
    HSMCA_ENSURE(sp, e, HSMCA_EINVAL, "signed-note: a signature line is '— name signature'");
    size_t nlen = (size_t)(sp - name), blen = rest - nlen - 1;
    HSMCA_GUARD(audit_name_check(name, nlen, e));
    size_t rawlen;
    uint8_t *raw = util_b64_decode(sp + 1, blen, &rawlen);
    HSMCA_ENSURE(raw, e, HSMCA_EINVAL, "signed-note: a signature is not canonical padded base64");
    int ok = rawlen >= 5;
    if (ok)
        sig->id = (uint32_t)raw[0] << 24 | (uint32_t)raw[1] << 16 | (uint32_t)raw[2] << 8 | raw[3];
    free(raw);
    HSMCA_ENSURE(ok, e, HSMCA_EINVAL, "signed-note: a signature is a key ID and at least a byte");
    sig->name = name;
    sig->name_len = nlen;
    sig->b64 = sp + 1;
    sig->b64_len = blen;
    return HSMCA_OK;
}

hsmca_code audit_note_parse(const char *note, size_t len, size_t *text_len, audit_note_sig *sigs,
                            size_t *nsigs, hsmca_err *e)
{
    HSMCA_ENSURE(len <= AUDIT_NOTE_MAX, e, HSMCA_EINVAL, "signed-note: longer than %d bytes",
                 AUDIT_NOTE_MAX);
    HSMCA_GUARD(audit_text_check(note, len, 1, "signed-note", e));
    /* The text ends at the last blank line; signature lines follow, each ending in '\n'. */
    size_t split = len;
    for (size_t i = len; i >= 2; i--)
        if (note[i - 1] == '\n' && note[i - 2] == '\n') {
            split = i - 1;
            break;
        }
    HSMCA_ENSURE(split < len, e, HSMCA_EINVAL,
                 "signed-note: no blank line between the text and the signatures");
    HSMCA_ENSURE(split + 1 < len && note[len - 1] == '\n', e, HSMCA_EINVAL,
                 "signed-note: signature lines must follow the blank line, each ending in a "
                 "newline");
    size_t n = 0;
    for (size_t at = split + 1; at < len;) {
        const char *nl = memchr(note + at, '\n', len - at);
        HSMCA_ENSURE(n < AUDIT_NOTE_SIGS_MAX, e, HSMCA_EINVAL,
                     "signed-note: more than %d signatures", AUDIT_NOTE_SIGS_MAX);
        HSMCA_GUARD(parse_sig_line(note + at, (size_t)(nl - (note + at)), &sigs[n], e));
        n++;
        at = (size_t)(nl - note) + 1;
    }
    *text_len = split;
    *nsigs = n;
    return HSMCA_OK;
}

hsmca_code audit_note_verify(const char *note, size_t len, const audit_vkey *k, size_t *text_len,
                             hsmca_err *e)
{
    audit_note_sig s[AUDIT_NOTE_SIGS_MAX];
    size_t tlen, n, nlen = strnlen(k->name, sizeof(k->name)), verified = 0;
    hsmca_code rc = audit_note_parse(note, len, &tlen, s, &n, e);
    for (size_t i = 0; rc == HSMCA_OK && i < n; i++) {
        if (s[i].name_len != nlen || memcmp(s[i].name, k->name, nlen) != 0 || s[i].id != k->id)
            continue; /* another key's signature: ignored, as the spec says */
        size_t rawlen;
        uint8_t *raw = util_b64_decode(s[i].b64, s[i].b64_len, &rawlen);
        if (!raw)
            rc = hsmca_fail(e, HSMCA_ENOMEM, "signed-note: out of memory");
        else if (rawlen != 4 + AUDIT_ED25519_SIG_LEN)
            rc = hsmca_fail(e, HSMCA_EPERM,
                            "signed-note: the signature by %s+%08x is not "
                            "64 bytes",
                            k->name, k->id);
        else
            rc = ed25519_verify(k, note, tlen, raw + 4, e);
        free(raw);
        verified++;
    }
    HSMCA_GUARD(rc);
    HSMCA_ENSURE(verified > 0, e, HSMCA_EPERM, "signed-note: no signature by %s+%08x", k->name,
                 k->id);
    *text_len = tlen;
    return HSMCA_OK;
}
