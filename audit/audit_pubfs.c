/* audit_pubfs.c - the publisher's file operations (audit_pubfs.h). Every path is relative
 * to the audit directory's descriptor, so the signer's seccomp filter sees only openat,
 * mkdirat and renameat/renameat2 on it. */
#include "audit_pubfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUBFS_PATH_MAX 128 /* tile paths are at most 64, ".tmp/" and checkpoints/<20 digits> */
#define PUBFS_TMP_DIR ".tmp"

/* Hands a file or directory the publisher created to the signer's user when we are still
 * root (before the signer drops its privileges); after that, it is ours already. */
static int give(const pubfs *fs, int fd, const char *rel)
{
    if (fs->owner == (uid_t)-1 || geteuid() != 0)
        return 0;
    return fd >= 0 ? fchown(fd, fs->owner, fs->group)
                   : fchownat(fs->root, rel, fs->owner, fs->group, AT_SYMLINK_NOFOLLOW);
}

/* mkdir -p of rel's parent directories. */
static HSMCA_MUSTCHECK hsmca_code make_parents(const pubfs *fs, const char *rel, hsmca_err *e)
{
    char p[PUBFS_PATH_MAX];
    snprintf(p, sizeof(p), "%s", rel);
    for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdirat(fs->root, p, 0755) == 0) {
            HSMCA_ENSURE(give(fs, -1, p) == 0, e, HSMCA_EIO, "audit publish: chown %s: %s", p,
                         strerror(errno));
        } else {
            HSMCA_ENSURE(errno == EEXIST, e, HSMCA_EIO, "audit publish: mkdir %s: %s", p,
                         strerror(errno));
        }
        *s = '/';
    }
    return HSMCA_OK;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The temp file tmp with data, on stable storage when durable. */
static HSMCA_MUSTCHECK hsmca_code write_temp(const pubfs *fs, const char *tmp, const void *data,
                                             size_t len, int durable, hsmca_err *e)
{
    int fd = openat(fs->root, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == ENOENT) {
        HSMCA_GUARD(make_parents(fs, tmp, e));
        fd = openat(fs->root, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    }
    HSMCA_ENSURE(fd >= 0, e, HSMCA_EIO, "audit publish: create %s: %s", tmp, strerror(errno));
    int err = write_all(fd, data, len);
    if (!err && durable && fsync(fd) != 0)
        err = errno;
    if (!err && give(fs, fd, tmp) != 0)
        err = errno;
    close(fd);
    HSMCA_ENSURE(!err, e, HSMCA_EIO, "audit publish: write %s: %s", tmp, strerror(err));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code sync_parent(const pubfs *fs, const char *rel, hsmca_err *e)
{
    char p[PUBFS_PATH_MAX];
    snprintf(p, sizeof(p), "%s", rel);
    char *slash = strrchr(p, '/');
    if (slash)
        *slash = '\0';
    int fd = openat(fs->root, slash ? p : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    HSMCA_ENSURE(fd >= 0, e, HSMCA_EIO, "audit publish: open the directory of %s: %s", rel,
                 strerror(errno));
    int ok = fsync(fd) == 0;
    int err = errno;
    close(fd);
    HSMCA_ENSURE(ok, e, HSMCA_EIO, "audit publish: fsync the directory of %s: %s", rel,
                 strerror(err));
    return HSMCA_OK;
}

/* Temp files live in DIR/.tmp/ ("tile/0/001" is written as ".tmp/tile_0_001"), so one a
 * crash leaves behind is never among the published files a verifier or mirror lists. */
static HSMCA_MUSTCHECK hsmca_code temp_name(const char *rel, char tmp[PUBFS_PATH_MAX], hsmca_err *e)
{
    HSMCA_ENSURE(snprintf(tmp, PUBFS_PATH_MAX, PUBFS_TMP_DIR "/%s", rel) < PUBFS_PATH_MAX, e,
                 HSMCA_EINVAL, "audit publish: path too long: %s", rel);
    for (char *s = tmp + sizeof(PUBFS_TMP_DIR); *s; s++)
        if (*s == '/')
            *s = '_';
    return HSMCA_OK;
}

/* renameat, making rel's directories when they are missing. */
static int rename_in(const pubfs *fs, const char *tmp, const char *rel, unsigned flags,
                     hsmca_err *e)
{
    for (int tries = 0;; tries++) {
        int rc = flags ? renameat2(fs->root, tmp, fs->root, rel, flags)
                       : renameat(fs->root, tmp, fs->root, rel);
        if (rc == 0 || errno != ENOENT || tries > 0)
            return rc;
        int saved = errno;
        if (make_parents(fs, rel, e) != HSMCA_OK) {
            errno = saved;
            return -1;
        }
    }
}

hsmca_code pubfs_replace(const pubfs *fs, const char *rel, const void *data, size_t len,
                         int durable, hsmca_err *e)
{
    char tmp[PUBFS_PATH_MAX];
    HSMCA_GUARD(temp_name(rel, tmp, e));
    HSMCA_GUARD(write_temp(fs, tmp, data, len, durable, e));
    HSMCA_ENSURE(rename_in(fs, tmp, rel, 0, e) == 0, e, HSMCA_EIO,
                 "audit publish: rename %s to %s: %s", tmp, rel, strerror(errno));
    return durable ? sync_parent(fs, rel, e) : HSMCA_OK;
}

hsmca_code pubfs_create(const pubfs *fs, const char *rel, const void *data, size_t len,
                        int *existed, hsmca_err *e)
{
    *existed = 0;
    struct stat st;
    if (fstatat(fs->root, rel, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        *existed = 1;
        return HSMCA_OK;
    }
    char tmp[PUBFS_PATH_MAX];
    HSMCA_GUARD(temp_name(rel, tmp, e));
    HSMCA_GUARD(write_temp(fs, tmp, data, len, 1, e));
    /* Never over an older file of the same name: those are kept as they were signed. */
    int rc = rename_in(fs, tmp, rel, RENAME_NOREPLACE, e);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) /* a file system without it */
        rc = fstatat(fs->root, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 ? (errno = EEXIST, -1)
                                                                   : rename_in(fs, tmp, rel, 0, e);
    if (rc != 0 && errno == EEXIST) {
        *existed = 1;
        return HSMCA_OK; /* the temp file stays: the next write truncates it */
    }
    HSMCA_ENSURE(rc == 0, e, HSMCA_EIO, "audit publish: rename %s to %s: %s", tmp, rel,
                 strerror(errno));
    return sync_parent(fs, rel, e);
}

hsmca_code pubfs_read(const pubfs *fs, const char *rel, size_t max, uint8_t **out, size_t *len,
                      hsmca_err *e)
{
    int fd = openat(fs->root, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return hsmca_fail(e, HSMCA_ENOTFOUND, "audit publish: %s does not exist", rel);
    HSMCA_ENSURE(fd >= 0, e, HSMCA_EIO, "audit publish: open %s: %s", rel, strerror(errno));
    uint8_t *buf = malloc(max + 1);
    size_t have = 0;
    int err = buf ? 0 : ENOMEM;
    while (!err && have <= max) {
        ssize_t got = read(fd, buf + have, max + 1 - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            err = errno;
        if (got <= 0)
            break;
        have += (size_t)got;
    }
    close(fd);
    if (err || have > max) {
        free(buf);
        return err ? hsmca_fail(e, HSMCA_EIO, "audit publish: read %s: %s", rel, strerror(err))
                   : hsmca_fail(e, HSMCA_EINVAL, "audit publish: %s is longer than %zu bytes", rel,
                                max);
    }
    *out = buf;
    *len = have;
    return HSMCA_OK;
}

int pubfs_same(const pubfs *fs, const char *rel, const void *data, size_t len)
{
    uint8_t *b;
    size_t n;
    hsmca_err e;
    if (pubfs_read(fs, rel, len, &b, &n, &e) != HSMCA_OK)
        return 0;
    int same = n == len && (len == 0 || memcmp(b, data, len) == 0);
    free(b);
    return same;
}

hsmca_code pubfs_pread(int fd, uint64_t off, size_t len, uint8_t *buf, hsmca_err *e)
{
    size_t done = 0;
    while (done < len) {
        ssize_t got = pread(fd, buf + done, len - done, (off_t)(off + done));
        if (got < 0 && errno == EINTR)
            continue;
        HSMCA_ENSURE(got >= 0, e, HSMCA_EIO, "audit publish: read the log: %s", strerror(errno));
        HSMCA_ENSURE(got > 0, e, HSMCA_EIO,
                     "audit publish: the log ends at %llu, before its durable size",
                     (unsigned long long)(off + done));
        done += (size_t)got;
    }
    return HSMCA_OK;
}
