/* audit_lines.c - the log read line by line in one fixed buffer (audit_lines.h). */
#include "audit_lines.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit_entry.h"

#define BUF_SIZE (2 * (size_t)AUDIT_LINE_MAX)

struct audit_lines {
    int fd;
    int eof, torn_ok;
    size_t torn;       /* torn_ok: the bytes of a last line without '\n' */
    size_t start, end; /* unread bytes are buf[start..end) */
    uint64_t off;      /* file offset of buf[start] */
    char buf[BUF_SIZE];
};

hsmca_code audit_lines_open_fd(int fd, int torn_ok, audit_lines **out, hsmca_err *e)
{
    audit_lines *r = malloc(sizeof(*r));
    if (!r) {
        close(fd);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    r->fd = fd;
    r->eof = 0;
    r->torn_ok = torn_ok;
    r->torn = 0;
    r->start = r->end = 0;
    r->off = 0;
    *out = r;
    return HSMCA_OK;
}

hsmca_code audit_lines_open(const char *path, audit_lines **out, hsmca_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    HSMCA_ENSURE(fd >= 0, e, HSMCA_EIO, "cannot open %s: %s", path, strerror(errno));
    return audit_lines_open_fd(fd, 0, out, e);
}

/* Moves the unread bytes to the front and reads more behind them. */
static HSMCA_MUSTCHECK hsmca_code fill(audit_lines *r, hsmca_err *e)
{
    memmove(r->buf, r->buf + r->start, r->end - r->start);
    r->end -= r->start;
    r->start = 0;
    while (r->end < BUF_SIZE) {
        ssize_t n = read(r->fd, r->buf + r->end, BUF_SIZE - r->end);
        if (n < 0 && errno == EINTR)
            continue;
        HSMCA_ENSURE(n >= 0, e, HSMCA_EIO, "log: read failed: %s", strerror(errno));
        if (n == 0) {
            r->eof = 1;
            break;
        }
        r->end += (size_t)n;
    }
    return HSMCA_OK;
}

hsmca_code audit_lines_next(audit_lines *r, const char **line, size_t *len, uint64_t *off, int *eof,
                            hsmca_err *e)
{
    *eof = 0;
    char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
    if (!nl && !r->eof) {
        HSMCA_GUARD(fill(r, e));
        nl = memchr(r->buf + r->start, '\n', r->end - r->start);
    }
    size_t avail = r->end - r->start;
    if (!nl) {
        HSMCA_ENSURE(avail < AUDIT_LINE_MAX, e, HSMCA_EPERM,
                     "log (byte %llu): a line longer than %u bytes", (unsigned long long)r->off,
                     AUDIT_LINE_MAX);
        HSMCA_ENSURE(avail == 0 || r->torn_ok, e, HSMCA_EPERM,
                     "log (byte %llu): the last line (%zu bytes) has no newline (torn)",
                     (unsigned long long)r->off, avail);
        r->torn = avail;
        *eof = 1;
        return HSMCA_OK;
    }
    size_t n = (size_t)(nl - (r->buf + r->start));
    HSMCA_ENSURE(n + 1 <= AUDIT_LINE_MAX, e, HSMCA_EPERM,
                 "log (byte %llu): a line longer than %u bytes", (unsigned long long)r->off,
                 AUDIT_LINE_MAX);
    *line = r->buf + r->start;
    *len = n;
    *off = r->off;
    r->start += n + 1;
    r->off += n + 1;
    return HSMCA_OK;
}

uint64_t audit_lines_torn(const audit_lines *r)
{
    return r->torn;
}

void audit_lines_close(audit_lines *r)
{
    if (!r)
        return;
    close(r->fd);
    free(r);
}
