/* p11_rv.c - names of CKR_* codes, and what each asks the pool to do. */
#include "p11_int.h"
#include <stdio.h>

#define RV(x)                                                                                      \
    {                                                                                              \
        x, #x                                                                                      \
    }
static const struct {
    CK_RV rv;
    const char *name;
} rv_names[] = {
    RV(CKR_OK),
    RV(CKR_CANCEL),
    RV(CKR_HOST_MEMORY),
    RV(CKR_SLOT_ID_INVALID),
    RV(CKR_GENERAL_ERROR),
    RV(CKR_FUNCTION_FAILED),
    RV(CKR_ARGUMENTS_BAD),
    RV(CKR_NO_EVENT),
    RV(CKR_NEED_TO_CREATE_THREADS),
    RV(CKR_CANT_LOCK),
    RV(CKR_ATTRIBUTE_READ_ONLY),
    RV(CKR_ATTRIBUTE_SENSITIVE),
    RV(CKR_ATTRIBUTE_TYPE_INVALID),
    RV(CKR_ATTRIBUTE_VALUE_INVALID),
    RV(CKR_ACTION_PROHIBITED),
    RV(CKR_DATA_INVALID),
    RV(CKR_DATA_LEN_RANGE),
    RV(CKR_DEVICE_ERROR),
    RV(CKR_DEVICE_MEMORY),
    RV(CKR_DEVICE_REMOVED),
    RV(CKR_ENCRYPTED_DATA_INVALID),
    RV(CKR_ENCRYPTED_DATA_LEN_RANGE),
    RV(CKR_FUNCTION_CANCELED),
    RV(CKR_FUNCTION_NOT_PARALLEL),
    RV(CKR_FUNCTION_NOT_SUPPORTED),
    RV(CKR_KEY_HANDLE_INVALID),
    RV(CKR_KEY_SIZE_RANGE),
    RV(CKR_KEY_TYPE_INCONSISTENT),
    RV(CKR_KEY_NOT_NEEDED),
    RV(CKR_KEY_CHANGED),
    RV(CKR_KEY_NEEDED),
    RV(CKR_KEY_INDIGESTIBLE),
    RV(CKR_KEY_FUNCTION_NOT_PERMITTED),
    RV(CKR_KEY_NOT_WRAPPABLE),
    RV(CKR_KEY_UNEXTRACTABLE),
    RV(CKR_MECHANISM_INVALID),
    RV(CKR_MECHANISM_PARAM_INVALID),
    RV(CKR_OBJECT_HANDLE_INVALID),
    RV(CKR_OPERATION_ACTIVE),
    RV(CKR_OPERATION_NOT_INITIALIZED),
    RV(CKR_PIN_INCORRECT),
    RV(CKR_PIN_INVALID),
    RV(CKR_PIN_LEN_RANGE),
    RV(CKR_PIN_EXPIRED),
    RV(CKR_PIN_LOCKED),
    RV(CKR_SESSION_CLOSED),
    RV(CKR_SESSION_COUNT),
    RV(CKR_SESSION_HANDLE_INVALID),
    RV(CKR_SESSION_PARALLEL_NOT_SUPPORTED),
    RV(CKR_SESSION_READ_ONLY),
    RV(CKR_SESSION_EXISTS),
    RV(CKR_SESSION_READ_ONLY_EXISTS),
    RV(CKR_SESSION_READ_WRITE_SO_EXISTS),
    RV(CKR_SIGNATURE_INVALID),
    RV(CKR_SIGNATURE_LEN_RANGE),
    RV(CKR_TEMPLATE_INCOMPLETE),
    RV(CKR_TEMPLATE_INCONSISTENT),
    RV(CKR_TOKEN_NOT_PRESENT),
    RV(CKR_TOKEN_NOT_RECOGNIZED),
    RV(CKR_TOKEN_WRITE_PROTECTED),
    RV(CKR_UNWRAPPING_KEY_SIZE_RANGE),
    RV(CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT),
    RV(CKR_USER_ALREADY_LOGGED_IN),
    RV(CKR_USER_NOT_LOGGED_IN),
    RV(CKR_USER_PIN_NOT_INITIALIZED),
    RV(CKR_USER_TYPE_INVALID),
    RV(CKR_USER_ANOTHER_ALREADY_LOGGED_IN),
    RV(CKR_USER_TOO_MANY_TYPES),
    RV(CKR_WRAPPED_KEY_INVALID),
    RV(CKR_WRAPPED_KEY_LEN_RANGE),
    RV(CKR_WRAPPING_KEY_HANDLE_INVALID),
    RV(CKR_WRAPPING_KEY_SIZE_RANGE),
    RV(CKR_WRAPPING_KEY_TYPE_INCONSISTENT),
    RV(CKR_RANDOM_SEED_NOT_SUPPORTED),
    RV(CKR_RANDOM_NO_RNG),
    RV(CKR_DOMAIN_PARAMS_INVALID),
    RV(CKR_CURVE_NOT_SUPPORTED),
    RV(CKR_BUFFER_TOO_SMALL),
    RV(CKR_SAVED_STATE_INVALID),
    RV(CKR_INFORMATION_SENSITIVE),
    RV(CKR_STATE_UNSAVEABLE),
    RV(CKR_CRYPTOKI_NOT_INITIALIZED),
    RV(CKR_CRYPTOKI_ALREADY_INITIALIZED),
    RV(CKR_MUTEX_BAD),
    RV(CKR_MUTEX_NOT_LOCKED),
    RV(CKR_NEW_PIN_MODE),
    RV(CKR_NEXT_OTP),
    RV(CKR_EXCEEDED_MAX_ITERATIONS),
    RV(CKR_FIPS_SELF_TEST_FAILED),
    RV(CKR_LIBRARY_LOAD_FAILED),
    RV(CKR_PIN_TOO_WEAK),
    RV(CKR_PUBLIC_KEY_INVALID),
    RV(CKR_FUNCTION_REJECTED),
};

const char *p11_rv_name(unsigned long rv)
{
    /* Unknown codes (vendor-defined ones) get a per-thread buffer so the
     * returned pointer stays valid while the caller formats its message. */
    static _Thread_local char unknown[32];
    for (size_t i = 0; i < sizeof(rv_names) / sizeof(rv_names[0]); i++)
        if (rv_names[i].rv == rv)
            return rv_names[i].name;
    snprintf(unknown, sizeof(unknown), "CKR_0x%lx", rv);
    return unknown;
}

p11_rv_class p11_rv_classify(CK_RV rv)
{
    switch (rv) {
    case CKR_OK: return P11_RV_OK;
    case CKR_SESSION_HANDLE_INVALID:
    case CKR_SESSION_CLOSED: return P11_RV_SESSION;
    case CKR_USER_NOT_LOGGED_IN: return P11_RV_LOGIN;
    case CKR_DEVICE_REMOVED:
    case CKR_TOKEN_NOT_PRESENT:
    case CKR_DEVICE_ERROR:
    case CKR_CRYPTOKI_NOT_INITIALIZED: return P11_RV_DEVICE;
    /* A hardware token locks, and some zeroize, after a few wrong PINs. */
    case CKR_PIN_INCORRECT:
    case CKR_PIN_LOCKED:
    case CKR_PIN_EXPIRED:
    case CKR_PIN_LEN_RANGE: return P11_RV_PIN;
    default: return P11_RV_OTHER;
    }
}

p11_rv_class p11_rv_classify_op(CK_RV rv, int key_has_signed)
{
    /* A client library's answer when its daemon or link went away: a device fault once
     * the key has signed in this process; before that, a setup the module refuses, which
     * no reconnect cures. Never a PIN refusal: those have codes of their own.
     * tpm2-pkcs11 answers CKR_GENERAL_ERROR from C_Sign once tpm2-abrmd has gone, and
     * from C_Initialize until it is back (integration.test_tpm). p11-kit-client.so
     * answers CKR_DEVICE_ERROR from C_Sign once its server has gone (a device fault
     * whatever has signed), and while the server is away it initializes without any
     * slot, so the reconnect finds no token and is tried again (test_p11kit). */
    if (key_has_signed && p11_rv_module_fault(rv))
        return P11_RV_DEVICE;
    return p11_rv_classify(rv);
}

int p11_rv_module_fault(CK_RV rv)
{
    return rv == CKR_GENERAL_ERROR || rv == CKR_FUNCTION_FAILED;
}

hsmca_code p11_fail_rv(hsmca_err *e, hsmca_code code, const char *what, CK_RV rv)
{
    p11_rv_class cls = p11_rv_classify(rv);
    if (cls == P11_RV_SESSION || cls == P11_RV_LOGIN || cls == P11_RV_DEVICE)
        code = HSMCA_EUNAVAIL;
    return hsmca_fail(e, code, "%s: %s", what, p11_rv_name(rv));
}
