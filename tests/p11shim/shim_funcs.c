/* shim_funcs.c - the module's one exported symbol, C_GetFunctionList, and a
 * wrapper for every function of the list: shim_enter decides (hang, delay,
 * injected failure, token state), the real module runs only when it says
 * CKR_OK, shim_leave counts. A failed call never reaches the real module, so
 * an injected C_Sign failure signs nothing. */
#include "shim.h"

/* Calls on a session: the first parameter is always named `session`. */
#define SESSION_CALL(name, params, args)                                                           \
    static CK_RV shim_##name params                                                                \
    {                                                                                              \
        shim_call c;                                                                               \
        CK_RV rv = shim_enter(&c, SHIM_FN_##name, SHIM_K_SESSION, session);                        \
        if (rv == CKR_OK)                                                                          \
            rv = shim_real()->name args;                                                           \
        return shim_leave(&c, rv);                                                                 \
    }

/* Calls on a slot's token, refused while it is removed. */
#define SLOT_CALL(name, params, args)                                                              \
    static CK_RV shim_##name params                                                                \
    {                                                                                              \
        shim_call c;                                                                               \
        CK_RV rv = shim_enter(&c, SHIM_FN_##name, SHIM_K_SLOT, slot);                              \
        if (rv == CKR_OK)                                                                          \
            rv = shim_real()->name args;                                                           \
        return shim_leave(&c, rv);                                                                 \
    }

/* Calls on the library as a whole. */
#define GLOBAL_CALL(name, params, args)                                                            \
    static CK_RV shim_##name params                                                                \
    {                                                                                              \
        shim_call c;                                                                               \
        CK_RV rv = shim_enter(&c, SHIM_FN_##name, SHIM_K_GLOBAL, 0);                               \
        if (rv == CKR_OK)                                                                          \
            rv = shim_real()->name args;                                                           \
        return shim_leave(&c, rv);                                                                 \
    }

/* ---- the ones with bookkeeping ---- */

static CK_RV shim_C_Initialize(CK_VOID_PTR args)
{
    CK_RV rv = shim_load();
    if (rv != CKR_OK)
        return rv;
    shim_call c;
    rv = shim_enter(&c, SHIM_FN_C_Initialize, SHIM_K_GLOBAL, 0);
    if (rv == CKR_OK) {
        rv = shim_real()->C_Initialize(args);
        shim_after_initialize(rv);
    }
    return shim_leave(&c, rv);
}

static CK_RV shim_C_Finalize(CK_VOID_PTR reserved)
{
    shim_call c;
    CK_RV rv = shim_enter(&c, SHIM_FN_C_Finalize, SHIM_K_GLOBAL, 0);
    if (rv == CKR_OK) {
        rv = shim_real()->C_Finalize(reserved);
        shim_after_finalize(rv);
    }
    return shim_leave(&c, rv);
}

static CK_RV shim_C_GetSlotList(CK_BBOOL present, CK_SLOT_ID_PTR list, CK_ULONG_PTR count)
{
    shim_call c;
    CK_RV rv = shim_enter(&c, SHIM_FN_C_GetSlotList, SHIM_K_GLOBAL, 0);
    if (rv == CKR_OK && present && c.removed) {
        /* No slot has a token present. */
        if (count)
            *count = 0;
        else
            rv = CKR_ARGUMENTS_BAD;
    } else if (rv == CKR_OK) {
        rv = shim_real()->C_GetSlotList(present, list, count);
    }
    return shim_leave(&c, rv);
}

static CK_RV shim_C_GetSlotInfo(CK_SLOT_ID slot, CK_SLOT_INFO_PTR info)
{
    shim_call c;
    CK_RV rv = shim_enter(&c, SHIM_FN_C_GetSlotInfo, SHIM_K_GLOBAL, 0);
    if (rv == CKR_OK)
        rv = shim_real()->C_GetSlotInfo(slot, info);
    if (rv == CKR_OK && c.removed)
        info->flags &= ~(CK_FLAGS)CKF_TOKEN_PRESENT;
    return shim_leave(&c, rv);
}

static CK_RV shim_C_OpenSession(CK_SLOT_ID slot, CK_FLAGS flags, CK_VOID_PTR app, CK_NOTIFY notify,
                                CK_SESSION_HANDLE_PTR session)
{
    shim_call c;
    CK_RV rv = shim_enter(&c, SHIM_FN_C_OpenSession, SHIM_K_SLOT, slot);
    if (rv == CKR_OK) {
        rv = shim_real()->C_OpenSession(slot, flags, app, notify, session);
        if (rv == CKR_OK)
            shim_after_open(&c, slot, *session);
    }
    return shim_leave(&c, rv);
}

static CK_RV shim_C_CloseSession(CK_SESSION_HANDLE session)
{
    shim_call c;
    CK_RV rv = shim_enter(&c, SHIM_FN_C_CloseSession, SHIM_K_SESSION, session);
    /* A dead session (removed token, idle drop) is still closed underneath,
     * so its login and memory go; the caller gets the injected code. */
    if (rv == CKR_OK || c.by_state) {
        CK_RV real = shim_real()->C_CloseSession(session);
        shim_after_close(session);
        if (rv == CKR_OK)
            rv = real;
    }
    return shim_leave(&c, rv);
}

static CK_RV shim_C_CloseAllSessions(CK_SLOT_ID slot)
{
    shim_call c;
    CK_RV rv = shim_enter(&c, SHIM_FN_C_CloseAllSessions, SHIM_K_GLOBAL, 0);
    if (rv == CKR_OK) {
        rv = shim_real()->C_CloseAllSessions(slot);
        if (rv == CKR_OK)
            shim_after_close_all(slot);
    }
    return shim_leave(&c, rv);
}

static CK_RV shim_C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR list)
{
    return C_GetFunctionList(list);
}

/* ---- plain forwarding ---- */

GLOBAL_CALL(C_GetInfo, (CK_INFO_PTR info), (info))
GLOBAL_CALL(C_WaitForSlotEvent, (CK_FLAGS flags, CK_SLOT_ID_PTR slot, CK_VOID_PTR reserved),
            (flags, slot, reserved))

SLOT_CALL(C_GetTokenInfo, (CK_SLOT_ID slot, CK_TOKEN_INFO_PTR info), (slot, info))
SLOT_CALL(C_GetMechanismList, (CK_SLOT_ID slot, CK_MECHANISM_TYPE_PTR list, CK_ULONG_PTR count),
          (slot, list, count))
SLOT_CALL(C_GetMechanismInfo, (CK_SLOT_ID slot, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR info),
          (slot, type, info))
SLOT_CALL(C_InitToken, (CK_SLOT_ID slot, CK_UTF8CHAR_PTR pin, CK_ULONG len, CK_UTF8CHAR_PTR label),
          (slot, pin, len, label))

SESSION_CALL(C_InitPIN, (CK_SESSION_HANDLE session, CK_UTF8CHAR_PTR pin, CK_ULONG len),
             (session, pin, len))
SESSION_CALL(C_SetPIN,
             (CK_SESSION_HANDLE session, CK_UTF8CHAR_PTR old, CK_ULONG oldlen, CK_UTF8CHAR_PTR new,
              CK_ULONG newlen),
             (session, old, oldlen, new, newlen))
SESSION_CALL(C_GetSessionInfo, (CK_SESSION_HANDLE session, CK_SESSION_INFO_PTR info),
             (session, info))
SESSION_CALL(C_GetOperationState, (CK_SESSION_HANDLE session, CK_BYTE_PTR state, CK_ULONG_PTR len),
             (session, state, len))
SESSION_CALL(C_SetOperationState,
             (CK_SESSION_HANDLE session, CK_BYTE_PTR state, CK_ULONG len, CK_OBJECT_HANDLE enc,
              CK_OBJECT_HANDLE auth),
             (session, state, len, enc, auth))
SESSION_CALL(C_Login,
             (CK_SESSION_HANDLE session, CK_USER_TYPE user, CK_UTF8CHAR_PTR pin, CK_ULONG len),
             (session, user, pin, len))
SESSION_CALL(C_Logout, (CK_SESSION_HANDLE session), (session))
SESSION_CALL(C_CreateObject,
             (CK_SESSION_HANDLE session, CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR o),
             (session, t, n, o))
SESSION_CALL(C_CopyObject,
             (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n,
              CK_OBJECT_HANDLE_PTR out),
             (session, o, t, n, out))
SESSION_CALL(C_DestroyObject, (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE o), (session, o))
SESSION_CALL(C_GetObjectSize, (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE o, CK_ULONG_PTR size),
             (session, o, size))
SESSION_CALL(C_GetAttributeValue,
             (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n),
             (session, o, t, n))
SESSION_CALL(C_SetAttributeValue,
             (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR t, CK_ULONG n),
             (session, o, t, n))
SESSION_CALL(C_FindObjectsInit, (CK_SESSION_HANDLE session, CK_ATTRIBUTE_PTR t, CK_ULONG n),
             (session, t, n))
SESSION_CALL(C_FindObjects,
             (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE_PTR o, CK_ULONG max, CK_ULONG_PTR n),
             (session, o, max, n))
SESSION_CALL(C_FindObjectsFinal, (CK_SESSION_HANDLE session), (session))

/* Encrypt, decrypt, digest, sign, verify: (session, mechanism, key) to start,
 * (session, in, inlen, out, outlen) in one go or by parts. */
#define INIT_CALL(name)                                                                            \
    SESSION_CALL(name, (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE key),      \
                 (session, m, key))
#define INOUT_CALL(name)                                                                           \
    SESSION_CALL(name,                                                                             \
                 (CK_SESSION_HANDLE session, CK_BYTE_PTR in, CK_ULONG inlen, CK_BYTE_PTR out,      \
                  CK_ULONG_PTR outlen),                                                            \
                 (session, in, inlen, out, outlen))
#define IN_CALL(name)                                                                              \
    SESSION_CALL(name, (CK_SESSION_HANDLE session, CK_BYTE_PTR in, CK_ULONG inlen),                \
                 (session, in, inlen))
#define OUT_CALL(name)                                                                             \
    SESSION_CALL(name, (CK_SESSION_HANDLE session, CK_BYTE_PTR out, CK_ULONG_PTR outlen),          \
                 (session, out, outlen))

INIT_CALL(C_EncryptInit)
INOUT_CALL(C_Encrypt)
INOUT_CALL(C_EncryptUpdate)
OUT_CALL(C_EncryptFinal)
INIT_CALL(C_DecryptInit)
INOUT_CALL(C_Decrypt)
INOUT_CALL(C_DecryptUpdate)
OUT_CALL(C_DecryptFinal)
SESSION_CALL(C_DigestInit, (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m), (session, m))
INOUT_CALL(C_Digest)
IN_CALL(C_DigestUpdate)
SESSION_CALL(C_DigestKey, (CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key), (session, key))
OUT_CALL(C_DigestFinal)
INIT_CALL(C_SignInit)
INOUT_CALL(C_Sign)
IN_CALL(C_SignUpdate)
OUT_CALL(C_SignFinal)
INIT_CALL(C_SignRecoverInit)
INOUT_CALL(C_SignRecover)
INIT_CALL(C_VerifyInit)
SESSION_CALL(C_Verify,
             (CK_SESSION_HANDLE session, CK_BYTE_PTR in, CK_ULONG inlen, CK_BYTE_PTR sig,
              CK_ULONG siglen),
             (session, in, inlen, sig, siglen))
IN_CALL(C_VerifyUpdate)
IN_CALL(C_VerifyFinal)
INIT_CALL(C_VerifyRecoverInit)
INOUT_CALL(C_VerifyRecover)
INOUT_CALL(C_DigestEncryptUpdate)
INOUT_CALL(C_DecryptDigestUpdate)
INOUT_CALL(C_SignEncryptUpdate)
INOUT_CALL(C_DecryptVerifyUpdate)

SESSION_CALL(C_GenerateKey,
             (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m, CK_ATTRIBUTE_PTR t, CK_ULONG n,
              CK_OBJECT_HANDLE_PTR key),
             (session, m, t, n, key))
SESSION_CALL(C_GenerateKeyPair,
             (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m, CK_ATTRIBUTE_PTR pubt, CK_ULONG pubn,
              CK_ATTRIBUTE_PTR privt, CK_ULONG privn, CK_OBJECT_HANDLE_PTR pub,
              CK_OBJECT_HANDLE_PTR priv),
             (session, m, pubt, pubn, privt, privn, pub, priv))
SESSION_CALL(C_WrapKey,
             (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE wrapping,
              CK_OBJECT_HANDLE key, CK_BYTE_PTR out, CK_ULONG_PTR outlen),
             (session, m, wrapping, key, out, outlen))
SESSION_CALL(C_UnwrapKey,
             (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE unwrapping,
              CK_BYTE_PTR in, CK_ULONG inlen, CK_ATTRIBUTE_PTR t, CK_ULONG n,
              CK_OBJECT_HANDLE_PTR key),
             (session, m, unwrapping, in, inlen, t, n, key))
SESSION_CALL(C_DeriveKey,
             (CK_SESSION_HANDLE session, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE base,
              CK_ATTRIBUTE_PTR t, CK_ULONG n, CK_OBJECT_HANDLE_PTR key),
             (session, m, base, t, n, key))
IN_CALL(C_SeedRandom)
SESSION_CALL(C_GenerateRandom, (CK_SESSION_HANDLE session, CK_BYTE_PTR out, CK_ULONG len),
             (session, out, len))
SESSION_CALL(C_GetFunctionStatus, (CK_SESSION_HANDLE session), (session))
SESSION_CALL(C_CancelFunction, (CK_SESSION_HANDLE session), (session))

CK_FUNCTION_LIST shim_function_list = {.version = {CRYPTOKI_VERSION_MAJOR, CRYPTOKI_VERSION_MINOR},
#define SHIM_ENTRY(n) .n = shim_##n,
                                       SHIM_FUNCS(SHIM_ENTRY)
#undef SHIM_ENTRY
};

/* The one exported symbol. Loads the real module (and opens the control and
 * counts files) on first use. */
__attribute__((visibility("default"))) CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR list)
{
    CK_RV rv = shim_load();
    if (rv != CKR_OK)
        return rv;
    if (!list)
        return CKR_ARGUMENTS_BAD;
    shim_call c;
    rv = shim_enter(&c, SHIM_FN_C_GetFunctionList, SHIM_K_GLOBAL, 0);
    if (rv == CKR_OK)
        *list = &shim_function_list;
    return shim_leave(&c, rv);
}
