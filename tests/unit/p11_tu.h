/* p11_tu.h - a fresh SoftHSM2 token per test, and raw PKCS#11 calls on it as
 * a second application would make them (keys with careless attributes, events
 * behind the project's back). Shared by test_p11.c and test_p11_eddsa.c.
 * Failures abort the running cmocka test. */
#ifndef HSMCA_P11_TU_H
#define HSMCA_P11_TU_H

#include <pkcs11.h>

#include "p11.h"

#define TU_SOFTHSM "/usr/lib/softhsm/libsofthsm2.so"
#define TU_SO_PIN "so-secret-1234"
#define TU_USER_PIN "user-secret-5678"
#define TU_TOKEN "hsmca-test"

typedef struct {
    char *dir;
    p11_module *m;
} tu_p11_env;

/* A new token directory and SOFTHSM2_CONF for it, the module loaded afresh
 * (SoftHSM reads SOFTHSM2_CONF at C_Initialize); with_token: TU_TOKEN
 * initialized with TU_SO_PIN / TU_USER_PIN. */
void tu_p11_up(tu_p11_env *v, int with_token);
/* Unloads the module (finalizing it) and removes the directory. */
void tu_p11_down(tu_p11_env *v);

/* p11_generate_key in TU_TOKEN, or the test fails. */
void tu_p11_gen(tu_p11_env *v, const char *label, p11_key_type t);

/* The same SoftHSM instance, reached as another part of the process would. */
CK_FUNCTION_LIST *tu_p11_raw_fl(void);
/* The slot of TU_TOKEN. */
CK_SLOT_ID tu_p11_raw_slot(CK_FUNCTION_LIST *fl);
/* A read-write session on TU_TOKEN, logged in as the user. */
CK_SESSION_HANDLE tu_p11_raw_login(CK_FUNCTION_LIST *fl);
/* The one object of a class with this label. */
CK_OBJECT_HANDLE tu_p11_raw_find(CK_FUNCTION_LIST *fl, CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls,
                                 const char *label);

/* Test-only: a key pair with the attributes a careless set-up would give.
 * kind: "ec-p256", "ed25519", "ed448" or "rsa-BITS". */
void tu_p11_raw_gen(const char *label, CK_BBOOL sensitive, CK_BBOOL extractable, CK_BBOOL sign,
                    const char *kind);

#endif
