/* shim_state.c - what every call goes through: loading the real module,
 * counting, the hang / delay / fail rules, and the token state the control
 * file simulates.
 *
 * The process that loads us (the signer) drops privileges and installs a
 * seccomp filter after C_Initialize and login, so both files are opened once,
 * at load, and kept for the life of the process (across C_Finalize and
 * C_Initialize); afterwards only fstat, pread, pwrite and ftruncate touch
 * them, and nothing here allocates. One mutex guards all state; it is never
 * held while the real module runs or while a call sleeps, so a hung or
 * delayed call blocks no other thread.
 *
 * Token state:
 * - "remove": calls on a session return CKR_DEVICE_REMOVED; C_GetTokenInfo,
 *   C_OpenSession, C_GetMechanism{List,Info} and C_InitToken return
 *   CKR_TOKEN_NOT_PRESENT; C_GetSlotList(TRUE) lists no slot and C_GetSlotInfo
 *   clears CKF_TOKEN_PRESENT. Sessions open at that moment are dead for good:
 *   after the line goes, they return CKR_SESSION_HANDLE_INVALID.
 * - "idle-drop S": at the first call after S seconds without any call (the
 *   clock also restarts when the file changes), every open session dies and
 *   C_OpenSession returns CKR_DEVICE_ERROR until C_Finalize (then
 *   C_Initialize), as a YubiHSM does after ~40 s idle.
 * C_CloseSession on a dead session still closes it in the real module (so
 * its login and memory go) and returns the injected code. */
#include "shim.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHIM_DEFAULT_MODULE "/usr/lib/softhsm/libsofthsm2.so"
#define SHIM_SESSIONS_MAX 4096
#define SHIM_HANG_POLL_MS 5

typedef struct {
    CK_SESSION_HANDLE h;
    CK_SLOT_ID slot;
    unsigned char used;
    unsigned char dead;
} shim_session;

static struct {
    pthread_once_t once;
    CK_RV load_rv;
    CK_FUNCTION_LIST *real;
    int counts_fd;

    pthread_mutex_t mu; /* everything below */
    shim_ctl ctl;
    shim_rules rules;
    unsigned long long calls[SHIM_FN_COUNT];
    unsigned long long failed[SHIM_FN_COUNT];
    unsigned hanging;
    int initialized;
    int was_removed;
    int idle_dropped;
    double last_activity; /* monotonic seconds */
    unsigned kill_gen;
    shim_session sessions[SHIM_SESSIONS_MAX];
    unsigned nsessions; /* high-water mark of used entries */
    int sessions_full_warned;
    char counts[SHIM_FN_COUNT * 64 + 64];
} S = {
    .once = PTHREAD_ONCE_INIT,
    .load_rv = CKR_GENERAL_ERROR,
    .counts_fd = -1,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .ctl = {.fd = -1},
};

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_ms(unsigned long ms)
{
    struct timespec t = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR)
        ;
}

/* ---- loading ---- */

static void open_files(void)
{
    /* Created when missing so a test may write it later; kept open forever. */
    const char *ctl = getenv("P11SHIM_CONTROL");
    if (ctl && *ctl) {
        S.ctl.fd = open(ctl, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        if (S.ctl.fd < 0)
            fprintf(stderr, "p11shim: open %s: %s (passing every call through)\n", ctl,
                    strerror(errno));
    }
    const char *counts = getenv("P11SHIM_COUNTS");
    if (counts && *counts) {
        S.counts_fd = open(counts, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (S.counts_fd < 0)
            fprintf(stderr, "p11shim: open %s: %s (no counts)\n", counts, strerror(errno));
    }
}

static void load(void)
{
    const char *path = getenv("P11SHIM_MODULE");
    if (!path || !*path)
        path = SHIM_DEFAULT_MODULE;
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        fprintf(stderr, "p11shim: dlopen %s: %s\n", path, why ? why : "failed");
        return;
    }
    CK_C_GetFunctionList get;
    *(void **)&get = dlsym(dl, "C_GetFunctionList");
    /* P11SHIM_MODULE naming this shim would recurse into pthread_once. */
    CK_FUNCTION_LIST *fl = NULL;
    if (!get || get == C_GetFunctionList || get(&fl) != CKR_OK || !fl) {
        fprintf(stderr, "p11shim: %s: no usable C_GetFunctionList\n", path);
        dlclose(dl);
        return;
    }
    /* The handle stays open for the life of the process: the module may be
     * initialized by others in it, and unloading it under them would crash. */
    S.real = fl;
    open_files();
    pthread_mutex_lock(&S.mu);
    shim_ctl_refresh(&S.ctl, &S.rules);
    S.was_removed = S.rules.removed;
    pthread_mutex_unlock(&S.mu);
    S.load_rv = CKR_OK;
}

CK_RV shim_load(void)
{
    pthread_once(&S.once, load);
    return S.load_rv;
}

CK_FUNCTION_LIST *shim_real(void)
{
    return S.real;
}

/* Only when the image itself is unloaded (tests that dlclose it): otherwise
 * the fds are kept until exit on purpose. */
__attribute__((destructor)) static void shim_unload(void)
{
    if (S.ctl.fd >= 0)
        close(S.ctl.fd);
    if (S.counts_fd >= 0)
        close(S.counts_fd);
}

/* ---- counts ---- */

static void counts_write_locked(void)
{
    if (S.counts_fd < 0)
        return;
    size_t off = 0, cap = sizeof(S.counts);
    for (int i = 0; i < SHIM_FN_COUNT; i++)
        if (S.calls[i])
            off += (size_t)snprintf(S.counts + off, cap - off, "%s %llu %llu\n", shim_fn_names[i],
                                    S.calls[i], S.failed[i]);
    off += (size_t)snprintf(S.counts + off, cap - off, "parse_errors %u\nhanging %u\n",
                            S.rules.parse_errors, S.hanging);
    /* Readers may see a torn file; they re-read until two reads agree. */
    size_t done = 0;
    while (done < off) {
        ssize_t n = pwrite(S.counts_fd, S.counts + done, off - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        done += (size_t)n;
    }
    while (ftruncate(S.counts_fd, (off_t)off) != 0 && errno == EINTR)
        ;
}

/* ---- sessions ---- */

static shim_session *session_find_locked(CK_SESSION_HANDLE h)
{
    for (unsigned i = 0; i < S.nsessions; i++)
        if (S.sessions[i].used && S.sessions[i].h == h)
            return &S.sessions[i];
    return NULL;
}

static void sessions_kill_all_locked(void)
{
    for (unsigned i = 0; i < S.nsessions; i++)
        S.sessions[i].dead = 1;
    S.kill_gen++;
}

static void sessions_forget_locked(int all, CK_SLOT_ID slot)
{
    for (unsigned i = 0; i < S.nsessions; i++)
        if (all || S.sessions[i].slot == slot)
            S.sessions[i].used = 0;
    while (S.nsessions && !S.sessions[S.nsessions - 1].used)
        S.nsessions--;
}

/* ---- one call ---- */

static void refresh_locked(double now)
{
    if (!shim_ctl_refresh(&S.ctl, &S.rules))
        return;
    if (S.rules.removed && !S.was_removed)
        sessions_kill_all_locked();
    S.was_removed = S.rules.removed;
    S.last_activity = now; /* an idle clock starts when its rule is read */
}

/* Blocks while a hang rule holds this call, re-reading the file meanwhile. */
static void hang_locked(shim_fn fn)
{
    const shim_rule *r = shim_rules_hang(&S.rules, fn);
    if (!r)
        return;
    char text[SHIM_RULE_TEXT];
    memcpy(text, r->text, sizeof(text));
    S.hanging++;
    counts_write_locked(); /* so a test can wait until the call is held */
    while (!S.rules.release && shim_rules_has(&S.rules, text)) {
        pthread_mutex_unlock(&S.mu);
        sleep_ms(SHIM_HANG_POLL_MS);
        pthread_mutex_lock(&S.mu);
        double now = mono_now();
        refresh_locked(now);
        S.last_activity = now; /* a held call is not idleness */
    }
    S.hanging--;
}

static CK_RV state_rv_locked(shim_fn fn, shim_kind kind, CK_ULONG handle)
{
    if (kind == SHIM_K_SESSION) {
        if (S.rules.removed)
            return CKR_DEVICE_REMOVED;
        shim_session *s = session_find_locked(handle);
        if (s && s->dead)
            return CKR_SESSION_HANDLE_INVALID;
    } else if (kind == SHIM_K_SLOT) {
        if (S.rules.removed)
            return CKR_TOKEN_NOT_PRESENT;
        if (fn == SHIM_FN_C_OpenSession && S.idle_dropped)
            return CKR_DEVICE_ERROR;
    }
    return CKR_OK;
}

CK_RV shim_enter(shim_call *c, shim_fn fn, shim_kind kind, CK_ULONG handle)
{
    memset(c, 0, sizeof(*c));
    c->fn = fn;
    pthread_mutex_lock(&S.mu);
    double now = mono_now();
    refresh_locked(now);
    S.calls[fn]++;
    if (S.rules.idle_drop_s > 0 && S.initialized && !S.idle_dropped &&
        now - S.last_activity >= S.rules.idle_drop_s) {
        S.idle_dropped = 1;
        sessions_kill_all_locked();
    }
    S.last_activity = now;
    hang_locked(fn);
    unsigned long delay = shim_rules_delay_ms(&S.rules, fn);
    CK_RV rv = shim_rules_fail(&S.rules, fn);
    if (rv != CKR_OK)
        c->by_rule = 1;
    else if ((rv = state_rv_locked(fn, kind, handle)) != CKR_OK)
        c->by_state = 1;
    if (rv != CKR_OK)
        S.failed[fn]++;
    c->removed = S.rules.removed;
    c->kill_gen = S.kill_gen;
    pthread_mutex_unlock(&S.mu);
    if (delay)
        sleep_ms(delay);
    return rv;
}

CK_RV shim_leave(shim_call *c, CK_RV rv)
{
    (void)c;
    pthread_mutex_lock(&S.mu);
    S.last_activity = mono_now();
    counts_write_locked();
    pthread_mutex_unlock(&S.mu);
    return rv;
}

void shim_after_initialize(CK_RV rv)
{
    if (rv != CKR_OK)
        return;
    pthread_mutex_lock(&S.mu);
    S.initialized = 1;
    S.idle_dropped = 0;
    S.last_activity = mono_now();
    pthread_mutex_unlock(&S.mu);
}

void shim_after_finalize(CK_RV rv)
{
    if (rv != CKR_OK)
        return;
    pthread_mutex_lock(&S.mu);
    S.initialized = 0;
    S.idle_dropped = 0; /* the YubiHSM way out: finalize, then initialize */
    sessions_forget_locked(1, 0);
    pthread_mutex_unlock(&S.mu);
}

void shim_after_open(const shim_call *c, CK_SLOT_ID slot, CK_SESSION_HANDLE h)
{
    pthread_mutex_lock(&S.mu);
    shim_session *s = session_find_locked(h); /* a handle the module reused */
    for (unsigned i = 0; !s && i < SHIM_SESSIONS_MAX; i++)
        if (!S.sessions[i].used)
            s = &S.sessions[i];
    if (s) {
        s->h = h;
        s->slot = slot;
        s->used = 1;
        /* Opened while a removal or idle drop killed the others: dead too. */
        s->dead = c->kill_gen != S.kill_gen;
        unsigned idx = (unsigned)(s - S.sessions);
        if (idx >= S.nsessions)
            S.nsessions = idx + 1;
    } else if (!S.sessions_full_warned) {
        S.sessions_full_warned = 1;
        fprintf(stderr, "p11shim: more than %d open sessions; new ones are not tracked\n",
                SHIM_SESSIONS_MAX);
    }
    pthread_mutex_unlock(&S.mu);
}

void shim_after_close(CK_SESSION_HANDLE h)
{
    pthread_mutex_lock(&S.mu);
    shim_session *s = session_find_locked(h);
    if (s)
        s->used = 0;
    while (S.nsessions && !S.sessions[S.nsessions - 1].used)
        S.nsessions--;
    pthread_mutex_unlock(&S.mu);
}

void shim_after_close_all(CK_SLOT_ID slot)
{
    pthread_mutex_lock(&S.mu);
    sessions_forget_locked(0, slot);
    pthread_mutex_unlock(&S.mu);
}
