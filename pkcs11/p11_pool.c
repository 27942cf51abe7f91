/* p11_pool.c - N logged-in sessions bound to one private key, shared by the
 * signing threads, with recovery driven by exact CKR_* codes (docs/ARCHITECTURE.md §6).
 * The CA key has one (p11_pool_sign_digest); the audit key another, of its
 * own (p11_signkey.c), and both sign through p11_pool_run.
 *
 * Invariants: a session index is either on the free list or held by exactly
 * one thread (counted in in_use); a session whose sign failed is never put
 * back as if healthy; a reconnect runs only while no session is held and no
 * other thread may take one (healthy == 0, reconnecting == 1). */
#include "config.h"
#include "ipc_contract.h"
#include "log.h"
#include "p11_int.h"
#include "util.h"
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Sessions: at most pkcs11.sessions, which the config bounds. */
#define POOL_MAX CONFIG_MAX_SESSIONS
#define POOL_BACKOFF_S 1.0 /* at most one reconnect attempt per second */

struct p11_pool {
    p11_module *m;
    p11_uri uri;
    char *pin; /* page of its own, mlock'ed when allowed, wiped on close */
    size_t pin_page;
    int pin_locked;
    unsigned n;
    CK_SLOT_ID slot;
    CK_OBJECT_HANDLE key;
    CK_KEY_TYPE kt;
    p11_key_role role; /* what the key is for: decides the key checks */
    const sigalg *alg; /* CA keys: what the key signs with (from its public half) */
    EVP_PKEY *pub; /* fixed at open: a reconnect must find the same key */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    CK_SESSION_HANDLE all[POOL_MAX];
    unsigned free_idx[POOL_MAX];
    unsigned nfree;
    unsigned in_use;
    int healthy;
    int reconnecting;
    double last_attempt;
    CK_RV last_rv;
    int has_signed; /* an operation succeeded: a general failure now is the device's */
    unsigned long generation; /* the module's (p11_module_generation) at the last connect */
    CK_RV pin_rv; /* not CKR_OK: the token refused the PIN; never tried again */
    uint64_t reconnects; /* that succeeded (under mu) */
    metrics_hist sign_hist; /* C_Sign of sign_digest (lock-free) */
};

/* The key in log lines: a token may hold several keys with pools of their own. */
static const char *pool_key_name(const p11_pool *p)
{
    return p->uri.object[0] ? p->uri.object : "(by id)";
}

static HSMCA_MUSTCHECK hsmca_code pin_keep(p11_pool *p, const char *pin, hsmca_err *e)
{
    size_t n = pin ? strnlen(pin, UTIL_PIN_MAX + 1) : 0;
    if (n == 0 || n > UTIL_PIN_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "pool: PIN must be 1..%d bytes", UTIL_PIN_MAX);
    long pg = sysconf(_SC_PAGESIZE);
    p->pin_page = pg > 0 ? (size_t)pg : 4096;
    void *mem = NULL;
    if (posix_memalign(&mem, p->pin_page, p->pin_page) != 0)
        return hsmca_fail(e, HSMCA_ENOMEM, "pool: out of memory");
    p->pin = mem;
    /* Keep the PIN out of swap and core dumps; a failed mlock (RLIMIT_MEMLOCK)
     * is not fatal, the page is still wiped on close. */
    p->pin_locked = mlock(p->pin, p->pin_page) == 0;
    madvise(p->pin, p->pin_page, MADV_DONTDUMP);
    memcpy(p->pin, pin, n);
    p->pin[n] = '\0';
    return HSMCA_OK;
}

static void pin_wipe(p11_pool *p)
{
    if (!p->pin)
        return;
    OPENSSL_cleanse(p->pin, p->pin_page);
    if (p->pin_locked)
        munlock(p->pin, p->pin_page);
    free(p->pin);
    p->pin = NULL;
}

/* 1 when the module was re-initialized since the pool connected: its sessions died
 * with the C_Finalize, and their numbers (object handles too) may be another pool's
 * now, so they are forgotten, never closed or used. */
static int pool_stale(p11_pool *p)
{
    return p11_module_generation(p->m) != p->generation;
}

static void sessions_close(p11_pool *p)
{
    int stale = pool_stale(p);
    for (unsigned i = 0; i < p->n; i++) {
        if (p->all[i] != CK_INVALID_HANDLE && !stale)
            p->m->fl->C_CloseSession(p->all[i]); /* may already be gone: ignored */
        p->all[i] = CK_INVALID_HANDLE;
    }
}

/* Finds the token, opens n sessions, logs in and finds the key. Closes what it
 * opened on failure. Only our own sessions: C_CloseAllSessions would also kill
 * another pool's sessions on the same token. */
static HSMCA_MUSTCHECK hsmca_code pool_connect(p11_pool *p, EVP_PKEY **pub, CK_RV *login_rv, hsmca_err *e)
{
    CK_RV rv;
    p->generation = p11_module_generation(p->m); /* before: a re-init during it shows */
    hsmca_code c = p11_find_token(p->m, p->uri.token, &p->slot, &rv, e);
    if (c != HSMCA_OK)
        return c;
    for (unsigned i = 0; i < p->n; i++) {
        rv = p->m->fl->C_OpenSession(p->slot, CKF_SERIAL_SESSION, NULL, NULL, &p->all[i]);
        if (rv != CKR_OK) {
            p->all[i] = CK_INVALID_HANDLE;
            c = p11_fail_rv(e, HSMCA_EINTERNAL, "pool: C_OpenSession", rv);
            goto fail;
        }
    }
    if ((c = p11_login_user(p->m, p->all[0], p->pin, login_rv, NULL, e)) != HSMCA_OK)
        goto fail;
    if ((c = p11_key_find_checked(p->m, p->all[0], &p->uri, p->role, &p->key, &p->kt, pub, e)) !=
        HSMCA_OK)
        goto fail;
    return HSMCA_OK;
fail:
    sessions_close(p);
    return c;
}

/* Closes our sessions and connects again; when the module itself seems gone
 * (EUNAVAIL: not initialized, device error, token missing) it re-initializes
 * the module and tries once more. After a fault of the module itself (reinit:
 * a client library whose daemon went away keeps a dead link in its state) it
 * re-initializes first. Runs with no session held by anyone. */
static HSMCA_MUSTCHECK hsmca_code pool_reconnect(p11_pool *p, int reinit, CK_RV *login_rv,
                                                 hsmca_err *e)
{
    EVP_PKEY *pub = NULL;
    /* Another key's pool re-initialized the module since we connected: it is fresh
     * already, and a second re-initialization would only end that pool's new sessions
     * (and wait for its calls in flight). Connect; a failure still re-initializes. */
    if (reinit && pool_stale(p))
        reinit = 0;
    p11_module_enter(p->m);
    sessions_close(p);
    hsmca_code c = reinit ? HSMCA_EUNAVAIL : pool_connect(p, &pub, login_rv, e);
    p11_module_leave(p->m);
    if (c == HSMCA_EUNAVAIL) {
        CK_RV rv = p11_module_reinit(p->m);
        if (rv != CKR_OK)
            return p11_fail_rv(e, HSMCA_EUNAVAIL, "pool: re-initialize module", rv);
        p11_module_enter(p->m);
        c = pool_connect(p, &pub, login_rv, e);
        p11_module_leave(p->m);
    }
    if (c != HSMCA_OK)
        return c;
    if (EVP_PKEY_eq(pub, p->pub) != 1) {
        p11_module_enter(p->m);
        sessions_close(p);
        p11_module_leave(p->m);
        c = hsmca_fail(e, HSMCA_EPERM, "pool: key '%s' changed while reconnecting",
                       pool_key_name(p));
    }
    EVP_PKEY_free(pub);
    return c;
}

static void mark_unhealthy_locked(p11_pool *p, CK_RV rv)
{
    if (p->healthy)
        LOG_EVENT(LOG_LVL_WARN, "pkcs11: token unavailable: reconnecting the key",
                  LOG_STR("token", p->uri.token), LOG_STR("rv", p11_rv_name(rv)),
                  LOG_STR("key", pool_key_name(p)));
    p->healthy = 0;
    p->last_rv = rv;
    pthread_cond_broadcast(&p->cv);
}

/* The refusal every call gets once the token has refused the PIN. */
static HSMCA_MUSTCHECK hsmca_code pin_refused(const p11_pool *p, hsmca_err *e)
{
    return hsmca_fail(e, HSMCA_EUNAVAIL,
                      "token '%s' refused the PIN (%s): issuance stopped; the PIN is not tried "
                      "again until the PIN file changes or the signer is restarted",
                      p->uri.token, p11_rv_name(p->pin_rv));
}

static void mark_pin_refused_locked(p11_pool *p, CK_RV rv)
{
    if (p->pin_rv == CKR_OK)
        LOG_EVENT(LOG_LVL_ERROR,
                  "pkcs11: the token refused the PIN; issuance stopped. A hardware token locks "
                  "after a few wrong PINs, so it is not tried again: fix the PIN file (the "
                  "signer restarts when it changes) or restart the signer (SIGHUP to hsmca serve)",
                  LOG_STR("token", p->uri.token), LOG_STR("rv", p11_rv_name(rv)));
    p->pin_rv = rv;
    p->healthy = 0;
    pthread_cond_broadcast(&p->cv);
}

/* Called with the lock held on an unhealthy pool; returns with it held. One
 * caller per second gets to reconnect; every other caller fails fast. */
static HSMCA_MUSTCHECK hsmca_code recover_locked(p11_pool *p, hsmca_err *e)
{
    double now = util_mono_now();
    if (p->pin_rv != CKR_OK)
        return pin_refused(p, e);
    if (p->reconnecting || now - p->last_attempt < POOL_BACKOFF_S)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "token unavailable (%s): reconnect pending",
                          p11_rv_name(p->last_rv));
    p->reconnecting = 1;
    p->last_attempt = now;
    while (p->in_use)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    hsmca_err why;
    hsmca_err_clear(&why);
    CK_RV login_rv = CKR_OK;
    hsmca_code c = pool_reconnect(p, p11_rv_module_fault(p->last_rv), &login_rv, &why);
    pthread_mutex_lock(&p->mu);
    p->reconnecting = 0;
    if (c == HSMCA_EAUTH && p11_rv_classify(login_rv) == P11_RV_PIN) {
        mark_pin_refused_locked(p, login_rv);
        return pin_refused(p, e);
    }
    if (c != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_WARN, "pkcs11: reconnect to the token failed",
                  LOG_STR("token", p->uri.token), LOG_STR("key", pool_key_name(p)),
                  LOG_STR("error", why.msg));
        return hsmca_fail(e, HSMCA_EUNAVAIL, "token unavailable: reconnect failed: %s", why.msg);
    }
    p->nfree = 0;
    for (unsigned i = 0; i < p->n; i++)
        p->free_idx[p->nfree++] = i;
    p->healthy = 1;
    p->reconnects++;
    LOG_EVENT(LOG_LVL_INFO, "pkcs11: reconnected to the token", LOG_STR("token", p->uri.token),
              LOG_STR("key", pool_key_name(p)));
    pthread_cond_broadcast(&p->cv);
    return HSMCA_OK;
}

hsmca_code p11_pool_reinit_module(p11_pool *p, hsmca_err *e)
{
    pthread_mutex_lock(&p->mu);
    LOG_EVENT(LOG_LVL_INFO, "pkcs11: re-initializing the module once, as after a token fault",
              LOG_STR("key", pool_key_name(p)));
    p->healthy = 0;
    p->last_rv = CKR_GENERAL_ERROR; /* a module fault: recover_locked re-initializes */
    p->last_attempt = -1e9;
    hsmca_code c = recover_locked(p, e);
    pthread_mutex_unlock(&p->mu);
    return c;
}

static HSMCA_MUSTCHECK hsmca_code pool_acquire(p11_pool *p, unsigned *idx, CK_OBJECT_HANDLE *key,
                                               int *has_signed, hsmca_err *e)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->pin_rv != CKR_OK) {
            pthread_mutex_unlock(&p->mu);
            return pin_refused(p, e);
        }
        if (p->healthy && pool_stale(p)) {
            /* Another key's pool re-initialized the module: our sessions and handles
             * are gone (a handle may now name another object). Reconnect now, without
             * a re-init of our own; that pool's backoff bounds how often. */
            LOG_EVENT(LOG_LVL_INFO,
                      "pkcs11: the module was re-initialized for another key: reconnecting this "
                      "key",
                      LOG_STR("key", pool_key_name(p)));
            p->healthy = 0;
            p->last_rv = CKR_SESSION_HANDLE_INVALID;
            p->last_attempt = -1e9;
        }
        if (!p->healthy) {
            hsmca_code c = recover_locked(p, e);
            if (c != HSMCA_OK) {
                pthread_mutex_unlock(&p->mu);
                return c;
            }
            continue;
        }
        if (p->nfree) {
            *idx = p->free_idx[--p->nfree];
            *key = p->key;
            *has_signed = p->has_signed;
            p->in_use++;
            pthread_mutex_unlock(&p->mu);
            return HSMCA_OK;
        }
        pthread_cond_wait(&p->cv, &p->mu);
    }
}

/* Replaces a session whose operation failed for an ordinary reason: it may
 * still hold a half-done operation. Runs outside the lock; the index is ours
 * until it is given back. Returns CKR_OK or why the new session failed. */
static CK_RV session_replace(p11_pool *p, unsigned idx)
{
    if (pool_stale(p)) { /* re-initialized under us: the pool reconnects */
        p->all[idx] = CK_INVALID_HANDLE;
        return CKR_CRYPTOKI_NOT_INITIALIZED;
    }
    /* Open before closing: closing an application's last session would end
     * its login. */
    CK_SESSION_HANDLE old = p->all[idx];
    CK_RV rv = p->m->fl->C_OpenSession(p->slot, CKF_SERIAL_SESSION, NULL, NULL, &p->all[idx]);
    if (rv != CKR_OK)
        p->all[idx] = CK_INVALID_HANDLE;
    p->m->fl->C_CloseSession(old);
    return rv;
}

/* 1 when session idx is logged in and still sees the pool's key. Another
 * key's pool on the token may have logged the application in again after
 * every session died; the object handles found before did not survive that
 * (SoftHSM drops them with the last session or the logout). */
static int session_sees_key(p11_pool *p, unsigned idx)
{
    CK_SESSION_INFO info;
    CK_OBJECT_CLASS cls;
    CK_ATTRIBUTE a = {CKA_CLASS, &cls, sizeof(cls)};
    if (pool_stale(p))
        return 0; /* re-initialized: the handle may name another object now */
    return p->m->fl->C_GetSessionInfo(p->all[idx], &info) == CKR_OK &&
           (info.state == CKS_RO_USER_FUNCTIONS || info.state == CKS_RW_USER_FUNCTIONS) &&
           p->m->fl->C_GetAttributeValue(p->all[idx], p->key, &a, 1) == CKR_OK;
}

/* Gives a session back after a sign that returned rv, acting on its class cls
 * (docs/ARCHITECTURE.md §6). Returns 1 when the request may be retried once: nothing was
 * signed and the pool is usable again (a dead session replaced, or logged in
 * again). Runs outside the lock; the index is ours until it is given back. */
static int pool_release(p11_pool *p, unsigned idx, CK_RV rv, p11_rv_class cls, int may_retry)
{
    CK_RV fix = rv;
    p11_module_enter(p->m);
    if (cls == P11_RV_SESSION || cls == P11_RV_OTHER || cls == P11_RV_LOGIN) {
        /* A dead session, or one that may hold a half-done operation. */
        fix = session_replace(p, idx);
        /* The login ends with an application's last session: a new session
         * that is not logged in, or no longer sees the key, means every
         * session died; the reconnect (one login, the key found again) brings
         * them back. */
        if (fix == CKR_OK && cls == P11_RV_SESSION && !session_sees_key(p, idx))
            fix = CKR_USER_NOT_LOGGED_IN;
        if (cls == P11_RV_SESSION)
            LOG_EVENT(LOG_LVL_WARN, "pkcs11: session evicted", LOG_STR("key", pool_key_name(p)),
                      LOG_STR("rv", p11_rv_name(rv)),
                      LOG_STR("action", fix == CKR_OK ? "replaced" : "reconnecting its sessions"));
    }
    if (cls == P11_RV_LOGIN && fix == CKR_OK && may_retry) {
        /* Login state is per application: one C_Login brings every session back. */
        hsmca_err why;
        if (p11_login_user(p->m, p->all[idx], p->pin, &fix, NULL, &why) != HSMCA_OK &&
            fix == CKR_OK)
            fix = CKR_GENERAL_ERROR; /* refused before any C_Login */
        LOG_EVENT(LOG_LVL_WARN, "pkcs11: session not logged in; logged in again",
                  LOG_STR("rv", p11_rv_name(rv)), LOG_STR("key", pool_key_name(p)),
                  LOG_STR("login", p11_rv_name(fix)));
        if (fix == CKR_OK && !session_sees_key(p, idx))
            fix = rv; /* the key's handle went with the login: rebuild the pool */
    } else if (cls == P11_RV_LOGIN && fix == CKR_OK) {
        fix = rv; /* a second lost login in one request: rebuild the pool */
    }
    p11_module_leave(p->m);
    pthread_mutex_lock(&p->mu);
    int ok = fix == CKR_OK;
    p->has_signed |= rv == CKR_OK;
    if (ok)
        p->free_idx[p->nfree++] = idx;
    else if (p11_rv_classify(fix) == P11_RV_PIN)
        mark_pin_refused_locked(p, fix);
    else
        mark_unhealthy_locked(p, fix); /* the session is dropped; reconnect reopens all */
    p->in_use--;
    /* A healthy session back: one waiter can take it. The signer runs several
     * threads per session, so waking all of them for it would cost more CPU than
     * the signature. Anything else (a reconnect waiting for in_use to drop, a
     * pool gone unhealthy) concerns every waiter. */
    if (ok && p->healthy && !p->reconnecting)
        pthread_cond_signal(&p->cv);
    else
        pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    p11_rv_class after = p11_rv_classify(fix);
    return may_retry && (cls == P11_RV_SESSION || cls == P11_RV_LOGIN) &&
           (ok || after == P11_RV_DEVICE || after == P11_RV_LOGIN);
}

hsmca_code p11_pool_run(p11_pool *p, p11_pool_op op, void *arg, const char *what, hsmca_err *e)
{
    unsigned idx = 0;
    CK_OBJECT_HANDLE key = CK_INVALID_HANDLE;
    /* A dead session or a lost login costs no request: nothing was signed, so
     * the request is retried once on another session. */
    for (int attempt = 0;; attempt++) {
        int has_signed = 0;
        HSMCA_GUARD(pool_acquire(p, &idx, &key, &has_signed, e));
        p11_module_enter(p->m);
        CK_RV rv = op(p->m, p->all[idx], key, arg);
        p11_module_leave(p->m);
        p11_rv_class cls = p11_rv_classify_op(rv, has_signed);
        if (pool_release(p, idx, rv, cls, attempt == 0))
            continue;
        if (rv != CKR_OK) /* a device fault: UNAVAILABLE while the pool reconnects */
            return p11_fail_rv(e, cls == P11_RV_DEVICE ? HSMCA_EUNAVAIL : HSMCA_EINTERNAL, what,
                               rv);
        return HSMCA_OK;
    }
}

typedef struct {
    const sigalg *alg;
    const uint8_t *digest;
    uint8_t raw[IPC_SIG_MAX];
    CK_ULONG rawlen;
    metrics_hist *hist;
} digest_sign_op;

static CK_RV sign_digest_op(p11_module *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, void *arg)
{
    digest_sign_op *o = arg;
    o->rawlen = sizeof(o->raw);
    double t0 = util_mono_now();
    CK_RV rv = p11_sign_raw(m, s, key, o->alg, o->digest, o->raw, &o->rawlen);
    metrics_hist_observe(o->hist, util_mono_now() - t0);
    return rv;
}

hsmca_code p11_pool_sign_digest(p11_pool *p, const uint8_t *digest, size_t digest_len,
                                uint8_t *sig, size_t *siglen, hsmca_err *e)
{
    if (!p || !p->alg || !digest || !sig || !siglen || *siglen < IPC_SIG_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "sign: signature buffer must hold %d bytes",
                          IPC_SIG_MAX);
    if (digest_len != p->alg->digest_len)
        return hsmca_fail(e, HSMCA_EINVAL, "sign: %s signs a %zu-byte digest, not %zu",
                          p->alg->name, p->alg->digest_len, digest_len);
    digest_sign_op o = {.alg = p->alg, .digest = digest, .hist = &p->sign_hist};
    HSMCA_GUARD(p11_pool_run(p, sign_digest_op, &o, "sign: C_Sign", e));
    return p11_sig_encode(p->alg, o.raw, o.rawlen, sig, siglen, e);
}

const sigalg *p11_pool_sigalg(p11_pool *p) { return p ? p->alg : NULL; }

/* Proves the public half we found belongs to the private key: a test
 * signature over a random digest must verify. */
hsmca_code p11_pool_self_test(p11_pool *p, hsmca_err *e)
{
    uint8_t digest[64], sig[IPC_SIG_MAX + 16];
    size_t siglen = sizeof(sig);
    util_random(digest, p->alg->digest_len);
    hsmca_code c = p11_pool_sign_digest(p, digest, p->alg->digest_len, sig, &siglen, e);
    if (c != HSMCA_OK)
        return c;
    if (!sigalg_verify_digest(p->alg, p->pub, digest, sig, siglen))
        return hsmca_fail(e, HSMCA_EPERM,
                          "key check: public key does not verify the private key's signature");
    return HSMCA_OK;
}

hsmca_code p11_pool_open_role(p11_module *m, const char *key_uri, const char *user_pin,
                              unsigned n, p11_key_role role, p11_pool **out, hsmca_err *e)
{
    *out = NULL;
    if (!m)
        return hsmca_fail(e, HSMCA_EINVAL, "pool: no module");
    if (n == 0 || n > POOL_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "pool: size must be 1..%d", POOL_MAX);
    p11_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return hsmca_fail(e, HSMCA_ENOMEM, "pool: out of memory");
    p->m = m;
    p->n = n;
    p->role = role;
    for (unsigned i = 0; i < POOL_MAX; i++)
        p->all[i] = CK_INVALID_HANDLE;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    hsmca_code c;
    if ((c = p11_uri_parse(key_uri, &p->uri, e)) != HSMCA_OK)
        goto fail;
    if (!p->uri.token[0]) {
        c = hsmca_fail(e, HSMCA_EINVAL, "key URI: no token given");
        goto fail;
    }
    if ((c = pin_keep(p, user_pin, e)) != HSMCA_OK ||
        (c = pool_connect(p, &p->pub, NULL, e)) != HSMCA_OK)
        goto fail;
    for (unsigned i = 0; i < n; i++)
        p->free_idx[p->nfree++] = i;
    p->healthy = 1;
    p->last_attempt = -1e9;
    *out = p;
    return HSMCA_OK;
fail:
    p11_pool_close(p);
    return c;
}

hsmca_code p11_pool_open(p11_module *m, const char *key_uri, const char *user_pin, unsigned n,
                         p11_pool **out, hsmca_err *e)
{
    p11_pool *p = NULL;
    *out = NULL;
    HSMCA_GUARD(p11_pool_open_role(m, key_uri, user_pin, n, P11_ROLE_CA, &p, e));
    hsmca_code c = HSMCA_OK;
    if (!(p->alg = sigalg_for_key(p->pub)))
        c = hsmca_fail(e, HSMCA_EPERM, "key check: no signature algorithm for this key type");
    else
        c = p11_pool_self_test(p, e);
    if (c != HSMCA_OK) {
        p11_pool_close(p);
        return c;
    }
    *out = p;
    return HSMCA_OK;
}

void p11_pool_close(p11_pool *p)
{
    if (!p)
        return;
    /* No C_Logout: the login is shared by every session of this application,
     * and closing our last session ends it anyway. */
    sessions_close(p);
    EVP_PKEY_free(p->pub);
    pin_wipe(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    OPENSSL_cleanse(p, sizeof(*p));
    free(p);
}

EVP_PKEY *p11_pool_public_key(p11_pool *p)
{
    if (!p || !p->pub || EVP_PKEY_up_ref(p->pub) != 1)
        return NULL;
    return p->pub;
}

p11_pool_state p11_pool_get_state(p11_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p11_pool_state st = p->pin_rv != CKR_OK ? P11_POOL_PIN_REFUSED
                        : p->healthy        ? P11_POOL_READY
                                            : P11_POOL_RECONNECTING;
    pthread_mutex_unlock(&p->mu);
    return st;
}

void p11_pool_figures_get(p11_pool *p, p11_pool_figures *out)
{
    pthread_mutex_lock(&p->mu);
    out->state = p->pin_rv != CKR_OK ? P11_POOL_PIN_REFUSED
                 : p->healthy        ? P11_POOL_READY
                                     : P11_POOL_RECONNECTING;
    /* A healthy pool holds its sessions, free or in use (a session replaced is in use);
     * an unhealthy one closes them all to reconnect. */
    out->open = p->healthy ? p->nfree + p->in_use : 0;
    out->busy = p->in_use;
    out->reconnects = p->reconnects;
    pthread_mutex_unlock(&p->mu);
    metrics_hist_read(&p->sign_hist, &out->sign);
}

int p11_pool_healthy(p11_pool *p) { return p11_pool_get_state(p) == P11_POOL_READY; }
