/* p11_int.h - internal to pkcs11/: the module struct and helpers shared by the
 * module, key-generation, key-check and pool files. Not for other modules. */
#ifndef HSMCA_P11_INT_H
#define HSMCA_P11_INT_H

#include "p11.h"
#include "sigalg.h"
#include <pkcs11.h>
#include <pthread.h>
#include <stdatomic.h>

struct p11_module {
    void *dl;
    CK_FUNCTION_LIST *fl;
    int owns_init;             /* we called C_Initialize: C_Finalize on unload */
    /* Token calls hold it shared (p11_module_enter), a re-initialization exclusively:
     * C_Finalize while another thread is inside the module is undefined (tpm2-pkcs11 frees
     * state a C_Sign in flight then writes to). Writers first, so a re-initialization
     * is not starved by a stream of signatures. */
    pthread_rwlock_t use_lock;
    atomic_ulong generation;   /* re-initializations so far: each ends every session and
                                  object handle of every pool on the module */
};

#define P11_LABEL_MAX 32 /* CK_TOKEN_INFO.label is 32 bytes, space padded */

/* Space-pads label into the 32-byte CK_TOKEN_INFO form; -1 when empty or too long. */
int p11_pad_label(const char *label, unsigned char out[P11_LABEL_MAX]);

/* What a failed call's CKR_* asks the pool to do (docs/ARCHITECTURE.md §6). */
typedef enum {
    P11_RV_OK,      /* nothing */
    P11_RV_SESSION, /* this session is dead: evict it, retry once on another */
    P11_RV_LOGIN,   /* the login went away: log in again once, retry once */
    P11_RV_DEVICE,  /* the token or module is gone: rebuild the pool with backoff */
    P11_RV_PIN,     /* the PIN was refused: never retried automatically */
    P11_RV_OTHER,   /* this request failed; replace its session, keep the pool */
} p11_rv_class;
p11_rv_class p11_rv_classify(CK_RV rv);

/* The class of a signing operation's rv: p11_rv_classify's, except that
 * CKR_GENERAL_ERROR and CKR_FUNCTION_FAILED are P11_RV_DEVICE once the key has
 * signed (key_has_signed), as a client library answers when its daemon went away. */
p11_rv_class p11_rv_classify_op(CK_RV rv, int key_has_signed);

/* 1 for the codes that put the module itself in doubt (CKR_GENERAL_ERROR,
 * CKR_FUNCTION_FAILED): its recovery re-initializes it first. */
int p11_rv_module_fault(CK_RV rv);

/* Sets *e from a failed call: HSMCA_EUNAVAIL when the session, the login or
 * the token went away (P11_RV_SESSION, _LOGIN, _DEVICE), else `code`; the message is "<what>: <CKR name>". Returns the code set. */
HSMCA_MUSTCHECK hsmca_code p11_fail_rv(hsmca_err *e, hsmca_code code, const char *what, CK_RV rv);

/* C_Finalize (result ignored) then C_Initialize, under the module's lock; counts one
 * more generation. */
CK_RV p11_module_reinit(p11_module *m);

/* Around every token call a pool makes while other threads may use the module: no
 * re-initialization runs until p11_module_leave. Never held across p11_module_reinit
 * (the lock is not recursive). */
void p11_module_enter(p11_module *m);
void p11_module_leave(p11_module *m);

/* How many times the module was re-initialized: a pool whose handles are of an older
 * generation must reconnect. */
unsigned long p11_module_generation(p11_module *m);

/* Finds the slot whose present token has this label. HSMCA_EUNAVAIL when none
 * (or the slot list fails), naming the label. *rv_out gets the CKR (may be NULL). */
HSMCA_MUSTCHECK hsmca_code p11_find_token(p11_module *m, const char *label, CK_SLOT_ID *slot, CK_RV *rv_out,
                          hsmca_err *e);

/* C_Login as the user; CKR_USER_ALREADY_LOGGED_IN is success (*did_login = 0).
 * A refused PIN is HSMCA_EAUTH; *rv_out (may be NULL) gets the CKR. */
HSMCA_MUSTCHECK hsmca_code p11_login_user(p11_module *m, CK_SESSION_HANDLE s, const char *pin, CK_RV *rv_out,
                          int *did_login,
                          hsmca_err *e);

/* Finds up to max objects of a class matching label (may be NULL) and id
 * (id_len 0: any). *n gets how many matched, capped at max. */
CK_RV p11_find_objects(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label,
                       const uint8_t *id, size_t id_len, CK_OBJECT_HANDLE *out, CK_ULONG max,
                       CK_ULONG *n);

/* Reads one attribute into a new buffer (caller frees; OPENSSL_free-safe via free). */
CK_RV p11_get_attr(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE t,
                   uint8_t **val, size_t *len, size_t max);

/* Reads a CK_BBOOL / CK_ULONG attribute. */
CK_RV p11_get_bool(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE t,
                   int *b);
CK_RV p11_get_ulong(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE t,
                    CK_ULONG *v);

/* DER OIDs of the curves we use as CKA_EC_PARAMS. */
extern const uint8_t p11_oid_p256[10];
extern const uint8_t p11_oid_p384[7];
/* Ed25519's CKA_EC_PARAMS: the RFC 8410 OID 1.3.101.112, or the PrintableString
 * "edwards25519" (PKCS#11 3.0 allows both; SoftHSM reports the latter on the
 * private half whichever was given). */
extern const uint8_t p11_oid_ed25519[5];
extern const uint8_t p11_name_ed25519[14];

/* What a key is for, which decides the key types its checks accept. */
typedef enum {
    P11_ROLE_CA,      /* EC P-256/P-384 or RSA >= 2048 */
    P11_ROLE_AUDIT, /* the audit key: CKK_EC_EDWARDS on edwards25519, or EC P-256/P-384 */
} p11_key_role;

/* The private key found by a URI: checked (sensitive, non-extractable, may sign,
 * of a type its role accepts) and its public half as an EVP_PKEY. Messages name
 * the key by its label (else its id). On success *pub is a new reference. */
HSMCA_MUSTCHECK hsmca_code p11_key_find_checked(p11_module *m, CK_SESSION_HANDLE s, const p11_uri *u,
                                p11_key_role role, CK_OBJECT_HANDLE *priv, CK_KEY_TYPE *kt,
                                EVP_PKEY **pub, hsmca_err *e);

/* One signature over a digest (alg->digest_len bytes) on session s with alg's
 * mechanism: CKM_ECDSA (raw r||s) or CKM_RSA_PKCS over the DigestInfo. *rawlen in: capacity, out: length. */
CK_RV p11_sign_raw(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, const sigalg *alg,
                   const uint8_t *digest, uint8_t *raw, CK_ULONG *rawlen);

/* Turns a raw token signature into what X.509 carries: ECDSA r||s becomes a DER
 * ECDSA-Sig-Value, RSA is copied. *siglen in: capacity, out: length. */
HSMCA_MUSTCHECK hsmca_code p11_sig_encode(const sigalg *alg, const uint8_t *raw, size_t rawlen, uint8_t *sig,
                          size_t *siglen, hsmca_err *e);

/* --- the session pool, shared by the CA key's pool and p11_signkey --- */

/* p11_pool_open without what is the CA key's own (its signature algorithm and
 * the self-test): n sessions, one login, the key found and checked for its
 * role. The caller proves the key's public half itself. */
HSMCA_MUSTCHECK hsmca_code p11_pool_open_role(p11_module *m, const char *key_uri,
                                              const char *user_pin, unsigned n,
                                              p11_key_role role, p11_pool **out, hsmca_err *e);

/* One token operation on a pool session: returns the CKR of its first failing
 * call. It may run twice for one p11_pool_run (the retry), so it resets any
 * output it fills. */
typedef CK_RV (*p11_pool_op)(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, void *arg);

/* Runs op on a free session of the pool (blocking until one is free) with the
 * pool's recovery (docs/ARCHITECTURE.md §6, p11_pool_sign_digest): a dead session or a
 * lost login is repaired and op retried once; a device error fails with
 * HSMCA_EUNAVAIL and the pool rebuilds itself with backoff; a refused PIN
 * stops the pool for good. A failure of op is "<what>: <CKR name>". */
HSMCA_MUSTCHECK hsmca_code p11_pool_run(p11_pool *p, p11_pool_op op, void *arg, const char *what,
                                        hsmca_err *e);

#endif
