/* audit_note.h - C2SP signed-note and tlog-checkpoint for the signing log: the checkpoint
 * body (origin, size, root), Ed25519 key IDs and verifier keys ("vkey"), note assembly
 * around a signature made elsewhere (the HSM's CKM_EDDSA), and strict parsing and
 * verification. Go's golang.org/x/mod/sumdb/note accepts what this writes.
 *
 * Every parser takes an explicit length, has a size cap, and refuses with HSMCA_EINVAL and
 * a message naming the rule ("signed-note: ...", "checkpoint: ...", "vkey: ..."). A
 * signature that does not verify is HSMCA_EPERM. Stricter than the specs where they allow
 * choice: base64 must be canonical, key names are also held to no ASCII control
 * characters, origins to the key-name rule, vkey key IDs to lowercase hex. */
#ifndef HSMCA_AUDIT_NOTE_H
#define HSMCA_AUDIT_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "audit_merkle.h"
#include "hsmca_err.h"

#define AUDIT_NAME_MAX 255 /* key name and checkpoint origin, bytes */
#define AUDIT_ED25519_PUB_LEN 32
#define AUDIT_ED25519_SIG_LEN 64
#define AUDIT_VKEY_MAX 320            /* name + '+' + 8 hex + '+' + 44 base64 */
#define AUDIT_CHECKPOINT_EXT_MAX 1024 /* all extension lines with their '\n' */
#define AUDIT_CHECKPOINT_MAX 2048     /* a checkpoint body (the note text) */
#define AUDIT_NOTE_MAX (128 * 1024)   /* a whole signed note (the spec wants >= 16 sigs) */
#define AUDIT_NOTE_SIGS_MAX 64        /* signature lines in one note */

/* An Ed25519 verifier key: name, key ID (SHA-256(name ‖ 0x0A ‖ 0x01 ‖ pub)[:4], big
 * endian) and public key. */
typedef struct {
    char name[AUDIT_NAME_MAX + 1];
    uint32_t id;
    uint8_t pub[AUDIT_ED25519_PUB_LEN];
} audit_vkey;

/* A checkpoint body. ext holds the extension lines, each ending in '\n' ("" for none). */
typedef struct {
    char origin[AUDIT_NAME_MAX + 1];
    uint64_t size;
    audit_hash root;
    char ext[AUDIT_CHECKPOINT_EXT_MAX + 1];
    size_t ext_len;
} audit_checkpoint;

/* One signature line of a note, pointing into the note it was parsed from. */
typedef struct {
    const char *name; /* not NUL-terminated */
    size_t name_len;
    uint32_t id;
    const char *b64; /* base64(id ‖ signature), not NUL-terminated */
    size_t b64_len;
} audit_note_sig;

/* Makes the HSM's Ed25519 signature of msg[0..len) into sig: the log writer passes one
 * over its CKM_EDDSA session; tests a software key. */
typedef hsmca_code (*audit_note_signer)(void *ctx, const uint8_t *msg, size_t len,
                                        uint8_t sig[AUDIT_ED25519_SIG_LEN], hsmca_err *e);

/* ---- key names and verifier keys ------------------------------------------------------- */

/* HSMCA_OK when name[0..len) is a valid key name: 1..AUDIT_NAME_MAX bytes of UTF-8, no
 * Unicode space, no '+', no ASCII control character. */
HSMCA_MUSTCHECK hsmca_code audit_name_check(const char *name, size_t len, hsmca_err *e);

/* The vkey of an Ed25519 public key under name (NUL-terminated) into *k. */
HSMCA_MUSTCHECK hsmca_code audit_vkey_from_pub(const char *name,
                                               const uint8_t pub[AUDIT_ED25519_PUB_LEN],
                                               audit_vkey *k, hsmca_err *e);

/* Parses "name+hex8(id)+base64(0x01 ‖ pub)" from s[0..len) (no trailing newline: a caller
 * reading a file strips one) into *k; the ID must match the name and key. */
HSMCA_MUSTCHECK hsmca_code audit_vkey_parse(const char *s, size_t len, audit_vkey *k, hsmca_err *e);

/* k's vkey string into a new NUL-terminated buffer (caller frees *out). */
HSMCA_MUSTCHECK hsmca_code audit_vkey_format(const audit_vkey *k, char **out, hsmca_err *e);

/* ---- checkpoint bodies --------------------------------------------------------------- */

/* "origin\nsize\nbase64(root)\n" + ext: the bytes to sign, in a new NUL-terminated buffer
 * (caller frees *out; *len excludes the NUL). Refuses what audit_checkpoint_parse would. */
HSMCA_MUSTCHECK hsmca_code audit_checkpoint_body(const audit_checkpoint *c, char **out, size_t *len,
                                                 hsmca_err *e);

/* Parses a checkpoint body text[0..len) strictly into *c: origin a valid key name, size
 * decimal without leading zeros up to AUDIT_TREE_SIZE_MAX, root 44 base64 characters of
 * 32 bytes, extension lines non-empty. On error *c is untouched. */
HSMCA_MUSTCHECK hsmca_code audit_checkpoint_parse(const char *text, size_t len, audit_checkpoint *c,
                                                  hsmca_err *e);

/* ---- signed notes -------------------------------------------------------------------- */

/* The signed note text[0..len) ‖ "\n" ‖ "— name base64(id ‖ sig)\n" in a new
 * NUL-terminated buffer (caller frees *out; *outlen excludes the NUL). Refuses a text that
 * is not a note text (non-empty, ending in '\n', UTF-8 without control characters but '\n')
 * and a signature that does not verify under k, so a wrong HSM key never leaves. */
HSMCA_MUSTCHECK hsmca_code audit_note_assemble(const char *text, size_t len, const audit_vkey *k,
                                               const uint8_t sig[AUDIT_ED25519_SIG_LEN], char **out,
                                               size_t *outlen, hsmca_err *e);

/* audit_note_assemble with the signature from sign(ctx, text). Same ownership. */
HSMCA_MUSTCHECK hsmca_code audit_note_sign(const char *text, size_t len, const audit_vkey *k,
                                           audit_note_signer sign, void *ctx, char **out,
                                           size_t *outlen, hsmca_err *e);

/* Splits note[0..len) into its text (note[0..*text_len)) and signature lines
 * (sigs[0..*nsigs), pointing into note; the caller's array of AUDIT_NOTE_SIGS_MAX)
 * without verifying any signature. */
HSMCA_MUSTCHECK hsmca_code audit_note_parse(const char *note, size_t len, size_t *text_len,
                                            audit_note_sig *sigs, size_t *nsigs, hsmca_err *e);

/* Verifies note[0..len) against k: every signature line with k's name and ID must verify
 * over the text, and there must be one; other signatures are ignored (the spec's rule).
 * On success *text_len is the length of the text at the start of note. */
HSMCA_MUSTCHECK hsmca_code audit_note_verify(const char *note, size_t len, const audit_vkey *k,
                                             size_t *text_len, hsmca_err *e);

/* audit_note_verify, then audit_checkpoint_parse of its text into *c. */
HSMCA_MUSTCHECK hsmca_code audit_checkpoint_open(const char *note, size_t len, const audit_vkey *k,
                                                 audit_checkpoint *c, hsmca_err *e);

#endif
