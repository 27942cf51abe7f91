/* log.h - JSON-lines logging to stderr with a stable set of keys:
 * {"ts":"...","lvl":"info","proc":"signer","pid":42,"msg":"...", <fields>}
 *
 * Guarantees, whatever bytes a caller passes (strings from a compromised front end
 * included):
 * - Every line is one JSON object, valid UTF-8, ending in '\n', written with one
 *   write(2) of at most LOG_LINE_MAX bytes (atomic on a pipe: lines never interleave).
 *   The bound holds by construction (static_assert in log.c), not by cutting the line.
 * - String values are escaped so nothing is lost or ambiguous: '"' and controls as
 *   \" \n \r \t \u00XX; valid UTF-8 kept byte for byte; each byte of an invalid
 *   sequence (stray continuation, truncated, overlong, surrogate, > U+10FFFF) decodes
 *   to the four characters \xNN; a literal backslash decodes to two (\\), so a value
 *   that spells "\xc0" cannot pass for the byte 0xc0. An embedded NUL is \u0000
 *   (a jansson reader needs JSON_ALLOW_NUL), never the end of the value.
 * - A value is capped (LOG_FIELD_MAX input or LOG_FIELD_ESC_MAX escaped bytes, whichever
 *   comes first; LOG_MSG_MAX / LOG_MSG_ESC_MAX for fatal()'s formatted message), cut at a
 *   character boundary, and a cut value is followed by the number
 *   "<key>_truncated":<original length in bytes>. So one long value never pushes the
 *   fields after it off the line.
 * log_init and log_set_level are for startup, before threads; everything else is
 * thread-safe. Nothing allocates except log_limiter_new. */
#ifndef HSMCA_LOG_H
#define HSMCA_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

#define LOG_LVL_DEBUG 0
#define LOG_LVL_INFO 1
#define LOG_LVL_WARN 2
#define LOG_LVL_ERROR 3

#define LOG_LINE_MAX 4096     /* bytes in a line, '\n' included (PIPE_BUF) */
#define LOG_FIELD_MAX 256     /* input bytes kept of a field value or event msg */
#define LOG_FIELD_ESC_MAX 384 /* escaped bytes of a field value: controls cost 6 */
#define LOG_FIELDS_MAX 7      /* fields per log_event; more are counted, not shown */
#define LOG_KEY_MAX 32        /* bytes in a field key */
#define LOG_MSG_MAX 1024      /* input bytes kept of fatal()'s formatted message */
#define LOG_MSG_ESC_MAX 3072  /* escaped bytes of fatal()'s formatted message */

/* Names this process in every line ("supervisor", "signer", "frontend", "cli"); a copy
 * of at most 31 bytes is kept, bytes outside [A-Za-z0-9_.-] replaced by '_'. */
void log_init(const char *proc);

/* Lines below this level are dropped: LOG_LVL_DEBUG (0) .. LOG_LVL_ERROR (3); a line's
 * level outside that range is shown as the nearest one.
 * HSMCA_LOG_LEVEL=debug|info|warn|error in the environment sets it at log_init. */
void log_set_level(int level);

/* One string field of a structured line. The caller owns key and val; both need
 * only live for the call. val holds len bytes (any bytes, NULs included); a NULL
 * val is logged as "". len == LOG_CSTR means val is NUL-terminated. */
typedef struct {
    const char *key; /* a literal: [a-z][a-z0-9_]*, at most LOG_KEY_MAX bytes */
    const char *val;
    size_t len;
} log_field;

#define LOG_CSTR SIZE_MAX
/* Initialisers for a log_field: a NUL-terminated string (NULL logs as ""), and
 * len bytes at ptr. */
/* clang-format off */
#define LOG_STR(key, cstr) {(key), (cstr), LOG_CSTR}
#define LOG_BYTES(key, ptr, len) {(key), (const char *)(ptr), (len)}
/* clang-format on */

/* A number as a decimal string field: LOG_INT("pid", pid), LOG_UINT("seq", seq). The
 * digits live in a compound literal of the block that holds the log_field array
 * (LOG_EVENT's), so they last for the call. */
#define LOG_NUM_MAX 24 /* bytes of a decimal 64-bit number, sign and NUL included */
/* clang-format off */
#define LOG_INT(key, v) {(key), log_num_i((char[LOG_NUM_MAX]){0}, (long long)(v)), LOG_CSTR}
#define LOG_UINT(key, v) \
    {(key), log_num_u((char[LOG_NUM_MAX]){0}, (unsigned long long)(v)), LOG_CSTR}
/* clang-format on */

/* Writes v in decimal into buf (LOG_NUM_MAX bytes, the caller's) and returns buf. */
const char *log_num_i(char *buf, long long v);
const char *log_num_u(char *buf, unsigned long long v);

/* Logs msg (a trusted literal, capped at LOG_FIELD_MAX) and then fields[0..n) as
 * string values in the order given. Keys must be distinct, not ts/lvl/proc/pid/msg
 * and not end in "_truncated" (asserted; in an NDEBUG build a bad key is shown as
 * "_<index>"). Beyond LOG_FIELDS_MAX fields, the rest become "_dropped":<count>. */
void log_event(int level, const char *msg, const log_field *fields, size_t n);

/* LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", r),
 *           LOG_BYTES("requester", p, len)); -- at least one field. */
#define LOG_EVENT(level, msg, ...)                                                                 \
    do {                                                                                           \
        const log_field log_event_f_[] = {__VA_ARGS__};                                            \
        log_event((level), (msg), log_event_f_, sizeof(log_event_f_) / sizeof(log_event_f_[0]));   \
    } while (0)

/* Flood control for one kind of line (the signer's refusals): at most per_interval
 * lines are allowed in each window of interval_s seconds; the rest are counted.
 * Time is passed in, in seconds of a monotonic clock (util_mono_now()), so
 * tests can drive it. Lines not passed through a limiter are never limited. */
typedef struct log_limiter log_limiter;

/* A new limiter (caller frees with log_limiter_free), or NULL on OOM or when
 * interval_s is not a positive finite number. per_interval 0 suppresses all. */
log_limiter *log_limiter_new(unsigned per_interval, double interval_s);

/* 1: log the line; 0: suppress it (it is counted). When now is past the window
 * that suppressed lines, first logs one warn line {"msg":"suppressed refusal lines",
 * "count":N,"interval_s":X,"limit":P}; counts over all summaries add up. */
int log_limiter_allow(log_limiter *l, double now);

/* Logs the summary line if the current window has ended with suppressed lines
 * (for a periodic caller, so a flood that stops is still reported); else nothing. */
void log_limiter_flush(log_limiter *l, double now);

/* Frees l (NULL is fine); suppressed lines not yet reported are not logged. */
void log_limiter_free(log_limiter *l);

/* Escapes s[0..n) as the inside of a JSON string exactly as log values are (see above:
 * \xNN for invalid UTF-8 bytes, \\ for a backslash, \u00XX for controls), writing the
 * longest prefix of whole characters that fits in_cap input and out_cap output bytes to
 * out (not NUL-terminated). Returns the input bytes covered; *out_len gets the bytes
 * written. For other JSON writers (the audit log) so there is one escaper. */
size_t log_json_escape(const void *s, size_t n, size_t in_cap, char *out, size_t out_cap,
                       size_t *out_len);

/* The only printf-style lines are fatal()'s and fatal_config()'s: the formatted message
 * is escaped and capped like a field value (key "msg", cap LOG_MSG_MAX, "msg_truncated"
 * when cut); every other line is a log_event.
 * Logs at error level and _exits(1) (no exit handlers: other threads may still run):
 * the supervisor restarts the process. When to use it (and when an error must be
 * returned instead) is hsmca_err.h's out-of-memory rule. */
noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exit status of a child that cannot start for a reason a restart will not cure
 * (bad config, wrong PIN, unsafe key): the supervisor stops instead of retrying,
 * which also keeps it from locking an HSM's PIN with repeated failed logins. */
#define EXIT_CONFIG 78

/* Exit status of a child that asks to be started again at once (the signer,
 * when the PIN file changed after the token refused the old PIN). */
#define EXIT_RESTART 75

/* Logs at error level and _exits(EXIT_CONFIG). */
noreturn void fatal_config(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
