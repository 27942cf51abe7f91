/* audit_note.c - C2SP signed-note: names, key IDs, verifier keys, assembly, parsing and
 * Ed25519 and ECDSA verification (see audit_note.h). Written from c2sp.org/signed-note. */
#include "audit_note.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "audit_internal.h"
#include "util.h"

static const char EM_DASH_SP[] = "\xe2\x80\x94 "; /* U+2014 then a space */
#define EM_DASH_SP_LEN 4
#define SIG_B64_LEN(n) (4 * ((4 + (n) + 2) / 3)) /* base64 of a key ID and n bytes */

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

static uint32_t be32(const uint8_t *h)
{
    return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
}

/* The key ID of (name[0..len), k->type, k->pub) by the type's rule (audit_note.h). */
static HSMCA_MUSTCHECK hsmca_code key_id(const char *name, size_t len, const audit_vkey *k,
                                         uint32_t *id, hsmca_err *e)
{
    uint8_t h[32];
    if (k->type == AUDIT_SIG_TYPE_ECDSA) {
        HSMCA_GUARD(audit_sha256(k->pub, k->pub_len, NULL, 0, NULL, 0, h, e));
    } else {
        const uint8_t sep[2] = {'\n', AUDIT_SIG_TYPE_ED25519};
        HSMCA_GUARD(audit_sha256(name, len, sep, 2, k->pub, AUDIT_ED25519_PUB_LEN, h, e));
    }
    *id = be32(h);
    return HSMCA_OK;
}

/* The curve of an ECDSA SPKI the notes accept (P-256 or P-384), as a message fragment; NULL
 * when der[0..len) is not one, or not in its one DER encoding. */
static const char *ec_spki_curve(const uint8_t *der, size_t len)
{
    const unsigned char *p = der;
    EVP_PKEY *pk = len <= AUDIT_KEY_MAX ? d2i_PUBKEY(NULL, &p, (long)len) : NULL;
    const char *curve = NULL;
    char group[32];
    size_t glen;
    if (pk && p == der + len && EVP_PKEY_get_base_id(pk) == EVP_PKEY_EC &&
        EVP_PKEY_get_utf8_string_param(pk, "group", group, sizeof(group), &glen) == 1) {
        /* A named curve and an uncompressed point have one length per curve: a
         * compressed point (which OpenSSL would re-encode as it came) is refused. */
        if (strcmp(group, "prime256v1") == 0 && len == 91)
            curve = "P-256";
        else if (strcmp(group, "secp384r1") == 0 && len == 120)
            curve = "P-384";
    }
    unsigned char *again = NULL;
    int n = curve ? i2d_PUBKEY(pk, &again) : 0;
    if (n <= 0 || (size_t)n != len || memcmp(again, der, len) != 0)
        curve = NULL; /* compressed point, explicit parameters, a non-DER length... */
    OPENSSL_free(again);
    EVP_PKEY_free(pk);
    return curve;
}

/* Checks the name and fills *k's name and ID from k's type and key. */
static HSMCA_MUSTCHECK hsmca_code vkey_finish(const char *name, size_t len, const char *what,
                                              audit_vkey *k, hsmca_err *e)
{
    HSMCA_GUARD(audit_name_check_as(name, len, what, e));
    memset(k->name, 0, sizeof(k->name));
    memcpy(k->name, name, len);
    return key_id(name, len, k, &k->id, e);
}

/* *k for name and the public key pub[0..len) of signature type type (len checked by
 * the caller against the type); *k is left alone on error. */
static HSMCA_MUSTCHECK hsmca_code vkey_make(const char *name, uint8_t type, const uint8_t *pub,
                                            size_t len, audit_vkey *k, hsmca_err *e)
{
    audit_vkey tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.type = type;
    tmp.pub_len = len;
    memcpy(tmp.pub, pub, len);
    HSMCA_GUARD(vkey_finish(name, strnlen(name, AUDIT_NAME_MAX + 1), "signed-note: a key name",
                            &tmp, e));
    *k = tmp;
    return HSMCA_OK;
}

hsmca_code audit_vkey_from_pub(const char *name, const uint8_t pub[AUDIT_ED25519_PUB_LEN],
                               audit_vkey *k, hsmca_err *e)
{
    return vkey_make(name, AUDIT_SIG_TYPE_ED25519, pub, AUDIT_ED25519_PUB_LEN, k, e);
}

hsmca_code audit_vkey_from_spki(const char *name, const uint8_t *der, size_t len, audit_vkey *k,
                                hsmca_err *e)
{
    HSMCA_ENSURE(ec_spki_curve(der, len), e, HSMCA_EINVAL,
                 "vkey: an ECDSA key must be the DER SubjectPublicKeyInfo of a P-256 or P-384 "
                 "key");
    return vkey_make(name, AUDIT_SIG_TYPE_ECDSA, der, len, k, e);
}

/* The key of a vkey, key[0..klen) = type || public key, into *k's type and pub. */
static HSMCA_MUSTCHECK hsmca_code vkey_key(const uint8_t *key, size_t klen, audit_vkey *k,
                                           hsmca_err *e)
{
    if (klen == 1 + AUDIT_ED25519_PUB_LEN && key[0] == AUDIT_SIG_TYPE_ED25519) {
        k->type = AUDIT_SIG_TYPE_ED25519;
    } else if (klen >= 2 && key[0] == AUDIT_SIG_TYPE_ECDSA) {
        HSMCA_ENSURE(ec_spki_curve(key + 1, klen - 1), e, HSMCA_EINVAL,
                     "vkey: an ECDSA key (0x02) must be a DER SubjectPublicKeyInfo of a P-256 "
                     "or P-384 key");
        k->type = AUDIT_SIG_TYPE_ECDSA;
    } else {
        return hsmca_fail(e, HSMCA_EINVAL,
                          "vkey: the key must be 0x01 and a 32-byte Ed25519 key, or 0x02 and an "
                          "ECDSA SubjectPublicKeyInfo");
    }
    k->pub_len = klen - 1;
    memcpy(k->pub, key + 1, klen - 1);
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
    uint32_t id = be32(idb);
    size_t klen;
    uint8_t *key = util_b64_decode(p1 + 10, rest - 9, &klen);
    HSMCA_ENSURE(key, e, HSMCA_EINVAL, "vkey: the key is not canonical padded base64");
    audit_vkey tmp;
    memset(&tmp, 0, sizeof(tmp));
    hsmca_code rc = klen <= 1 + AUDIT_KEY_MAX
                        ? vkey_key(key, klen, &tmp, e)
                        : hsmca_fail(e, HSMCA_EINVAL, "vkey: the key is longer than %d bytes",
                                     1 + AUDIT_KEY_MAX);
    free(key);
    HSMCA_GUARD(rc);
    HSMCA_GUARD(vkey_finish(s, nlen, "vkey: the name", &tmp, e));
    HSMCA_ENSURE(tmp.id == id, e, HSMCA_EINVAL,
                 "vkey: key ID %08x does not match the name and key (%08x)", id, tmp.id);
    *k = tmp;
    return HSMCA_OK;
}

hsmca_code audit_vkey_format(const audit_vkey *k, char **out, hsmca_err *e)
{
    HSMCA_GUARD(
        audit_name_check_as(k->name, strnlen(k->name, sizeof(k->name)), "vkey: the name", e));
    HSMCA_ENSURE(k->pub_len > 0 && k->pub_len <= AUDIT_KEY_MAX, e, HSMCA_EINVAL,
                 "vkey: no public key");
    uint8_t raw[1 + AUDIT_KEY_MAX] = {k->type};
    memcpy(raw + 1, k->pub, k->pub_len);
    char *b64 = util_b64_encode(raw, 1 + k->pub_len);
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

/* ---- signatures ------------------------------------------------------------------------- */

/* k's public key as an EVP_PKEY (NULL when it is not usable). */
static EVP_PKEY *vkey_pkey(const audit_vkey *k)
{
    if (k->type == AUDIT_SIG_TYPE_ED25519)
        return k->pub_len == AUDIT_ED25519_PUB_LEN
                   ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, k->pub, k->pub_len)
                   : NULL;
    if (k->type != AUDIT_SIG_TYPE_ECDSA || !ec_spki_curve(k->pub, k->pub_len))
        return NULL;
    const unsigned char *p = k->pub;
    return d2i_PUBKEY(NULL, &p, (long)k->pub_len);
}

/* HSMCA_OK when sig[0..siglen) is k's signature over msg[0..len): pure Ed25519, or ECDSA
 * over SHA-256(msg) with a DER signature (OpenSSL refuses a non-DER one). */
static HSMCA_MUSTCHECK hsmca_code sig_verify(const audit_vkey *k, const char *msg, size_t len,
                                             const uint8_t *sig, size_t siglen, hsmca_err *e)
{
    int ed = k->type == AUDIT_SIG_TYPE_ED25519;
    EVP_PKEY *pk = vkey_pkey(k);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int init = pk && ctx && EVP_DigestVerifyInit(ctx, NULL, ed ? NULL : EVP_sha256(), NULL, pk) == 1;
    int ok = init && (!ed || siglen == AUDIT_ED25519_SIG_LEN) && siglen <= AUDIT_SIG_MAX &&
             EVP_DigestVerify(ctx, sig, siglen, (const uint8_t *)msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pk);
    HSMCA_ENSURE(init, e, HSMCA_EINVAL, "signed-note: %s+%08x is not a usable %s key", k->name,
                 k->id, ed ? "Ed25519" : "ECDSA");
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
                               const uint8_t *sig, size_t siglen, char **out, size_t *outlen,
                               hsmca_err *e)
{
    size_t nlen = strnlen(k->name, sizeof(k->name));
    HSMCA_GUARD(audit_name_check(k->name, nlen, e));
    HSMCA_ENSURE(siglen > 0 && siglen <= AUDIT_SIG_MAX, e, HSMCA_EINVAL,
                 "signed-note: a signature of %zu bytes (1-%d)", siglen, AUDIT_SIG_MAX);
    HSMCA_ENSURE(len <= AUDIT_NOTE_MAX - (1 + EM_DASH_SP_LEN + nlen + 1 + SIG_B64_LEN(siglen) + 1),
                 e, HSMCA_EINVAL, "signed-note: the text is too long");
    HSMCA_GUARD(text_check(text, len, e));
    HSMCA_GUARD(sig_verify(k, text, len, sig, siglen, e));
    uint8_t raw[4 + AUDIT_SIG_MAX] = {(uint8_t)(k->id >> 24), (uint8_t)(k->id >> 16),
                                      (uint8_t)(k->id >> 8), (uint8_t)k->id};
    memcpy(raw + 4, sig, siglen);
    char *b64 = util_b64_encode(raw, 4 + siglen);
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
    uint8_t sig[AUDIT_SIG_MAX];
    size_t siglen = sizeof(sig);
    HSMCA_GUARD(text_check(text, len, e));
    HSMCA_GUARD(sign(ctx, (const uint8_t *)text, len, sig, &siglen, e));
    HSMCA_ENSURE(siglen <= sizeof(sig), e, HSMCA_EINTERNAL,
                 "signed-note: the signer overran its buffer");
    return audit_note_assemble(text, len, k, sig, siglen, out, outlen, e);
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
        sig->id = be32(raw);
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
        else if (k->type == AUDIT_SIG_TYPE_ED25519 && rawlen != 4 + AUDIT_ED25519_SIG_LEN)
            rc = hsmca_fail(e, HSMCA_EPERM,
                            "signed-note: the signature by %s+%08x is not "
                            "64 bytes",
                            k->name, k->id);
        else if (rawlen > 4 + AUDIT_SIG_MAX)
            rc = hsmca_fail(e, HSMCA_EPERM,
                            "signed-note: the signature by %s+%08x is longer than %d bytes",
                            k->name, k->id, AUDIT_SIG_MAX);
        else
            rc = sig_verify(k, note, tlen, raw + 4, rawlen - 4, e);
        free(raw);
        verified++;
    }
    HSMCA_GUARD(rc);
    HSMCA_ENSURE(verified > 0, e, HSMCA_EPERM, "signed-note: no signature by %s+%08x", k->name,
                 k->id);
    *text_len = tlen;
    return HSMCA_OK;
}
