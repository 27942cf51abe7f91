/* p11_tu.c - see p11_tu.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "p11_tu.h"
#include "testutil.h"

void tu_p11_up(tu_p11_env *v, int with_token)
{
    char path[1024];
    v->dir = tu_mkdtemp("p11");
    snprintf(path, sizeof(path), "%s/tokens", v->dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/softhsm2.conf", v->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\n",
            v->dir);
    fclose(f);
    setenv("SOFTHSM2_CONF", path, 1);
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(p11_module_load(TU_SOFTHSM, &v->m, &e), HSMCA_OK);
    if (with_token) {
        hsmca_code c = p11_init_token(v->m, TU_TOKEN, TU_SO_PIN, TU_USER_PIN, &e);
        if (c != HSMCA_OK)
            fail_msg("init token: %s", e.msg);
    }
}

void tu_p11_down(tu_p11_env *v)
{
    p11_module_unload(v->m);
    tu_system("rm -rf '%s'", v->dir);
    free(v->dir);
}

void tu_p11_gen(tu_p11_env *v, const char *label, p11_key_type t)
{
    hsmca_err e;
    if (p11_generate_key(v->m, TU_TOKEN, TU_USER_PIN, label, t, &e) != HSMCA_OK)
        fail_msg("generate %s: %s", label, e.msg);
}

CK_FUNCTION_LIST *tu_p11_raw_fl(void)
{
    void *dl = dlopen(TU_SOFTHSM, RTLD_NOW);
    assert_non_null(dl);
    CK_C_GetFunctionList get;
    *(void **)&get = dlsym(dl, "C_GetFunctionList");
    assert_non_null(get);
    CK_FUNCTION_LIST *fl = NULL;
    assert_int_equal(get(&fl), CKR_OK);
    return fl; /* the handle stays open: the module must outlive the test */
}

CK_SLOT_ID tu_p11_raw_slot(CK_FUNCTION_LIST *fl)
{
    CK_SLOT_ID slots[16];
    CK_ULONG n = 16;
    assert_int_equal(fl->C_GetSlotList(CK_TRUE, slots, &n), CKR_OK);
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (fl->C_GetTokenInfo(slots[i], &ti) == CKR_OK &&
            memcmp(ti.label, TU_TOKEN, strlen(TU_TOKEN)) == 0 && ti.label[strlen(TU_TOKEN)] == ' ')
            return slots[i];
    }
    fail_msg("token not found");
    return 0;
}

CK_SESSION_HANDLE tu_p11_raw_login(CK_FUNCTION_LIST *fl)
{
    CK_SESSION_HANDLE s;
    assert_int_equal(
        fl->C_OpenSession(tu_p11_raw_slot(fl), CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s),
        CKR_OK);
    CK_RV rv = fl->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)TU_USER_PIN, strlen(TU_USER_PIN));
    assert_true(rv == CKR_OK || rv == CKR_USER_ALREADY_LOGGED_IN);
    return s;
}

CK_OBJECT_HANDLE tu_p11_raw_find(CK_FUNCTION_LIST *fl, CK_SESSION_HANDLE s, CK_OBJECT_CLASS cls,
                                 const char *label)
{
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof(cls)}, {CKA_LABEL, (void *)label, strlen(label)}};
    CK_OBJECT_HANDLE h = CK_INVALID_HANDLE;
    CK_ULONG n = 0;
    assert_int_equal(fl->C_FindObjectsInit(s, t, 2), CKR_OK);
    assert_int_equal(fl->C_FindObjects(s, &h, 1, &n), CKR_OK);
    fl->C_FindObjectsFinal(s);
    if (n != 1)
        fail_msg("no object labelled '%s'", label);
    return h;
}

void tu_p11_raw_gen(const char *label, CK_BBOOL sensitive, CK_BBOOL extractable, CK_BBOOL sign,
                    const char *kind)
{
    static const uint8_t p256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
    static const uint8_t p384[] = {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22};
    static const uint8_t p224[] = {0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x21};
    static const uint8_t ed25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};
    static const uint8_t ed448[] = {0x06, 0x03, 0x2b, 0x65, 0x71};
    static const uint8_t f4[] = {1, 0, 1};
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
    CK_BBOOL yes = CK_TRUE;
    CK_ULONG llen = strlen(label), rsa_bits = 0;
    uint8_t id[4];
    RAND_bytes(id, sizeof(id));
    CK_ATTRIBUTE pub[5] = {
        {CKA_TOKEN, &yes, 1}, {CKA_LABEL, (void *)label, llen}, {CKA_ID, id, sizeof(id)}};
    CK_ULONG np = 3;
    CK_MECHANISM mech = {CKM_EC_KEY_PAIR_GEN, NULL, 0};
    if (!strcmp(kind, "ec-p256")) {
        pub[np++] = (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)p256, sizeof(p256)};
    } else if (!strcmp(kind, "ec-p384")) {
        pub[np++] = (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)p384, sizeof(p384)};
    } else if (!strcmp(kind, "ec-p224")) {
        pub[np++] = (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)p224, sizeof(p224)};
    } else if (!strcmp(kind, "ed25519") || !strcmp(kind, "ed448")) {
        mech.mechanism = CKM_EC_EDWARDS_KEY_PAIR_GEN;
        pub[np++] = kind[2] == '2' ? (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)ed25519, sizeof(ed25519)}
                                   : (CK_ATTRIBUTE){CKA_EC_PARAMS, (void *)ed448, sizeof(ed448)};
    } else if (sscanf(kind, "rsa-%lu", &rsa_bits) == 1) {
        mech.mechanism = CKM_RSA_PKCS_KEY_PAIR_GEN;
        pub[np++] = (CK_ATTRIBUTE){CKA_MODULUS_BITS, &rsa_bits, sizeof(rsa_bits)};
        pub[np++] = (CK_ATTRIBUTE){CKA_PUBLIC_EXPONENT, (void *)f4, sizeof(f4)};
    } else {
        fail_msg("raw_gen: unknown kind '%s'", kind);
    }
    CK_ATTRIBUTE priv[] = {
        {CKA_TOKEN, &yes, 1},           {CKA_PRIVATE, &yes, 1},
        {CKA_SENSITIVE, &sensitive, 1}, {CKA_EXTRACTABLE, &extractable, 1},
        {CKA_SIGN, &sign, 1},           {CKA_LABEL, (void *)label, llen},
        {CKA_ID, id, sizeof(id)},
    };
    CK_OBJECT_HANDLE hp, hk;
    assert_int_equal(fl->C_GenerateKeyPair(s, &mech, pub, np, priv, 7, &hp, &hk), CKR_OK);
    fl->C_CloseSession(s);
}
