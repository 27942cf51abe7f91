/* audit_note.h - C2SP signed-note and tlog-checkpoint for the signing log: the checkpoint
 * body (origin, size, root), key IDs and verifier keys ("vkey"), note assembly around a
 * signature made elsewhere (the HSM's audit key), and strict parsing and verification.
 *
 * Two signature types of c2sp.org/signed-note, one per key:
 *
 *   0x01 Ed25519 (the HSM's CKM_EDDSA). Go's golang.org/x/mod/sumdb/note accepts it.
 *     key ID    = SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4], big endian
 *     signature = key ID || 64-byte RFC 8032 signature over the note text
 *     vkey      = name "+" hex8(key ID) "+" base64(0x01 || 32-byte public key)
 *
 *   0x02 ECDSA "as implemented by github.com/transparency-dev/witness" (the spec's words),
 *     on NIST P-256 or P-384 (the spec also allows P-521; no token key here is one):
 *     key ID    = SHA-256(DER SubjectPublicKeyInfo)[:4], big endian: neither the name nor
 *                 the type byte is hashed (the spec's stated exception to its own
 *                 recommendation, and what transparency-dev's keyHashECDSA computes)
 *     signature = key ID || DER ECDSA-Sig-Value over SHA-256(note text); SHA-256 whatever
 *                 the curve (transparency-dev's verifier hashes with SHA-256 for every key)
 *     vkey      = name "+" hex8(key ID) "+" base64(0x02 || DER SubjectPublicKeyInfo)
 *   Checked against the c2sp.org/signed-note text and transparency-dev's note verifier
 *   (NewECDSAVerifier); re-check both when either changes.
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
#define AUDIT_SIG_TYPE_ED25519 0x01
#define AUDIT_SIG_TYPE_ECDSA 0x02
#define AUDIT_KEY_MAX 128 /* public key bytes: 32 (Ed25519) or a DER SPKI (P-384: 120) */
#define AUDIT_SIG_MAX 128 /* a signature without its key ID: 64, or DER ECDSA (P-384: <= 104) */
#define AUDIT_VKEY_MAX 448 /* name + '+' + 8 hex + '+' + base64(1 + AUDIT_KEY_MAX) */
#define AUDIT_CHECKPOINT_EXT_MAX 1024 /* all extension lines with their '\n' */
#define AUDIT_CHECKPOINT_MAX 2048     /* a checkpoint body (the note text) */
#define AUDIT_NOTE_MAX (128 * 1024)   /* a whole signed note (the spec wants >= 16 sigs) */
#define AUDIT_NOTE_SIGS_MAX 64        /* signature lines in one note */

/* A verifier key: name, signature type, key ID (as above, per type) and public key
 * (Ed25519: the 32 raw bytes; ECDSA: the DER SubjectPublicKeyInfo, P-256 or P-384). */
typedef struct {
    char name[AUDIT_NAME_MAX + 1];
    uint32_t id;
    uint8_t type; /* AUDIT_SIG_TYPE_* */
    uint8_t pub[AUDIT_KEY_MAX];
    size_t pub_len;
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

/* Makes the HSM's signature of msg[0..len) into sig[0..*siglen) (*siglen in: capacity,
 * AUDIT_SIG_MAX; out: length) in the form the key's type signs (above): Ed25519's 64 bytes,
 * or a DER ECDSA signature over SHA-256(msg). The log writer passes one over its audit key's
 * session; tests a software key. */
typedef hsmca_code (*audit_note_signer)(void *ctx, const uint8_t *msg, size_t len,
                                        uint8_t sig[AUDIT_SIG_MAX], size_t *siglen, hsmca_err *e);

/* ---- key names and verifier keys ------------------------------------------------------- */

/* HSMCA_OK when name[0..len) is a valid key name: 1..AUDIT_NAME_MAX bytes of UTF-8, no
 * Unicode space, no '+', no ASCII control character. */
HSMCA_MUSTCHECK hsmca_code audit_name_check(const char *name, size_t len, hsmca_err *e);

/* The vkey of an Ed25519 public key under name (NUL-terminated) into *k. */
HSMCA_MUSTCHECK hsmca_code audit_vkey_from_pub(const char *name,
                                               const uint8_t pub[AUDIT_ED25519_PUB_LEN],
                                               audit_vkey *k, hsmca_err *e);

/* The vkey of an ECDSA key under name (NUL-terminated) into *k: der[0..len) must be the DER
 * SubjectPublicKeyInfo of a P-256 or P-384 key, in its one DER encoding (uncompressed point). */
HSMCA_MUSTCHECK hsmca_code audit_vkey_from_spki(const char *name, const uint8_t *der, size_t len,
                                                audit_vkey *k, hsmca_err *e);

/* Parses "name+hex8(id)+base64(type ‖ key)" from s[0..len) (no trailing newline: a caller
 * reading a file strips one) into *k, for type 0x01 (Ed25519) or 0x02 (ECDSA); the ID must
 * match the key (and, for Ed25519, the name). */
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
 * and a signature sig[0..siglen) that does not verify under k, so a wrong HSM key never
 * leaves. */
HSMCA_MUSTCHECK hsmca_code audit_note_assemble(const char *text, size_t len, const audit_vkey *k,
                                               const uint8_t *sig, size_t siglen, char **out,
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
