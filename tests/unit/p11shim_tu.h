/* p11shim_tu.h - helpers for test_p11shim.c: the shim's control and counts
 * files, and raw PKCS#11 calls through the shim on the `hsmca dev init` token
 * (label "hsmca", EC P-256 key "ca-key", Ed25519 key "audit-key"). Failures
 * abort the running cmocka test. */
#ifndef HSMCA_P11SHIM_TU_H
#define HSMCA_P11SHIM_TU_H

#include <pkcs11.h>
#include <stddef.h>

#define ST_TOKEN "hsmca"

typedef struct {
    char *dir;            /* the dev CA directory, with control and counts files */
    char pin[256];        /* the token's user PIN */
    char ctl[1024];       /* P11SHIM_CONTROL */
    char counts[1024];    /* P11SHIM_COUNTS */
    void *shim;           /* dlopen handle, kept until exit */
    CK_FUNCTION_LIST *fl; /* the shim's function list */
} st_globals;
extern st_globals st;

/* Makes the dev CA, sets P11SHIM_* and loads the shim until exit (its state,
 * counts and open files are per process). 0 on success. */
int st_setup(const char *p11shim_path);

/* Rewrites the control file in place (truncate + write, never rename). */
void st_ctl_write(const char *text);
/* Reads up to cap-1 bytes, NUL-terminated; returns the length (0 when missing). */
size_t st_read_file(const char *path, char *buf, size_t cap);
/* The counts file, read until two reads agree. */
void st_counts_text(char *buf, size_t cap);

/* Calls and injected failures of one function (0 0 when never called). */
typedef struct {
    unsigned long long calls, failed;
} st_counts;
st_counts st_count_of(const char *fn);
/* Changes since base, for one function. */
st_counts st_delta(const char *fn, st_counts base);
double st_mono(void);

void st_raw_init(void);
/* The slot of the token labelled ST_TOKEN. */
CK_SLOT_ID st_raw_slot(void);
CK_SESSION_HANDLE st_raw_open(CK_SLOT_ID slot);
CK_RV st_raw_login(CK_SESSION_HANDLE s);
CK_OBJECT_HANDLE st_raw_key(CK_SESSION_HANDLE s);
/* C_SignInit + C_Sign (CKM_ECDSA over a random digest); the first failure. */
CK_RV st_raw_sign(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key);
/* A sign on a session of its own, so no failed operation lingers on a
 * session the test reuses; the caller holds a logged-in session. */
CK_RV st_raw_sign_fresh(CK_SLOT_ID slot, CK_OBJECT_HANDLE key);

/* Initialize, find the token, log in on an anchor session, find the key. */
typedef struct {
    CK_SLOT_ID slot;
    CK_SESSION_HANDLE anchor;
    CK_OBJECT_HANDLE key;
} st_raw_env;
void st_raw_up(st_raw_env *r);
/* Clears the control file and finalizes. */
void st_raw_down(void);

#endif
