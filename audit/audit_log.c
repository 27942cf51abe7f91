/* audit_log.c - the signing log's writer: append, group commit, fail closed, replay at
 * open (audit_log.h). */
#include "audit_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "audit_lines.h"
#include "log.h"
#include "util.h"

#define AUDIT_LOG_FILE "log"

struct audit_log {
    pthread_mutex_t mu;
    /* Futex words, one per parity of the sync number: done[n & 1] is bumped under mu
     * when sync n ends (both when the log fails). A waiter sleeps without mu on the word
     * of the sync that covers its line, so a sync wakes exactly the threads it released
     * (and the one that starts the next sync): waking the rest only to sleep again was a
     * context switch per request, the log's largest cost (bench_signer, perf). A waiter
     * whose line the sync covered goes on without taking mu. */
    uint32_t done[2];
    uint64_t sync_no;            /* syncs started; while syncing, sync_no is the one in flight */
    uint64_t sync_target;        /* the sync in flight covers lines [0, sync_target) */
    uint64_t leader_of;          /* a waiter will start the sync after sync leader_of (0: none) */
    int (*sync_hook)(void *ctx); /* tests: before each fdatasync; nonzero = its errno */
    void *sync_hook_ctx;
    int dirfd, fd;
    uint64_t next_seq;     /* seq of the next line */
    uint64_t synced;       /* lines [0, synced) are durable; written under mu, atomically */
    off_t synced_bytes;    /* ... and end at this offset of the file (under mu) */
    audit_line_fn line_fn; /* replay only */
    void *line_ctx;
    off_t good_size; /* the file's size after the last complete line */
    /* Lines appended but not yet written: the syncer writes them just before its
     * fdatasync, outside mu, so an append never waits on the disk (a write(2) into a
     * page under writeback can block until that writeback ends). */
    char *pend;
    size_t pend_len, pend_cap;
    int syncing;         /* a thread is in fdatasync for the others */
    int failed;          /* fail closed until a reopen works */
    char why[200];       /* the failure, as callers see it */
    double last_attempt; /* monotonic: the last reopen attempt */
    double retry_s;
    uint64_t syncs;
    metrics_hist sync_hist; /* fdatasync's time (lock-free) */
    audit_tree tree;
    char line[AUDIT_LINE_MAX]; /* under mu */
};

/* ---- open and replay ----------------------------------------------------------------- */

static HSMCA_MUSTCHECK hsmca_code fsync_dir(int dirfd, const char *dir, hsmca_err *e)
{
    HSMCA_ENSURE(fsync(dirfd) == 0, e, HSMCA_EIO, "audit log: fsync %.128s: %s", dir,
                 strerror(errno));
    return HSMCA_OK;
}

/* One line of the existing log, at byte off: parse, check its seq, hash it into the
 * tree, then the caller's replay (which may refuse the log). */
static HSMCA_MUSTCHECK hsmca_code replay_line(audit_log *l, const char *p, size_t n, uint64_t off,
                                              audit_replay_fn fn, void *ctx, audit_replay_stats *st,
                                              hsmca_err *e)
{
    static _Thread_local audit_entry_buf buf;
    audit_entry ent;
    hsmca_err pe;
    hsmca_err_clear(&pe);
    if (audit_entry_parse(p, n, &ent, &buf, &pe) != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EINVAL, "audit log: entry %llu: %s",
                          (unsigned long long)l->next_seq, pe.msg);
    HSMCA_ENSURE(ent.seq == l->next_seq, e, HSMCA_EINVAL,
                 "audit log: entry %llu has seq %llu (lines missing or reordered)",
                 (unsigned long long)l->next_seq, (unsigned long long)ent.seq);
    audit_hash leaf;
    HSMCA_GUARD(audit_hash_leaf((const uint8_t *)p, n, &leaf, e));
    HSMCA_GUARD(audit_tree_append(&l->tree, &leaf, e));
    if (l->line_fn)
        HSMCA_GUARD(l->line_fn(l->line_ctx, p, n, &leaf, e));
    l->next_seq++;
    st->entries++;
    if (ent.kind == AUDIT_ISSUE_INTENT)
        st->intents++;
    return fn ? fn(ctx, &ent, off, e) : HSMCA_OK;
}

/* Reads DIR/log line by line (audit_lines.h: bounded memory); a torn tail is left in
 * *torn bytes past l->good_size. */
static HSMCA_MUSTCHECK hsmca_code replay(audit_log *l, audit_replay_fn fn, void *ctx,
                                         audit_replay_stats *st, uint64_t *torn, hsmca_err *e)
{
    int rfd = openat(l->dirfd, AUDIT_LOG_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    HSMCA_ENSURE(rfd >= 0, e, HSMCA_EIO, "audit log: cannot read it back: %s", strerror(errno));
    audit_lines *lr;
    HSMCA_GUARD(audit_lines_open_fd(rfd, 1, &lr, e));
    hsmca_code rc = HSMCA_OK;
    for (;;) {
        const char *p;
        size_t n;
        uint64_t off;
        int eof;
        hsmca_err le;
        if (audit_lines_next(lr, &p, &n, &off, &eof, &le) != HSMCA_OK) {
            rc = hsmca_fail(e, le.code == HSMCA_EIO ? HSMCA_EIO : HSMCA_EINVAL,
                            "audit log: entry %llu: %s", (unsigned long long)l->next_seq, le.msg);
            break;
        }
        if (eof)
            break;
        rc = replay_line(l, p, n, off, fn, ctx, st, e);
        if (rc != HSMCA_OK)
            break;
        l->good_size += (off_t)(n + 1);
    }
    *torn = audit_lines_torn(lr);
    audit_lines_close(lr);
    return rc;
}

static void audit_log_free(audit_log *l)
{
    free(l->pend);
    if (l->fd >= 0)
        close(l->fd);
    if (l->dirfd >= 0)
        close(l->dirfd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static HSMCA_MUSTCHECK hsmca_code open_files(audit_log *l, const char *dir, uid_t owner,
                                             gid_t group, hsmca_err *e)
{
    int made_dir = mkdir(dir, 0700) == 0;
    HSMCA_ENSURE(made_dir || errno == EEXIST, e, HSMCA_EIO, "audit log: mkdir %.128s: %s", dir,
                 strerror(errno));
    l->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    HSMCA_ENSURE(l->dirfd >= 0, e, HSMCA_EIO, "audit log: open %.128s: %s", dir, strerror(errno));
    if (made_dir && owner != (uid_t)-1)
        HSMCA_ENSURE(fchown(l->dirfd, owner, group) == 0, e, HSMCA_EIO,
                     "audit log: chown %.128s: %s", dir, strerror(errno));
    int made_file = 0;
    l->fd = openat(l->dirfd, AUDIT_LOG_FILE, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (l->fd < 0 && errno == ENOENT) {
        l->fd = openat(l->dirfd, AUDIT_LOG_FILE,
                       O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        made_file = l->fd >= 0;
    }
    HSMCA_ENSURE(l->fd >= 0, e, HSMCA_EIO, "audit log: open %.128s/" AUDIT_LOG_FILE ": %s", dir,
                 strerror(errno));
    if (made_file && owner != (uid_t)-1)
        HSMCA_ENSURE(fchown(l->fd, owner, group) == 0, e, HSMCA_EIO,
                     "audit log: chown %.128s/" AUDIT_LOG_FILE ": %s", dir, strerror(errno));
    /* A new file's name is durable only once its directory is (and a new directory's
     * once its parent is). */
    if (made_dir) {
        char parent[4096];
        snprintf(parent, sizeof(parent), "%s/..", dir);
        int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd >= 0) {
            int ok = fsync(pfd) == 0;
            close(pfd);
            HSMCA_ENSURE(ok, e, HSMCA_EIO, "audit log: fsync the parent of %.128s", dir);
        }
    }
    if (made_file || made_dir)
        HSMCA_GUARD(fsync_dir(l->dirfd, dir, e));
    return HSMCA_OK;
}

hsmca_code audit_log_open(const char *dir, uid_t owner, gid_t group, audit_replay_fn fn, void *ctx,
                          audit_log **out, audit_replay_stats *stats, hsmca_err *e)
{
    return audit_log_open_ex(dir, owner, group, fn, ctx, NULL, NULL, out, stats, e);
}

hsmca_code audit_log_open_ex(const char *dir, uid_t owner, gid_t group, audit_replay_fn fn,
                             void *ctx, audit_line_fn line_fn, void *line_ctx, audit_log **out,
                             audit_replay_stats *stats, hsmca_err *e)
{
    *out = NULL;
    audit_replay_stats st_local;
    audit_replay_stats *st = stats ? stats : &st_local;
    memset(st, 0, sizeof(*st));
    audit_log *l = calloc(1, sizeof(*l));
    HSMCA_ENSURE(l, e, HSMCA_ENOMEM, "out of memory");
    /* Adaptive: under load many workers append at once for a short hold each, and
     * a brief spin is cheaper than queueing every one of them in the kernel. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&l->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    l->dirfd = l->fd = -1;
    l->retry_s = 1.0;
    l->line_fn = line_fn;
    l->line_ctx = line_ctx;
    audit_tree_init(&l->tree);
    /* Fail closed, not dead: over RLIMIT_FSIZE a write must fail with EFBIG. */
    signal(SIGXFSZ, SIG_IGN);
    uint64_t torn = 0;
    hsmca_code rc = open_files(l, dir, owner, group, e);
    if (rc == HSMCA_OK)
        rc = replay(l, fn, ctx, st, &torn, e);
    if (rc == HSMCA_OK && torn) {
        /* A crash in the middle of a write: the line was never durable, so no signature
         * depended on it. Cut it and say so in the log. */
        if (ftruncate(l->fd, l->good_size) != 0 || fdatasync(l->fd) != 0)
            rc = hsmca_fail(e, HSMCA_EIO, "audit log: cannot cut a torn last line: %s",
                            strerror(errno));
        st->cut_bytes = torn;
    }
    l->synced = l->next_seq;
    l->synced_bytes = l->good_size;
    l->line_fn = NULL; /* replay only: the caller's ctx need not outlive the open */
    if (rc == HSMCA_OK && torn) {
        char why[96];
        int n = snprintf(why, sizeof(why), "cut a torn last line of %llu bytes at offset %lld",
                         (unsigned long long)torn, (long long)l->good_size);
        audit_entry rec = {.kind = AUDIT_RECOVERY, .reason = {why, (size_t)n, 0}};
        uint64_t seq;
        rc = audit_log_append(l, &rec, &seq, e);
        if (rc == HSMCA_OK)
            rc = audit_log_sync_through(l, seq, e);
        LOG_EVENT(LOG_LVL_WARN, "audit log: recovery", LOG_STR("reason", why));
    }
    if (rc != HSMCA_OK) {
        audit_log_free(l);
        return rc;
    }
    *out = l;
    return HSMCA_OK;
}

/* ---- append and group commit --------------------------------------------------------- */

/* Beyond this many bytes pending, an append syncs itself (back-pressure on a slow disk). */
#define AUDIT_PEND_FLUSH (1u << 20)

/* Under mu: appends n bytes to the pending buffer; 0 when out of memory. */
static int pend_add(audit_log *l, const char *p, size_t n)
{
    if (l->pend_len + n > l->pend_cap) {
        size_t cap = l->pend_cap ? l->pend_cap : 2 * (size_t)AUDIT_LINE_MAX;
        while (cap < l->pend_len + n)
            cap *= 2;
        char *b = realloc(l->pend, cap);
        if (!b)
            return 0;
        l->pend = b;
        l->pend_cap = cap;
    }
    memcpy(l->pend + l->pend_len, p, n);
    l->pend_len += n;
    return 1;
}

/* Writes p[0..n) at the end of fd; 0 or the errno that stopped it. */
static int write_all(int fd, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        done += (size_t)w;
    }
    return 0;
}

/* Wakes every thread asleep on the futex word w. */
static void wake_all(uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Under mu: marks both parities' syncs over (the log failed); wake_all(both) once mu
 * is free. */
static void end_all_locked(audit_log *l)
{
    __atomic_add_fetch(&l->done[0], 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&l->done[1], 1, __ATOMIC_RELEASE);
}

/* Sleeps while *w is v (a futex wait: returns at once when it moved on, and may return
 * early; the caller checks again). */
static void wait_word(uint32_t *w, uint32_t v)
{
    if (__atomic_load_n(w, __ATOMIC_ACQUIRE) == v)
        syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

/* Under mu: enters the failed state with the reason. */
static void fail_locked(audit_log *l, const char *what, int err)
{
    if (!l->failed)
        LOG_EVENT(LOG_LVL_ERROR, "audit log failed: issuance stops until it is writable",
                  LOG_STR("op", what), LOG_STR("error", strerror(err)));
    l->failed = 1;
    snprintf(l->why, sizeof(l->why), "audit log: %s failed: %s", what, strerror(err));
    l->last_attempt = util_mono_now();
    end_all_locked(l);
}

/* Under mu, failed and nobody syncing: reopen, cut a partial line, sync; 1 when writable
 * again. At most once per retry interval, so a full disk is not hammered. */
static int try_recover_locked(audit_log *l)
{
    double now = util_mono_now();
    if (l->syncing || now - l->last_attempt < l->retry_s)
        return 0;
    l->last_attempt = now;
    int fd = openat(l->dirfd, AUDIT_LOG_FILE, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(l->why, sizeof(l->why), "audit log: reopen failed: %s", strerror(errno));
        return 0;
    }
    /* The lines that were pending when the log failed are written again after the last
     * complete line (their callers were told UNAVAILABLE: an intent among them signed
     * nothing). Rare, so done under mu. */
    int err = 0;
    if (ftruncate(fd, l->good_size) != 0)
        err = errno;
    if (!err)
        err = write_all(fd, l->pend, l->pend_len);
    if (!err && fdatasync(fd) != 0)
        err = errno;
    if (err) {
        snprintf(l->why, sizeof(l->why), "audit log: write failed: %s", strerror(err));
        close(fd);
        return 0;
    }
    close(l->fd);
    l->fd = fd;
    l->failed = 0;
    l->good_size += (off_t)l->pend_len;
    l->pend_len = 0;
    /* every line is on disk: the sync above covered it */
    __atomic_store_n(&l->synced, l->next_seq, __ATOMIC_RELEASE);
    l->synced_bytes = l->good_size;
    l->syncs++;
    log_event(LOG_LVL_INFO, "audit log: writable again, issuance resumes", NULL, 0);
    return 1;
}

hsmca_code audit_log_append(audit_log *l, audit_entry *ent, uint64_t *seq, hsmca_err *e)
{
    return audit_log_append_checked(l, ent, NULL, NULL, seq, e);
}

hsmca_code audit_log_append_checked(audit_log *l, audit_entry *ent, audit_check_fn check,
                                    void *ctx, uint64_t *seq, hsmca_err *e)
{
    pthread_mutex_lock(&l->mu);
    /* An intent's outcome is kept while the log has failed, to be written after it when
     * the log recovers: without it the intent would read as "maybe signed" (and the next
     * start would record UNKNOWN) when we know what happened. Bounded: an intent cannot
     * be appended meanwhile, so these are at most the intents in flight at the failure. */
    int keep = ent->kind == AUDIT_ISSUE_RESULT;
    if (l->failed && !try_recover_locked(l) && !keep) {
        hsmca_code rc = hsmca_fail(e, HSMCA_EUNAVAIL, "%s", l->why);
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    ent->seq = l->next_seq;
    ent->time = util_wall_now();
    size_t n;
    /* The rules see the entry with the seq and time it is written with. */
    hsmca_code rc = check ? check(ctx, ent, e) : HSMCA_OK;
    if (rc == HSMCA_OK)
        rc = audit_entry_encode(ent, l->line, &n, e);
    if (rc != HSMCA_OK) {
        pthread_mutex_unlock(&l->mu);
        return rc;
    }
    if (!pend_add(l, l->line, n)) {
        pthread_mutex_unlock(&l->mu);
        return hsmca_fail(e, HSMCA_ENOMEM, "audit log: out of memory");
    }
    audit_hash leaf;
    rc = audit_hash_leaf((const uint8_t *)l->line, n - 1, &leaf, e);
    if (rc == HSMCA_OK)
        rc = audit_tree_append(&l->tree, &leaf, e);
    /* Hook for checkpoints (docs/ARCHITECTURE.md §7.6, next step): the tree's root after this line is
     * what a checkpoint signed by the audit key will commit to, at least once a second. */
    *seq = l->next_seq++;
    int flush = l->pend_len > AUDIT_PEND_FLUSH && !l->failed;
    pthread_mutex_unlock(&l->mu);
    if (rc == HSMCA_OK && flush)
        rc = audit_log_sync_through(l, *seq, e);
    return rc;
}

/* Under mu, a sync in flight and line seq not durable: picks the futex word to sleep on
 * and its value. A line the sync in flight covers waits for it; a later line waits for
 * the next sync, and the first such waiter (the leader) waits for the one in flight to
 * end, to start the next: so no sync wakes a thread it did not release, and a next
 * sync always has a thread to start it. *lead is the sync whose end this thread waits
 * for as the leader (0: none); it stays the leader when it wakes early. */
static uint32_t *pick_word(audit_log *l, uint64_t seq, uint64_t *lead, uint32_t *v)
{
    uint64_t n = l->sync_no;
    if (seq >= l->sync_target) {
        if (l->leader_of != n || *lead == n)
            l->leader_of = *lead = n;
        else
            n++;
    }
    uint32_t *w = &l->done[n & 1];
    *v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    return w;
}

/* Under mu, nobody syncing: writes what is pending and syncs it, with mu released
 * meanwhile; returns with mu held, the sync's waiters to wake (*woken) once it is
 * free. */
static void sync_locked(audit_log *l, uint32_t **woken)
{
    l->syncing = 1;
    uint64_t me = ++l->sync_no;
    uint64_t target = l->sync_target = l->next_seq;
    int fd = l->fd;
    char *out = l->pend;
    size_t out_len = l->pend_len;
    l->pend = NULL;
    l->pend_len = l->pend_cap = 0;
    int (*hook)(void *) = l->sync_hook;
    void *hook_ctx = l->sync_hook_ctx;
    pthread_mutex_unlock(&l->mu);
    int werr = write_all(fd, out, out_len), serr = 0;
    if (!werr && hook)
        serr = hook(hook_ctx);
    double t0 = util_mono_now();
    if (!werr && !serr && fdatasync(fd) != 0)
        serr = errno;
    if (!werr && !serr)
        metrics_hist_observe(&l->sync_hist, util_mono_now() - t0);
    pthread_mutex_lock(&l->mu);
    l->syncing = 0;
    l->syncs++;
    if (werr || serr) {
        /* Keep the lines, in order, for the recovery to write again after the last
         * complete line: what was appended meanwhile goes after them. */
        if (!werr)
            l->good_size += (off_t)out_len; /* written whole: only the sync failed */
        else {
            size_t had = l->pend_len;
            char *rest = l->pend;
            l->pend = out;
            l->pend_len = l->pend_cap = out_len;
            out = NULL;
            if (had && !pend_add(l, rest, had))
                fatal("audit log: out of memory keeping the lines a failed write left; "
                      "stopping rather than sign past them"); /* hsmca_err.h */
            free(rest);
        }
        fail_locked(l, werr ? "write" : "sync", werr ? werr : serr);
        woken[0] = &l->done[0];
        woken[1] = &l->done[1];
    } else {
        l->good_size += (off_t)out_len;
        if (target > l->synced) {
            __atomic_store_n(&l->synced, target, __ATOMIC_RELEASE);
            l->synced_bytes = l->good_size;
        }
        __atomic_add_fetch(&l->done[me & 1], 1, __ATOMIC_RELEASE);
        woken[0] = &l->done[me & 1];
    }
    free(out);
}

hsmca_code audit_log_sync_through(audit_log *l, uint64_t seq, hsmca_err *e)
{
    uint32_t *woken[2] = {NULL, NULL};
    uint64_t lead = 0;
    pthread_mutex_lock(&l->mu);
    while (!l->failed && l->synced <= seq) {
        if (l->syncing) { /* the sync in flight, or the next, covers us: wait for it */
            uint32_t v;
            uint32_t *w = pick_word(l, seq, &lead, &v);
            pthread_mutex_unlock(&l->mu);
            wait_word(w, v);
            if (!lead && __atomic_load_n(&l->synced, __ATOMIC_ACQUIRE) > seq)
                return HSMCA_OK;
            pthread_mutex_lock(&l->mu);
            continue;
        }
        /* Sync for everyone: every line written so far. The waiters are woken once mu
         * is free (they may need it), below. */
        sync_locked(l, woken);
    }
    hsmca_code rc = l->synced > seq ? HSMCA_OK : hsmca_fail(e, HSMCA_EUNAVAIL, "%s", l->why);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < 2; i++)
        if (woken[i])
            wake_all(woken[i]);
    return rc;
}

hsmca_code audit_log_flush(audit_log *l, hsmca_err *e)
{
    pthread_mutex_lock(&l->mu);
    int idle = l->pend_len > 0 && !l->syncing && !l->failed;
    uint64_t last = l->next_seq - 1;
    pthread_mutex_unlock(&l->mu);
    return idle ? audit_log_sync_through(l, last, e) : HSMCA_OK;
}

hsmca_code audit_log_root(audit_log *l, uint64_t *size, audit_hash *root, hsmca_err *e)
{
    pthread_mutex_lock(&l->mu);
    *size = l->tree.size;
    hsmca_code rc = audit_tree_root(&l->tree, root, e);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void audit_log_durable(audit_log *l, uint64_t *lines, uint64_t *bytes)
{
    pthread_mutex_lock(&l->mu);
    *lines = l->synced;
    *bytes = (uint64_t)l->synced_bytes;
    pthread_mutex_unlock(&l->mu);
}

void audit_log_figures_get(audit_log *l, audit_log_figures *out)
{
    pthread_mutex_lock(&l->mu);
    out->failed = l->failed;
    out->entries = l->synced;
    out->bytes = (uint64_t)l->synced_bytes;
    pthread_mutex_unlock(&l->mu);
    metrics_hist_read(&l->sync_hist, &out->sync);
}

uint64_t audit_log_syncs(audit_log *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t n = l->syncs;
    pthread_mutex_unlock(&l->mu);
    return n;
}

void audit_log_set_sync_hook(audit_log *l, int (*hook)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&l->mu);
    l->sync_hook = hook;
    l->sync_hook_ctx = ctx;
    pthread_mutex_unlock(&l->mu);
}

void audit_log_set_retry_interval(audit_log *l, double seconds)
{
    pthread_mutex_lock(&l->mu);
    l->retry_s = seconds;
    pthread_mutex_unlock(&l->mu);
}

void audit_log_close(audit_log *l)
{
    if (!l)
        return;
    hsmca_err e;
    if (l->next_seq > 0 && audit_log_sync_through(l, l->next_seq - 1, &e) != HSMCA_OK)
        LOG_EVENT(LOG_LVL_WARN, "audit log: lines lost at close", LOG_STR("error", e.msg));
    audit_log_free(l);
}
