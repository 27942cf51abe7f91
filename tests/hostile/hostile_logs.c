/* hostile_logs.c - the signer's log as an auditor reads it (common/log.h): every
 * line one JSON object whatever bytes the front end sent; a signed line names
 * every SAN with their count and hash; a refusal line gives the reason before
 * the requester (the front end's word); refusal floods are summarized. */
#include "hostile.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "audit_entry.h"
#include "signer_tbs.h"

/* What the signed line of each certificate signed in this signer's life must say. */
typedef struct {
    char serial[2 * 21 + 1];
    char san_sha256[65];
    int n_sans;
    char sans[2 * 4096];
} signed_note;

static signed_note *notes;
static size_t n_notes, cap_notes;

void hf_notes_reset(void)
{
    free(notes);
    notes = NULL;
    n_notes = cap_notes = 0;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
    out[2 * n] = '\0';
}

static void append(char *buf, size_t cap, const char *kind, const void *p, size_t n)
{
    size_t have = strlen(buf);
    if (have + strlen(kind) + n + 3 < cap)
        snprintf(buf + have, cap - have, "%s%s:%.*s", have ? "," : "", kind, (int)n,
                 (const char *)p);
}

void hf_note_signed(const X509 *x)
{
    if (n_notes == cap_notes) {
        cap_notes = cap_notes ? 2 * cap_notes : 64;
        notes = realloc(notes, cap_notes * sizeof(*notes));
        assert_non_null(notes);
    }
    signed_note *s = &notes[n_notes++];
    memset(s, 0, sizeof(*s));
    /* The serial as the signer sees it: the INTEGER's content octets. */
    uint8_t *der = NULL;
    int n = i2d_ASN1_INTEGER(X509_get0_serialNumber(x), &der);
    assert_true(n > 2 && n < 24 && der[1] == n - 2);
    hex(der + 2, (size_t)n - 2, s->serial);
    OPENSSL_free(der);

    int at = X509_get_ext_by_NID(x, NID_subject_alt_name, -1);
    assert_true(at >= 0);
    const ASN1_OCTET_STRING *v = X509_EXTENSION_get_data(X509_get_ext(x, at));
    uint8_t md[32];
    SHA256(ASN1_STRING_get0_data(v), (size_t)ASN1_STRING_length(v), md);
    hex(md, sizeof(md), s->san_sha256);
    GENERAL_NAMES *g = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    assert_non_null(g);
    s->n_sans = sk_GENERAL_NAME_num(g);
    for (int i = 0; i < s->n_sans; i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(g, i);
        const ASN1_STRING *str = gn->d.ia5;
        const uint8_t *p = ASN1_STRING_get0_data(str);
        size_t len = (size_t)ASN1_STRING_length(str);
        if (gn->type == GEN_URI) {
            append(s->sans, sizeof(s->sans), "uri", p, len);
        } else if (gn->type == GEN_DNS) {
            append(s->sans, sizeof(s->sans), "dns", p, len);
        } else {
            char ip[64];
            assert_non_null(inet_ntop(len == 4 ? AF_INET : AF_INET6, p, ip, sizeof(ip)));
            append(s->sans, sizeof(s->sans), "ip", ip, strlen(ip));
        }
    }
    GENERAL_NAMES_free(g);
}

/* ---- reading the log -------------------------------------------------------------- */

/* "2026-11-05T02:11:08.123Z" as seconds since the epoch, -1 if malformed. */
static double ts_seconds(const char *ts)
{
    struct tm tm = {0};
    int ms = 0;
    if (!ts || sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                      &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + ms / 1000.0;
}

static const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Where "key": appears in the raw line, or SIZE_MAX. */
static size_t raw_pos(const char *line, size_t n, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *at = memmem(line, n, pat, strlen(pat));
    return at ? (size_t)(at - line) : SIZE_MAX;
}

static void fail_line(size_t no, const char *line, size_t n, const char *why)
{
    fail_msg("%s line %zu: %s: %.*s", hf.log, no, why, (int)(n > 600 ? 600 : n), line);
}

static void check_signed_line(json_t *o, const char *line, size_t n, size_t no)
{
    static const char *const keys[] = {"serial", "not_after", "n_sans", "sans", "san_sha256"};
    size_t req = raw_pos(line, n, "requester");
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (!str_of(o, keys[i]))
            fail_line(no, line, n, keys[i]);
        if (raw_pos(line, n, keys[i]) > req)
            fail_line(no, line, n, "a SAN field comes after the requester (or no requester)");
    }
}

/* A "queue full" refusal is given before the request is unpacked
 * (signer_queue_reserve): it names no requester, and nothing else may lack one but a
 * request that could not be unpacked or queued for memory (signer_submit). */
#define QUEUE_FULL_REASON "invariant 7: signer queue full ("
#define NO_MEMORY_REASON "out of memory (unpacking or queueing the request)"

static void check_refusal_line(json_t *o, const char *line, size_t n, size_t no, hf_log_stats *st)
{
    const char *reason = str_of(o, "reason"), *code = str_of(o, "code");
    if (!reason || !code || !str_of(o, "request_id"))
        fail_line(no, line, n, "refusal without reason, code or request_id");
    size_t r = raw_pos(line, n, "reason"), q = raw_pos(line, n, "requester");
    if (!strncmp(reason, QUEUE_FULL_REASON, strlen(QUEUE_FULL_REASON))) {
        if (q != SIZE_MAX || strcmp(code, "RESOURCE_EXHAUSTED") != 0)
            fail_line(no, line, n, "a queue-full refusal: RESOURCE_EXHAUSTED, no requester");
        st->queue_full_lines++;
        return;
    }
    if (!strcmp(reason, NO_MEMORY_REASON) && q == SIZE_MAX && !strcmp(code, "OUT_OF_MEMORY"))
        return;
    if (q == SIZE_MAX || r > q)
        fail_line(no, line, n, "the reason must come before the requester");
}

static void check_summary_line(json_t *o, const char *line, size_t n, size_t no, hf_log_stats *st)
{
    json_t *c = json_object_get(o, "count"), *l = json_object_get(o, "limit");
    json_t *iv = json_object_get(o, "interval_s");
    if (!json_is_integer(c) || json_integer_value(c) <= 0 || !json_is_integer(l) ||
        json_integer_value(l) != 50 || !json_is_number(iv) || json_number_value(iv) != 1.0)
        fail_line(no, line, n, "summary without a positive count, limit 50, interval_s 1");
    st->suppressed += (unsigned long long)json_integer_value(c);
    st->summaries++;
}

/* The signed line of each noted certificate: once, with its SANs, count and hash. */
static void check_notes(json_t *const *signed_lines, size_t n_signed)
{
    for (size_t i = 0; i < n_notes; i++) {
        const signed_note *s = &notes[i];
        json_t *hit = NULL;
        for (size_t j = 0; j < n_signed; j++) {
            const char *serial = str_of(signed_lines[j], "serial");
            if (serial && !strcmp(serial, s->serial)) {
                if (hit)
                    fail_msg("two signed lines for serial %s", s->serial);
                hit = signed_lines[j];
            }
        }
        if (!hit)
            fail_msg("no signed line for serial %s (%s)", s->serial, s->sans);
        char n_sans[16];
        snprintf(n_sans, sizeof(n_sans), "%d", s->n_sans);
        const char *sans = str_of(hit, "sans");
        json_t *cut = json_object_get(hit, "sans_truncated");
        if (strcmp(str_of(hit, "n_sans"), n_sans) ||
            strcmp(str_of(hit, "san_sha256"), s->san_sha256))
            fail_msg("serial %s: n_sans %s san_sha256 %s, want %s and %s", s->serial,
                     str_of(hit, "n_sans"), str_of(hit, "san_sha256"), n_sans, s->san_sha256);
        if (cut ? (!json_is_integer(cut) || (size_t)json_integer_value(cut) != strlen(s->sans) ||
                   strncmp(s->sans, sans, strlen(sans)) != 0)
                : strcmp(sans, s->sans) != 0)
            fail_msg("serial %s: sans \"%s\"%s, want \"%s\"", s->serial, sans,
                     cut ? " (truncated)" : "", s->sans);
    }
}

void hf_check_log(hf_log_stats *st)
{
    memset(st, 0, sizeof(*st));
    struct stat sb;
    assert_int_equal(stat(hf.log, &sb), 0);
    assert_true(sb.st_size < HF_MAX_LOG);
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(text);
    size_t len = strlen(text);
    assert_int_equal(len, (size_t)sb.st_size); /* no NUL byte in the raw log either */
    json_t **signed_lines = calloc(len / 64 + 1, sizeof(*signed_lines));
    double *refused_at = calloc(len / 64 + 1, sizeof(*refused_at));
    /* after_summary[i]: a summary line came between refusal line i-1 and line i. */
    unsigned char *after_summary = calloc(len / 64 + 1, 1);
    int summary_pending = 0;
    assert_true(signed_lines && refused_at && after_summary);
    size_t no = 0;
    for (const char *line = text; line < text + len; no++) {
        const char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl)
            fail_line(no + 1, line, strlen(line), "no newline at the end");
        size_t n = (size_t)(nl - line);
        json_error_t err;
        json_t *o = json_loadb(line, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
        if (!o || !json_is_object(o))
            fail_line(no + 1, line, n, o ? "not an object" : err.text);
        const char *msg = str_of(o, "msg");
        if (!str_of(o, "ts") || !str_of(o, "lvl") || !json_is_integer(json_object_get(o, "pid")) ||
            !msg || raw_pos(line, n, "ts") != 1)
            fail_line(no + 1, line, n, "not a line of common/log.h");
        if (!strncmp(msg, "signed ", 7)) {
            check_signed_line(o, line, n, no + 1);
            signed_lines[st->signed_lines++] = json_incref(o);
        } else if (!strcmp(msg, "refused request")) {
            check_refusal_line(o, line, n, no + 1, st);
            after_summary[st->refused_lines] = (unsigned char)summary_pending;
            summary_pending = 0;
            refused_at[st->refused_lines++] = ts_seconds(str_of(o, "ts"));
        } else if (!strcmp(msg, "suppressed refusal lines")) {
            check_summary_line(o, line, n, no + 1, st);
            summary_pending = 1;
        } else if (!strcmp(msg, "front end protocol violation: closing its connection")) {
            st->violations++;
        }
        json_decref(o);
        line = nl + 1;
    }
    st->lines = no;
    check_notes(signed_lines, st->signed_lines);
    /* The densest second of refusal lines (they come in time order, give or
     * take the few threads that write them). */
    for (size_t i = 0, j = 0; i < st->refused_lines; i++) {
        while (j < st->refused_lines && refused_at[j] < refused_at[i] + 1.0)
            j++;
        if (j - i > st->max_refused_per_s)
            st->max_refused_per_s = j - i;
    }
    /* The limiter's windows: each opens with a line (the first refusal after the
     * last window ended is always let through) and lasts 1 s. A summary line also
     * marks where a window opened (it is written as the next window's first line
     * goes through): a window whose lines were written late, on a loaded machine,
     * then does not run into the next one's. */
    for (size_t i = 0; i < st->refused_lines;) {
        size_t j = i + 1;
        while (j < st->refused_lines && refused_at[j] < refused_at[i] + 1.0 && !after_summary[j])
            j++;
        if (j - i > st->max_refused_window)
            st->max_refused_window = j - i;
        i = j;
    }
    for (size_t i = 0; i < st->signed_lines; i++)
        json_decref(signed_lines[i]);
    free(signed_lines);
    free(refused_at);
    free(after_summary);
    free(text);
    fprintf(stderr,
            "  log: %zu lines, all JSON; %zu signed (%zu certificates checked), %zu refusal "
            "lines (%zu \"queue full\"; at most %zu in any second), %zu summaries of %llu "
            "suppressed, %zu protocol violations\n",
            st->lines, st->signed_lines, n_notes, st->refused_lines, st->queue_full_lines,
            st->max_refused_per_s, st->summaries, st->suppressed, st->violations);
}

json_t *hf_log_find(const char *msg_prefix, const char *key, const char *value)
{
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(text);
    json_t *found = NULL;
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        json_t *o =
            json_loadb(line, (size_t)(nl - line), JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
        const char *m = o ? str_of(o, "msg") : NULL, *v = o ? str_of(o, key) : NULL;
        if (m && v && !strncmp(m, msg_prefix, strlen(msg_prefix)) && !strcmp(v, value)) {
            json_decref(found);
            found = json_incref(o);
        }
        json_decref(o);
    }
    free(text);
    return found;
}

char *hf_log_last_msg(const char *prefix)
{
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(text);
    char *found = NULL;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        json_t *o = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, NULL);
        const char *m = o ? str_of(o, "msg") : NULL;
        if (m && !strncmp(m, prefix, strlen(prefix))) {
            free(found);
            found = strdup(m);
        }
        json_decref(o);
    }
    free(text);
    return found;
}

size_t hf_log_count(const char *prefix)
{
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(text);
    size_t n = 0;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        json_t *o = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, NULL);
        const char *m = o ? str_of(o, "msg") : NULL;
        n += m && !strncmp(m, prefix, strlen(prefix));
        json_decref(o);
    }
    free(text);
    return n;
}

char *hf_log_last_field(const char *msg_prefix, const char *key)
{
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(text);
    char *found = NULL;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        json_t *o = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, NULL);
        const char *m = o ? str_of(o, "msg") : NULL, *v = o ? str_of(o, key) : NULL;
        if (m && v && !strncmp(m, msg_prefix, strlen(msg_prefix))) {
            free(found);
            found = strdup(v);
        }
        json_decref(o);
    }
    free(text);
    return found;
}

size_t hf_log_count_field(const char *msg_prefix, const char *key, const char *value_prefix)
{
    char *text = hf_read_text(hf.log, HF_MAX_LOG);
    assert_non_null(text);
    size_t n = 0;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        json_t *o = json_loadb(line, (size_t)(nl - line), JSON_ALLOW_NUL, NULL);
        const char *m = o ? str_of(o, "msg") : NULL, *v = o ? str_of(o, key) : NULL;
        n += m && v && !strncmp(m, msg_prefix, strlen(msg_prefix)) &&
             !strncmp(v, value_prefix, strlen(value_prefix));
        json_decref(o);
    }
    free(text);
    return n;
}

/* ---- requesters the signer takes, and what their lines say ---------------------- */

/* Signs a fresh valid TBS for this requester (rlen bytes, any bytes) and returns
 * the signed line (a new reference). */
static json_t *sign_as(const void *requester, size_t rlen, size_t csr_len)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    uint64_t id = hf_send_request_as(hf.ipc, 1, tbs, len, requester, rlen, csr_len);
    Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, HF_REPLY_MS);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    json_t *line = hf_log_find("signed workload certificate", "serial", notes[n_notes - 1].serial);
    if (!line)
        fail_msg("no signed line for serial %s", notes[n_notes - 1].serial);
    return line;
}

static void assert_value(json_t *line, const char *key, const char *want, size_t want_len)
{
    json_t *v = json_object_get(line, key);
    if (!json_is_string(v) || json_string_length(v) != want_len ||
        memcmp(json_string_value(v), want, want_len) != 0)
        fail_msg("%s is \"%s\", expected \"%.*s\"", key,
                 json_is_string(v) ? json_string_value(v) : "(none)", (int)want_len, want);
}

/* Invalid UTF-8 of several kinds is taken as a request (the requester is only
 * logged) and logged as \xNN, each byte; a literal backslash is doubled, so the
 * text "\xc0" cannot pass for the byte. The refusal line says the same. */
static void test_requester_invalid_utf8(void **state)
{
    static const char bad[] = HF_SPIFFE_ID "\xc0\xaf"
                                           "\xff"
                                           "\xed\xa0\x80"
                                           "\\xc0"
                                           "\xe2\x82";
    static const char want[] = HF_SPIFFE_ID "\\xc0\\xaf\\xff\\xed\\xa0\\x80\\\\xc0\\xe2\\x82";
    json_t *line = sign_as(bad, sizeof(bad) - 1, 32);
    assert_value(line, "requester", want, sizeof(want) - 1);
    json_decref(line);

    /* The refusal line must not be one the limiter suppresses (the tests before
     * this one refuse more than 50 a second): a new window opens 1 s after the
     * last refusal. */
    usleep(1100 * 1000);
    tbs_spec s = {.bc = BC_CA_TRUE};
    size_t len;
    uint8_t *tbs = hf_build_tbs(&s, &len);
    uint64_t id = hf_send_request_as(hf.ipc, 1, tbs, len, bad, sizeof(bad) - 1, 32);
    Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, HF_REPLY_MS);
    assert_int_equal(rep->code, HSMCA_EPERM);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    char rid[24];
    snprintf(rid, sizeof(rid), "%llu", (unsigned long long)id);
    line = hf_log_find("refused request", "request_id", rid);
    assert_non_null(line);
    assert_value(line, "requester", want, sizeof(want) - 1);
    assert_value(line, "reason", "invariant 3: basicConstraints must be CA:FALSE", 46);
    json_decref(line);
}

/* A requester that tries to end its line and forge another: valid UTF-8, so
 * kept byte for byte, inside its own string. */
static void test_requester_forging_a_line(void **state)
{
    static const char forged[] = "spiffe://cluster.local/ns/default/sa/sleep\"}\n"
                                 "{\"ts\":\"2030-01-01T00:00:00.000Z\",\"lvl\":\"info\",\"proc\":"
                                 "\"signer\",\"pid\":1,\"msg\":\"signed workload certificate\","
                                 "\"serial\":\"00\"}\r\n\t\x01\x7f";
    json_t *line = sign_as(forged, sizeof(forged) - 1, 32);
    assert_value(line, "requester", forged, sizeof(forged) - 1);
    json_decref(line);
    assert_null(hf_log_find("signed", "serial", "00"));
}

/* The longest requester the wire check admits, plain and all invalid bytes: the
 * line keeps its bound and says how long the value was. */
static void test_requester_at_the_bound(void **state)
{
    static char plain[2048], bad[2048];
    memset(plain, 'r', sizeof(plain));
    memset(bad, 0xff, sizeof(bad));
    for (int i = 0; i < 2; i++) {
        json_t *line = sign_as(i ? bad : plain, 2048, 32);
        json_t *cut = json_object_get(line, "requester_truncated");
        const char *v = str_of(line, "requester");
        assert_true(json_is_integer(cut) && json_integer_value(cut) == 2048);
        assert_non_null(v);
        for (size_t k = 0; v[k]; k++) /* "rrr..." or "\xff\xff..." */
            assert_int_equal(v[k], i ? "\\xff"[k % 4] : 'r');
        fprintf(stderr, "  requester of 2048 %s bytes logged as %zu characters + %s\n",
                i ? "invalid" : "plain", strlen(v), "requester_truncated:2048");
        json_decref(line);
    }
}

/* No requester and no csr_sha256: both optional on the wire. */
static void test_requester_and_csr_absent(void **state)
{
    json_t *line = sign_as(NULL, 0, 0);
    assert_value(line, "requester", "", 0);
    json_decref(line);
}

/* An empty SignRequest is well formed on the wire (every field is optional) and
 * refused for what it lacks; so is a profile without a TBS; a TBS at the wire's
 * bound (16384 bytes) is taken and refused by the validator. */
static void test_wire_bounds_taken(void **state)
{
    static const uint8_t big[PROFILE_TBS_MAX];
    static const struct {
        uint32_t profile;
        size_t tbs_len;
        hsmca_code code;
        const char *why;
    } c[] = {{0, 0, HSMCA_EPERM, "invariant 0: unknown profile 0"},
             {1, 0, HSMCA_EINVAL, "invariant 0: empty TBS"},
             {1, PROFILE_TBS_MAX, HSMCA_EINVAL, "invariant 0: TBSCertificate: not DER"}};
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        uint64_t id = hf_send_request_as(hf.ipc, c[i].profile, c[i].tbs_len ? big : NULL,
                                         c[i].tbs_len, NULL, 0, 0);
        Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, HF_REPLY_MS);
        fprintf(stderr, "  profile %u, tbs of %zu bytes: code %u, \"%s\"\n", c[i].profile,
                c[i].tbs_len, rep->code, rep->reason);
        assert_int_equal(rep->code, c[i].code);
        assert_string_equal(rep->reason, c[i].why);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    }
    hf_assert_signs_fresh();
}

/* After all of the above (invalid UTF-8, NULs, a 60 KiB requester, 64 KiB of
 * padding, forged lines): every line of the log is one JSON object. */
static void test_log_every_line_json(void **state)
{
    hf_log_stats st;
    hf_check_log(&st);
    assert_true(st.signed_lines > 0 && st.refused_lines > 0 && st.violations > 0);
}

/* Close the control channel like a supervisor that went away: the signer stops
 * cleanly. Then its whole log must be free of the PIN, and still all JSON. */
static void test_stop_and_no_pin_in_log(void **state)
{
    hf_stop_signer();
    char *log = hf_read_log_without_pin();
    /* The log is the real one: it saw the start and the violations above. */
    assert_non_null(strstr(log, "signer ready"));
    assert_non_null(strstr(log, "protocol violation"));
    free(log);
    hf_log_stats st;
    hf_check_log(&st);
    /* Every refusal the front end received ("queue full" ones too) was logged
     * or counted in a summary (the last one written at stop), none twice. */
    fprintf(stderr,
            "  %lu refusals received (%lu \"queue full\"); %zu refusal lines + %llu "
            "suppressed\n",
            hf.n_refused + hf.n_queue_full, hf.n_queue_full, st.refused_lines, st.suppressed);
    assert_int_equal(st.refused_lines + st.suppressed, hf.n_refused + hf.n_queue_full);
}

/* The signing log after all of the above (the dev config has audit.dir): every line
 * parses strictly (hostile requesters never broke one), seq is the line's index, start
 * first and stop last, every intent has its result after it, and the signer's own
 * refusals are deny entries naming the invariant. */
static void test_audit_log_after_stop(void **state)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/audit/log", hf.dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char line[AUDIT_LINE_MAX + 1];
    static audit_entry_buf buf;
    static uint8_t has_result[1 << 16];
    size_t n = 0, intents = 0, results = 0, denies = 0, profile0 = 0;
    audit_kind last = 0;
    while (fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        assert_true(len > 0 && line[len - 1] == '\n');
        audit_entry ent;
        hsmca_err e;
        if (audit_entry_parse(line, len - 1, &ent, &buf, &e) != HSMCA_OK)
            fail_msg("audit log line %zu: %s", n, e.msg);
        assert_int_equal(ent.seq, n);
        if (n == 0)
            assert_int_equal(ent.kind, AUDIT_START);
        if (ent.kind == AUDIT_ISSUE_INTENT)
            intents++;
        if (ent.kind == AUDIT_ISSUE_RESULT) {
            results++;
            assert_true(ent.intent_seq < ent.seq && ent.intent_seq < sizeof(has_result));
            assert_int_equal(has_result[ent.intent_seq]++, 0);
        }
        if (ent.kind == AUDIT_DENY) {
            denies++;
            assert_non_null(memmem(ent.reason.p, ent.reason.len, "invariant", 9));
            profile0 += ent.reason.len == 30 &&
                        memcmp(ent.reason.p, "invariant 0: unknown profile 0", 30) == 0;
        }
        last = ent.kind;
        n++;
    }
    fclose(f);
    fprintf(stderr, "  audit log: %zu entries, %zu intents, %zu results, %zu denies\n", n, intents,
            results, denies);
    assert_int_equal(last, AUDIT_STOP);
    assert_true(intents > 0 && intents == results);
    assert_true(denies > 0 && denies <= hf.n_refused);
    assert_true(profile0 >= 1);
}

const struct CMUnitTest hf_log_tests[] = {
    cmocka_unit_test(test_requester_invalid_utf8), cmocka_unit_test(test_requester_forging_a_line),
    cmocka_unit_test(test_requester_at_the_bound), cmocka_unit_test(test_requester_and_csr_absent),
    cmocka_unit_test(test_wire_bounds_taken),      cmocka_unit_test(test_log_every_line_json),
    cmocka_unit_test(test_stop_and_no_pin_in_log), cmocka_unit_test(test_audit_log_after_stop),
};
const size_t hf_n_log_tests = sizeof(hf_log_tests) / sizeof(hf_log_tests[0]);
