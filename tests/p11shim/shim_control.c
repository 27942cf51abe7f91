/* shim_control.c - the control file: reading it through its one fd, parsing
 * it into rules, and deciding which rule applies to a call.
 *
 * Grammar, one rule per line; words separated by blanks; '#' starts a comment
 * (anywhere on the line); blank lines are ignored:
 *
 *   fail FUNC CKR once        the next matching call returns CKR (not forwarded)
 *   fail FUNC CKR always      every matching call does
 *   fail FUNC CKR every N     the Nth, 2Nth, ... matching call does (N >= 1)
 *   delay FUNC MS             each matching call sleeps MS ms, then is forwarded
 *   hang FUNC once|always     the call blocks until the file no longer has this
 *                             rule or has "release", then is forwarded
 *   release                   no hang blocks while this line is present
 *   remove                    the token is removed (see shim_state.c)
 *   idle-drop SECONDS         sessions die after SECONDS without a call
 *
 * FUNC is a PKCS#11 function name (C_Sign) or "*" for any; CKR a symbolic
 * code (CKR_DEVICE_ERROR) or a number (0x30, 48); CKR_OK is refused. Any
 * other line is a parse error: ignored, counted in the counts file.
 *
 * Arming: the rules are the file's bytes. Any change of those bytes re-parses
 * the file and re-arms every rule (once rules fire again, every-N counters
 * restart); a re-read that finds the same bytes (a touch, a rewrite with the
 * same text, C_Finalize/C_Initialize) keeps the state. The first rule of a
 * kind that matches (file order) decides. */
#include "shim.h"
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Coarse file timestamps advance once per clock tick (a few ms): a write in
 * the same tick as our read leaves size and mtime unchanged, so while the
 * mtime is this recent we compare the bytes on every call. */
#define SHIM_RACY_NS 50000000LL

// clang-format off
#define CKR(x) {#x, x}
// clang-format on
static const struct {
    const char *name;
    CK_RV rv;
} ckr_names[] = {
    CKR(CKR_CANCEL),
    CKR(CKR_HOST_MEMORY),
    CKR(CKR_SLOT_ID_INVALID),
    CKR(CKR_GENERAL_ERROR),
    CKR(CKR_FUNCTION_FAILED),
    CKR(CKR_ARGUMENTS_BAD),
    CKR(CKR_ATTRIBUTE_SENSITIVE),
    CKR(CKR_ATTRIBUTE_TYPE_INVALID),
    CKR(CKR_ATTRIBUTE_VALUE_INVALID),
    CKR(CKR_DATA_INVALID),
    CKR(CKR_DATA_LEN_RANGE),
    CKR(CKR_DEVICE_ERROR),
    CKR(CKR_DEVICE_MEMORY),
    CKR(CKR_DEVICE_REMOVED),
    CKR(CKR_FUNCTION_CANCELED),
    CKR(CKR_FUNCTION_NOT_SUPPORTED),
    CKR(CKR_KEY_HANDLE_INVALID),
    CKR(CKR_KEY_TYPE_INCONSISTENT),
    CKR(CKR_KEY_FUNCTION_NOT_PERMITTED),
    CKR(CKR_MECHANISM_INVALID),
    CKR(CKR_MECHANISM_PARAM_INVALID),
    CKR(CKR_OBJECT_HANDLE_INVALID),
    CKR(CKR_OPERATION_ACTIVE),
    CKR(CKR_OPERATION_NOT_INITIALIZED),
    CKR(CKR_PIN_INCORRECT),
    CKR(CKR_PIN_INVALID),
    CKR(CKR_PIN_LEN_RANGE),
    CKR(CKR_PIN_EXPIRED),
    CKR(CKR_PIN_LOCKED),
    CKR(CKR_SESSION_CLOSED),
    CKR(CKR_SESSION_COUNT),
    CKR(CKR_SESSION_HANDLE_INVALID),
    CKR(CKR_SESSION_READ_ONLY),
    CKR(CKR_SESSION_EXISTS),
    CKR(CKR_SIGNATURE_INVALID),
    CKR(CKR_SIGNATURE_LEN_RANGE),
    CKR(CKR_TEMPLATE_INCOMPLETE),
    CKR(CKR_TOKEN_NOT_PRESENT),
    CKR(CKR_TOKEN_NOT_RECOGNIZED),
    CKR(CKR_TOKEN_WRITE_PROTECTED),
    CKR(CKR_USER_ALREADY_LOGGED_IN),
    CKR(CKR_USER_NOT_LOGGED_IN),
    CKR(CKR_USER_PIN_NOT_INITIALIZED),
    CKR(CKR_USER_TYPE_INVALID),
    CKR(CKR_BUFFER_TOO_SMALL),
    CKR(CKR_CRYPTOKI_NOT_INITIALIZED),
    CKR(CKR_CRYPTOKI_ALREADY_INITIALIZED),
};

const char *const shim_fn_names[SHIM_FN_COUNT] = {
#define SHIM_NAME(n) #n,
    SHIM_FUNCS(SHIM_NAME)
#undef SHIM_NAME
};

/* ---- parsing ---- */

static int parse_fn(const char *w, int *fn)
{
    if (!strcmp(w, "*")) {
        *fn = SHIM_ANY_FN;
        return 0;
    }
    for (int i = 0; i < SHIM_FN_COUNT; i++)
        if (!strcmp(w, shim_fn_names[i])) {
            *fn = i;
            return 0;
        }
    return -1;
}

/* A decimal number without sign, or 0x hex; the whole word. */
static int parse_ulong(const char *w, unsigned long max, unsigned long *v)
{
    if (!isdigit((unsigned char)w[0]))
        return -1;
    char *end;
    errno = 0;
    unsigned long x = strtoul(w, &end, 0);
    if (errno || *end || x > max)
        return -1;
    *v = x;
    return 0;
}

static int parse_rv(const char *w, CK_RV *rv)
{
    for (size_t i = 0; i < sizeof(ckr_names) / sizeof(ckr_names[0]); i++)
        if (!strcmp(w, ckr_names[i].name)) {
            *rv = ckr_names[i].rv;
            return 0;
        }
    unsigned long x;
    if (parse_ulong(w, 0xffffffffUL, &x) != 0 || x == CKR_OK)
        return -1;
    *rv = x;
    return 0;
}

/* "once" | "always" | "every N": consumes 1 or 2 words. */
static int parse_mode(char **w, int nw, shim_rule *r, int allow_every)
{
    if (nw == 1 && !strcmp(w[0], "once"))
        r->mode = SHIM_ONCE;
    else if (nw == 1 && !strcmp(w[0], "always"))
        r->mode = SHIM_ALWAYS;
    else if (allow_every && nw == 2 && !strcmp(w[0], "every") &&
             parse_ulong(w[1], 1000000000UL, &r->n) == 0 && r->n >= 1)
        r->mode = SHIM_EVERY;
    else
        return -1;
    return 0;
}

/* Parses one line's words: 0 when it is a rule (in *r), 1 when it is a flag
 * (set in rs), -1 when it is neither. */
static int parse_words(char **w, int nw, shim_rules *rs, shim_rule *r)
{
    memset(r, 0, sizeof(*r));
    if (nw == 1 && !strcmp(w[0], "remove")) {
        rs->removed = 1;
        return 1;
    }
    if (nw == 1 && !strcmp(w[0], "release")) {
        rs->release = 1;
        return 1;
    }
    if (nw == 2 && !strcmp(w[0], "idle-drop")) {
        char *end;
        errno = 0;
        double s = strtod(w[1], &end);
        if (errno || *end || !(s > 0 && s <= 86400))
            return -1;
        rs->idle_drop_s = s;
        return 1;
    }
    if (nw < 3 || parse_fn(w[1], &r->fn) != 0)
        return -1;
    if (!strcmp(w[0], "fail")) {
        r->kind = SHIM_RULE_FAIL;
        return nw >= 4 && parse_rv(w[2], &r->rv) == 0 && parse_mode(w + 3, nw - 3, r, 1) == 0 ? 0
                                                                                              : -1;
    }
    if (!strcmp(w[0], "delay")) {
        r->kind = SHIM_RULE_DELAY;
        return nw == 3 && parse_ulong(w[2], 600000UL, &r->n) == 0 ? 0 : -1;
    }
    if (!strcmp(w[0], "hang")) {
        r->kind = SHIM_RULE_HANG;
        return parse_mode(w + 2, nw - 2, r, 0);
    }
    return -1;
}

/* One line (NUL-terminated, may be modified). */
static void parse_line(shim_rules *rs, char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *w[8];
    int nw = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r\v\f", &save); t;
         t = strtok_r(NULL, " \t\r\v\f", &save)) {
        if (nw == 8) {
            rs->parse_errors++;
            return;
        }
        w[nw++] = t;
    }
    if (nw == 0)
        return;
    shim_rule r;
    int rc = parse_words(w, nw, rs, &r);
    if (rc < 0 || (rc == 0 && rs->nrules == SHIM_RULES_MAX)) {
        rs->parse_errors++;
        return;
    }
    if (rc == 1)
        return; /* a flag, already set */
    size_t off = 0;
    for (int i = 0; i < nw && off < sizeof(r.text); i++)
        off += (size_t)snprintf(r.text + off, sizeof(r.text) - off, "%s%s", i ? " " : "", w[i]);
    rs->rules[rs->nrules++] = r;
}

void shim_rules_parse(shim_rules *rs, const char *text, size_t len)
{
    memset(rs, 0, sizeof(*rs));
    char line[512];
    size_t start = 0;
    while (start < len) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t n = end - start;
        if (n >= sizeof(line) || memchr(text + start, '\0', n)) {
            rs->parse_errors++; /* no rule is that long; NULs are not text */
        } else {
            memcpy(line, text + start, n);
            line[n] = '\0';
            parse_line(rs, line);
        }
        start = end + 1;
    }
    if (len == SHIM_CTL_MAX)
        rs->parse_errors++; /* the file may go on: say so rather than cut a rule */
}

/* ---- reading ---- */

static long long ts_ns(struct timespec t)
{
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int shim_ctl_refresh(shim_ctl *c, shim_rules *r)
{
    struct stat st;
    if (c->fd < 0 || fstat(c->fd, &st) != 0)
        return 0;
    if (c->have_stat && !c->racy && st.st_size == c->size && ts_ns(st.st_mtim) == ts_ns(c->mtim))
        return 0;
    c->have_stat = 1;
    c->size = st.st_size;
    c->mtim = st.st_mtim;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    c->racy = ts_ns(now) - ts_ns(st.st_mtim) < SHIM_RACY_NS;

    size_t got = 0;
    while (got < sizeof(c->next)) {
        ssize_t n = pread(c->fd, c->next + got, sizeof(c->next) - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == c->len && memcmp(c->next, c->text, got) == 0)
        return 0;
    memcpy(c->text, c->next, got);
    c->len = got;
    shim_rules_parse(r, c->text, c->len);
    return 1;
}

/* ---- which rule applies ---- */

static int matches(const shim_rule *r, shim_rule_kind kind, shim_fn fn)
{
    return r->kind == kind && (r->fn == SHIM_ANY_FN || r->fn == (int)fn);
}

const shim_rule *shim_rules_hang(shim_rules *rs, shim_fn fn)
{
    if (rs->release)
        return NULL;
    for (unsigned i = 0; i < rs->nrules; i++) {
        shim_rule *r = &rs->rules[i];
        if (!matches(r, SHIM_RULE_HANG, fn) || (r->mode == SHIM_ONCE && r->fired))
            continue;
        r->fired = 1;
        return r;
    }
    return NULL;
}

int shim_rules_has(const shim_rules *rs, const char *text)
{
    for (unsigned i = 0; i < rs->nrules; i++)
        if (!strcmp(rs->rules[i].text, text))
            return 1;
    return 0;
}

unsigned long shim_rules_delay_ms(const shim_rules *rs, shim_fn fn)
{
    for (unsigned i = 0; i < rs->nrules; i++)
        if (matches(&rs->rules[i], SHIM_RULE_DELAY, fn))
            return rs->rules[i].n;
    return 0;
}

CK_RV shim_rules_fail(shim_rules *rs, shim_fn fn)
{
    for (unsigned i = 0; i < rs->nrules; i++) {
        shim_rule *r = &rs->rules[i];
        if (!matches(r, SHIM_RULE_FAIL, fn))
            continue;
        switch (r->mode) {
        case SHIM_ONCE:
            if (r->fired)
                continue;
            r->fired = 1;
            return r->rv;
        case SHIM_ALWAYS: return r->rv;
        case SHIM_EVERY:
            if (++r->seen % r->n == 0)
                return r->rv;
            continue;
        }
    }
    return CKR_OK;
}
