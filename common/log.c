/* log.c - JSON-lines logging to stderr. Each line is built in a fixed buffer whose
 * worst case is proved below from the caps, then written with one write(2), so
 * lines from several processes sharing stderr never interleave and none is cut. */
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "window_limiter.h"

#define LOG_TS_MAX 31   /* "YYYY-MM-DDTHH:MM:SS.mmmZ", room for a 10-digit year */
#define LOG_PROC_MAX 31 /* log_init keeps this much, from a safe alphabet */
#define LIT(s) (sizeof(s) - 1)
#define SUMMARY_MSG "suppressed refusal lines"

/* Worst case of each part of a line. A value is ,"key":"<esc>" plus, when cut,
 * ,"key_truncated":<size_t>; a number field is ,"key":<up to 20 characters>. */
#define HEAD_MAX                                                                                   \
    (LIT("{\"ts\":\"\",\"lvl\":\"error\",\"proc\":\"\",\"pid\":-2147483648") + LOG_TS_MAX +        \
     LOG_PROC_MAX)
#define VALUE_MAX(keylen, esc)                                                                     \
    (LIT(",\"\":\"\",\"_truncated\":18446744073709551615") + 2 * (keylen) + (esc))
#define NUMBER_MAX(keylen) (LIT(",\"\":18446744073709551615") + (keylen))
#define TAIL_MAX LIT("}\n")

static_assert(HEAD_MAX + VALUE_MAX(LIT("msg"), LOG_FIELD_ESC_MAX) +
                      LOG_FIELDS_MAX * VALUE_MAX(LOG_KEY_MAX, LOG_FIELD_ESC_MAX) +
                      NUMBER_MAX(LIT("_dropped")) + TAIL_MAX <=
                  LOG_LINE_MAX,
              "a log_event line fits one atomic write");
static_assert(HEAD_MAX + VALUE_MAX(LIT("msg"), LOG_MSG_ESC_MAX) + TAIL_MAX <= LOG_LINE_MAX,
              "a printf-style line fits one atomic write");
static_assert(HEAD_MAX + VALUE_MAX(LIT("msg"), LIT(SUMMARY_MSG)) +
                      3 * NUMBER_MAX(LIT("interval_s")) + TAIL_MAX <=
                  LOG_LINE_MAX,
              "a limiter summary fits one atomic write");
static_assert(LOG_FIELD_ESC_MAX >= 6 && LOG_MSG_ESC_MAX >= 6, "one escape always fits");

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static char log_proc[LOG_PROC_MAX + 1] = "hsmca";
static int log_level = LOG_LVL_INFO;

void log_init(const char *proc)
{
    size_t i = 0;
    for (; proc && proc[i] && i < LOG_PROC_MAX; i++) {
        char c = proc[i];
        int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '.' || c == '-';
        log_proc[i] = safe ? c : '_';
    }
    if (proc)
        log_proc[i] = '\0';
    const char *lv = getenv("HSMCA_LOG_LEVEL");
    for (int l = LOG_LVL_DEBUG; lv && l <= LOG_LVL_ERROR; l++)
        if (!strcmp(lv, level_names[l]))
            log_level = l;
}

void log_set_level(int level)
{
    log_level = level;
}

/* A line under construction. put() cannot overflow: the static_asserts above bound
 * every line, so running out of room is a bug in this file, not an input. */
typedef struct {
    char buf[LOG_LINE_MAX];
    size_t len;
} log_line;

static void put(log_line *b, const void *p, size_t n)
{
    if (n > sizeof(b->buf) - b->len)
        abort();
    memcpy(b->buf + b->len, p, n);
    b->len += n;
}

static void put_s(log_line *b, const char *s)
{
    put(b, s, strlen(s));
}

/* ,"key":<number>, the number already formatted (at most 20 characters). */
static void put_number(log_line *b, const char *key, const char *num)
{
    put_s(b, ",\"");
    put_s(b, key);
    put_s(b, "\":");
    put_s(b, num);
}

static void put_u64(log_line *b, const char *key, uint64_t v)
{
    char num[21];
    snprintf(num, sizeof(num), "%" PRIu64, v);
    put_number(b, key, num);
}

/* Length of the valid UTF-8 sequence at s (1-4 bytes), or 0 when s[0] starts none:
 * a stray continuation, C0/C1 or F5+ lead, overlong form, surrogate, code point
 * above U+10FFFF, or a sequence cut short by the end of the input. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t need;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 1;
    else if (c >= 0xe0 && c <= 0xef)
        need = 2;
    else if (c >= 0xf0 && c <= 0xf4)
        need = 3;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0; /* below is an overlong 2-byte form */
    else if (c == 0xed)
        hi = 0x9f; /* above is a surrogate */
    else if (c == 0xf0)
        lo = 0x90; /* below is an overlong 3-byte form */
    else if (c == 0xf4)
        hi = 0x8f; /* above is past U+10FFFF */
    if (n <= need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i <= need; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return need + 1;
}

/* Escapes the character (or the one invalid byte) at s into out; sets *used to the
 * input bytes it stands for and returns the bytes written (at most 6). */
static size_t escape_one(const unsigned char *s, size_t n, char out[6], size_t *used)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = utf8_len(s, n);
    unsigned char c = s[0];
    *used = k ? k : 1;
    if (k == 0) { /* decodes to \xNN; a literal backslash decodes to \\, so no clash */
        memcpy(out, "\\\\x", 3);
        out[3] = hex[c >> 4];
        out[4] = hex[c & 15];
        return 5;
    }
    if (k > 1) {
        memcpy(out, s, k);
        return k;
    }
    switch (c) {
    case '"': memcpy(out, "\\\"", 2); return 2;
    case '\\': memcpy(out, "\\\\\\\\", 4); return 4;
    case '\n': memcpy(out, "\\n", 2); return 2;
    case '\r': memcpy(out, "\\r", 2); return 2;
    case '\t': memcpy(out, "\\t", 2); return 2;
    }
    if (c < 0x20 || c == 0x7f) {
        memcpy(out, "\\u00", 4);
        out[4] = hex[c >> 4];
        out[5] = hex[c & 15];
        return 6;
    }
    out[0] = (char)c;
    return 1;
}

/* Appends the longest escaped prefix of s[0..n) made of whole characters that keeps
 * within in_cap input and esc_cap output bytes; returns the input bytes it covers. */
static size_t put_escaped(log_line *b, const unsigned char *s, size_t n, size_t in_cap,
                          size_t esc_cap)
{
    size_t in = 0, out = 0;
    while (in < n) {
        char e[6];
        size_t used, w = escape_one(s + in, n - in, e, &used);
        if (in + used > in_cap || out + w > esc_cap)
            break;
        put(b, e, w);
        in += used;
        out += w;
    }
    return in;
}

size_t log_json_escape(const void *s, size_t n, size_t in_cap, char *out, size_t out_cap,
                       size_t *out_len)
{
    const unsigned char *p = s;
    size_t in = 0, o = 0;
    while (in < n) {
        char e[6];
        size_t used, w = escape_one(p + in, n - in, e, &used);
        if (in + used > in_cap || o + w > out_cap)
            break;
        memcpy(out + o, e, w);
        in += used;
        o += w;
    }
    *out_len = o;
    return in;
}

/* ,"key":"<escaped>" for the first have bytes at s of a value full bytes long, and
 * ,"key_truncated":full when what fits the caps is less than all of it. */
static void put_value(log_line *b, const char *key, const char *s, size_t have, size_t full,
                      size_t in_cap, size_t esc_cap)
{
    put_s(b, ",\"");
    put_s(b, key);
    put_s(b, "\":\"");
    size_t kept = put_escaped(b, (const unsigned char *)s, have, in_cap, esc_cap);
    put_s(b, "\"");
    if (kept < full) {
        char k[LOG_KEY_MAX + sizeof("_truncated")];
        snprintf(k, sizeof(k), "%s_truncated", key);
        put_u64(b, k, full);
    }
}

/* Starts a line at level: 0 when the level is filtered out. */
static int line_begin(log_line *b, int level)
{
    if (level < log_level)
        return 0;
    level = level < LOG_LVL_DEBUG ? LOG_LVL_DEBUG : level > LOG_LVL_ERROR ? LOG_LVL_ERROR : level;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    if (!gmtime_r(&ts.tv_sec, &tm))
        memset(&tm, 0, sizeof(tm));
    char when[128], pid[12]; /* when: room for any int; kept to LOG_TS_MAX digits */
    int tn = snprintf(when, sizeof(when), "%04lld-%02d-%02dT%02d:%02d:%02d.%03ldZ",
                      (long long)tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                      tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    snprintf(pid, sizeof(pid), "%d", (int)getpid());

    b->len = 0;
    put_s(b, "{\"ts\":\"");
    put(b, when, tn < 0 ? 0 : tn > LOG_TS_MAX ? LOG_TS_MAX : (size_t)tn);
    put_s(b, "\",\"lvl\":\"");
    put_s(b, level_names[level]);
    put_s(b, "\",\"proc\":\"");
    put_s(b, log_proc);
    put_s(b, "\",\"pid\":");
    put_s(b, pid);
    return 1;
}

static void line_write(log_line *b)
{
    put_s(b, "}\n");
    ssize_t w;
    do
        w = write(STDERR_FILENO, b->buf, b->len);
    while (w < 0 && errno == EINTR);
}

/* A log_event key is a literal [a-z][a-z0-9_]* of at most LOG_KEY_MAX bytes that
 * cannot collide with another key of the line: not a fixed key, not an earlier
 * field's, not a *_truncated sibling. */
static int key_ok(const log_field *f, size_t i)
{
    static const char *const fixed[] = {"ts", "lvl", "proc", "pid", "msg"};
    static const char suffix[] = "_truncated";
    const char *k = f[i].key;
    if (!k || *k < 'a' || *k > 'z')
        return 0;
    size_t n = strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (k[n] || n > LOG_KEY_MAX)
        return 0;
    if (n >= LIT(suffix) && !strcmp(k + n - LIT(suffix), suffix))
        return 0;
    for (size_t j = 0; j < sizeof(fixed) / sizeof(fixed[0]); j++)
        if (!strcmp(k, fixed[j]))
            return 0;
    for (size_t j = 0; j < i; j++)
        if (f[j].key && !strcmp(k, f[j].key))
            return 0;
    return 1;
}

const char *log_num_i(char *buf, long long v)
{
    snprintf(buf, LOG_NUM_MAX, "%lld", v);
    return buf;
}

const char *log_num_u(char *buf, unsigned long long v)
{
    snprintf(buf, LOG_NUM_MAX, "%llu", v);
    return buf;
}

void log_event(int level, const char *msg, const log_field *fields, size_t n)
{
    log_line b;
    if (!line_begin(&b, level))
        return;
    if (!msg)
        msg = "";
    size_t mlen = strlen(msg);
    put_value(&b, "msg", msg, mlen, mlen, LOG_FIELD_MAX, LOG_FIELD_ESC_MAX);
    if (!fields)
        n = 0;
    assert(n <= LOG_FIELDS_MAX && "log_event: too many fields");
    size_t shown = n < LOG_FIELDS_MAX ? n : LOG_FIELDS_MAX;
    for (size_t i = 0; i < shown; i++) {
        const log_field *f = &fields[i];
        char alt[24];
        const char *key = f->key;
        int ok = key_ok(fields, i);
        assert(ok && "log_event: keys are distinct [a-z][a-z0-9_]* literals, not reserved");
        if (!ok) { /* "_<i>" is no valid key, so the line stays free of duplicates */
            snprintf(alt, sizeof(alt), "_%zu", i);
            key = alt;
        }
        const char *val = f->val ? f->val : "";
        size_t len = !f->val ? 0 : f->len == LOG_CSTR ? strlen(f->val) : f->len;
        put_value(&b, key, val, len, len, LOG_FIELD_MAX, LOG_FIELD_ESC_MAX);
    }
    if (n > shown)
        put_u64(&b, "_dropped", n - shown);
    line_write(&b);
}

__attribute__((format(printf, 2, 0))) static void log_emit(int level, const char *fmt, va_list ap)
{
    log_line b;
    if (!line_begin(&b, level))
        return;
    /* 3 bytes past the cap: a character that straddles it is seen whole and left
     * out, rather than shown as the invalid bytes of a cut sequence. */
    char msg[LOG_MSG_MAX + 4];
    int r = vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t full = r < 0 ? 0 : (size_t)r;
    size_t have = full < sizeof(msg) - 1 ? full : sizeof(msg) - 1;
    put_value(&b, "msg", msg, have, full, LOG_MSG_MAX, LOG_MSG_ESC_MAX);
    line_write(&b);
}

/* then: how the process exits after the line. */
#define LOG_FN(name, level, then)                                                                  \
    void name(const char *fmt, ...)                                                                \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        log_emit(level, fmt, ap);                                                                  \
        va_end(ap);                                                                                \
        then;                                                                                      \
    }
/* _exit, not exit: a fatal error may come from any thread, and exit's handlers
 * (OpenSSL's cleanup among them) would free what the other threads are still
 * using, turning one failure into wrong answers. The log line is already out
 * (write(2)); only stdout may hold buffered text. */
LOG_FN(fatal, LOG_LVL_ERROR, (fflush(stdout), _exit(1)))
LOG_FN(fatal_config, LOG_LVL_ERROR, (fflush(stdout), _exit(EXIT_CONFIG)))

/* The counting is window_limiter's; this adds the summary line. */
struct log_limiter {
    window_limiter *w;
    unsigned per;    /* lines allowed per window (for the summary) */
    double interval; /* window length, seconds (for the summary) */
};

log_limiter *log_limiter_new(unsigned per_interval, double interval_s)
{
    log_limiter *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    if (!(l->w = window_limiter_new(per_interval, interval_s))) {
        free(l);
        return NULL;
    }
    l->per = per_interval;
    l->interval = interval_s;
    return l;
}

void log_limiter_free(log_limiter *l)
{
    if (!l)
        return;
    window_limiter_free(l->w);
    free(l);
}

static void limiter_summary(const log_limiter *l, uint64_t count)
{
    log_line b;
    if (!line_begin(&b, LOG_LVL_WARN))
        return;
    put_value(&b, "msg", SUMMARY_MSG, LIT(SUMMARY_MSG), LIT(SUMMARY_MSG), LOG_FIELD_MAX,
              LOG_FIELD_ESC_MAX);
    put_u64(&b, "count", count);
    char num[21]; /* %.6g of a finite double: at most 13 characters */
    snprintf(num, sizeof(num), "%.6g", l->interval);
    put_number(&b, "interval_s", num);
    put_u64(&b, "limit", l->per);
    line_write(&b);
}

int log_limiter_allow(log_limiter *l, double now)
{
    uint64_t report;
    int ok = window_limiter_allow(l->w, now, &report);
    /* The counters have their own lock, never held across this write. */
    if (report)
        limiter_summary(l, report);
    return ok;
}

void log_limiter_flush(log_limiter *l, double now)
{
    uint64_t report = window_limiter_flush(l->w, now);
    if (report)
        limiter_summary(l, report);
}
