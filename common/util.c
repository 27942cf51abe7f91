/* util.c - see util.h. */
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

hsmca_code util_read_file(const char *path, size_t max, char **out, size_t *len, hsmca_err *e)
{
    /* Only a regular file is read, and nothing else is even opened in a way that can
     * block: a FIFO or a device opened for reading waits for a writer or the hardware,
     * and the supervisor reads these files on SIGHUP in its one loop. So: stat first (no
     * open at all of what is not a regular file), open non-blocking, check the opened
     * file again (it may have been replaced in between). Symlinks are followed on
     * purpose: Kubernetes mounts a ConfigMap's or Secret's files as symlinks into its
     * ..data directory, and these paths come from the operator's config. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return hsmca_fail(e, HSMCA_EIO, "%s is not a regular file", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return hsmca_fail(e, HSMCA_EIO, "cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return hsmca_fail(e, HSMCA_EIO, "%s is not a regular file", path);
    }
    if ((size_t)st.st_size > max) {
        close(fd);
        return hsmca_fail(e, HSMCA_EINVAL, "%s is larger than %zu bytes", path, max);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory reading %s", path);
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != (size_t)st.st_size) {
        free(buf);
        return hsmca_fail(e, HSMCA_EIO, "short read on %s", path);
    }
    buf[got] = '\0';
    *out = buf;
    if (len)
        *len = got;
    return HSMCA_OK;
}

/* The one atomic writer. exact: the file gets mode whatever the umask (fchmod when the
 * umask took bits away); else mode less the umask, and no chmod call at all. */
static hsmca_code write_atomic(const char *path, const void *data, size_t len, unsigned mode,
                               int exact, hsmca_err *e)
{
    /* A new temp file of an unguessable name (O_EXCL): nothing planted beside path, link
     * or file, is ever opened; rename then replaces whatever path is without following it.
     * renameat, not rename: the call the signer's sandbox allows. */
    char tmp[4096];
    uint64_t r;
    util_random(&r, sizeof(r));
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%016llx", path, (int)getpid(),
                 (unsigned long long)r) >= (int)sizeof(tmp))
        return hsmca_fail(e, HSMCA_EINVAL, "path too long: %s", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return hsmca_fail(e, HSMCA_EIO, "cannot create %s: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = errno;
            close(fd);
            unlink(tmp);
            return hsmca_fail(e, HSMCA_EIO, "cannot write %s: %s", tmp, strerror(err));
        }
        p += w;
        left -= (size_t)w;
    }
    struct stat st;
    int chmod_ok = !exact || (fstat(fd, &st) == 0 && (st.st_mode & 07777) == (mode & 07777)) ||
                   fchmod(fd, mode) == 0;
    if (!chmod_ok || fsync(fd) != 0 || close(fd) != 0) {
        int err = errno;
        unlink(tmp);
        return hsmca_fail(e, HSMCA_EIO, "cannot sync %s: %s", tmp, strerror(err));
    }
    if (renameat(AT_FDCWD, tmp, AT_FDCWD, path) != 0) {
        int err = errno;
        unlink(tmp);
        return hsmca_fail(e, HSMCA_EIO, "cannot rename to %s: %s", path, strerror(err));
    }
    /* Make the rename itself durable. */
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return HSMCA_OK;
}

hsmca_code util_write_file_atomic(const char *path, const void *data, size_t len, unsigned mode,
                                  hsmca_err *e)
{
    return write_atomic(path, data, len, mode, 1, e);
}

hsmca_code util_write_file_umask(const char *path, const void *data, size_t len, unsigned mode,
                                 hsmca_err *e)
{
    return write_atomic(path, data, len, mode, 0, e);
}

hsmca_code util_write_out(const char *path, const void *data, size_t len, unsigned mode,
                          hsmca_err *e)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "refusing to write %s: it is %s, not a regular file (remove it or "
                          "choose another path)",
                          path, S_ISLNK(st.st_mode) ? "a symbolic link" : "a special file");
    return util_write_file_atomic(path, data, len, mode, e);
}

hsmca_code util_read_secret(const char *path, char *buf, size_t bufsz, hsmca_err *e)
{
    char *data = NULL;
    size_t len = 0;
    hsmca_code rc = util_read_file(path, 4096, &data, &len, e);
    if (rc != HSMCA_OK)
        return rc;
    size_t n = strcspn(data, "\r\n");
    if (n == 0 || n >= bufsz || n > UTIL_PIN_MAX) {
        OPENSSL_cleanse(data, len);
        free(data);
        return hsmca_fail(e, HSMCA_EINVAL, "secret file %s: first line must hold 1-%d bytes",
                          path, UTIL_PIN_MAX);
    }
    memcpy(buf, data, n);
    buf[n] = '\0';
    OPENSSL_cleanse(data, len);
    free(data);
    return HSMCA_OK;
}

void util_random(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t r = getrandom(p, len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            abort(); /* no randomness: nothing safe to do */
        p += r;
        len -= (size_t)r;
    }
}

static const char b64url_alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char b64std_alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The one encoder: in[0..len) into out (room for 4 * ((len + 2) / 3) + 1 bytes),
 * NUL-terminated; returns the characters written. */
static size_t b64_encode_into(const uint8_t *in, size_t len, const char *alpha, int pad, char *out)
{
    size_t o = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = alpha[v >> 18];
        out[o++] = alpha[(v >> 12) & 63];
        out[o++] = alpha[(v >> 6) & 63];
        out[o++] = alpha[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = alpha[v >> 18];
        out[o++] = alpha[(v >> 12) & 63];
        if (i + 1 < len)
            out[o++] = alpha[(v >> 6) & 63];
        else if (pad)
            out[o++] = '=';
        if (pad)
            out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

static char *b64_encode(const uint8_t *in, size_t len, const char *alpha, int pad)
{
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (out)
        b64_encode_into(in, len, alpha, pad, out);
    return out;
}

char *util_b64url_encode(const uint8_t *in, size_t len) { return b64_encode(in, len, b64url_alpha, 0); }
char *util_b64_encode(const uint8_t *in, size_t len) { return b64_encode(in, len, b64std_alpha, 1); }

size_t util_b64_encode_to(const uint8_t *in, size_t len, char *out, size_t cap)
{
    if (cap == 0 || len > (cap - 1) / 4 * 3) /* (cap - 1) / 4 quads of 3 bytes each */
        return 0;
    return b64_encode_into(in, len, b64std_alpha, 1, out);
}

/* Value of c in the url (-_) or the standard (+/) alphabet; -1 outside it. */
static int b64_val(unsigned char c, int url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

/* The one decoder behind both alphabets. Canonical input only, so each byte
 * string has exactly one accepted encoding: every character in the alphabet (no
 * whitespace), no 4k+1 length, and zero bits left over after the last byte.
 * padded: whole quads whose end carries exactly the '=' the data needs and '='
 * nowhere else; unpadded: no '=' at all. */
static uint8_t *b64_decode(const char *in, size_t inlen, int url, int padded, size_t *outlen)
{
    size_t n = inlen;
    if (padded) {
        size_t pad = 0;
        if (inlen % 4 != 0)
            return NULL;
        while (pad < 2 && n > 0 && in[n - 1] == '=') {
            n--;
            pad++;
        }
        if (pad != (4 - n % 4) % 4)
            return NULL;
    }
    if (n % 4 == 1)
        return NULL; /* no encoding has this length */
    uint8_t *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)in[i], url);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) { /* the bits under the (implied) padding */
        free(out);
        return NULL;
    }
    *outlen = o;
    return out;
}

uint8_t *util_b64url_decode(const char *in, size_t inlen, size_t *outlen)
{
    return b64_decode(in, inlen, 1, 0, outlen);
}

uint8_t *util_b64_decode(const char *in, size_t inlen, size_t *outlen)
{
    return b64_decode(in, inlen, 0, 1, outlen);
}

size_t util_b64_span(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && b64_val((unsigned char)s[i], 0) >= 0)
        i++;
    return i;
}

const char *util_printable(const char *s, size_t len, char *out, size_t outsz)
{
    static const char ellipsis[] = "...";
    const size_t el = sizeof(ellipsis) - 1;
    if (!out || outsz == 0)
        return "";
    if (!s) {
        s = "(null)";
        len = strlen(s);
    }
    size_t n = len < outsz - 1 ? len : outsz - 1;
    int cut = n < len && outsz > el + 1;
    if (cut)
        n -= el;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        /* Quotes and backslash too: messages put values between quotes. */
        int ok = c >= 0x20 && c <= 0x7e && c != '\'' && c != '"' && c != '\\';
        out[i] = ok ? (char)c : '?';
    }
    if (cut) {
        memcpy(out + n, ellipsis, el);
        n += el;
    }
    out[n] = '\0';
    return out;
}

double util_mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t util_wall_now(void) { return (int64_t)time(NULL); }

struct timespec util_mono_deadline(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long whole = (long)seconds;
    long ns = ts.tv_nsec + (long)((seconds - (double)whole) * 1e9);
    ts.tv_sec += whole + ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    return ts;
}

void util_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int util_unhex(const char *hex, size_t n, uint8_t *out, size_t cap, size_t *outlen)
{
    if (n % 2 || n / 2 > cap)
        return 0;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    *outlen = n / 2;
    return 1;
}

void util_hex(const uint8_t *in, size_t len, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hx[in[i] >> 4];
        out[2 * i + 1] = hx[in[i] & 15];
    }
    out[2 * len] = '\0';
}

int util_cidr_parse(const char *s, uint8_t out[32], size_t *len)
{
    char addr[INET6_ADDRSTRLEN];
    const char *slash = strchr(s, '/'), *p = slash ? slash + 1 : NULL;
    if (!slash || (size_t)(slash - s) >= sizeof(addr) || !p[0] || strlen(p) > 3 ||
        strspn(p, "0123456789") != strlen(p) || (p[0] == '0' && p[1]))
        return 0;
    memcpy(addr, s, (size_t)(slash - s));
    addr[slash - s] = '\0';
    int v6 = strchr(addr, ':') != NULL, bits = atoi(p);
    size_t n = v6 ? 16 : 4;
    if (bits > (int)n * 8 || inet_pton(v6 ? AF_INET6 : AF_INET, addr, out) != 1)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int b = bits - 8 * (int)i;
        uint8_t m = b >= 8 ? 0xff : b <= 0 ? 0 : (uint8_t)(0xff << (8 - b));
        if (out[i] & (uint8_t)~m)
            return 0; /* host bits set: a range has one spelling */
        out[n + i] = m;
    }
    *len = 2 * n;
    return 1;
}
