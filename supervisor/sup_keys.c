/* sup_keys.c - see sup_keys.h. */
#include "sup_keys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tok_jwks.h"
#include "ipc_frame.h"
#include "log.h"
#include "thread_start.h"
#include "util.h"

struct sup_keys {
    const hsmca_config *cfg;
    sup_keys_fetch_fn fetch; /* discovery: the key fetcher's (NULL in the supervisor) */
    pthread_t thread;
    int running;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t wake;
    char *doc; /* the accepted JWKS document, NULL before the first */
    size_t len;
    uint64_t generation;
    int asked;
    volatile int stop; /* also read, unlocked, by a transfer in progress */
    /* thread only */
    struct stat file_st; /* the JWKS file as last loaded */
    double next_fetch;   /* discovery: when the next scheduled fetch is due */
    double last_fetch;   /* discovery: when the last fetch started (0: never) */
    int have_good;       /* discovery: a fetch has succeeded */
};

/* Keeps doc (taken over) as the document; the same bytes again are no news. Returns the
 * new generation, or 0 when it is the same. */
static uint64_t keys_store(sup_keys *k, char *doc, size_t len)
{
    pthread_mutex_lock(&k->lock);
    int same = k->doc && k->len == len && memcmp(k->doc, doc, len) == 0;
    if (same) {
        free(doc);
    } else {
        free(k->doc);
        k->doc = doc;
        k->len = len;
        k->generation++;
    }
    uint64_t g = same ? 0 : k->generation;
    pthread_mutex_unlock(&k->lock);
    return g;
}

/* Accepts doc (taken over) when tok_jwks_parse does; the same bytes again are no news. */
static HSMCA_MUSTCHECK hsmca_code keys_accept(sup_keys *k, char *doc, size_t len, hsmca_err *e)
{
    tok_jwks *ks = NULL;
    hsmca_code rc = tok_jwks_parse(doc, len, &ks, e);
    if (rc != HSMCA_OK) {
        free(doc);
        return rc;
    }
    size_t n = tok_jwks_count(ks);
    tok_jwks_free(ks);
    uint64_t g = keys_store(k, doc, len);
    if (g)
        LOG_EVENT(LOG_LVL_INFO, "issuer keys: accepted a JWKS", LOG_UINT("usable_keys", n),
                  LOG_UINT("generation", g));
    return HSMCA_OK;
}

/* "what where: <e's message>" into e (the message is copied first: it cannot be both
 * the source and the destination of one format). */
static HSMCA_MUSTCHECK hsmca_code prefix_err(hsmca_err *e, hsmca_code rc, const char *what,
                                             const char *where)
{
    char why[sizeof(e->msg)];
    memcpy(why, e->msg, sizeof(why));
    return hsmca_fail(e, rc, "%s %.160s: %s", what, where, why);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Loads the JWKS file when it is not the one loaded last (force: in any case). */
static HSMCA_MUSTCHECK hsmca_code file_load(sup_keys *k, int force, hsmca_err *e)
{
    struct stat st;
    if (stat(k->cfg->jwks_file, &st) != 0)
        return hsmca_fail(e, HSMCA_EIO, "auth.jwt.jwks_file %s: %s", k->cfg->jwks_file,
                          strerror(errno));
    if (!force && same_file(&st, &k->file_st))
        return HSMCA_OK;
    k->file_st = st; /* a bad file is reported once per change, not every poll */
    char *doc = NULL;
    size_t len = 0;
    hsmca_code rc = util_read_file(k->cfg->jwks_file, TOK_JWKS_MAX_LEN, &doc, &len, e);
    if (rc != HSMCA_OK)
        return rc;
    rc = keys_accept(k, doc, len, e);
    if (rc != HSMCA_OK)
        return prefix_err(e, rc, "auth.jwt.jwks_file", k->cfg->jwks_file);
    return HSMCA_OK;
}

/* One fetch from the issuer (the fetch hook), then the check: only a JWKS that
 * tok_jwks_parse accepts is kept. */
static HSMCA_MUSTCHECK hsmca_code issuer_fetch(sup_keys *k, hsmca_err *e)
{
    char *doc = NULL, src[SUP_KEYS_SRC_MAX] = "";
    size_t len = 0;
    HSMCA_GUARD(k->fetch(k->cfg, &k->stop, &doc, &len, src, sizeof(src), e));
    hsmca_code rc = keys_accept(k, doc, len, e);
    if (rc != HSMCA_OK)
        return prefix_err(e, rc, "JWKS from", src);
    return HSMCA_OK;
}

/* One round of the thread's work; asked: a child wants fresh keys. */
static void keys_round(sup_keys *k, int asked)
{
    hsmca_err e;
    double now = util_mono_now();
    if (k->cfg->jwks_file[0]) {
        if (file_load(k, 0, &e) != HSMCA_OK)
            LOG_EVENT(LOG_LVL_WARN, "issuer keys: keeping the last good keys",
                      LOG_STR("error", e.msg));
        return;
    }
    double min_gap = (double)k->cfg->jwt_min_refresh;
    if (asked && k->last_fetch > 0 && k->next_fetch > k->last_fetch + min_gap)
        k->next_fetch = k->last_fetch + min_gap; /* sooner, but not more often */
    else if (asked && k->last_fetch == 0)
        k->next_fetch = now;
    if (now < k->next_fetch)
        return;
    k->last_fetch = now;
    if (issuer_fetch(k, &e) == HSMCA_OK) {
        k->have_good = 1;
        k->next_fetch = now + (double)k->cfg->jwt_refresh;
        return;
    }
    /* Unreachable or wrong: retry sooner than the schedule, never more often than
     * min_refresh; whatever was accepted before keeps being used. */
    k->next_fetch = now + min_gap;
    if (k->have_good)
        LOG_EVENT(LOG_LVL_WARN, "issuer keys: fetch failed; keeping the last good keys",
                  LOG_STR("url", k->cfg->jwt_issuer), LOG_STR("error", e.msg));
    else
        LOG_EVENT(LOG_LVL_WARN, "issuer keys: fetch failed; no keys yet",
                  LOG_STR("url", k->cfg->jwt_issuer), LOG_STR("error", e.msg));
}

static void *keys_thread(void *arg)
{
    sup_keys *k = arg;
    for (;;) {
        pthread_mutex_lock(&k->lock);
        double wait_s =
            k->cfg->jwks_file[0] ? SUP_KEYS_FILE_POLL_S : k->next_fetch - util_mono_now();
        if (wait_s > SUP_KEYS_FILE_POLL_S)
            wait_s = SUP_KEYS_FILE_POLL_S; /* re-checks the schedule now and then */
        if (wait_s > 0 && !k->asked && !k->stop) {
            struct timespec ts = util_mono_deadline(wait_s);
            pthread_cond_timedwait(&k->wake, &k->lock, &ts);
        }
        int stop = k->stop, asked = k->asked;
        k->asked = 0;
        pthread_mutex_unlock(&k->lock);
        if (stop)
            return NULL;
        keys_round(k, asked);
    }
}

sup_keys *sup_keys_start(const hsmca_config *cfg, sup_keys_fetch_fn fetch, hsmca_err *e)
{
    sup_keys *k = calloc(1, sizeof(*k));
    if (!k) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        return NULL;
    }
    k->cfg = cfg;
    k->fetch = fetch;
    pthread_mutex_init(&k->lock, NULL);
    util_cond_init_monotonic(&k->wake);
    if (!config_chain_has(cfg, "jwt"))
        return k;
    if (cfg->jwks_file[0]) {
        if (file_load(k, 1, e) != HSMCA_OK) {
            sup_keys_stop(k);
            return NULL;
        }
    } else if (!fetch) {
        hsmca_fail(e, HSMCA_EINTERNAL, "issuer keys by discovery: no fetcher here");
        sup_keys_stop(k);
        return NULL;
    }
    thread_start(&k->thread, keys_thread, k, "issuer keys thread"); /* at start-up only */
    k->running = 1;
    return k;
}

int sup_keys_from_issuer(const hsmca_config *cfg, int idx)
{
    if (!config_cluster_has_jwt(cfg, idx))
        return 0;
    return idx == 0 ? !cfg->jwks_file[0] : !cfg->clusters[idx - 1].jwks_file[0];
}

sup_keys *sup_keys_relay(hsmca_err *e)
{
    sup_keys *k = calloc(1, sizeof(*k));
    if (!k) {
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&k->lock, NULL);
    util_cond_init_monotonic(&k->wake);
    return k;
}

hsmca_code sup_keys_offer_fd(sup_keys *k, int fd, hsmca_err *e)
{
    /* Only a sealed memfd: a pipe, socket or device could block or change under us. */
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    HSMCA_ENSURE(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && seals >= 0 && (seals & need) == need,
                 e, HSMCA_EINVAL, "issuer keys from the key fetcher: not a sealed memfd");
    HSMCA_ENSURE(st.st_size > 0 && st.st_size <= TOK_JWKS_MAX_LEN, e, HSMCA_EINVAL,
                 "issuer keys from the key fetcher: %lld bytes (1-%d)", (long long)st.st_size,
                 TOK_JWKS_MAX_LEN);
    size_t len = (size_t)st.st_size;
    char *doc = malloc(len + 1);
    HSMCA_ENSURE(doc, e, HSMCA_ENOMEM, "out of memory");
    ssize_t got = pread(fd, doc, len, 0);
    if (got < 0 || (size_t)got != len) {
        free(doc);
        return hsmca_fail(e, HSMCA_EIO, "issuer keys from the key fetcher: short read");
    }
    doc[len] = '\0';
    uint64_t g = keys_store(k, doc, len);
    if (g)
        LOG_EVENT(LOG_LVL_INFO, "issuer keys: the key fetcher sent a new JWKS",
                  LOG_UINT("generation", g));
    return HSMCA_OK;
}

uint64_t sup_keys_generation(sup_keys *k)
{
    pthread_mutex_lock(&k->lock);
    uint64_t g = k->generation;
    pthread_mutex_unlock(&k->lock);
    return g;
}

int sup_sealed_memfd(const char *name, const char *doc, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, doc + off, len - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

hsmca_code sup_keys_push(sup_keys *k, int ctl, uint64_t *sent, hsmca_err *e)
{
    return sup_keys_push_type(k, ctl, CTL_KEYS, sent, e);
}

hsmca_code sup_keys_push_type(sup_keys *k, int ctl, char type, uint64_t *sent, hsmca_err *e)
{
    *sent = 0;
    pthread_mutex_lock(&k->lock);
    uint64_t g = k->generation;
    int fd = k->doc ? sup_sealed_memfd("hsmca-jwks", k->doc, k->len) : -2;
    pthread_mutex_unlock(&k->lock);
    if (fd == -2)
        return HSMCA_OK;
    if (fd < 0)
        return hsmca_fail(e, HSMCA_EIO, "issuer keys: memfd: %s", strerror(errno));
    hsmca_code rc = ipc_send_ctl_fd(ctl, type, fd, e);
    close(fd);
    if (rc == HSMCA_OK)
        *sent = g;
    return rc;
}

void sup_keys_refresh(sup_keys *k)
{
    pthread_mutex_lock(&k->lock);
    k->asked = 1;
    pthread_cond_signal(&k->wake);
    pthread_mutex_unlock(&k->lock);
}

void sup_keys_stop(sup_keys *k)
{
    if (!k)
        return;
    if (k->running) {
        pthread_mutex_lock(&k->lock);
        k->stop = 1;
        pthread_cond_signal(&k->wake);
        pthread_mutex_unlock(&k->lock);
        pthread_join(k->thread, NULL);
    }
    pthread_cond_destroy(&k->wake);
    pthread_mutex_destroy(&k->lock);
    free(k->doc);
    free(k);
}
