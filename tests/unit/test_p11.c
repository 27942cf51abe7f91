/* test_p11.c - the PKCS#11 layer against a real SoftHSM2 token.
 *
 * Every test gets its own token directory and loads the module afresh
 * (SoftHSM reads SOFTHSM2_CONF at C_Initialize; p11_module_unload finalizes).
 * Keys with bad attributes and "behind the pool's back" events are made
 * through the module's own function list, as a second application would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pkcs11.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "p11.h"
#include "p11_tu.h"
#include "testutil.h"

static void open_fails(tu_p11_env *v, const char *uri, const char *pin, hsmca_code want,
                       const char *msg)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    p11_pool *p = (p11_pool *)1;
    hsmca_code c = p11_pool_open(v->m, uri, pin, 2, &p, &e);
    assert_null(p);
    if (c != want || !strstr(e.msg, msg))
        fail_msg("open %s: got %d '%s', want %d '%s'", uri, c, e.msg, want, msg);
}

/* ---- URIs ---- */

static void test_uri_good(void **state)
{
    (void)state;
    p11_uri u;
    hsmca_err e;
    assert_int_equal(
        p11_uri_parse("pkcs11:token=hsmca;object=ca%20key;id=%01%a2%FF;type=private", &u, &e),
        HSMCA_OK);
    assert_string_equal(u.token, "hsmca");
    assert_string_equal(u.object, "ca key");
    assert_int_equal(u.id_len, 3);
    assert_memory_equal(u.id, "\x01\xa2\xff", 3);
    assert_string_equal(u.type, "private");
    assert_int_equal(p11_uri_parse("pkcs11:object=a-b_c.d~e", &u, &e), HSMCA_OK);
    assert_string_equal(u.object, "a-b_c.d~e");
    assert_int_equal(u.token[0], '\0');
    assert_int_equal(u.id_len, 0);
    /* 32-byte token label and 64-byte id are the maxima. */
    char s[512] = "pkcs11:token=";
    strcat(s, "0123456789abcdef0123456789abcdef;id=");
    for (int i = 0; i < 64; i++)
        strcat(s, "%7f");
    assert_int_equal(p11_uri_parse(s, &u, &e), HSMCA_OK);
    assert_int_equal(strlen(u.token), 32);
    assert_int_equal(u.id_len, 64);
}

static void test_uri_bad(void **state)
{
    (void)state;
    static const struct {
        const char *uri, *msg;
    } bad[] = {
        {"", "does not start with 'pkcs11:'"},
        {"pkcs11:", "no attributes"},
        {"pkcs12:token=a", "does not start"},
        {"pkcs11:token=a;pin-value=1234", "PIN in the URI refused"},
        {"pkcs11:token=a;pin-source=file:/x", "PIN in the URI refused"},
        {"pkcs11:token=a;serial=42", "unsupported attribute 'serial'"},
        {"pkcs11:token=a?module-path=/x.so", "query or fragment part refused"},
        {"pkcs11:token=a#x", "query or fragment"},
        {"pkcs11:token=a;token=b", "token given twice"},
        {"pkcs11:token=", "token is empty"},
        {"pkcs11:token=a;;object=b", "empty attribute"},
        {"pkcs11:token=a;", "trailing ';'"},
        {"pkcs11:token", "without '='"},
        {"pkcs11:object=a%2", "bad character or escape"},
        {"pkcs11:object=a%zz", "bad character or escape"},
        {"pkcs11:object=a b", "bad character or escape"},
        {"pkcs11:object=a%00b", "NUL byte"},
        {"pkcs11:type=secret-key", "type must be private, public or cert"},
        {"pkcs11:token=0123456789abcdef0123456789abcdef0", "token longer than 32 bytes"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p11_uri u;
        hsmca_err e;
        hsmca_err_clear(&e);
        hsmca_code c = p11_uri_parse(bad[i].uri, &u, &e);
        if (c != HSMCA_EINVAL || !strstr(e.msg, bad[i].msg))
            fail_msg("'%s': got %d '%s', want '%s'", bad[i].uri, c, e.msg, bad[i].msg);
    }
    /* Overlong id and whole URI. */
    char s[2048] = "pkcs11:id=";
    for (int i = 0; i < 65; i++)
        strcat(s, "%01");
    p11_uri u;
    hsmca_err e;
    assert_int_equal(p11_uri_parse(s, &u, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "id longer than 64 bytes"));
    memset(s, 0, sizeof(s));
    strcpy(s, "pkcs11:object=");
    memset(s + strlen(s), 'a', 1100);
    assert_int_equal(p11_uri_parse(s, &u, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "longer than 1024 bytes"));
    assert_int_equal(p11_uri_parse(NULL, &u, &e), HSMCA_EINVAL);
}

static void test_rv_name(void **state)
{
    (void)state;
    assert_string_equal(p11_rv_name(CKR_OK), "CKR_OK");
    assert_string_equal(p11_rv_name(CKR_PIN_INCORRECT), "CKR_PIN_INCORRECT");
    assert_string_equal(p11_rv_name(CKR_SESSION_HANDLE_INVALID), "CKR_SESSION_HANDLE_INVALID");
    assert_string_equal(p11_rv_name(CKR_CRYPTOKI_NOT_INITIALIZED), "CKR_CRYPTOKI_NOT_INITIALIZED");
    assert_string_equal(p11_rv_name(0x80001234UL), "CKR_0x80001234");
}

/* ---- module, token, keys ---- */

static void test_module_load_bad(void **state)
{
    (void)state;
    p11_module *m = (p11_module *)1;
    hsmca_err e;
    assert_int_equal(p11_module_load("/nonexistent/libnone.so", &m, &e), HSMCA_EUNAVAIL);
    assert_null(m);
    assert_non_null(strstr(e.msg, "dlopen"));
    assert_int_equal(p11_module_load("libz.so.1", &m, &e), HSMCA_EUNAVAIL);
    assert_non_null(strstr(e.msg, "no C_GetFunctionList"));
    p11_module_unload(NULL);
}

static void test_token_and_keygen(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 0);
    hsmca_err e;
    assert_int_equal(p11_token_exists(v.m, TU_TOKEN), 0);
    assert_int_equal(p11_init_token(v.m, TU_TOKEN, TU_SO_PIN, TU_USER_PIN, &e), HSMCA_OK);
    assert_int_equal(p11_token_exists(v.m, TU_TOKEN), 1);
    assert_int_equal(p11_token_exists(v.m, "other"), 0);
    assert_int_equal(p11_init_token(v.m, TU_TOKEN, TU_SO_PIN, TU_USER_PIN, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "already exists"));
    assert_int_equal(
        p11_init_token(v.m, "0123456789abcdef0123456789abcdefX", TU_SO_PIN, TU_USER_PIN, &e),
        HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "label must be"));

    tu_p11_gen(&v, "ec-key", P11_KEY_EC_P256);
    tu_p11_gen(&v, "rsa-key", P11_KEY_RSA_2048);
    assert_int_equal(p11_generate_key(v.m, TU_TOKEN, TU_USER_PIN, "ec-key", P11_KEY_EC_P256, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "'ec-key' already exists"));
    assert_int_equal(p11_generate_key(v.m, TU_TOKEN, "wrong-pin", "k2", P11_KEY_EC_P256, &e),
                     HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "CKR_PIN_INCORRECT"));
    assert_int_equal(p11_generate_key(v.m, "no-such-token", TU_USER_PIN, "k2", P11_KEY_EC_P256, &e),
                     HSMCA_EUNAVAIL);
    assert_non_null(strstr(e.msg, "token 'no-such-token' not found"));

    /* The generated private key carries exactly the attributes we promise. */
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof(cls)}, {CKA_LABEL, "rsa-key", 7}};
    CK_OBJECT_HANDLE h;
    CK_ULONG n = 0;
    assert_int_equal(fl->C_FindObjectsInit(s, t, 2), CKR_OK);
    assert_int_equal(fl->C_FindObjects(s, &h, 1, &n), CKR_OK);
    fl->C_FindObjectsFinal(s);
    assert_int_equal(n, 1);
    CK_BBOOL tok = 0, priv = 0, sens = 0, extr = 1, sign = 0;
    uint8_t id[64];
    CK_ATTRIBUTE a[] = {{CKA_TOKEN, &tok, 1},      {CKA_PRIVATE, &priv, 1},
                        {CKA_SENSITIVE, &sens, 1}, {CKA_EXTRACTABLE, &extr, 1},
                        {CKA_SIGN, &sign, 1},      {CKA_ID, id, sizeof(id)}};
    assert_int_equal(fl->C_GetAttributeValue(s, h, a, 6), CKR_OK);
    assert_true(tok && priv && sens && !extr && sign);
    assert_int_equal(a[5].ulValueLen, 16);
    fl->C_CloseSession(s);
    tu_p11_down(&v);
}

/* ---- pool ---- */

static void pool_sign(p11_key_type t, const char *label, int want_id)
{
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, label, t);
    hsmca_err e;
    p11_pool *p = NULL;
    char uri[256];
    snprintf(uri, sizeof(uri), "pkcs11:token=%s;object=%s;type=private", TU_TOKEN, label);
    if (p11_pool_open(v.m, uri, TU_USER_PIN, 2, &p, &e) != HSMCA_OK)
        fail_msg("pool open: %s", e.msg);
    assert_int_equal(p11_pool_healthy(p), 1);
    EVP_PKEY *pk = p11_pool_public_key(p);
    assert_non_null(pk);
    if (t == P11_KEY_EC_P256) {
        assert_true(EVP_PKEY_is_a(pk, "EC"));
        assert_int_equal(EVP_PKEY_get_bits(pk), 256);
    } else {
        assert_true(EVP_PKEY_is_a(pk, "RSA"));
        assert_int_equal(EVP_PKEY_get_bits(pk), 2048);
    }
    for (int i = 0; i < 5; i++)
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    uint8_t d[32] = {0}, small[256];
    size_t len = sizeof(small);
    assert_int_equal(p11_pool_sign_digest(p, d, 32, small, &len, &e), HSMCA_EINVAL);
    char must[32]; /* the pool wants room for the largest signature (ipc_contract.h) */
    snprintf(must, sizeof(must), "%d", IPC_SIG_MAX);
    assert_non_null(strstr(e.msg, must));
    p11_pool_close(p);

    if (want_id) {
        /* The same key named by its CKA_ID alone. */
        char idhex[128] = "";
        CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
        CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
        CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
        CK_ATTRIBUTE ft[] = {{CKA_CLASS, &cls, sizeof(cls)},
                             {CKA_LABEL, (void *)label, strlen(label)}};
        CK_OBJECT_HANDLE h;
        CK_ULONG n = 0;
        uint8_t id[32];
        CK_ATTRIBUTE a = {CKA_ID, id, sizeof(id)};
        assert_int_equal(fl->C_FindObjectsInit(s, ft, 2), CKR_OK);
        assert_int_equal(fl->C_FindObjects(s, &h, 1, &n), CKR_OK);
        fl->C_FindObjectsFinal(s);
        assert_int_equal(fl->C_GetAttributeValue(s, h, &a, 1), CKR_OK);
        for (CK_ULONG i = 0; i < a.ulValueLen; i++)
            snprintf(idhex + 3 * i, 4, "%%%02x", id[i]);
        fl->C_CloseSession(s);
        snprintf(uri, sizeof(uri), "pkcs11:token=%s;id=%s", TU_TOKEN, idhex);
        if (p11_pool_open(v.m, uri, TU_USER_PIN, 1, &p, &e) != HSMCA_OK)
            fail_msg("pool open by id: %s", e.msg);
        EVP_PKEY *pk2 = p11_pool_public_key(p);
        assert_int_equal(EVP_PKEY_eq(pk, pk2), 1);
        EVP_PKEY_free(pk2);
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
        p11_pool_close(p);
    }
    EVP_PKEY_free(pk);
    tu_p11_down(&v);
}

static void test_pool_sign_ec(void **state)
{
    (void)state;
    pool_sign(P11_KEY_EC_P256, "ec-key", 1);
}

static void test_pool_sign_rsa(void **state)
{
    (void)state;
    pool_sign(P11_KEY_RSA_2048, "rsa-key", 0);
}

static void *signer_thread(void *arg)
{
    p11_pool *p = arg;
    long bad = 0;
    for (int i = 0; i < 40; i++) {
        hsmca_err e;
        bad += tu_pool_sign_check(p, &e) != HSMCA_OK;
    }
    return (void *)bad;
}

static void test_pool_concurrent(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "ec-key", P11_KEY_EC_P256);
    hsmca_err e;
    p11_pool *p = NULL;
    /* Fewer sessions than threads: callers must wait for a free session. */
    assert_int_equal(
        p11_pool_open(v.m, "pkcs11:token=" TU_TOKEN ";object=ec-key", TU_USER_PIN, 2, &p, &e),
        HSMCA_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, signer_thread, p), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        assert_int_equal((long)bad, 0);
    }
    assert_int_equal(p11_pool_healthy(p), 1);
    p11_pool_close(p);
    tu_p11_down(&v);
}

static void test_pool_refusals(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_raw_gen("extractable", CK_TRUE, CK_TRUE, CK_TRUE, "ec-p256");
    tu_p11_raw_gen("not-sensitive", CK_FALSE, CK_FALSE, CK_TRUE, "ec-p256");
    tu_p11_raw_gen("no-sign", CK_TRUE, CK_FALSE, CK_FALSE, "ec-p256");
    tu_p11_raw_gen("rsa-1024", CK_TRUE, CK_FALSE, CK_TRUE, "rsa-1024");
    tu_p11_raw_gen("twice", CK_TRUE, CK_FALSE, CK_TRUE, "ec-p256");
    tu_p11_raw_gen("twice", CK_TRUE, CK_FALSE, CK_TRUE, "ec-p256");
    tu_p11_gen(&v, "good", P11_KEY_EC_P256);

    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=extractable", TU_USER_PIN, HSMCA_EPERM,
               "key check (extractable): CKA_EXTRACTABLE is TRUE");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=not-sensitive", TU_USER_PIN, HSMCA_EPERM,
               "key check (not-sensitive): CKA_SENSITIVE is FALSE");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=no-sign", TU_USER_PIN, HSMCA_EPERM,
               "key check (no-sign): CKA_SIGN is FALSE");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=rsa-1024", TU_USER_PIN, HSMCA_EPERM,
               "RSA modulus is 1024 bits, below 2048");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=twice", TU_USER_PIN, HSMCA_EINVAL,
               "private key 'twice': more than one object matches");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=missing", TU_USER_PIN, HSMCA_ENOTFOUND,
               "private key 'missing' not found in token '" TU_TOKEN "'");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";id=%01%02", TU_USER_PIN, HSMCA_ENOTFOUND,
               "private key 'id=0102' not found");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=good;type=public", TU_USER_PIN, HSMCA_EINVAL,
               "type must be private");
    open_fails(&v, "pkcs11:object=good", TU_USER_PIN, HSMCA_EINVAL, "no token given");
    open_fails(&v, "pkcs11:token=" TU_TOKEN, TU_USER_PIN, HSMCA_EINVAL, "neither object nor id");
    open_fails(&v, "pkcs11:token=nope;object=good", TU_USER_PIN, HSMCA_EUNAVAIL,
               "token 'nope' not found");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=good;pin-value=" TU_USER_PIN, TU_USER_PIN,
               HSMCA_EINVAL, "PIN in the URI refused");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=good", "wrong-pin", HSMCA_EAUTH,
               "CKR_PIN_INCORRECT");
    open_fails(&v, "pkcs11:token=" TU_TOKEN ";object=good", "", HSMCA_EINVAL, "PIN must be");

    /* The good key still opens after all that. */
    hsmca_err e;
    p11_pool *p = NULL;
    assert_int_equal(
        p11_pool_open(v.m, "pkcs11:token=" TU_TOKEN ";object=good", TU_USER_PIN, 1, &p, &e),
        HSMCA_OK);
    p11_pool *p0 = NULL;
    assert_int_equal(
        p11_pool_open(v.m, "pkcs11:token=" TU_TOKEN ";object=good", TU_USER_PIN, 0, &p0, &e),
        HSMCA_EINVAL);
    assert_null(p0);
    assert_non_null(strstr(e.msg, "size must be"));
    p11_pool_close(p);
    tu_p11_down(&v);
}

/* ---- recovery ---- */

static void test_recover_closed_sessions(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "rsa-key", P11_KEY_RSA_2048);
    hsmca_err e;
    p11_pool *p = NULL;
    assert_int_equal(
        p11_pool_open(v.m, "pkcs11:token=" TU_TOKEN ";object=rsa-key", TU_USER_PIN, 3, &p, &e),
        HSMCA_OK);
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);

    /* Behind the pool's back: every session of this application on the slot
     * goes, and with them the login. */
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    assert_int_equal(fl->C_CloseAllSessions(tu_p11_raw_slot(fl)), CKR_OK);
    /* It costs no request: the dead session is evicted, the new one is not
     * logged in, so the pool reconnects (re-opens, logs in once, re-finds the
     * key) and the request is retried once (nothing was signed). */
    if (tu_pool_sign_check(p, &e) != HSMCA_OK)
        fail_msg("after recovery: %s", e.msg);
    assert_int_equal(p11_pool_healthy(p), 1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    p11_pool_close(p);
    tu_p11_down(&v);
}

/* An ordinary sign failure (the key was deleted behind our back): the caller
 * gets INTERNAL with the CKR name, the session is replaced rather than lost,
 * and the pool stays healthy (no reconnect storm for a non-transient error). */
static void test_sign_error_keeps_pool(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "ec-key", P11_KEY_EC_P256);
    hsmca_err e;
    p11_pool *p = NULL;
    assert_int_equal(
        p11_pool_open(v.m, "pkcs11:token=" TU_TOKEN ";object=ec-key", TU_USER_PIN, 1, &p, &e),
        HSMCA_OK);
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    CK_SESSION_HANDLE s = tu_p11_raw_login(fl);
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof(cls)}, {CKA_LABEL, "ec-key", 6}};
    CK_OBJECT_HANDLE h;
    CK_ULONG n = 0;
    assert_int_equal(fl->C_FindObjectsInit(s, t, 2), CKR_OK);
    assert_int_equal(fl->C_FindObjects(s, &h, 1, &n), CKR_OK);
    fl->C_FindObjectsFinal(s);
    assert_int_equal(n, 1);
    assert_int_equal(fl->C_DestroyObject(s, h), CKR_OK);
    fl->C_CloseSession(s);
    /* One session only: if the failed sign lost it, the second call would hang. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EINTERNAL);
        assert_non_null(strstr(e.msg, "_HANDLE_INVALID"));
        assert_int_equal(p11_pool_healthy(p), 1);
    }
    p11_pool_close(p);
    tu_p11_down(&v);
}

static void test_recover_finalized_with_backoff(void **state)
{
    (void)state;
    tu_p11_env v;
    tu_p11_up(&v, 1);
    tu_p11_gen(&v, "ec-key", P11_KEY_EC_P256);
    hsmca_err e;
    p11_pool *p = NULL;
    assert_int_equal(
        p11_pool_open(v.m, "pkcs11:token=" TU_TOKEN ";object=ec-key", TU_USER_PIN, 2, &p, &e),
        HSMCA_OK);
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);

    /* The module is finalized behind our back, and cannot come back yet
     * (its config is missing). */
    char conf[1024], missing[1024];
    snprintf(conf, sizeof(conf), "%s/softhsm2.conf", v.dir);
    snprintf(missing, sizeof(missing), "%s/missing.conf", v.dir);
    setenv("SOFTHSM2_CONF", missing, 1);
    CK_FUNCTION_LIST *fl = tu_p11_raw_fl();
    assert_int_equal(fl->C_Finalize(NULL), CKR_OK);

    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
    assert_non_null(strstr(e.msg, "CKR_CRYPTOKI_NOT_INITIALIZED"));
    assert_int_equal(p11_pool_healthy(p), 0);
    /* First reconnect attempt: C_Initialize fails. */
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
    assert_non_null(strstr(e.msg, "reconnect failed"));
    /* Within the second: no new attempt, fail fast. */
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
    assert_non_null(strstr(e.msg, "reconnect pending"));

    setenv("SOFTHSM2_CONF", conf, 1);
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL); /* still backing off */
    assert_non_null(strstr(e.msg, "reconnect pending"));
    usleep(1100 * 1000);
    if (tu_pool_sign_check(p, &e) != HSMCA_OK)
        fail_msg("after re-initialize: %s", e.msg);
    assert_int_equal(p11_pool_healthy(p), 1);
    p11_pool_close(p);
    tu_p11_down(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uri_good),
        cmocka_unit_test(test_uri_bad),
        cmocka_unit_test(test_rv_name),
        cmocka_unit_test(test_module_load_bad),
        cmocka_unit_test(test_token_and_keygen),
        cmocka_unit_test(test_pool_sign_ec),
        cmocka_unit_test(test_pool_sign_rsa),
        cmocka_unit_test(test_pool_concurrent),
        cmocka_unit_test(test_pool_refusals),
        cmocka_unit_test(test_recover_closed_sessions),
        cmocka_unit_test(test_sign_error_keeps_pool),
        cmocka_unit_test(test_recover_finalized_with_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
