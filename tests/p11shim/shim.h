/* shim.h - internal to tests/p11shim/: the function table, the rule set read
 * from the control file, and the hooks every forwarded call goes through.
 *
 * Files: shim_funcs.c (the exported C_GetFunctionList and one wrapper per
 * PKCS#11 function), shim_state.c (loading, call bookkeeping, sessions,
 * counts file), shim_control.c (reading and parsing the control file, and
 * deciding which rule applies to a call). The control grammar is in
 * shim_control.c and README.md. */
#ifndef P11SHIM_SHIM_H
#define P11SHIM_SHIM_H

#include <pkcs11.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* Every function of the PKCS#11 2.40 function list, in the list's order. */
// clang-format off
#define SHIM_FUNCS(X) \
    X(C_Initialize) X(C_Finalize) X(C_GetInfo) \
    X(C_GetFunctionList) X(C_GetSlotList) X(C_GetSlotInfo) \
    X(C_GetTokenInfo) X(C_GetMechanismList) X(C_GetMechanismInfo) \
    X(C_InitToken) X(C_InitPIN) X(C_SetPIN) \
    X(C_OpenSession) X(C_CloseSession) X(C_CloseAllSessions) \
    X(C_GetSessionInfo) X(C_GetOperationState) X(C_SetOperationState) \
    X(C_Login) X(C_Logout) X(C_CreateObject) \
    X(C_CopyObject) X(C_DestroyObject) X(C_GetObjectSize) \
    X(C_GetAttributeValue) X(C_SetAttributeValue) X(C_FindObjectsInit) \
    X(C_FindObjects) X(C_FindObjectsFinal) X(C_EncryptInit) \
    X(C_Encrypt) X(C_EncryptUpdate) X(C_EncryptFinal) \
    X(C_DecryptInit) X(C_Decrypt) X(C_DecryptUpdate) \
    X(C_DecryptFinal) X(C_DigestInit) X(C_Digest) \
    X(C_DigestUpdate) X(C_DigestKey) X(C_DigestFinal) \
    X(C_SignInit) X(C_Sign) X(C_SignUpdate) \
    X(C_SignFinal) X(C_SignRecoverInit) X(C_SignRecover) \
    X(C_VerifyInit) X(C_Verify) X(C_VerifyUpdate) \
    X(C_VerifyFinal) X(C_VerifyRecoverInit) X(C_VerifyRecover) \
    X(C_DigestEncryptUpdate) X(C_DecryptDigestUpdate) X(C_SignEncryptUpdate) \
    X(C_DecryptVerifyUpdate) X(C_GenerateKey) X(C_GenerateKeyPair) \
    X(C_WrapKey) X(C_UnwrapKey) X(C_DeriveKey) \
    X(C_SeedRandom) X(C_GenerateRandom) X(C_GetFunctionStatus) \
    X(C_CancelFunction) X(C_WaitForSlotEvent)
// clang-format on

typedef enum {
#define SHIM_ENUM(n) SHIM_FN_##n,
    SHIM_FUNCS(SHIM_ENUM)
#undef SHIM_ENUM
        SHIM_FN_COUNT
} shim_fn;

extern const char *const shim_fn_names[SHIM_FN_COUNT];

/* ---- rules (shim_control.c) ---- */

typedef enum { SHIM_RULE_FAIL, SHIM_RULE_DELAY, SHIM_RULE_HANG } shim_rule_kind;
typedef enum { SHIM_ONCE, SHIM_ALWAYS, SHIM_EVERY } shim_mode;

#define SHIM_ANY_FN (-1) /* FUNC "*" */
#define SHIM_RULES_MAX 64
#define SHIM_RULE_TEXT 128
#define SHIM_CTL_MAX 65536 /* control file bytes read; the rest is a parse error */

typedef struct {
    shim_rule_kind kind;
    int fn;                    /* shim_fn, or SHIM_ANY_FN */
    shim_mode mode;            /* fail, hang */
    unsigned long n;           /* fail every N; delay milliseconds */
    CK_RV rv;                  /* fail */
    char text[SHIM_RULE_TEXT]; /* the rule, one space between words: a hang's identity */
    int fired;                 /* once: used up */
    unsigned long seen;        /* every N: matching calls so far */
} shim_rule;

typedef struct {
    shim_rule rules[SHIM_RULES_MAX];
    unsigned nrules;
    int removed;           /* "remove" */
    int release;           /* "release" */
    double idle_drop_s;    /* "idle-drop S"; 0 when absent */
    unsigned parse_errors; /* lines of the current text that are not rules */
} shim_rules;

/* The control file as last read. */
typedef struct {
    int fd; /* -1: no control file, every call passes through */
    off_t size;
    struct timespec mtim;
    int have_stat;
    int racy; /* the last read was within a clock tick of a write: read again */
    size_t len;
    char text[SHIM_CTL_MAX];
    char next[SHIM_CTL_MAX];
} shim_ctl;

/* Reads the control file again when its size or mtime changed (or the last
 * read may have raced a write); only fstat and pread on the fd. Returns 1 when
 * its bytes differ from the last read: r then holds the new rules, all armed. */
int shim_ctl_refresh(shim_ctl *c, shim_rules *r);

/* Parses control text into r; every rule starts armed. */
void shim_rules_parse(shim_rules *r, const char *text, size_t len);

/* The first hang rule for fn that blocks this call (none while "release" is
 * present); a "once" rule is used up by it. NULL when none. */
const shim_rule *shim_rules_hang(shim_rules *r, shim_fn fn);
/* 1 when a rule with exactly this text is in r. */
int shim_rules_has(const shim_rules *r, const char *text);
/* Milliseconds of the first delay rule for fn, 0 when none. */
unsigned long shim_rules_delay_ms(const shim_rules *r, shim_fn fn);
/* The code of the first fail rule for fn that fires on this call (counting
 * the call for "every N" rules it passes), CKR_OK when none fires. */
CK_RV shim_rules_fail(shim_rules *r, shim_fn fn);

/* ---- calls (shim_state.c) ---- */

/* What a call acts on, for "remove" and "idle-drop". */
typedef enum { SHIM_K_GLOBAL, SHIM_K_SLOT, SHIM_K_SESSION } shim_kind;

typedef struct {
    shim_fn fn;
    int by_rule;       /* a fail rule answered: the call must not reach the module */
    int by_state;      /* the token state answered (removed, dead session, idle drop) */
    int removed;       /* the token was removed at entry */
    unsigned kill_gen; /* sessions-killed generation at entry */
} shim_call;

/* Loads the real module and opens the control and counts files, once per
 * process. CKR_OK or why not. */
CK_RV shim_load(void);
CK_FUNCTION_LIST *shim_real(void);

/* Before forwarding: counts the call, applies hang, delay, fail rules and the
 * token state. CKR_OK: forward; otherwise the code to return instead.
 * handle is the session (SHIM_K_SESSION) or slot (SHIM_K_SLOT). */
CK_RV shim_enter(shim_call *c, shim_fn fn, shim_kind kind, CK_ULONG handle);
/* After the call (forwarded or not): counts, counts file. Returns rv. */
CK_RV shim_leave(shim_call *c, CK_RV rv);

/* Bookkeeping the wrappers do after forwarding. */
void shim_after_initialize(CK_RV rv);
void shim_after_finalize(CK_RV rv);
void shim_after_open(const shim_call *c, CK_SLOT_ID slot, CK_SESSION_HANDLE s);
void shim_after_close(CK_SESSION_HANDLE s);
void shim_after_close_all(CK_SLOT_ID slot);

/* Our function list (shim_funcs.c). */
extern CK_FUNCTION_LIST shim_function_list;

#endif
