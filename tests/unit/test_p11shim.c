/* test_p11shim.c - the fault-injecting PKCS#11 module (tests/p11shim/) in
 * front of a real SoftHSM2 token made by `hsmca dev init`.
 *
 * One control file and one counts file serve the whole program: the shim
 * opens them once per process (as it must inside the sandboxed signer), and
 * main() keeps it loaded until exit, so counts are cumulative and tests
 * compare before and after. Each test starts from an empty control file and
 * initializes and finalizes the module itself, either raw (exact CKR codes)
 * or through the project's session pool. Timings are lower bounds only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pkcs11.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "p11.h"
#include "p11shim_tu.h"
#include "testutil.h"

#define SOFTHSM "/usr/lib/softhsm/libsofthsm2.so"
#define KEY_URI "pkcs11:token=hsmca;object=ca-key;type=private"

/* ---- through the project's pool ---- */

static p11_pool *pool_up(p11_module **m)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    if (p11_module_load(P11SHIM_PATH, m, &e) != HSMCA_OK)
        fail_msg("load shim: %s", e.msg);
    p11_pool *p = NULL;
    if (p11_pool_open(*m, KEY_URI, st.pin, 2, &p, &e) != HSMCA_OK)
        fail_msg("pool open through the shim: %s", e.msg);
    return p;
}

static void pool_down(p11_module *m, p11_pool *p)
{
    st_ctl_write("");
    p11_pool_close(p);
    p11_module_unload(m);
}

/* ---- cases ---- */

static void test_passthrough_pool(void **state)
{
    (void)state;
    st_counts login0 = st_count_of("C_Login");
    p11_module *m;
    p11_pool *p = pool_up(&m);
    assert_int_equal(st_delta("C_Login", login0).calls, 1);
    st_counts sign0 = st_count_of("C_Sign");
    hsmca_err e;
    for (int i = 0; i < 5; i++)
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    st_counts d = st_delta("C_Sign", sign0);
    assert_int_equal(d.calls, 5);
    assert_int_equal(d.failed, 0);
    assert_true(st_count_of("C_Initialize").calls >= 1);
    pool_down(m, p);
}

static void test_fail_once_raw(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    st_counts base = st_count_of("C_Sign"), init0 = st_count_of("C_SignInit");
    st_ctl_write("fail C_Sign CKR_SESSION_HANDLE_INVALID once\n");
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_SESSION_HANDLE_INVALID);
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_OK);
    /* Re-reading the same bytes (after the racy window, and after a touch)
     * does not re-arm it. */
    usleep(100 * 1000);
    assert_int_equal(utimensat(AT_FDCWD, st.ctl, NULL, 0), 0);
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_OK);
    st_counts d = st_delta("C_Sign", base);
    assert_int_equal(d.calls, 3);
    assert_int_equal(d.failed, 1);
    assert_int_equal(st_delta("C_SignInit", init0).failed, 0);
    /* Changed bytes re-arm it. */
    st_ctl_write("fail C_Sign CKR_SESSION_HANDLE_INVALID once # again\n");
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_SESSION_HANDLE_INVALID);
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_OK);
    assert_int_equal(st_delta("C_Sign", base).failed, 2);
    st_raw_down();
}

/* The pool sees exactly one failed C_Sign. Whether it reports it (today:
 * UNAVAILABLE naming the code) or retries on another session (docs/ARCHITECTURE.md §6),
 * a signature comes within two tries and nothing fails afterwards. */
/* docs/ARCHITECTURE.md §6: one dead session costs no request. The session is evicted and
 * the request retried once on another; nothing was signed by the failed call. */
static void test_fail_once_pool(void **state)
{
    (void)state;
    p11_module *m;
    p11_pool *p = pool_up(&m);
    st_counts base = st_count_of("C_Sign"), login0 = st_count_of("C_Login");
    st_ctl_write("fail C_Sign CKR_SESSION_HANDLE_INVALID once\n");
    hsmca_err e;
    if (tu_pool_sign_check(p, &e) != HSMCA_OK)
        fail_msg("one dead session failed the request: %s", e.msg);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    st_counts d = st_delta("C_Sign", base);
    assert_int_equal(d.failed, 1);
    assert_int_equal(d.calls, 7); /* the retry, then five more */
    assert_int_equal(st_delta("C_Login", login0).calls, 0);
    assert_int_equal(p11_pool_get_state(p), P11_POOL_READY);
    pool_down(m, p);
}

/* A lost login is restored with one C_Login and the request retried once. */
static void test_login_lost_relogs_once(void **state)
{
    (void)state;
    p11_module *m;
    p11_pool *p = pool_up(&m);
    st_counts login0 = st_count_of("C_Login");
    st_ctl_write("fail C_Sign CKR_USER_NOT_LOGGED_IN once\n");
    hsmca_err e;
    if (tu_pool_sign_check(p, &e) != HSMCA_OK)
        fail_msg("a lost login failed the request: %s", e.msg);
    assert_int_equal(st_delta("C_Login", login0).calls, 1);
    assert_int_equal(p11_pool_get_state(p), P11_POOL_READY);
    pool_down(m, p);
}

/* Sessions dropped while idle (YubiHSM): only C_Finalize/C_Initialize brings
 * the token back, and the pool does that within the request. */
static void test_idle_drop_pool(void **state)
{
    (void)state;
    p11_module *m;
    p11_pool *p = pool_up(&m);
    hsmca_err e;
    st_ctl_write("idle-drop 1\n");
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    usleep(1300 * 1000);
    st_counts init0 = st_count_of("C_Initialize");
    if (tu_pool_sign_check(p, &e) != HSMCA_OK)
        fail_msg("idle-dropped sessions failed the request: %s", e.msg);
    assert_true(st_delta("C_Initialize", init0).calls >= 1);
    pool_down(m, p);
}

/* A wrong PIN at re-login (the token came back re-provisioned) is never tried
 * again: one C_Login, then every call fails fast with UNAVAILABLE naming it. */
static void test_pin_refused_at_relogin(void **state)
{
    (void)state;
    p11_module *m;
    p11_pool *p = pool_up(&m);
    hsmca_err e;
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    st_counts login0 = st_count_of("C_Login");
    st_ctl_write("fail C_Sign CKR_DEVICE_ERROR once\nfail C_Login CKR_PIN_INCORRECT always\n");
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL); /* the device error itself */
    int calls = 0, named = 0;
    for (double end = st_mono() + 3.5; st_mono() < end; calls++) { /* 3 backoff periods */
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
        named += strstr(e.msg, "refused the PIN (CKR_PIN_INCORRECT)") != NULL;
        usleep(50 * 1000);
    }
    print_message("pin refused: %d calls in 3.5 s, %d named the PIN, C_Login tried %llu time(s)\n",
                  calls, named, st_delta("C_Login", login0).calls);
    assert_int_equal(st_delta("C_Login", login0).calls, 1);
    assert_true(named > 0);
    assert_int_equal(p11_pool_get_state(p), P11_POOL_PIN_REFUSED);
    pool_down(m, p);
}

/* ---- the audit key (p11_signkey): the pool's recovery, on a key of its own ---- */

#define AUDIT_URI "pkcs11:token=hsmca;object=audit-key;type=private"

static p11_signkey *audit_up(p11_module **m)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    if (p11_module_load(P11SHIM_PATH, m, &e) != HSMCA_OK)
        fail_msg("load shim: %s", e.msg);
    p11_signkey *k = NULL;
    if (p11_signkey_open(*m, AUDIT_URI, st.pin, &k, &e) != HSMCA_OK)
        fail_msg("audit key through the shim: %s", e.msg);
    return k;
}

static hsmca_code audit_sign(p11_signkey *k, hsmca_err *e)
{
    uint8_t msg[77], sig[P11_ED25519_SIG_LEN];
    RAND_bytes(msg, sizeof(msg));
    hsmca_err_clear(e);
    return p11_signkey_sign_message(k, msg, sizeof(msg), sig, &(size_t){sizeof(sig)}, e);
}

/* A dead session costs no signature: replaced, and the message signed once more. */
static void test_audit_key_dead_session(void **state)
{
    (void)state;
    p11_module *m;
    p11_signkey *k = audit_up(&m);
    st_counts base = st_count_of("C_Sign"), login0 = st_count_of("C_Login");
    st_ctl_write("fail C_Sign CKR_SESSION_HANDLE_INVALID once\n");
    hsmca_err e;
    if (audit_sign(k, &e) != HSMCA_OK)
        fail_msg("one dead session failed the signature: %s", e.msg);
    assert_int_equal(audit_sign(k, &e), HSMCA_OK);
    st_counts d = st_delta("C_Sign", base);
    assert_int_equal(d.failed, 1);
    assert_int_equal(d.calls, 3); /* the retry, then one more */
    assert_int_equal(st_delta("C_Login", login0).calls, 0);
    assert_int_equal(p11_signkey_get_state(k), P11_POOL_READY);
    st_ctl_write("");
    p11_signkey_close(k);
    p11_module_unload(m);
}

/* A refused PIN at re-login is final for the audit key too: one C_Login. */
static void test_audit_key_pin_refused(void **state)
{
    (void)state;
    p11_module *m;
    p11_signkey *k = audit_up(&m);
    hsmca_err e;
    st_counts login0 = st_count_of("C_Login");
    st_ctl_write("fail C_Sign CKR_USER_NOT_LOGGED_IN once\nfail C_Login CKR_PIN_INCORRECT always\n");
    assert_int_equal(audit_sign(k, &e), HSMCA_EUNAVAIL);
    for (int i = 0; i < 5; i++) {
        usleep(300 * 1000); /* past the pool's backoff: still nothing tried */
        assert_int_equal(audit_sign(k, &e), HSMCA_EUNAVAIL);
        assert_non_null(strstr(e.msg, "refused the PIN (CKR_PIN_INCORRECT)"));
    }
    assert_int_equal(st_delta("C_Login", login0).calls, 1);
    assert_int_equal(p11_signkey_get_state(k), P11_POOL_PIN_REFUSED);
    st_ctl_write("");
    p11_signkey_close(k);
    p11_module_unload(m);
}

static void test_fail_every_3(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    st_counts base = st_count_of("C_Sign");
    st_ctl_write("fail C_Sign CKR_DEVICE_ERROR every 3\n");
    for (int i = 1; i <= 9; i++)
        assert_int_equal(st_raw_sign_fresh(r.slot, r.key), i % 3 ? CKR_OK : CKR_DEVICE_ERROR);
    st_counts d = st_delta("C_Sign", base);
    assert_int_equal(d.calls, 9);
    assert_int_equal(d.failed, 3);
    st_raw_down();
}

static void test_delay(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    CK_SESSION_HANDLE s = st_raw_open(r.slot);
    st_ctl_write("delay C_Sign 300\n");
    double t0 = st_mono();
    assert_int_equal(st_raw_sign(s, r.key), CKR_OK);
    assert_int_equal(st_raw_sign(s, r.key), CKR_OK);
    double took = st_mono() - t0;
    if (took < 0.6)
        fail_msg("two delayed signs took %.3f s, want >= 0.6", took);
    st_raw_down();
}

typedef struct {
    st_raw_env *r;
    int tokeninfo; /* call C_GetTokenInfo instead of signing */
    CK_RV rv;
    atomic_int done;
} held_call;

static void *held_thread(void *arg)
{
    held_call *h = arg;
    if (h->tokeninfo) {
        CK_TOKEN_INFO ti;
        h->rv = st.fl->C_GetTokenInfo(h->r->slot, &ti);
    } else {
        h->rv = st_raw_sign_fresh(h->r->slot, h->r->key);
    }
    atomic_store(&h->done, 1);
    return NULL;
}

/* Waits (up to 10 s) until the counts file reports n held calls. */
static void wait_hanging(unsigned n)
{
    char buf[8192], want[32];
    snprintf(want, sizeof(want), "hanging %u\n", n);
    for (int i = 0; i < 2000; i++) {
        st_counts_text(buf, sizeof(buf));
        if (strstr(buf, want))
            return;
        usleep(5000);
    }
    fail_msg("no '%s' in counts", want);
}

static void join_within(pthread_t th, held_call *h, double s)
{
    double end = st_mono() + s;
    while (!atomic_load(&h->done) && st_mono() < end)
        usleep(5000);
    if (!atomic_load(&h->done))
        fail_msg("call still blocked after %.0f s", s);
    pthread_join(th, NULL);
}

static void test_hang_release(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    st_ctl_write("hang C_Sign once\n");
    held_call h = {.r = &r};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, held_thread, &h), 0);
    wait_hanging(1);
    /* Other threads' calls go on, even to the same function. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_OK);
    usleep(50 * 1000);
    assert_int_equal(atomic_load(&h.done), 0);
    /* The rewrite re-arms the rule, but "release" lets every call through. */
    st_ctl_write("hang C_Sign once\nrelease\n");
    join_within(th, &h, 10);
    assert_int_equal(h.rv, CKR_OK);
    held_call h2 = {.r = &r};
    assert_int_equal(pthread_create(&th, NULL, held_thread, &h2), 0);
    join_within(th, &h2, 10);
    assert_int_equal(h2.rv, CKR_OK);
    wait_hanging(0);
    st_raw_down();
}

static void test_hang_rule_removed(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    st_ctl_write("hang C_GetTokenInfo always\n");
    held_call h = {.r = &r, .tokeninfo = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, held_thread, &h), 0);
    wait_hanging(1);
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_OK);
    assert_int_equal(atomic_load(&h.done), 0);
    st_ctl_write("# no more hang\n");
    join_within(th, &h, 10);
    assert_int_equal(h.rv, CKR_OK);
    st_raw_down();
}

static void test_remove_raw(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    CK_SESSION_HANDLE s = st_raw_open(r.slot);
    assert_int_equal(st_raw_sign(s, r.key), CKR_OK);

    st_ctl_write("remove\n");
    CK_SLOT_ID slots[16];
    CK_ULONG n = 16;
    assert_int_equal(st.fl->C_GetSlotList(CK_TRUE, slots, &n), CKR_OK);
    assert_int_equal(n, 0);
    n = 16;
    assert_int_equal(st.fl->C_GetSlotList(CK_FALSE, slots, &n), CKR_OK);
    assert_true(n >= 1);
    CK_SLOT_INFO si;
    assert_int_equal(st.fl->C_GetSlotInfo(r.slot, &si), CKR_OK);
    assert_false(si.flags & CKF_TOKEN_PRESENT);
    CK_TOKEN_INFO ti;
    assert_int_equal(st.fl->C_GetTokenInfo(r.slot, &ti), CKR_TOKEN_NOT_PRESENT);
    CK_SESSION_HANDLE s2;
    assert_int_equal(st.fl->C_OpenSession(r.slot, CKF_SERIAL_SESSION, NULL, NULL, &s2),
                     CKR_TOKEN_NOT_PRESENT);
    assert_int_equal(st_raw_sign(s, r.key), CKR_DEVICE_REMOVED);

    /* Reinserted: the old sessions stay dead until closed and reopened. */
    st_ctl_write("# reinserted\n");
    assert_int_equal(st_raw_sign(s, r.key), CKR_SESSION_HANDLE_INVALID);
    assert_int_equal(st_raw_sign(r.anchor, r.key), CKR_SESSION_HANDLE_INVALID);
    assert_int_equal(st_raw_slot(), r.slot);
    assert_int_equal(st.fl->C_CloseSession(s), CKR_SESSION_HANDLE_INVALID);
    assert_int_equal(st.fl->C_CloseSession(r.anchor), CKR_SESSION_HANDLE_INVALID);
    /* Closing them underneath ended the login, as a real removal does. */
    s = st_raw_open(r.slot);
    assert_int_equal(st_raw_login(s), CKR_OK);
    assert_int_equal(st_raw_sign(s, st_raw_key(s)), CKR_OK);
    st_raw_down();
}

/* The pool fails while the token is out and signs again once it is back,
 * without being reopened (docs/ARCHITECTURE.md §6: it recovers with no restart). */
static void test_remove_pool_recovers(void **state)
{
    (void)state;
    p11_module *m;
    p11_pool *p = pool_up(&m);
    hsmca_err e;
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
    st_ctl_write("remove\n");
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
    st_ctl_write("# reinserted\n");
    hsmca_code c = HSMCA_EUNAVAIL;
    for (double end = st_mono() + 10; c != HSMCA_OK && st_mono() < end;) {
        c = tu_pool_sign_check(p, &e);
        if (c != HSMCA_OK)
            usleep(100 * 1000);
    }
    if (c != HSMCA_OK)
        fail_msg("pool did not recover after reinsertion: %s", e.msg);
    assert_int_equal(p11_pool_healthy(p), 1);
    pool_down(m, p);
}

/* What a client library answers when its daemon went away (CKR_GENERAL_ERROR,
 * CKR_FUNCTION_FAILED) is a device fault once the key has signed (its open signed
 * once): UNAVAILABLE, the module re-initialized and logged in once, and signing again
 * without a new pool. */
static void test_module_fault_after_signing_reconnects(void **state)
{
    (void)state;
    static const char *const rules[] = {"fail C_Sign CKR_GENERAL_ERROR once\n",
                                        "fail C_Sign CKR_FUNCTION_FAILED once\n"};
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        p11_module *m;
        p11_pool *p = pool_up(&m);
        hsmca_err e;
        st_counts init0 = st_count_of("C_Initialize"), fin0 = st_count_of("C_Finalize");
        st_counts login0 = st_count_of("C_Login");
        st_ctl_write(rules[i]);
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
        assert_non_null(strstr(e.msg, i ? "CKR_FUNCTION_FAILED" : "CKR_GENERAL_ERROR"));
        assert_int_equal(p11_pool_get_state(p), P11_POOL_RECONNECTING);
        hsmca_code c = HSMCA_EUNAVAIL;
        for (double end = st_mono() + 10; c != HSMCA_OK && st_mono() < end;) {
            c = tu_pool_sign_check(p, &e);
            if (c != HSMCA_OK) {
                assert_int_equal(c, HSMCA_EUNAVAIL); /* never a refusal of the request */
                usleep(100 * 1000);
            }
        }
        if (c != HSMCA_OK)
            fail_msg("pool did not recover from %s: %s", rules[i], e.msg);
        assert_int_equal(p11_pool_get_state(p), P11_POOL_READY);
        assert_true(st_delta("C_Finalize", fin0).calls >= 1);
        assert_true(st_delta("C_Initialize", init0).calls >= 1);
        assert_int_equal(st_delta("C_Login", login0).calls, 1);
        pool_down(m, p);
    }
}

/* Until sign() answers HSMCA_OK (within 10 s), every answer meanwhile UNAVAILABLE. */
#define SIGNS_AGAIN(sign, what)                                                                    \
    do {                                                                                           \
        hsmca_code c_ = HSMCA_EUNAVAIL;                                                            \
        for (double end_ = st_mono() + 10; c_ != HSMCA_OK && st_mono() < end_;) {                  \
            if ((c_ = (sign)) != HSMCA_OK) {                                                       \
                if (c_ != HSMCA_EUNAVAIL)                                                          \
                    fail_msg("%s: %s", what, e.msg);                                               \
                usleep(100 * 1000);                                                                \
            }                                                                                      \
        }                                                                                          \
        if (c_ != HSMCA_OK)                                                                        \
            fail_msg("%s: no signature within 10 s: %s", what, e.msg);                             \
    } while (0)

/* Two keys' pools on one module: the one that re-initializes the module (its daemon
 * went away) ends the other's sessions and object handles too. The other reconnects
 * and signs with its own key, never through a handle that now names another object. */
static void test_module_reinit_by_other_pool(void **state)
{
    (void)state;
    p11_module *m;
    p11_pool *p = pool_up(&m);
    p11_signkey *k = NULL;
    hsmca_err e;
    if (p11_signkey_open(m, AUDIT_URI, st.pin, &k, &e) != HSMCA_OK)
        fail_msg("audit key through the shim: %s", e.msg);
    st_counts fin0 = st_count_of("C_Finalize");
    st_ctl_write("fail C_Sign CKR_GENERAL_ERROR once\n");
    assert_int_equal(audit_sign(k, &e), HSMCA_EUNAVAIL);
    SIGNS_AGAIN(audit_sign(k, &e), "the audit key after its re-init");
    assert_true(st_delta("C_Finalize", fin0).calls >= 1);
    SIGNS_AGAIN(tu_pool_sign_check(p, &e), "the CA key after the audit key's re-init");
    /* And the other way round. */
    fin0 = st_count_of("C_Finalize");
    st_ctl_write("fail C_Sign CKR_FUNCTION_FAILED once\n");
    assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_EUNAVAIL);
    SIGNS_AGAIN(tu_pool_sign_check(p, &e), "the CA key after its re-init");
    assert_true(st_delta("C_Finalize", fin0).calls >= 1);
    SIGNS_AGAIN(audit_sign(k, &e), "the audit key after the CA key's re-init");
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tu_pool_sign_check(p, &e), HSMCA_OK);
        assert_int_equal(audit_sign(k, &e), HSMCA_OK);
    }
    st_ctl_write("");
    p11_signkey_close(k);
    p11_pool_close(p);
    p11_module_unload(m);
}

/* Before the key has signed, the same code is the module refusing the set-up (no
 * reconnect cures it): the pool is not opened, and the error is not UNAVAILABLE. */
static void test_module_fault_at_first_sign(void **state)
{
    (void)state;
    hsmca_err e;
    p11_module *m;
    if (p11_module_load(P11SHIM_PATH, &m, &e) != HSMCA_OK)
        fail_msg("load shim: %s", e.msg);
    st_ctl_write("fail C_Sign CKR_GENERAL_ERROR once\n");
    p11_pool *p = NULL;
    assert_int_equal(p11_pool_open(m, KEY_URI, st.pin, 2, &p, &e), HSMCA_EINTERNAL);
    assert_null(p);
    assert_non_null(strstr(e.msg, "CKR_GENERAL_ERROR"));
    st_ctl_write("");
    p11_module_unload(m);
}

static void test_idle_drop(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    CK_SESSION_HANDLE s = st_raw_open(r.slot);
    st_counts open0 = st_count_of("C_OpenSession");
    st_ctl_write("idle-drop 1\n");
    assert_int_equal(st_raw_sign(s, r.key), CKR_OK); /* reads the rule: the clock starts */
    usleep(1200 * 1000);
    assert_int_equal(st_raw_sign(s, r.key), CKR_SESSION_HANDLE_INVALID);
    CK_SESSION_HANDLE s2;
    assert_int_equal(st.fl->C_OpenSession(r.slot, CKF_SERIAL_SESSION, NULL, NULL, &s2),
                     CKR_DEVICE_ERROR);
    assert_int_equal(st.fl->C_OpenSession(r.slot, CKF_SERIAL_SESSION, NULL, NULL, &s2),
                     CKR_DEVICE_ERROR);
    /* A longer idle time (so a stall on a busy machine cannot drop the new
     * session) does not revive the token either. */
    st_ctl_write("idle-drop 30\n");
    assert_int_equal(st.fl->C_OpenSession(r.slot, CKF_SERIAL_SESSION, NULL, NULL, &s2),
                     CKR_DEVICE_ERROR);
    assert_int_equal(st_delta("C_OpenSession", open0).failed, 3);
    /* The way out: C_Finalize, C_Initialize, open and log in again. */
    assert_int_equal(st.fl->C_Finalize(NULL), CKR_OK);
    st_raw_init();
    s = st_raw_open(r.slot);
    assert_int_equal(st_raw_login(s), CKR_OK);
    assert_int_equal(st_raw_sign(s, st_raw_key(s)), CKR_OK);
    st_raw_down();
}

/* A wrong-PIN answer is final: the pool refuses to open and logs in once. */
static void test_login_pin_incorrect(void **state)
{
    (void)state;
    p11_module *m;
    hsmca_err e;
    assert_int_equal(p11_module_load(P11SHIM_PATH, &m, &e), HSMCA_OK);
    st_ctl_write("fail C_Login CKR_PIN_INCORRECT always\n");
    for (int i = 1; i <= 2; i++) {
        st_counts base = st_count_of("C_Login");
        p11_pool *p = (p11_pool *)1;
        assert_int_equal(p11_pool_open(m, KEY_URI, st.pin, 2, &p, &e), HSMCA_EAUTH);
        assert_null(p);
        assert_non_null(strstr(e.msg, "CKR_PIN_INCORRECT"));
        st_counts d = st_delta("C_Login", base);
        assert_int_equal(d.calls, 1);
        assert_int_equal(d.failed, 1);
    }
    st_ctl_write("");
    p11_pool *p = NULL;
    if (p11_pool_open(m, KEY_URI, st.pin, 1, &p, &e) != HSMCA_OK)
        fail_msg("pool open after the rule went: %s", e.msg);
    pool_down(m, p);
}

static void test_grammar(void **state)
{
    (void)state;
    st_raw_env r;
    st_raw_up(&r);
    st_ctl_write("# comment\n"
                 "\n"
                 "   fail   C_GetTokenInfo   0x30   once   # numeric code, extra blanks\n"
                 "fail C_GetSessionInfo CKR_PIN_LOCKED always\n"
                 "bogus\n"
                 "fail C_Nope CKR_DEVICE_ERROR once\n"
                 "fail C_Sign CKR_NOPE once\n"
                 "fail C_Sign CKR_OK once\n"
                 "fail C_Sign CKR_DEVICE_ERROR every 0\n"
                 "delay C_Sign\n"
                 "hang C_Sign sometimes\n"
                 "idle-drop -1\n");
    CK_TOKEN_INFO ti;
    assert_int_equal(st.fl->C_GetTokenInfo(r.slot, &ti), CKR_DEVICE_ERROR);
    assert_int_equal(st.fl->C_GetTokenInfo(r.slot, &ti), CKR_OK);
    CK_SESSION_INFO si;
    assert_int_equal(st.fl->C_GetSessionInfo(r.anchor, &si), CKR_PIN_LOCKED);
    assert_int_equal(st.fl->C_GetSessionInfo(r.anchor, &si), CKR_PIN_LOCKED);
    assert_int_equal(st_raw_sign_fresh(r.slot, r.key), CKR_OK);
    char buf[8192];
    st_counts_text(buf, sizeof(buf));
    assert_non_null(strstr(buf, "parse_errors 8\n"));
    /* "*" matches every function; the first matching rule decides. */
    st_ctl_write("fail C_GetTokenInfo CKR_TOKEN_NOT_PRESENT once\nfail * CKR_GENERAL_ERROR once\n");
    assert_int_equal(st.fl->C_GetTokenInfo(r.slot, &ti), CKR_TOKEN_NOT_PRESENT);
    assert_int_equal(st.fl->C_GetTokenInfo(r.slot, &ti), CKR_GENERAL_ERROR);
    assert_int_equal(st.fl->C_GetTokenInfo(r.slot, &ti), CKR_OK);
    st_counts_text(buf, sizeof(buf));
    assert_non_null(strstr(buf, "parse_errors 0\n"));
    st_raw_down();
}

/* `pkcs11-tool -L` through the shim, with files of its own; output in out. */
static void tool_list(char *out, size_t cap)
{
    assert_int_equal(tu_system("env P11SHIM_MODULE=" SOFTHSM " P11SHIM_CONTROL='%s/tool-control' "
                               "P11SHIM_COUNTS='%s/tool-counts' pkcs11-tool --module '%s' -L "
                               ">'%s/tool.out' 2>&1",
                               st.dir, st.dir, P11SHIM_PATH, st.dir),
                     0);
    char path[1100];
    snprintf(path, sizeof(path), "%s/tool.out", st.dir);
    st_read_file(path, out, cap);
}

/* An uninstrumented program loads the shim, even from a sanitized build. */
static void test_pkcs11_tool(void **state)
{
    (void)state;
    char out[8192], path[1100];
    assert_int_equal(tu_system(": >'%s/tool-control'", st.dir), 0);
    tool_list(out, sizeof(out));
    if (!strstr(out, "token label        : " ST_TOKEN "\n"))
        fail_msg("pkcs11-tool -L through the shim:\n%s", out);
    snprintf(path, sizeof(path), "%s/tool-counts", st.dir);
    st_read_file(path, out, sizeof(out));
    assert_non_null(strstr(out, "C_GetSlotList "));

    /* And the same program sees the token gone. */
    assert_int_equal(tu_system("echo remove >'%s/tool-control'", st.dir), 0);
    tool_list(out, sizeof(out));
    if (strstr(out, "token label"))
        fail_msg("pkcs11-tool -L lists a removed token:\n%s", out);
}

/* Before each test: no rules, and nothing a failed test left initialized. */
static int reset(void **state)
{
    (void)state;
    st_ctl_write("");
    st.fl->C_Finalize(NULL); /* CKR_CRYPTOKI_NOT_INITIALIZED after a clean test */
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return st_setup(P11SHIM_PATH);
}

static int teardown(void **state)
{
    (void)state;
    tu_system("rm -rf '%s'", st.dir);
    free(st.dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_passthrough_pool, reset),
        cmocka_unit_test_setup(test_fail_once_raw, reset),
        cmocka_unit_test_setup(test_fail_once_pool, reset),
        cmocka_unit_test_setup(test_login_lost_relogs_once, reset),
        cmocka_unit_test_setup(test_idle_drop_pool, reset),
        cmocka_unit_test_setup(test_pin_refused_at_relogin, reset),
        cmocka_unit_test_setup(test_audit_key_dead_session, reset),
        cmocka_unit_test_setup(test_audit_key_pin_refused, reset),
        cmocka_unit_test_setup(test_fail_every_3, reset),
        cmocka_unit_test_setup(test_delay, reset),
        cmocka_unit_test_setup(test_hang_release, reset),
        cmocka_unit_test_setup(test_hang_rule_removed, reset),
        cmocka_unit_test_setup(test_remove_raw, reset),
        cmocka_unit_test_setup(test_remove_pool_recovers, reset),
        cmocka_unit_test_setup(test_module_fault_after_signing_reconnects, reset),
        cmocka_unit_test_setup(test_module_fault_at_first_sign, reset),
        cmocka_unit_test_setup(test_module_reinit_by_other_pool, reset),
        cmocka_unit_test_setup(test_idle_drop, reset),
        cmocka_unit_test_setup(test_login_pin_incorrect, reset),
        cmocka_unit_test_setup(test_grammar, reset),
        cmocka_unit_test_setup(test_pkcs11_tool, reset),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
