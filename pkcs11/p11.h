/* p11.h - the PKCS#11 layer: module loading, RFC 7512 URIs, login, key checks,
 * a session pool for parallel signing, key generation and token setup.
 *
 * Raw PKCS#11 through the module's C_GetFunctionList (no libp11 on the hot path),
 * so that exact CKR_* codes drive recovery. Only the signer and the dev set-up
 * code load a module; the front end never does. */
#ifndef HSMCA_P11_H
#define HSMCA_P11_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "hsmca_err.h"
#include "ipc_contract.h" /* IPC_SIG_MAX */
#include "metrics_hist.h"
#include "sigalg.h"

/* An RFC 7512 URI, the subset we need: token, object, id, type (private|public|cert).
 * Unknown path attributes are refused; pin-value is refused (PINs come from files). */
typedef struct {
    char token[33];      /* CKA_LABEL of the token (32 chars max) */
    char object[256];    /* CKA_LABEL of the object */
    uint8_t id[64];      /* CKA_ID */
    size_t id_len;       /* 0: not given */
    char type[16];       /* "private", "public", "cert", or "" */
} p11_uri;

/* Parses a "pkcs11:" URI (percent-decoding values). */
HSMCA_MUSTCHECK hsmca_code p11_uri_parse(const char *s, p11_uri *u, hsmca_err *e);

/* Key types p11_generate_key makes: the CA key's (EC P-256, P-384, RSA-2048, 3072,
 * 4096: CKM_RSA_PKCS_KEY_PAIR_GEN with that CKA_MODULUS_BITS, exponent 65537) and
 * the audit key's (Ed25519: CKK_EC_EDWARDS, CKA_EC_PARAMS the RFC 8410 OID; or EC
 * P-256 / P-384 on a token without EdDSA). */
typedef enum {
    P11_KEY_UNSET = 0, /* for callers' "not chosen"; p11_generate_key refuses it */
    P11_KEY_EC_P256 = 1,
    P11_KEY_RSA_2048 = 2,
    P11_KEY_ED25519 = 3,
    P11_KEY_EC_P384 = 4,
    P11_KEY_RSA_3072 = 5,
    P11_KEY_RSA_4096 = 6
} p11_key_type;

typedef struct p11_module p11_module; /* a loaded, initialized module */
typedef struct p11_pool p11_pool;     /* logged-in sessions bound to one private key */

/* dlopens the module, C_GetFunctionList, C_Initialize (OS locking allowed). */
HSMCA_MUSTCHECK hsmca_code p11_module_load(const char *path, p11_module **out, hsmca_err *e);
/* C_Finalize, dlclose, free. NULL is fine. */
void p11_module_unload(p11_module *m);

/* Dev set-up: initializes a fresh token in the first free slot with the label,
 * the SO PIN and the user PIN (C_InitToken, C_InitPIN). No PIN goes on a command line. */
HSMCA_MUSTCHECK hsmca_code p11_init_token(p11_module *m, const char *label, const char *so_pin,
                          const char *user_pin, hsmca_err *e);

/* Returns 1 when a token with that label exists, 0 when not. */
int p11_token_exists(p11_module *m, const char *label);

/* Generates a key pair in the token: private key CKA_TOKEN, CKA_PRIVATE,
 * CKA_SENSITIVE, !CKA_EXTRACTABLE, CKA_SIGN and no other use (decrypt, unwrap,
 * derive, sign-recover FALSE); public half CKA_VERIFY only; both halves
 * labelled `label` with a random CKA_ID. Refuses if an object with that label
 * already exists. */
HSMCA_MUSTCHECK hsmca_code p11_generate_key(p11_module *m, const char *token_label, const char *user_pin,
                            const char *label, p11_key_type type, hsmca_err *e);

/* p11_generate_key with the CKA_ID given (id_len 1..64) instead of a random one:
 * `hsmca token keygen` makes the key a config's URI names (its object and id). */
HSMCA_MUSTCHECK hsmca_code p11_generate_key_id(p11_module *m, const char *token_label,
                                               const char *user_pin, const char *label,
                                               const uint8_t *id, size_t id_len,
                                               p11_key_type type, hsmca_err *e);

/* 1 when the token with that label lists the mechanism that generates keys of this
 * type (C_GetMechanismList, no login), 0 when not or when the token is not there. */
int p11_token_can_generate(p11_module *m, const char *token_label, p11_key_type type);

/* --- read-only inspection, for `hsmca token check` (p11_inspect.c) --- */

/* What one line of an inspection found: INFO a fact, OK a check serve makes passed,
 * WARN something serve accepts but should not be, FAIL something that stops serve. */
typedef enum { P11_CHECK_INFO, P11_CHECK_OK, P11_CHECK_WARN, P11_CHECK_FAIL } p11_check_status;

/* Receives each line: subject names what to fix (a config key such as "pkcs11.ca_key",
 * or "pkcs11.module"), text says what was found. */
typedef void (*p11_check_fn)(void *ctx, p11_check_status st, const char *subject,
                             const char *text);

/* One INFO line for the module (C_GetInfo) and one per slot: its token's label,
 * manufacturer, model, serial number and flags. A FAIL on subject "pkcs11.module"
 * when the slot list cannot be read or no slot has a token. Returns the number of
 * tokens found. */
int p11_token_list(p11_module *m, p11_check_fn fn, void *ctx);

/* What p11_key_inspect found beyond its lines. */
typedef struct {
    int fails;       /* FAIL lines */
    int warns;       /* WARN lines */
    int pin_refused; /* the token refused the PIN: the caller must not log in again */
} p11_inspect_result;

/* Finds the private key key_uri names (subject: its config key, such as
 * "pkcs11.ca_key"; audit: 1 for the audit key's accepted types) on one session,
 * logging in once with the PIN, and reports each attribute without refusing: key type
 * and curve or size, CKA_SENSITIVE, CKA_EXTRACTABLE, CKA_SIGN (FAIL as
 * p11_pool_open/p11_signkey_open would refuse them), CKA_ALWAYS_SENSITIVE,
 * CKA_NEVER_EXTRACTABLE, CKA_DECRYPT, CKA_UNWRAP, CKA_DERIVE (WARN: serve accepts
 * them), and whether the public half is found (by CKA_ID, else label). Logs out and
 * closes its session. Changes nothing in the token. */
void p11_key_inspect(p11_module *m, const char *subject, const char *key_uri, const char *pin,
                     int audit, p11_check_fn fn, void *ctx, p11_inspect_result *r);

/* Opens n sessions on the token named by the URI, logs in with the PIN (once:
 * login state is per application), finds the private key by the URI and its
 * public half (same CKA_ID or label), and checks the key: CKA_SENSITIVE true,
 * CKA_EXTRACTABLE false, CKA_SIGN true, type EC P-256/P-384 or RSA >= 2048.
 * Refuses to return a pool otherwise, naming the failed check. */
HSMCA_MUSTCHECK hsmca_code p11_pool_open(p11_module *m, const char *key_uri, const char *user_pin, unsigned n,
                         p11_pool **out, hsmca_err *e);
void p11_pool_close(p11_pool *p);

/* The token key's public key (new reference; caller EVP_PKEY_free's). */
EVP_PKEY *p11_pool_public_key(p11_pool *p);

/* Signs a digest with the pool's key and the algorithm the key signs with
 * (p11_pool_sigalg; digest_len must be its digest's): CKM_ECDSA (raw r||s
 * converted to a DER ECDSA-Sig-Value) or CKM_RSA_PKCS over the DigestInfo.
 * sig gets the DER/PKCS#1 signature; *siglen in: capacity (>= IPC_SIG_MAX), out: length.
 * Blocks until a session is free. Thread-safe. Recovery follows the exact CKR_*
 * (docs/ARCHITECTURE.md §6): a dead session is replaced and a lost login restored once,
 * and the request retried once on another session (nothing was signed); a
 * device error returns HSMCA_EUNAVAIL and rebuilds the pool (C_Finalize /
 * C_Initialize, login) with backoff; so do CKR_GENERAL_ERROR and
 * CKR_FUNCTION_FAILED once the pool's key has signed (what a client library
 * answers when its daemon went away); a refused PIN (at any login) stops the
 * pool for good: HSMCA_EUNAVAIL naming it, and no login is tried again. */
HSMCA_MUSTCHECK hsmca_code p11_pool_sign_digest(p11_pool *p, const uint8_t *digest, size_t digest_len,
                                uint8_t *sig, size_t *siglen, hsmca_err *e);

/* Signs a random digest and verifies the signature with the key's public half, as
 * p11_pool_open does: the signer repeats it once its sandbox is in. HSMCA_EPERM when
 * the signature does not verify; else what p11_pool_sign_digest returned. */
HSMCA_MUSTCHECK hsmca_code p11_pool_self_test(p11_pool *p, hsmca_err *e);

/* Does at once what a fault of the module makes the pool do (its sessions closed,
 * C_Finalize, C_Initialize, a login, the key found again), so that the signer proves
 * inside its sandbox, as signer.user, the recovery it will need when the token's
 * daemon restarts: a client library that can no longer reach its daemon (a socket
 * the filter refuses, a store or socket signer.user may not open) fails here, at
 * start, instead of at the first fault. Other pools on the module reconnect at their
 * next use. HSMCA_EUNAVAIL when the module does not come back (the pool then retries
 * once a second, as after a fault). */
HSMCA_MUSTCHECK hsmca_code p11_pool_reinit_module(p11_pool *p, hsmca_err *e);

/* The signature algorithm of the pool's key (common/sigalg.h); never NULL for
 * an open pool. */
const sigalg *p11_pool_sigalg(p11_pool *p);

/* Where the pool stands, for the signer's log and its replies: ready;
 * reconnecting (a device error: calls fail fast with UNAVAILABLE while one
 * caller a second rebuilds the pool); or the token refused the PIN (nothing is
 * tried again until the caller makes a new pool). */
typedef enum { P11_POOL_READY, P11_POOL_RECONNECTING, P11_POOL_PIN_REFUSED } p11_pool_state;
p11_pool_state p11_pool_get_state(p11_pool *p);

/* A pool's figures for the signer's StatusReply, read under the pool's lock (which no
 * token call holds): its state, sessions open (held, whether free or signing) and
 * signing now, reconnects that succeeded, and the C_Sign latency of its key. */
typedef struct {
    p11_pool_state state;
    unsigned open, busy;
    uint64_t reconnects;
    metrics_hist_snap sign; /* p11_pool_sign_digest's C_Sign (and its C_SignInit) */
} p11_pool_figures;
void p11_pool_figures_get(p11_pool *p, p11_pool_figures *out);

/* While the pool has a free session and none waits, or it is reconnecting with no call
 * in flight: one C_GetSessionInfo through the pool's recovery (a removed token makes it
 * reconnecting; a reconnect is tried at most once a second, POOL_BACKOFF_S). Otherwise
 * nothing: it does not queue behind signatures (one that took the free session first is
 * waited for); a hung token holds the caller, as any call does. The state after it. */
p11_pool_state p11_pool_probe(p11_pool *p);

/* 1 while the pool is healthy, 0 while it is reconnecting. */
int p11_pool_healthy(p11_pool *p);

/* --- a second key: the audit key (docs/ARCHITECTURE.md §7.6), whole messages --- */

typedef struct p11_signkey p11_signkey;

#define P11_ED25519_SIG_LEN 64
#define P11_ED25519_PUB_LEN 32
#define P11_SIGNKEY_SIG_MAX 128 /* Ed25519's 64 bytes, or a DER ECDSA signature (P-384: <= 104) */
#define P11_SIGNKEY_PUB_MAX 128 /* Ed25519's 32 bytes, or a DER SPKI (P-384: 120) */
/* The longest message signed: CKM_EDDSA takes the message in one C_Sign, and
 * hardware tokens cap single-part input (a checkpoint note is a few hundred bytes). */
#define P11_SIGNKEY_MAX_MSG (64 * 1024)

/* Opens the audit private key the URI names, beside (and apart from) any CA
 * pool on the same module: its own session and lock, its own copy of the PIN.
 * The checks are the CA key's (CKA_SENSITIVE true, CKA_EXTRACTABLE false,
 * CKA_SIGN true; the public half found by CKA_ID, else label) with the type
 * CKK_EC_EDWARDS on edwards25519 (CKA_EC_PARAMS the OID 1.3.101.112 or the
 * string "edwards25519") or CKK_EC on P-256 or P-384 (for tokens without
 * EdDSA); then a signature over a random message must verify with the public
 * half. Refuses naming the failed check: ENOTFOUND for a missing key, EPERM for
 * a key that fails a check, EAUTH for a refused PIN, EUNAVAIL for a missing token. */
HSMCA_MUSTCHECK hsmca_code p11_signkey_open(p11_module *m, const char *key_uri,
                                            const char *user_pin, p11_signkey **out,
                                            hsmca_err *e);
/* Closes the session and wipes the PIN. NULL is fine. */
void p11_signkey_close(p11_signkey *k);

/* Signs msg[0..len) into sig[0..*siglen) (*siglen in: capacity, out: length):
 * Ed25519 (pure, RFC 8032) with CKM_EDDSA, the token hashing the whole message
 * (64 bytes out); or ECDSA with CKM_ECDSA over SHA-256(msg), hashed here, the
 * token's r||s returned as a DER ECDSA-Sig-Value (at most P11_SIGNKEY_SIG_MAX).
 * len <= P11_SIGNKEY_MAX_MSG; msg may be NULL when len is 0. The signature is
 * verified with the public half before it is copied to sig. Thread-safe;
 * blocks while another thread signs. Recovery is the pool's
 * (p11_pool_sign_digest): a dead session or lost login repaired and the
 * signature retried once, a device error HSMCA_EUNAVAIL while the key's
 * session is rebuilt with backoff, a refused PIN HSMCA_EUNAVAIL for good. */
HSMCA_MUSTCHECK hsmca_code p11_signkey_sign_message(p11_signkey *k, const uint8_t *msg,
                                                    size_t len, uint8_t *sig, size_t *siglen,
                                                    hsmca_err *e);

/* p11_pool_reinit_module for the audit key's module: the signer rehearses its recovery
 * when that module is not the CA key's. */
HSMCA_MUSTCHECK hsmca_code p11_signkey_reinit_module(p11_signkey *k, hsmca_err *e);

/* Signs a random message and verifies it, as p11_signkey_open does: the signer repeats
 * it once its sandbox is in. HSMCA_EPERM when the signature does not verify. */
HSMCA_MUSTCHECK hsmca_code p11_signkey_self_test(p11_signkey *k, hsmca_err *e);

/* The public key (a new reference; caller EVP_PKEY_free's). */
EVP_PKEY *p11_signkey_public_key(p11_signkey *k);
/* The public key's bytes, p11_signkey_public_len of them, valid while k is open:
 * Ed25519 the raw 32 bytes (RFC 8032 encoding), ECDSA the DER SubjectPublicKeyInfo. */
const uint8_t *p11_signkey_public_raw(const p11_signkey *k);
size_t p11_signkey_public_len(const p11_signkey *k);
/* "ed25519", "ecdsa-p256" or "ecdsa-p384" (static). */
const char *p11_signkey_alg(const p11_signkey *k);
/* SHA-256 of the DER SubjectPublicKeyInfo, 64 lower-case hex digits (what
 * `openssl pkey -pubin -outform DER | sha256sum` prints), valid while k is open. */
const char *p11_signkey_fingerprint(const p11_signkey *k);
/* Ready, reconnecting, or the PIN refused (see p11_pool_state). */
p11_pool_state p11_signkey_get_state(p11_signkey *k);

/* The figures of the audit key's pool (p11_pool_figures_get). */
void p11_signkey_figures_get(p11_signkey *k, p11_pool_figures *out);
/* p11_pool_probe on the audit key's session. */
p11_pool_state p11_signkey_probe(p11_signkey *k);

/* Name of a CKR_* value ("CKR_PIN_INCORRECT"), or "CKR_0x..." when unknown. */
const char *p11_rv_name(unsigned long rv);

#endif
