/* audit_lock.c - see audit_lock.h.
 *
 * flock(2), not fcntl(2) record locks: a record lock is dropped when the process closes
 * any descriptor of the file (a library reading it would release ours) and is not
 * refused to a second descriptor of the same process; a flock belongs to our open file
 * description alone. The pid in the file is for the message only: the lock, not the
 * file's content, says who owns the directory (a stale pid after a crash means nothing,
 * the kernel dropped that holder's lock). */
#include "audit_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* How often a waiter tries the lock again. */
#define AUDIT_LOCK_POLL_US (50 * 1000)

/* mkdir DIR (0700, chowned when owner is set); a new directory's name is durable only
 * once its parent is synced, as audit_log.c does when it makes it. */
static HSMCA_MUSTCHECK hsmca_code make_dir(const char *dir, uid_t owner, gid_t group,
                                           hsmca_err *e)
{
    if (mkdir(dir, 0700) != 0) {
        HSMCA_ENSURE(errno == EEXIST, e, HSMCA_EIO, "audit log lock: mkdir %.128s: %s", dir,
                     strerror(errno));
        return HSMCA_OK;
    }
    if (owner != (uid_t)-1)
        HSMCA_ENSURE(chown(dir, owner, group) == 0, e, HSMCA_EIO,
                     "audit log lock: chown %.128s: %s", dir, strerror(errno));
    char parent[4096];
    snprintf(parent, sizeof(parent), "%s/..", dir);
    int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ok = pfd >= 0 && fsync(pfd) == 0;
    if (pfd >= 0)
        close(pfd);
    HSMCA_ENSURE(ok, e, HSMCA_EIO, "audit log lock: fsync the parent of %.128s", dir);
    return HSMCA_OK;
}

/* The pid the holder wrote, or -1 (not written yet, or not a pid). */
static long holder_pid(int fd)
{
    char buf[24];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    long pid = strtol(buf, &end, 10);
    return end != buf && (*end == '\n' || *end == '\0') && pid > 0 ? pid : -1;
}

/* " by pid N" or " by a process that has not written its pid yet", for messages. */
static void holder_words(int fd, char *out, size_t outsz)
{
    long pid = holder_pid(fd);
    if (pid > 0)
        snprintf(out, outsz, "by pid %ld", pid);
    else
        snprintf(out, outsz, "by a process that has not written its pid yet");
}

/* Our pid into the file, for the next one's message: overwritten in place, then cut to
 * its length, so a full file system (whose page the old pid holds) does not refuse it.
 * Best effort: the lock, which is ours, is what keeps a second signer out. */
static void write_pid(int fd, const char *path)
{
    char buf[24];
    int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (pwrite(fd, buf, (size_t)n, 0) != n || ftruncate(fd, n) != 0)
        LOG_EVENT(LOG_LVL_WARN,
                  "audit log lock: cannot write our pid into it; the lock is held all the same",
                  LOG_STR("path", path), LOG_STR("error", strerror(errno)));
}

/* Tries the lock until it is ours (HSMCA_OK), wait_s ran out or *stop (EPERM). */
static HSMCA_MUSTCHECK hsmca_code wait_for_lock(int fd, const char *path, double wait_s,
                                                const volatile sig_atomic_t *stop, hsmca_err *e)
{
    double deadline = util_mono_now() + wait_s;
    char who[64];
    for (int logged = 0;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return HSMCA_OK;
        if (errno == EINTR)
            continue;
        HSMCA_ENSURE(errno == EWOULDBLOCK, e, HSMCA_EIO, "audit log lock: flock %.120s: %s", path,
                     strerror(errno));
        holder_words(fd, who, sizeof(who));
        if (stop && *stop)
            return hsmca_fail(e, HSMCA_EPERM,
                              "audit log lock: stopped while waiting for %.120s (held %s)", path,
                              who);
        if (util_mono_now() >= deadline)
            return hsmca_fail(e, HSMCA_EPERM,
                              "audit log lock: %.96s is held %s, another signer on this "
                              "audit.dir (still held after %g s); refusing to start",
                              path, who, wait_s);
        if (!logged++) {
            char wait[32];
            snprintf(wait, sizeof(wait), "%g", wait_s);
            LOG_EVENT(LOG_LVL_WARN,
                      "audit log lock: held by another process; waiting for it to stop",
                      LOG_STR("path", path), LOG_STR("held", who), LOG_STR("wait_s", wait));
        }
        usleep(AUDIT_LOCK_POLL_US);
    }
}

hsmca_code audit_lock_take(const char *dir, uid_t owner, gid_t group, double wait_s,
                           const volatile sig_atomic_t *stop, int *fd, hsmca_err *e)
{
    *fd = -1;
    char path[4096];
    HSMCA_ENSURE((size_t)snprintf(path, sizeof(path), "%s/" AUDIT_LOCK_FILE, dir) < sizeof(path),
                 e, HSMCA_EINVAL, "audit log lock: audit.dir is too long");
    HSMCA_GUARD(make_dir(dir, owner, group, e));
    int made = 0;
    int lfd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lfd < 0 && errno == ENOENT) {
        lfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        made = lfd >= 0;
        if (lfd < 0 && errno == EEXIST) /* another signer made it meanwhile */
            lfd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    }
    HSMCA_ENSURE(lfd >= 0, e, HSMCA_EIO, "audit log lock: open %.120s: %s", path,
                 strerror(errno));
    hsmca_code rc = HSMCA_OK;
    if (made && owner != (uid_t)-1 && fchown(lfd, owner, group) != 0)
        rc = hsmca_fail(e, HSMCA_EIO, "audit log lock: chown %.120s: %s", path, strerror(errno));
    if (rc == HSMCA_OK)
        rc = wait_for_lock(lfd, path, wait_s, stop, e);
    if (rc != HSMCA_OK) {
        close(lfd);
        return rc;
    }
    write_pid(lfd, path);
    *fd = lfd;
    return HSMCA_OK;
}

void audit_lock_release(int fd)
{
    if (fd >= 0)
        close(fd);
}
