/* test_log.c - honest logs: every line is one valid JSON object of valid UTF-8,
 * whatever bytes are logged; caps with *_truncated; the refusal limiter. Each test
 * captures stderr in a temp file and parses every line with jansson. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

/* --- capturing and parsing ------------------------------------------------------ */

static FILE *cap_file;
static int cap_saved = -1;

static void cap_begin(void)
{
    fflush(stderr);
    cap_file = tmpfile();
    assert_non_null(cap_file);
    cap_saved = dup(STDERR_FILENO);
    assert_true(cap_saved >= 0);
    assert_true(dup2(fileno(cap_file), STDERR_FILENO) >= 0);
}

typedef struct {
    char *buf;        /* everything written, NUL appended */
    size_t n;         /* lines */
    const char **raw; /* start of each line in buf */
    size_t *len;      /* its length, '\n' excluded */
    json_t **obj;     /* each line parsed */
} captured;

/* Restores stderr and parses what was written: asserts that the output is a
 * sequence of '\n'-terminated lines, each at most LOG_LINE_MAX bytes, without NUL
 * bytes, each exactly one JSON object (duplicate keys refused, so is bad UTF-8). */
static captured cap_end(void)
{
    captured c = {0};
    assert_true(dup2(cap_saved, STDERR_FILENO) >= 0);
    close(cap_saved);
    cap_saved = -1;
    fseek(cap_file, 0, SEEK_END);
    long size = ftell(cap_file);
    assert_true(size >= 0);
    rewind(cap_file);
    c.buf = malloc((size_t)size + 1);
    assert_non_null(c.buf);
    assert_int_equal(fread(c.buf, 1, (size_t)size, cap_file), (size_t)size);
    c.buf[size] = '\0';
    fclose(cap_file);
    assert_null(memchr(c.buf, '\0', (size_t)size));
    if (size > 0)
        assert_int_equal(c.buf[size - 1], '\n');
    size_t cap = 16;
    c.raw = malloc(cap * sizeof(*c.raw));
    c.len = malloc(cap * sizeof(*c.len));
    c.obj = malloc(cap * sizeof(*c.obj));
    for (char *p = c.buf; p < c.buf + size;) {
        char *nl = memchr(p, '\n', (size_t)(c.buf + size - p));
        assert_non_null(nl);
        if (c.n == cap) {
            cap *= 2;
            c.raw = realloc(c.raw, cap * sizeof(*c.raw));
            c.len = realloc(c.len, cap * sizeof(*c.len));
            c.obj = realloc(c.obj, cap * sizeof(*c.obj));
            assert_true(c.raw && c.len && c.obj);
        }
        size_t len = (size_t)(nl - p);
        assert_true(len + 1 <= LOG_LINE_MAX);
        json_error_t err;
        json_t *o = json_loadb(p, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
        if (!o)
            fail_msg("line %zu is not JSON (%s): %.*s", c.n, err.text, (int)len, p);
        assert_true(json_is_object(o));
        c.raw[c.n] = p;
        c.len[c.n] = len;
        c.obj[c.n++] = o;
        p = nl + 1;
    }
    return c;
}

/* Teardown: a test that failed while capturing gets stderr back, and with it what
 * was captured, cmocka's report of the failure included. */
static int cap_restore(void **state)
{
    if (cap_saved < 0)
        return 0;
    dup2(cap_saved, STDERR_FILENO);
    close(cap_saved);
    cap_saved = -1;
    rewind(cap_file);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), cap_file)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(cap_file);
    return 0;
}

static void cap_free(captured *c)
{
    for (size_t i = 0; i < c->n; i++)
        json_decref(c->obj[i]);
    free(c->obj);
    free(c->len);
    free(c->raw);
    free(c->buf);
}

/* The string value of key (its length in *len), failing the test if absent. */
static const char *jstr(json_t *o, const char *key, size_t *len)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        fail_msg("no string \"%s\"", key);
    if (len)
        *len = json_string_length(v);
    return json_string_value(v);
}

static json_int_t jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("no integer \"%s\"", key);
    return json_integer_value(v);
}

/* Asserts that the line's keys are exactly keys[], in that order. */
static void assert_keys(json_t *o, const char *const *keys, size_t n)
{
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        (void)v;
        assert_true(i < n);
        assert_string_equal(k, keys[i]);
        i++;
    }
    assert_int_equal(i, n);
}

/* Undoes the escaping the logger adds above JSON: \\ is a backslash, \xNN the
 * invalid byte NN. Returns the bytes written to out (room for n). */
static size_t unescape(const char *s, size_t n, unsigned char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') {
            out[o++] = (unsigned char)s[i];
        } else if (i + 1 < n && s[i + 1] == '\\') {
            out[o++] = '\\';
            i++;
        } else {
            unsigned v;
            assert_true(i + 3 < n && s[i + 1] == 'x');
            assert_int_equal(sscanf(s + i + 2, "%2x", &v), 1);
            assert_true(v >= 0x80);
            out[o++] = (unsigned char)v;
            i += 3;
        }
    }
    return o;
}

/* Logs one field "v" holding len bytes of s; returns the decoded string value. */
static char *log_one(const void *s, size_t len, size_t *outlen, int *truncated)
{
    cap_begin();
    LOG_EVENT(LOG_LVL_INFO, "one", LOG_BYTES("v", s, len));
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    size_t n;
    const char *v = jstr(c.obj[0], "v", &n);
    char *copy = malloc(n + 1);
    memcpy(copy, v, n + 1);
    *outlen = n;
    *truncated = json_object_get(c.obj[0], "v_truncated") != NULL;
    cap_free(&c);
    return copy;
}

static int setup(void **state)
{
    log_init("test_log");
    log_set_level(LOG_LVL_DEBUG);
    return 0;
}

/* --- the line ---------------------------------------------------------------- */

/* A printf-style line: fatal()'s (the only one), written by a child that exits 1. */
#define FATAL_LINE(...)                                                                            \
    do {                                                                                           \
        fflush(NULL);                                                                              \
        pid_t fl_pid_ = fork();                                                                    \
        assert_true(fl_pid_ >= 0);                                                                 \
        if (fl_pid_ == 0)                                                                          \
            fatal(__VA_ARGS__);                                                                    \
        int fl_st_ = 0;                                                                            \
        assert_int_equal(waitpid(fl_pid_, &fl_st_, 0), fl_pid_);                                   \
        assert_true(WIFEXITED(fl_st_) && WEXITSTATUS(fl_st_) == 1);                                \
    } while (0)

static void test_printf_line_shape(void **state)
{
    cap_begin();
    FATAL_LINE("hello %d", 5);
    log_event(LOG_LVL_WARN, "second", NULL, 0);
    captured c = cap_end();
    assert_int_equal(c.n, 2);
    static const char *const keys[] = {"ts", "lvl", "proc", "pid", "msg"};
    assert_keys(c.obj[0], keys, 5);
    assert_string_equal(jstr(c.obj[0], "lvl", NULL), "error");
    assert_string_equal(jstr(c.obj[0], "proc", NULL), "test_log");
    assert_int_not_equal(jint(c.obj[0], "pid"), getpid()); /* the child's */
    assert_int_equal(strlen(jstr(c.obj[0], "ts", NULL)), strlen("2026-11-01T12:00:00.000Z"));
    assert_string_equal(jstr(c.obj[0], "msg", NULL), "hello 5");
    assert_string_equal(jstr(c.obj[1], "lvl", NULL), "warn");
    /* What the integration tests grep for is still there, verbatim. */
    assert_non_null(strstr(c.raw[0], "\"msg\":\"hello 5\"}"));
    cap_free(&c);
}

static void test_level_filter(void **state)
{
    log_set_level(LOG_LVL_WARN);
    cap_begin();
    log_event(LOG_LVL_INFO, "hidden", NULL, 0);
    LOG_EVENT(LOG_LVL_INFO, "hidden", LOG_STR("k", "v"));
    log_event(LOG_LVL_WARN, "shown", NULL, 0);
    LOG_EVENT(LOG_LVL_ERROR, "shown too", LOG_STR("k", "v"));
    captured c = cap_end();
    log_set_level(LOG_LVL_DEBUG);
    assert_int_equal(c.n, 2);
    assert_string_equal(jstr(c.obj[0], "msg", NULL), "shown");
    assert_string_equal(jstr(c.obj[1], "lvl", NULL), "error");
    cap_free(&c);
}

static void test_event_fields_in_order(void **state)
{
    cap_begin();
    LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("id", "17"),
              LOG_STR("reason", "profile 3 refuses SAN"),
              LOG_BYTES("requester", "spiffe://td/ns/a/sa/b", 21), LOG_STR("empty", NULL));
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    static const char *const keys[] = {"ts", "lvl",    "proc",      "pid",  "msg",
                                       "id", "reason", "requester", "empty"};
    assert_keys(c.obj[0], keys, 9);
    assert_string_equal(jstr(c.obj[0], "msg", NULL), "refused request");
    assert_string_equal(jstr(c.obj[0], "reason", NULL), "profile 3 refuses SAN");
    assert_string_equal(jstr(c.obj[0], "requester", NULL), "spiffe://td/ns/a/sa/b");
    assert_string_equal(jstr(c.obj[0], "empty", NULL), "");
    const char *reason = strstr(c.raw[0], ",\"reason\":\"");
    const char *requester = strstr(c.raw[0], ",\"requester\":\"");
    assert_true(reason && requester && reason < requester);
    cap_free(&c);
}

/* Numbers are decimal strings, each field its own digits (two in one line do not
 * share a buffer), the extremes of both types included. */
static void test_number_fields(void **state)
{
    (void)state;
    cap_begin();
    LOG_EVENT(LOG_LVL_INFO, "numbers", LOG_INT("neg", INT64_MIN), LOG_INT("small", -1),
              LOG_UINT("big", UINT64_MAX), LOG_UINT("zero", 0));
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    assert_string_equal(jstr(c.obj[0], "neg", NULL), "-9223372036854775808");
    assert_string_equal(jstr(c.obj[0], "small", NULL), "-1");
    assert_string_equal(jstr(c.obj[0], "big", NULL), "18446744073709551615");
    assert_string_equal(jstr(c.obj[0], "zero", NULL), "0");
    cap_free(&c);
}

/* --- escaping ------------------------------------------------------------------ */

static void test_quotes_backslashes_controls(void **state)
{
    static const char in[] = "a\"b\\c\nd\te\rf\x01g\x1fh\x7fi}\",\"lvl\":\"x";
    cap_begin();
    LOG_EVENT(LOG_LVL_INFO, "m", LOG_BYTES("v", in, sizeof(in) - 1));
    FATAL_LINE("%s", in);
    captured c = cap_end();
    assert_int_equal(c.n, 2);
    /* JSON decodes control characters back; a backslash decodes to two. */
    assert_string_equal(jstr(c.obj[0], "v", NULL),
                        "a\"b\\\\c\nd\te\rf\x01g\x1fh\x7fi}\",\"lvl\":\"x");
    assert_string_equal(jstr(c.obj[1], "msg", NULL),
                        "a\"b\\\\c\nd\te\rf\x01g\x1fh\x7fi}\",\"lvl\":\"x");
    assert_string_equal(jstr(c.obj[0], "lvl", NULL), "info");
    assert_string_equal(jstr(c.obj[1], "lvl", NULL), "error");
    for (size_t i = 0; i < 2; i++) {
        assert_non_null(strstr(c.raw[i], "a\\\"b\\\\\\\\c\\nd\\te\\rf\\u0001g\\u001fh\\u007fi"));
        for (size_t j = 0; j < c.len[i]; j++)
            assert_true((unsigned char)c.raw[i][j] >= 0x20 && c.raw[i][j] != 0x7f);
    }
    cap_free(&c);
}

static void test_valid_utf8_kept(void **state)
{
    /* é, 日本, 😀, and the edges of each length: U+0080, U+07FF, U+0800, U+D7FF,
     * U+E000, U+FFFF, U+10000, U+10FFFF. */
    static const char in[] = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 "
                             "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
                             "\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
    cap_begin();
    LOG_EVENT(LOG_LVL_INFO, "m", LOG_STR("v", in));
    FATAL_LINE("requester=%s", in);
    captured c = cap_end();
    assert_int_equal(c.n, 2);
    size_t n;
    const char *v = jstr(c.obj[0], "v", &n);
    assert_int_equal(n, sizeof(in) - 1);
    assert_memory_equal(v, in, n);
    assert_non_null(strstr(c.raw[0], in)); /* byte for byte in the raw line too */
    assert_non_null(strstr(c.raw[1], in));
    cap_free(&c);
}

static void test_invalid_utf8_shown_as_hex(void **state)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\x80", "\\x80"},                                     /* lone continuation */
        {"a\xbf!", "a\\xbf!"},                                 /* stray continuation */
        {"\xe6\x97", "\\xe6\\x97"},                            /* truncated at the end */
        {"\xe6\x97Z", "\\xe6\\x97Z"},                          /* truncated mid-string */
        {"\xf0\x9f\x98", "\\xf0\\x9f\\x98"},                   /* truncated 4-byte */
        {"\xc0\xaf", "\\xc0\\xaf"},                            /* overlong '/' */
        {"\xc1\xbf", "\\xc1\\xbf"},                            /* overlong */
        {"\xe0\x80\xaf", "\\xe0\\x80\\xaf"},                   /* overlong 3-byte */
        {"\xf0\x80\x80\xaf", "\\xf0\\x80\\x80\\xaf"},          /* overlong 4-byte */
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"},                   /* surrogate D800 */
        {"\xed\xbf\xbf", "\\xed\\xbf\\xbf"},                   /* surrogate DFFF */
        {"\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},          /* U+110000 */
        {"\xf5\x80\x80\x80", "\\xf5\\x80\\x80\\x80"},          /* F5 lead */
        {"\xf8\x88\x80\x80\x80", "\\xf8\\x88\\x80\\x80\\x80"}, /* 5-byte form */
        {"\xfe\xff", "\\xfe\\xff"},
        {"\xc3\xc3\xa9", "\\xc3\xc3\xa9"}, /* a bad byte, then a good é */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n;
        int trunc;
        char *v = log_one(cases[i].in, strlen(cases[i].in), &n, &trunc);
        assert_false(trunc);
        assert_int_equal(n, strlen(cases[i].want));
        assert_string_equal(v, cases[i].want);
        free(v);
    }
    /* The printf path escapes the same way. */
    cap_begin();
    FATAL_LINE("from %s: %s", "\xc0\xaf\xed\xa0\x80", "\xf5\x80\"");
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    assert_string_equal(jstr(c.obj[0], "msg", NULL),
                        "from \\xc0\\xaf\\xed\\xa0\\x80: \\xf5\\x80\"");
    cap_free(&c);
}

static void test_hex_is_unambiguous(void **state)
{
    size_t n1, n2;
    int t;
    char *literal = log_one("\\xc0", 4, &n1, &t); /* the four characters \ x c 0 */
    char *byte = log_one("\xc0", 1, &n2, &t);     /* the byte 0xc0 */
    assert_string_equal(literal, "\\\\xc0");
    assert_string_equal(byte, "\\xc0");
    unsigned char a[8], b[8];
    assert_int_equal(unescape(literal, n1, a), 4);
    assert_memory_equal(a, "\\xc0", 4);
    assert_int_equal(unescape(byte, n2, b), 1);
    assert_int_equal(b[0], 0xc0);
    free(literal);
    free(byte);
}

static void test_nul_escaped_not_truncated(void **state)
{
    cap_begin();
    LOG_EVENT(LOG_LVL_INFO, "m", LOG_BYTES("reason", "bad\0tail", 8),
              LOG_BYTES("requester", "\0\0x", 3));
    FATAL_LINE("a%cb", 0);
    captured c = cap_end();
    assert_int_equal(c.n, 2);
    size_t n;
    const char *v = jstr(c.obj[0], "reason", &n);
    assert_int_equal(n, 8);
    assert_memory_equal(v, "bad\0tail", 8);
    v = jstr(c.obj[0], "requester", &n);
    assert_int_equal(n, 3);
    assert_memory_equal(v, "\0\0x", 3);
    assert_non_null(strstr(c.raw[0], "\"reason\":\"bad\\u0000tail\""));
    v = jstr(c.obj[1], "msg", &n);
    assert_int_equal(n, 3);
    assert_memory_equal(v, "a\0b", 3);
    cap_free(&c);
}

/* Random bytes, biased towards what breaks escapers: every line is valid, and the
 * value decodes back to exactly the bytes that fit the caps. */
static void test_random_bytes_round_trip(void **state)
{
    static const unsigned char pieces[][4] = {{'a'},
                                              {'"'},
                                              {'\\'},
                                              {'x'},
                                              {'\n'},
                                              {0},
                                              {0x1f},
                                              {0x7f},
                                              {0x80},
                                              {0xbf},
                                              {0xc0},
                                              {0xc3, 0xa9},
                                              {0xe6, 0x97, 0xa5},
                                              {0xf0, 0x9f, 0x98, 0x80},
                                              {0xed, 0xa0},
                                              {0xf4},
                                              {0xf5},
                                              {0xff},
                                              {0xe0},
                                              {0xf0, 0x90}};
    uint32_t x = 2463534242u;
    for (int round = 0; round < 4000; round++) {
        unsigned char in[600];
        size_t len = 0, want = (x ^= x << 13, x ^= x >> 17, x ^= x << 5) % 400;
        while (len < want) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            const unsigned char *p = pieces[x % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t plen = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 1;
            if (x & 0x100) /* sometimes only the first byte of a sequence */
                plen = 1;
            memcpy(in + len, p, plen);
            len += plen;
        }
        size_t n;
        int trunc;
        char *v = log_one(in, len, &n, &trunc);
        unsigned char out[600];
        size_t kept = unescape(v, n, out);
        assert_true(kept <= len);
        assert_memory_equal(out, in, kept);
        assert_int_equal(trunc, kept < len);
        assert_true(kept <= LOG_FIELD_MAX);
        free(v);
    }
}

/* --- caps ---------------------------------------------------------------------- */

static void test_long_requester_capped(void **state)
{
    size_t big = 60 * 1024;
    char *requester = malloc(big + 1);
    memset(requester, 'A', big);
    requester[big] = '\0';
    cap_begin();
    LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", "SAN not allowed"),
              LOG_BYTES("requester", requester, big), LOG_STR("after", "still here"));
    FATAL_LINE("refused request 9 from %s: %s", requester, "SAN not allowed");
    captured c = cap_end();
    free(requester);
    assert_int_equal(c.n, 2);
    static const char *const keys[] = {
        "ts", "lvl", "proc", "pid", "msg", "reason", "requester", "requester_truncated", "after"};
    assert_keys(c.obj[0], keys, 9);
    size_t n;
    const char *v = jstr(c.obj[0], "requester", &n);
    assert_int_equal(n, LOG_FIELD_MAX);
    assert_int_equal(strspn(v, "A"), LOG_FIELD_MAX);
    assert_int_equal(jint(c.obj[0], "requester_truncated"), big);
    assert_string_equal(jstr(c.obj[0], "after", NULL), "still here");
    /* The printf line is cut too, and says so. */
    v = jstr(c.obj[1], "msg", &n);
    assert_int_equal(n, LOG_MSG_MAX);
    assert_int_equal(jint(c.obj[1], "msg_truncated"),
                     strlen("refused request 9 from : SAN not allowed") + big);
    cap_free(&c);
}

static void test_cap_at_utf8_boundary(void **state)
{
    char in[LOG_MSG_MAX + 16];
    size_t n;
    int trunc;
    /* é straddles the cap: it is left out whole, not shown as a stray byte. */
    memset(in, 'a', sizeof(in));
    memcpy(in + LOG_FIELD_MAX - 1, "\xc3\xa9", 2);
    char *v = log_one(in, LOG_FIELD_MAX + 5, &n, &trunc);
    assert_true(trunc);
    assert_int_equal(n, LOG_FIELD_MAX - 1);
    free(v);
    /* Exactly the cap is kept whole; one byte more is cut. */
    memset(in, 'a', sizeof(in));
    v = log_one(in, LOG_FIELD_MAX, &n, &trunc);
    assert_false(trunc);
    assert_int_equal(n, LOG_FIELD_MAX);
    free(v);
    v = log_one(in, LOG_FIELD_MAX + 1, &n, &trunc);
    assert_true(trunc);
    free(v);
    /* Same for a printf message: 日 (3 bytes) at the last two bytes of the cap. */
    memcpy(in + LOG_MSG_MAX - 2, "\xe6\x97\xa5", 3);
    in[LOG_MSG_MAX + 8] = '\0';
    cap_begin();
    FATAL_LINE("%s", in);
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    jstr(c.obj[0], "msg", &n);
    assert_int_equal(n, LOG_MSG_MAX - 2);
    assert_int_equal(jint(c.obj[0], "msg_truncated"), LOG_MSG_MAX + 8);
    cap_free(&c);
}

static void test_escape_heavy_value_capped(void **state)
{
    unsigned char in[LOG_FIELD_MAX];
    size_t n;
    int trunc;
    memset(in, 0x01, sizeof(in)); /* 6 bytes each once escaped */
    char *v = log_one(in, sizeof(in), &n, &trunc);
    assert_true(trunc);
    assert_int_equal(n, LOG_FIELD_ESC_MAX / 6);
    free(v);
    memset(in, 0x80, sizeof(in)); /* 5 bytes each: \\xNN */
    v = log_one(in, sizeof(in), &n, &trunc);
    assert_true(trunc);
    assert_int_equal(n, (LOG_FIELD_ESC_MAX / 5) * 4);
    free(v);
}

static void test_worst_case_line_fits(void **state)
{
    static char keys[LOG_FIELDS_MAX + 2][LOG_KEY_MAX + 1];
    size_t big = 60 * 1024;
    char *hostile = malloc(big);
    for (size_t i = 0; i < big; i++)
        hostile[i] = (char)(i % 2 ? 0x01 : 0x80);
    log_field f[LOG_FIELDS_MAX + 2];
    for (size_t i = 0; i < LOG_FIELDS_MAX + 2; i++) {
        memset(keys[i], 'k', LOG_KEY_MAX);
        keys[i][0] = (char)('a' + i);
        f[i] = (log_field)LOG_BYTES(keys[i], hostile, big);
    }
    char msg[LOG_FIELD_MAX * 2];
    memset(msg, '\x02', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    cap_begin();
    log_event(LOG_LVL_ERROR, msg, f, LOG_FIELDS_MAX);
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    assert_int_equal(jint(c.obj[0], "msg_truncated"), sizeof(msg) - 1);
    char tk[sizeof(keys) + 16];
    for (size_t i = 0; i < LOG_FIELDS_MAX; i++) {
        jstr(c.obj[0], keys[i], NULL);
        snprintf(tk, sizeof(tk), "%s_truncated", keys[i]);
        assert_int_equal(jint(c.obj[0], tk), big);
    }
    cap_free(&c);

#ifdef NDEBUG /* too many fields is asserted in a debug build */
    cap_begin();
    log_event(LOG_LVL_ERROR, msg, f, LOG_FIELDS_MAX + 2);
    c = cap_end();
    assert_int_equal(c.n, 1);
    assert_int_equal(jint(c.obj[0], "_dropped"), 2);
    assert_null(json_object_get(c.obj[0], keys[LOG_FIELDS_MAX]));
    cap_free(&c);
#endif
    free(hostile);
}

#ifdef NDEBUG /* bad keys are asserted in a debug build */
static void test_bad_keys_never_break_the_line(void **state)
{
    cap_begin();
    LOG_EVENT(LOG_LVL_INFO, "m", LOG_STR("ok", "1"), LOG_STR("ok", "dup"),
              LOG_STR("msg", "reserved"), LOG_STR("Bad\"key", "2"), LOG_STR("ok_truncated", "3"),
              LOG_STR(NULL, "4"));
    captured c = cap_end();
    assert_int_equal(c.n, 1);
    static const char *const keys[] = {"ts", "lvl", "proc", "pid", "msg", "ok",
                                       "_1", "_2",  "_3",   "_4",  "_5"};
    assert_keys(c.obj[0], keys, 11);
    assert_string_equal(jstr(c.obj[0], "msg", NULL), "m");
    cap_free(&c);
}
#endif

static void test_proc_name_sanitised(void **state)
{
    log_init("bad\"proc\nname-that-is-much-longer-than-thirty-one");
    cap_begin();
    log_event(LOG_LVL_INFO, "x", NULL, 0);
    captured c = cap_end();
    log_init("test_log");
    assert_int_equal(c.n, 1);
    assert_string_equal(jstr(c.obj[0], "proc", NULL), "bad_proc_name-that-is-much-long");
    cap_free(&c);
}

/* --- the limiter --------------------------------------------------------------- */

static void test_limiter_rejects_bad_interval(void **state)
{
    assert_null(log_limiter_new(20, 0));
    assert_null(log_limiter_new(20, -1));
    assert_null(log_limiter_new(20, NAN));
    assert_null(log_limiter_new(20, INFINITY));
    log_limiter_free(NULL);
}

/* 10,000 refusals at 2048 a second through 20 per second, other lines between:
 * at most 20 refusal lines per window, summaries whose counts add up, and every
 * other line kept. The clock steps by 1/2048 s, so windows fall on whole seconds. */
static void test_limiter_flood(void **state)
{
    enum { TOTAL = 10000, PER = 20, RATE = 2048, OTHER_EVERY = 97 };
    log_limiter *l = log_limiter_new(PER, 1.0);
    assert_non_null(l);
    cap_begin();
    size_t others = 0;
    for (int i = 0; i < TOTAL; i++) {
        double now = (double)i / RATE;
        if (log_limiter_allow(l, now)) {
            char t[16];
            snprintf(t, sizeof(t), "%d", i);
            LOG_EVENT(LOG_LVL_WARN, "refused request", LOG_STR("reason", "flood"), LOG_STR("i", t));
        }
        if (i % OTHER_EVERY == 0)
            LOG_EVENT(LOG_LVL_INFO, "other line", LOG_UINT("n", others++));
    }
    log_limiter_flush(l, (double)(TOTAL - 1) / RATE); /* window not over: nothing */
    log_limiter_flush(l, (double)TOTAL / RATE + 1.0);
    log_limiter_flush(l, (double)TOTAL / RATE + 2.0); /* already reported: nothing */
    captured c = cap_end();
    log_limiter_free(l);

    size_t windows = (TOTAL + RATE - 1) / RATE;
    size_t per_window[8] = {0}, in_segment = 0, allowed = 0, seen_other = 0, summaries = 0;
    json_int_t suppressed = 0;
    for (size_t k = 0; k < c.n; k++) {
        const char *msg = jstr(c.obj[k], "msg", NULL);
        if (!strcmp(msg, "refused request")) {
            int i = atoi(jstr(c.obj[k], "i", NULL));
            per_window[i / RATE]++;
            allowed++;
            assert_true(++in_segment <= PER);
        } else if (!strcmp(msg, "suppressed refusal lines")) {
            assert_string_equal(jstr(c.obj[k], "lvl", NULL), "warn");
            assert_true(jint(c.obj[k], "count") > 0);
            suppressed += jint(c.obj[k], "count");
            assert_true(json_number_value(json_object_get(c.obj[k], "interval_s")) == 1.0);
            assert_int_equal(jint(c.obj[k], "limit"), PER);
            summaries++;
            in_segment = 0;
        } else {
            char want[32];
            snprintf(want, sizeof(want), "%zu", seen_other++);
            assert_string_equal(msg, "other line");
            assert_string_equal(jstr(c.obj[k], "n", NULL), want); /* all of them, in order */
        }
    }
    assert_int_equal(seen_other, others);
    assert_int_equal(allowed + (size_t)suppressed, TOTAL);
    assert_int_equal(summaries, windows); /* each window overflowed, each reported once */
    for (size_t w = 0; w < windows; w++)
        assert_int_equal(per_window[w], PER);
    cap_free(&c);
}

static void test_limiter_separate_from_other_lines(void **state)
{
    log_limiter *l = log_limiter_new(0, 10.0); /* suppress every refusal */
    assert_non_null(l);
    cap_begin();
    for (int i = 0; i < 100; i++)
        assert_int_equal(log_limiter_allow(l, 5.0 + i * 0.01), 0);
    LOG_EVENT(LOG_LVL_INFO, "signed", LOG_STR("serial", "01"));
    log_limiter_flush(l, 14.0);
    assert_int_equal(log_limiter_allow(l, 15.5), 0); /* a new window: reports 100 first */
    log_limiter_flush(l, 30.0);
    captured c = cap_end();
    log_limiter_free(l);
    assert_int_equal(c.n, 3);
    assert_string_equal(jstr(c.obj[0], "msg", NULL), "signed");
    assert_int_equal(jint(c.obj[1], "count"), 100);
    assert_int_equal(jint(c.obj[2], "count"), 1);
    cap_free(&c);
}

static void test_limiter_nan_clock_cannot_reset(void **state)
{
    log_limiter *l = log_limiter_new(1, 1.0);
    assert_non_null(l);
    cap_begin();
    assert_int_equal(log_limiter_allow(l, 10.0), 1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(log_limiter_allow(l, NAN), 0);
    assert_int_equal(log_limiter_allow(l, 10.5), 0);
    log_limiter_flush(l, NAN);
    log_limiter_flush(l, 11.0);
    captured c = cap_end();
    log_limiter_free(l);
    assert_int_equal(c.n, 1);
    assert_int_equal(jint(c.obj[0], "count"), 6);
    cap_free(&c);
}

typedef struct {
    log_limiter *l;
    int allowed;
} flood_arg;

static void *flood_thread(void *p)
{
    flood_arg *a = p;
    for (int i = 0; i < 5000; i++)
        a->allowed += log_limiter_allow(a->l, 100.0);
    return NULL;
}

static void test_limiter_threads(void **state)
{
    log_limiter *l = log_limiter_new(20, 1.0);
    assert_non_null(l);
    pthread_t t[4];
    flood_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (flood_arg){l, 0};
        assert_int_equal(pthread_create(&t[i], NULL, flood_thread, &a[i]), 0);
    }
    int allowed = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        allowed += a[i].allowed;
    }
    assert_int_equal(allowed, 20);
    cap_begin();
    assert_int_equal(log_limiter_allow(l, 101.0), 1);
    captured c = cap_end();
    log_limiter_free(l);
    assert_int_equal(c.n, 1);
    assert_int_equal(jint(c.obj[0], "count"), 4 * 5000 - 20);
    cap_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_printf_line_shape, cap_restore),
        cmocka_unit_test_teardown(test_level_filter, cap_restore),
        cmocka_unit_test_teardown(test_event_fields_in_order, cap_restore),
        cmocka_unit_test_teardown(test_number_fields, cap_restore),
        cmocka_unit_test_teardown(test_quotes_backslashes_controls, cap_restore),
        cmocka_unit_test_teardown(test_valid_utf8_kept, cap_restore),
        cmocka_unit_test_teardown(test_invalid_utf8_shown_as_hex, cap_restore),
        cmocka_unit_test_teardown(test_hex_is_unambiguous, cap_restore),
        cmocka_unit_test_teardown(test_nul_escaped_not_truncated, cap_restore),
        cmocka_unit_test_teardown(test_random_bytes_round_trip, cap_restore),
        cmocka_unit_test_teardown(test_long_requester_capped, cap_restore),
        cmocka_unit_test_teardown(test_cap_at_utf8_boundary, cap_restore),
        cmocka_unit_test_teardown(test_escape_heavy_value_capped, cap_restore),
        cmocka_unit_test_teardown(test_worst_case_line_fits, cap_restore),
#ifdef NDEBUG
        cmocka_unit_test_teardown(test_bad_keys_never_break_the_line, cap_restore),
#endif
        cmocka_unit_test_teardown(test_proc_name_sanitised, cap_restore),
        cmocka_unit_test_teardown(test_limiter_rejects_bad_interval, cap_restore),
        cmocka_unit_test_teardown(test_limiter_flood, cap_restore),
        cmocka_unit_test_teardown(test_limiter_separate_from_other_lines, cap_restore),
        cmocka_unit_test_teardown(test_limiter_nan_clock_cannot_reset, cap_restore),
        cmocka_unit_test_teardown(test_limiter_threads, cap_restore),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
