/* log.c - JSON-lines logging to stderr. One write(2) per line so lines from
 * several processes sharing stderr never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_proc = "hsmca";
static int log_level = 1;

void log_init(const char *proc)
{
    log_proc = proc;
    const char *lv = getenv("HSMCA_LOG_LEVEL");
    if (!lv)
        return;
    if (!strcmp(lv, "debug"))
        log_level = 0;
    else if (!strcmp(lv, "info"))
        log_level = 1;
    else if (!strcmp(lv, "warn"))
        log_level = 2;
    else if (!strcmp(lv, "error"))
        log_level = 3;
}

void log_set_level(int level) { log_level = level; }

/* Appends s to out as a JSON string body (quotes and controls escaped). */
static size_t json_escape(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; *s && o + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return o;
}

__attribute__((format(printf, 2, 0))) static void log_emit(int level, const char *fmt, va_list ap)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    if (level < log_level)
        return;
    char msg[1024], esc[2200], line[2600];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    json_escape(esc, sizeof(esc), msg);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);

    int n = snprintf(line, sizeof(line),
                     "{\"ts\":\"%s.%03ldZ\",\"lvl\":\"%s\",\"proc\":\"%s\",\"pid\":%d,\"msg\":\"%s\"}\n",
                     when, ts.tv_nsec / 1000000, names[level], log_proc, (int)getpid(), esc);
    if (n > 0) {
        size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
        ssize_t w = write(STDERR_FILENO, line, len);
        (void)w;
    }
}

#define LOG_FN(name, level)                                                                        \
    void name(const char *fmt, ...)                                                                \
    {                                                                                              \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        log_emit(level, fmt, ap);                                                                  \
        va_end(ap);                                                                                \
    }
LOG_FN(log_debug, 0)
LOG_FN(log_info, 1)
LOG_FN(log_warn, 2)
LOG_FN(log_error, 3)

void fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_emit(3, fmt, ap);
    va_end(ap);
    exit(1);
}

void fatal_config(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_emit(3, fmt, ap);
    va_end(ap);
    exit(EXIT_CONFIG);
}
