/* fuzz_note.c - libFuzzer target for the signing log's parsers (audit/audit_note.h,
 * audit/audit_tiles.h): signed notes, checkpoint bodies, verifier keys, tile paths and
 * entry bundles.
 *
 * The first input byte picks what the rest is (byte % 5):
 *   0  a signed note: parsed, its checkpoint body parsed, verified with the fuzz key
 *   1  a checkpoint body the target signs with the fuzz key, then opens
 *   2  a vkey        3  a tile or bundle path        4  an entry bundle
 * Oracles: whatever is accepted formats back to exactly the input bytes (a note from its
 * text and signature lines; a verified note with one signature re-assembles to itself; a
 * body, vkey, path or bundle re-encodes to itself); a signed body opens exactly when the
 * body parser accepts it; every refusal names its rule. The seeds in corpus/note/ carry
 * notes signed by the fuzz key (FUZZ_AUDIT_SEED), so the verified path is reached. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "audit_note.h"
#include "audit_tiles.h"
#include "fuzz_common.h"
#include "util.h"

static EVP_PKEY *g_key;
static audit_vkey g_vk;

static void setup(void)
{
    static const uint8_t seed[32] = FUZZ_AUDIT_SEED;
    uint8_t pub[32];
    size_t n = sizeof(pub);
    g_key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, sizeof(seed));
    if (!g_key || EVP_PKEY_get_raw_public_key(g_key, pub, &n) != 1 ||
        audit_vkey_from_pub(FUZZ_AUDIT_ORIGIN, pub, &g_vk, NULL) != HSMCA_OK)
        abort();
}

static HSMCA_MUSTCHECK hsmca_code sign(void *ctx, const uint8_t *msg, size_t len,
                                       uint8_t sig[AUDIT_SIG_MAX], size_t *siglen, hsmca_err *e)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t n = 64;
    int ok = md && EVP_DigestSignInit(md, NULL, NULL, NULL, ctx) == 1 &&
             EVP_DigestSign(md, sig, &n, msg, len) == 1;
    *siglen = n;
    EVP_MD_CTX_free(md);
    return ok ? HSMCA_OK : hsmca_fail(e, HSMCA_EINTERNAL, "fuzz: sign failed");
}

/* A refusal: the code, and a message that starts with the rule's family. */
static void refused(const hsmca_err *e, hsmca_code want, const char *prefix)
{
    if (e->code != want || strncmp(e->msg, prefix, strlen(prefix)) != 0)
        abort();
}

static void same(const void *a, size_t alen, const void *b, size_t blen)
{
    if (alen != blen || memcmp(a, b, alen) != 0)
        abort();
}

/* A checkpoint body: parsed, it formats back to itself. Returns 1 when accepted. */
static int body(const char *t, size_t len)
{
    audit_checkpoint c;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (audit_checkpoint_parse(t, len, &c, &e) != HSMCA_OK) {
        refused(&e, HSMCA_EINVAL, "checkpoint: ");
        return 0;
    }
    char *out;
    size_t olen;
    if (audit_checkpoint_body(&c, &out, &olen, NULL) != HSMCA_OK)
        abort();
    same(out, olen, t, len);
    free(out);
    return 1;
}

static void note(const char *n, size_t len)
{
    audit_note_sig sigs[AUDIT_NOTE_SIGS_MAX];
    size_t tlen, ns, tlen2;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (audit_note_parse(n, len, &tlen, sigs, &ns, &e) != HSMCA_OK) {
        refused(&e, HSMCA_EINVAL, "signed-note: ");
        if (audit_note_verify(n, len, &g_vk, &tlen, NULL) == HSMCA_OK)
            abort(); /* what does not parse never verifies */
        return;
    }
    /* The note is its text, a blank line and its signature lines, nothing else. */
    size_t at = tlen + 1;
    if (tlen == 0 || n[tlen - 1] != '\n' || n[tlen] != '\n' || ns == 0)
        abort();
    for (size_t i = 0; i < ns; i++) {
        if (memcmp(n + at, "\xe2\x80\x94 ", 4) != 0 || sigs[i].name != n + at + 4 ||
            sigs[i].b64 != sigs[i].name + sigs[i].name_len + 1 ||
            sigs[i].b64[sigs[i].b64_len] != '\n')
            abort();
        at = (size_t)(sigs[i].b64 - n) + sigs[i].b64_len + 1;
    }
    if (at != len)
        abort();
    body(n, tlen);
    hsmca_err_clear(&e);
    if (audit_note_verify(n, len, &g_vk, &tlen2, &e) != HSMCA_OK) {
        if (e.code != HSMCA_EPERM && e.code != HSMCA_EINVAL)
            abort();
        return;
    }
    if (tlen2 != tlen)
        abort();
    if (ns == 1) { /* ours alone: assembling its signature again gives the same note */
        size_t rawlen;
        uint8_t *raw = util_b64_decode(sigs[0].b64, sigs[0].b64_len, &rawlen);
        char *again;
        size_t alen;
        if (!raw || rawlen != 68 ||
            audit_note_assemble(n, tlen, &g_vk, raw + 4, 64, &again, &alen, NULL) != HSMCA_OK)
            abort();
        same(again, alen, n, len);
        free(again);
        free(raw);
    }
}

/* A body signed here: it opens exactly when it is a note text and a checkpoint body. */
static void signed_body(const char *t, size_t len)
{
    char *n;
    size_t nlen;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (audit_note_sign(t, len, &g_vk, sign, g_key, &n, &nlen, &e) != HSMCA_OK) {
        refused(&e, HSMCA_EINVAL, "signed-note: ");
        return;
    }
    /* The note splits where the text ends (its signature line holds no blank line), so
     * the body parser alone decides. */
    audit_checkpoint c;
    int opened = audit_checkpoint_open(n, nlen, &g_vk, &c, NULL) == HSMCA_OK;
    if (opened != body(t, len))
        abort();
    free(n);
}

static void vkey(const char *s, size_t len)
{
    audit_vkey k;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (audit_vkey_parse(s, len, &k, &e) != HSMCA_OK) {
        refused(&e, HSMCA_EINVAL, "vkey: ");
        return;
    }
    char *out;
    if (audit_vkey_format(&k, &out, NULL) != HSMCA_OK)
        abort();
    same(out, strlen(out), s, len);
    free(out);
}

static void tile_path(const char *s, size_t len)
{
    int ent;
    unsigned level, width;
    uint64_t index;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (audit_tile_path_parse(s, len, &ent, &level, &index, &width, &e) != HSMCA_OK) {
        refused(&e, HSMCA_EINVAL, "tlog-tiles: ");
        return;
    }
    char out[AUDIT_TILE_PATH_MAX];
    hsmca_code rc = ent ? audit_bundle_path(index, width, out, NULL)
                        : audit_tile_path(level, index, width, out, NULL);
    if (rc != HSMCA_OK)
        abort();
    same(out, strlen(out), s, len);
}

static void bundle(const uint8_t *b, size_t len)
{
    static audit_bundle_entry ents[AUDIT_TILE_WIDTH];
    unsigned n;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (audit_bundle_parse(b, len, ents, &n, &e) != HSMCA_OK) {
        refused(&e, HSMCA_EINVAL, "tlog-tiles: ");
        return;
    }
    uint8_t *out;
    size_t olen;
    if (audit_bundle_encode(ents, n, &out, &olen, NULL) != HSMCA_OK)
        abort();
    same(out, olen, b, len);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_key)
        setup();
    if (size < 1 || size > 256 * 1024)
        return 0;
    size_t n = size - 1;
    char *p = malloc(n ? n : 1); /* exactly n bytes, no NUL: the length is the contract */
    if (!p)
        return 0;
    memcpy(p, data + 1, n);
    switch (data[0] % 5) {
    case 0: note(p, n); break;
    case 1: signed_body(p, n); break;
    case 2: vkey(p, n); break;
    case 3: tile_path(p, n); break;
    case 4: bundle((const uint8_t *)p, n); break;
    }
    free(p);
    return 0;
}
