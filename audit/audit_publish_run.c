/* audit_publish_run.c - the publisher's open (the latest checkpoint, verified), its thread
 * and its stop (see audit_publish.h). */
#include "audit_publish_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* ---- open: the latest checkpoint --------------------------------------------------------- */

/* The largest <n> in DIR/checkpoints/ into *best (0 and HSMCA_ENOTFOUND when none): only
 * when DIR/checkpoint is missing, so the directory is listed only then. */
static HSMCA_MUSTCHECK hsmca_code largest_archived(audit_publish *p, uint64_t *best, hsmca_err *e)
{
    *best = 0;
    int fd = openat(p->fs.root, "checkpoints", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return hsmca_fail(e, HSMCA_ENOTFOUND, "no checkpoints");
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return hsmca_fail(e, HSMCA_EIO, "audit publish: list checkpoints/: %s", strerror(errno));
    }
    int found = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *s = de->d_name;
        size_t n = strspn(s, "0123456789");
        if (n == 0 || n > 19 || s[n] != '\0' || (s[0] == '0' && n > 1))
            continue;
        uint64_t v = strtoull(s, NULL, 10);
        if (!found || v > *best)
            *best = v;
        found = 1;
    }
    closedir(d);
    return found ? HSMCA_OK : hsmca_fail(e, HSMCA_ENOTFOUND, "no checkpoints");
}

/* Why a checkpoint does not open under our key, in words an operator can act on. */
static hsmca_code refuse(audit_publish *p, const char *note, size_t len, const hsmca_err *why,
                         hsmca_err *e)
{
    size_t tlen, ns;
    audit_note_sig sigs[AUDIT_NOTE_SIGS_MAX];
    audit_checkpoint c;
    hsmca_err pe;
    if (audit_note_parse(note, len, &tlen, sigs, &ns, &pe) == HSMCA_OK &&
        audit_checkpoint_parse(note, tlen, &c, &pe) == HSMCA_OK && strcmp(c.origin, p->origin))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "audit log: refusing to start: audit.dir's %s has origin '%.48s', but "
                          "audit.origin is '%.48s' (set audit.origin back, or move the log aside)",
                          p->cp_file, c.origin, p->origin);
    return hsmca_fail(e, HSMCA_EINVAL,
                      "audit log: refusing to start: audit.dir's %s is not signed by the "
                      "configured audit key (%.48s+%08x): %.72s",
                      p->cp_file, p->vk.name, (unsigned)p->vk.id, why->msg);
}

static HSMCA_MUSTCHECK hsmca_code read_latest(audit_publish *p, hsmca_err *e)
{
    p->fs.root = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->fs.root < 0 && errno == ENOENT)
        return HSMCA_OK; /* a new log */
    HSMCA_ENSURE(p->fs.root >= 0, e, HSMCA_EIO, "audit publish: open %.128s: %s", p->dir,
                 strerror(errno));
    uint8_t *note;
    size_t len;
    snprintf(p->cp_file, sizeof(p->cp_file), "checkpoint");
    hsmca_err re;
    hsmca_code rc = pubfs_read(&p->fs, p->cp_file, AUDIT_NOTE_MAX, &note, &len, &re);
    if (rc == HSMCA_ENOTFOUND) {
        uint64_t n;
        if (largest_archived(p, &n, &re) != HSMCA_OK)
            return HSMCA_OK; /* no checkpoint yet */
        snprintf(p->cp_file, sizeof(p->cp_file), "checkpoints/%llu", (unsigned long long)n);
        LOG_EVENT(LOG_LVL_WARN,
                  "audit publish: the checkpoint is missing: checking the log against the latest "
                  "archived one",
                  LOG_STR("dir", p->dir), LOG_STR("path", p->cp_file));
        rc = pubfs_read(&p->fs, p->cp_file, AUDIT_NOTE_MAX, &note, &len, &re);
    }
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "audit log: %.160s", re.msg);
    audit_checkpoint c;
    rc = audit_checkpoint_open((const char *)note, len, &p->vk, &c, &re);
    if (rc != HSMCA_OK) {
        rc = refuse(p, (const char *)note, len, &re, e);
        free(note);
        return rc;
    }
    p->have_cp = 1;
    p->cp_size = c.size;
    p->cp_root = c.root;
    struct stat st; /* a checkpoint is written whole and renamed in: its mtime is its time */
    p->cp_time = fstatat(p->fs.root, p->cp_file, &st, 0) == 0 ? (int64_t)st.st_mtime : 0;
    p->cp_note = (char *)note;
    p->cp_note_len = len;
    return p->cp_size == 0 ? pub_check_root(p, e) : HSMCA_OK; /* no line to wait for */
}

hsmca_code audit_publish_open(const audit_publish_cfg *cfg, audit_publish **out, hsmca_err *e)
{
    *out = NULL;
    size_t olen = strlen(cfg->origin);
    hsmca_err ne;
    if (audit_name_check(cfg->origin, olen, &ne) != HSMCA_OK)
        return hsmca_fail(e, HSMCA_EINVAL, "config: audit.origin '%.64s': %s", cfg->origin, ne.msg);
    HSMCA_ENSURE(strlen(cfg->dir) < sizeof(((audit_publish *)0)->dir), e, HSMCA_EINVAL,
                 "audit publish: directory name too long");
    audit_publish *p = calloc(1, sizeof(*p));
    HSMCA_ENSURE(p, e, HSMCA_ENOMEM, "out of memory");
    p->rbuf = malloc(2 * (size_t)AUDIT_LINE_MAX);
    pthread_mutex_init(&p->mu, NULL);
    util_cond_init_monotonic(&p->cv);
    p->fs.root = p->logfd = -1;
    p->fs.owner = cfg->owner;
    p->fs.group = cfg->group;
    p->sign = cfg->sign;
    p->sign_ctx = cfg->sign_ctx;
    snprintf(p->dir, sizeof(p->dir), "%s", cfg->dir);
    snprintf(p->origin, sizeof(p->origin), "%s", cfg->origin);
    audit_tree_init(&p->tree);
    hsmca_code rc = p->rbuf ? HSMCA_OK : hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (rc == HSMCA_OK)
        rc = cfg->key_type == AUDIT_SIG_TYPE_ECDSA
                 ? audit_vkey_from_spki(cfg->origin, cfg->pub, cfg->pub_len, &p->vk, e)
                 : audit_vkey_from_pub(cfg->origin, cfg->pub, &p->vk, e);
    if (rc == HSMCA_OK)
        rc = read_latest(p, e);
    if (rc != HSMCA_OK) {
        audit_publish_free(p);
        return rc;
    }
    *out = p;
    return HSMCA_OK;
}

/* ---- the thread -------------------------------------------------------------------------- */

/* 1 when a and b are the same text but for their runs of digits: the same reason. A
 * failed round's message names the file it could not write, whose name carries the tile's
 * width or the log's size: while the log grows, every round fails on another name. */
static int same_reason(const char *a, const char *b)
{
    while (*a && *b) {
        int da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da != db || (!da && *a != *b))
            return 0;
        if (!da) {
            a++, b++;
            continue;
        }
        while (*a >= '0' && *a <= '9')
            a++;
        while (*b >= '0' && *b <= '9')
            b++;
    }
    return *a == *b;
}

/* A failed round is said once per reason (a full disk would otherwise say it every
 * second), and its end once. */
static void round_logged(audit_publish *p)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    uint64_t size = 0;
    if (audit_publish_round(p, &size, &e) == HSMCA_OK) {
        if (p->last_err[0])
            LOG_EVENT(LOG_LVL_INFO, "audit publish: checkpoints resume", LOG_UINT("size", size));
        p->last_err[0] = '\0';
        return;
    }
    if (!p->last_err[0] || !same_reason(p->last_err, e.msg))
        LOG_EVENT(LOG_LVL_ERROR,
                  "audit publish: no checkpoint this round (issuance goes on; "
                  "retried)",
                  LOG_STR("error", e.msg));
    snprintf(p->last_err, sizeof(p->last_err), "%s", e.msg);
}

static void *pub_main(void *arg)
{
    audit_publish *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        pthread_mutex_unlock(&p->mu);
        struct timespec next = util_mono_deadline(p->interval);
        round_logged(p);
        pthread_mutex_lock(&p->mu);
        while (!p->stopping && pthread_cond_timedwait(&p->cv, &p->mu, &next) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&p->mu);
    round_logged(p); /* the log's last lines (the stop entry) */
    pthread_mutex_lock(&p->mu);
    p->done = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

hsmca_code audit_publish_start(audit_publish *p, double interval_s, hsmca_err *e)
{
    HSMCA_ENSURE(p->log && !p->started, e, HSMCA_EINTERNAL,
                 "audit publish: start needs an attached publisher, once");
    p->interval = interval_s > 0 ? interval_s : 1.0;
    HSMCA_ENSURE(pthread_create(&p->thread, NULL, pub_main, p) == 0, e, HSMCA_EINTERNAL,
                 "audit publish: cannot start its thread");
    p->started = 1;
    return HSMCA_OK;
}

int audit_publish_stop(audit_publish *p, double timeout_s)
{
    if (!p)
        return 0;
    if (!p->started)
        return 0;
    struct timespec deadline = util_mono_deadline(timeout_s);
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->cv);
    int timed_out = 0;
    while (!p->done && !timed_out)
        timed_out = pthread_cond_timedwait(&p->cv, &p->mu, &deadline) == ETIMEDOUT;
    int done = p->done;
    pthread_mutex_unlock(&p->mu);
    if (!done) {
        char within[32];
        snprintf(within, sizeof(within), "%.1f", timeout_s);
        LOG_EVENT(
            LOG_LVL_WARN,
            "audit publish: the last checkpoint did not finish within timeout_s (audit key call "
            "hung?); stopping without it",
            LOG_STR("timeout_s", within));
        return -1;
    }
    pthread_join(p->thread, NULL);
    p->started = 0;
    return 0;
}

void audit_publish_free(audit_publish *p)
{
    if (!p)
        return;
    if (p->logfd >= 0)
        close(p->logfd);
    if (p->fs.root >= 0)
        close(p->fs.root);
    free(p->cp_note);
    free(p->rbuf);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
