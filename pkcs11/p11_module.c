/* p11_module.c - loading a PKCS#11 module and the small lookups every other
 * file of pkcs11/ needs (token by label, login, object search, attributes). */
#include "p11_int.h"
#include "util.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define P11_MAX_SLOTS 256
#define P11_MAX_ATTR 8192

static CK_RV module_initialize(CK_FUNCTION_LIST *fl)
{
    /* OS locking: the pool calls the module from many threads at once. */
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof(args));
    args.flags = CKF_OS_LOCKING_OK;
    return fl->C_Initialize(&args);
}

hsmca_code p11_module_load(const char *path, p11_module **out, hsmca_err *e)
{
    hsmca_code c;
    *out = NULL;
    if (!path || !*path)
        return hsmca_fail(e, HSMCA_EINVAL, "pkcs11 module: no path given");
    p11_module *m = calloc(1, sizeof(*m));
    if (!m)
        return hsmca_fail(e, HSMCA_ENOMEM, "pkcs11 module: out of memory");
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&m->use_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    m->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!m->dl) {
        const char *why = dlerror();
        c = hsmca_fail(e, HSMCA_EUNAVAIL, "pkcs11 module: dlopen %s failed: %s", path,
                       why ? why : "unknown");
        goto fail;
    }
    CK_C_GetFunctionList get;
    *(void **)&get = dlsym(m->dl, "C_GetFunctionList");
    if (!get) {
        c = hsmca_fail(e, HSMCA_EUNAVAIL, "pkcs11 module: %s has no C_GetFunctionList", path);
        goto fail;
    }
    CK_RV rv = get(&m->fl);
    if (rv != CKR_OK || !m->fl) {
        c = hsmca_fail(e, HSMCA_EUNAVAIL, "pkcs11 module: C_GetFunctionList: %s", p11_rv_name(rv));
        goto fail;
    }
    rv = module_initialize(m->fl);
    if (rv == CKR_OK) {
        m->owns_init = 1;
    } else if (rv != CKR_CRYPTOKI_ALREADY_INITIALIZED) {
        /* Already initialized means someone else in this process owns the
         * module: use it, but leave C_Finalize to them. */
        c = hsmca_fail(e, HSMCA_EUNAVAIL, "pkcs11 module: C_Initialize: %s", p11_rv_name(rv));
        goto fail;
    }
    *out = m;
    return HSMCA_OK;
fail:
    if (m->dl)
        dlclose(m->dl);
    pthread_rwlock_destroy(&m->use_lock);
    free(m);
    return c;
}

void p11_module_unload(p11_module *m)
{
    if (!m)
        return;
    if (m->owns_init && m->fl)
        m->fl->C_Finalize(NULL);
    if (m->dl)
        dlclose(m->dl);
    pthread_rwlock_destroy(&m->use_lock);
    free(m);
}

unsigned long p11_module_generation(p11_module *m)
{
    return atomic_load(&m->generation);
}

CK_RV p11_module_reinit(p11_module *m)
{
    pthread_rwlock_wrlock(&m->use_lock);
    m->fl->C_Finalize(NULL);
    atomic_fetch_add(&m->generation, 1);
    CK_RV rv = module_initialize(m->fl);
    if (rv == CKR_OK)
        m->owns_init = 1;
    else if (rv == CKR_CRYPTOKI_ALREADY_INITIALIZED)
        rv = CKR_OK;
    pthread_rwlock_unlock(&m->use_lock);
    return rv;
}

void p11_module_enter(p11_module *m)
{
    pthread_rwlock_rdlock(&m->use_lock);
}

void p11_module_leave(p11_module *m)
{
    pthread_rwlock_unlock(&m->use_lock);
}

int p11_pad_label(const char *label, unsigned char out[P11_LABEL_MAX])
{
    size_t n = label ? strlen(label) : 0;
    if (n == 0 || n > P11_LABEL_MAX)
        return -1;
    memset(out, ' ', P11_LABEL_MAX);
    memcpy(out, label, n);
    return 0;
}

hsmca_code p11_find_token(p11_module *m, const char *label, CK_SLOT_ID *slot, CK_RV *rv_out,
                          hsmca_err *e)
{
    unsigned char want[P11_LABEL_MAX];
    CK_SLOT_ID slots[P11_MAX_SLOTS];
    CK_ULONG n = P11_MAX_SLOTS;
    if (rv_out)
        *rv_out = CKR_OK;
    if (p11_pad_label(label, want) != 0)
        return hsmca_fail(e, HSMCA_EINVAL, "token label must be 1..%d bytes", P11_LABEL_MAX);
    CK_RV rv = m->fl->C_GetSlotList(CK_TRUE, slots, &n);
    if (rv_out)
        *rv_out = rv;
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EUNAVAIL, "C_GetSlotList", rv);
    int found = 0;
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (m->fl->C_GetTokenInfo(slots[i], &ti) != CKR_OK)
            continue;
        if (!(ti.flags & CKF_TOKEN_INITIALIZED) || memcmp(ti.label, want, sizeof(want)) != 0)
            continue;
        /* Two tokens with one label: refuse rather than pick one of them. */
        if (found++)
            return hsmca_fail(e, HSMCA_EINVAL, "token '%s': more than one token has this label",
                              label);
        *slot = slots[i];
    }
    if (!found)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "token '%s' not found", label);
    return HSMCA_OK;
}

int p11_token_exists(p11_module *m, const char *label)
{
    CK_SLOT_ID slot;
    hsmca_err e;
    return p11_find_token(m, label, &slot, NULL, &e) == HSMCA_OK ? 1 : 0;
}

hsmca_code p11_login_user(p11_module *m, CK_SESSION_HANDLE s, const char *pin, CK_RV *rv_out,
                          int *did_login, hsmca_err *e)
{
    if (did_login)
        *did_login = 0;
    CK_RV scratch;
    if (!rv_out)
        rv_out = &scratch;
    *rv_out = CKR_OK;
    size_t n = pin ? strnlen(pin, UTIL_PIN_MAX + 1) : 0;
    if (n == 0 || n > UTIL_PIN_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "C_Login: PIN must be 1..%d bytes", UTIL_PIN_MAX);
    CK_RV rv = m->fl->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, (CK_ULONG)n);
    *rv_out = rv == CKR_USER_ALREADY_LOGGED_IN ? CKR_OK : rv;
    if (rv == CKR_USER_ALREADY_LOGGED_IN)
        return HSMCA_OK; /* login state is per application, not per session */
    if (p11_rv_classify(rv) == P11_RV_PIN)
        return hsmca_fail(e, HSMCA_EAUTH, "C_Login: %s", p11_rv_name(rv));
    if (rv != CKR_OK)
        return p11_fail_rv(e, HSMCA_EINTERNAL, "C_Login", rv);
    if (did_login)
        *did_login = 1;
    return HSMCA_OK;
}

CK_RV p11_find_objects(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls, const char *label,
                       const uint8_t *id, size_t id_len, CK_OBJECT_HANDLE *out, CK_ULONG max,
                       CK_ULONG *n)
{
    CK_ATTRIBUTE t[3];
    CK_ULONG nt = 0;
    t[nt++] = (CK_ATTRIBUTE){CKA_CLASS, &cls, sizeof(cls)};
    if (label && *label)
        t[nt++] = (CK_ATTRIBUTE){CKA_LABEL, (void *)label, strlen(label)};
    if (id && id_len)
        t[nt++] = (CK_ATTRIBUTE){CKA_ID, (void *)id, id_len};
    *n = 0;
    CK_RV rv = m->fl->C_FindObjectsInit(s, t, nt);
    if (rv != CKR_OK)
        return rv;
    rv = m->fl->C_FindObjects(s, out, max, n);
    CK_RV rv2 = m->fl->C_FindObjectsFinal(s);
    return rv != CKR_OK ? rv : rv2;
}

CK_RV p11_get_attr(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE t,
                   uint8_t **val, size_t *len, size_t max)
{
    CK_ATTRIBUTE a = {t, NULL, 0};
    *val = NULL;
    *len = 0;
    if (max == 0 || max > P11_MAX_ATTR)
        max = P11_MAX_ATTR;
    CK_RV rv = m->fl->C_GetAttributeValue(s, o, &a, 1);
    if (rv != CKR_OK)
        return rv;
    if (a.ulValueLen == CK_UNAVAILABLE_INFORMATION || a.ulValueLen == 0 || a.ulValueLen > max)
        return CKR_ATTRIBUTE_VALUE_INVALID;
    a.pValue = malloc(a.ulValueLen);
    if (!a.pValue)
        return CKR_HOST_MEMORY;
    rv = m->fl->C_GetAttributeValue(s, o, &a, 1);
    if (rv != CKR_OK) {
        free(a.pValue);
        return rv;
    }
    *val = a.pValue;
    *len = a.ulValueLen;
    return CKR_OK;
}

CK_RV p11_get_bool(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE t,
                   int *b)
{
    CK_BBOOL v = CK_FALSE;
    CK_ATTRIBUTE a = {t, &v, sizeof(v)};
    CK_RV rv = m->fl->C_GetAttributeValue(s, o, &a, 1);
    if (rv == CKR_OK && a.ulValueLen != sizeof(v))
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    *b = v != CK_FALSE;
    return rv;
}

CK_RV p11_get_ulong(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_TYPE t,
                    CK_ULONG *v)
{
    *v = 0;
    CK_ATTRIBUTE a = {t, v, sizeof(*v)};
    CK_RV rv = m->fl->C_GetAttributeValue(s, o, &a, 1);
    if (rv == CKR_OK && a.ulValueLen != sizeof(*v))
        rv = CKR_ATTRIBUTE_VALUE_INVALID;
    return rv;
}
