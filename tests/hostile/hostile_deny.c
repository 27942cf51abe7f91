/* hostile_deny.c - refusals in the signing log (issue 6 item 1), with their own signer:
 * a FrontendDeny outside the wire contract (signer/signer_request.h) is a protocol
 * violation like a bad SignRequest; a flood of valid ones, and a flood of requests the
 * signer itself refuses, become at most SIGNER_DENY_ENTRIES_PER_S entries per second
 * each plus "suppressed" entries whose counts make up the rest exactly, and neither
 * flood slows a valid request down. */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "audit_entry.h"
#include "ipc_frame.h"
#include "signer_audit.h"
#include "signer_request.h"
#include "util.h"

enum { WT_VARINT = 0, WT_LEN = 2, WT_I32 = 5 };
enum { D_REQUESTER = 1, D_AUTHENTICATOR = 2, D_CODE = 3, D_REASON = 4, D_SUPPRESSED = 5 };

typedef struct {
    uint8_t p[IPC_MAX_PAYLOAD];
    size_t n;
} dbuf;

static void d_varint(dbuf *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) {
        assert_true(b->n < sizeof(b->p));
        b->p[b->n++] = (uint8_t)(v | 0x80);
    }
    assert_true(b->n < sizeof(b->p));
    b->p[b->n++] = (uint8_t)v;
}

static void d_len(dbuf *b, uint64_t field, const void *p, size_t n)
{
    d_varint(b, field << 3 | WT_LEN);
    d_varint(b, n);
    assert_true(b->n + n <= sizeof(b->p));
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void d_uint(dbuf *b, uint64_t field, uint64_t v)
{
    d_varint(b, field << 3 | WT_VARINT);
    d_varint(b, v);
}

#define D_REQ HF_SPIFFE_ID
/* A hostile reason: a newline, a quote, invalid UTF-8, a fake escape. */
static const char d_reason[] = "policy: refused\n\"kind\":\"issue-result\" \xc0\xff \\x41";

/* A FrontendDeny the signer takes. */
static void d_valid(dbuf *b, uint32_t suppressed)
{
    d_len(b, D_REQUESTER, D_REQ, strlen(D_REQ));
    d_len(b, D_AUTHENTICATOR, "jwt", 3);
    d_uint(b, D_CODE, HSMCA_EPERM);
    d_len(b, D_REASON, d_reason, strlen(d_reason));
    if (suppressed)
        d_uint(b, D_SUPPRESSED, suppressed);
}

static void d_send(const dbuf *b)
{
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_FRONTEND_DENY, hf.next_id++, b->p, b->n, &e) != HSMCA_OK)
        fail_msg("ipc_send of a FrontendDeny: %s", e.msg);
}

/* What this group sent that the signer must account for, entry or summary. */
static struct {
    uint64_t fdenies;     /* valid FrontendDeny messages */
    uint64_t fsuppressed; /* their suppressed fields, added up */
    uint64_t refusals;    /* requests the signer refused itself */
    double flood_s;       /* how long the floods lasted, together */
} hd;

/* ---- the wire contract ------------------------------------------------------------- */

static void requester_twice(dbuf *b)
{
    d_valid(b, 0);
    d_len(b, D_REQUESTER, "x", 1);
}
static void unknown_field(dbuf *b)
{
    d_valid(b, 0);
    d_len(b, 6, "x", 1);
}
static void code_zero(dbuf *b)
{
    d_len(b, D_REASON, "r", 1);
    d_uint(b, D_CODE, 0);
}
static void code_absent(dbuf *b)
{
    d_len(b, D_REASON, "r", 1);
}
static void code_unknown(dbuf *b)
{
    d_uint(b, D_CODE, HSMCA_CODE_MAX + 1);
}
static void code_beyond_32_bits(dbuf *b)
{
    d_uint(b, D_CODE, (1ull << 32) + HSMCA_EPERM);
}
static void code_as_bytes(dbuf *b)
{
    d_len(b, D_CODE, "\x03", 1);
}
static void reason_too_long(dbuf *b)
{
    static char r[IPC_DENY_REASON_MAX + 1];
    memset(r, 'r', sizeof(r));
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_len(b, D_REASON, r, sizeof(r));
}
static void authenticator_too_long(dbuf *b)
{
    static char a[IPC_AUTHENTICATOR_MAX + 1];
    memset(a, 'a', sizeof(a));
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_len(b, D_AUTHENTICATOR, a, sizeof(a));
}
static void requester_too_long(dbuf *b)
{
    static char r[60000];
    memset(r, 'q', sizeof(r));
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_len(b, D_REQUESTER, r, sizeof(r));
}
static void reason_nul(dbuf *b)
{
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_len(b, D_REASON, "bad\0token", 9);
}
static void requester_nul(dbuf *b)
{
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_len(b, D_REQUESTER, "spiffe://a\0b", 12);
}
static void suppressed_beyond_32_bits(dbuf *b)
{
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_uint(b, D_SUPPRESSED, 1ull << 40);
}
static void suppressed_as_fixed32(dbuf *b)
{
    d_uint(b, D_CODE, HSMCA_EAUTH);
    d_varint(b, D_SUPPRESSED << 3 | WT_I32);
    memcpy(b->p + b->n, "\1\0\0\0", 4);
    b->n += 4;
}
static void truncated(dbuf *b)
{
    d_valid(b, 0);
    b->n -= 3; /* the reason runs past the frame */
}

typedef struct {
    const char *name;
    void (*build)(dbuf *b);
    const char *why;
} deny_case;

static const deny_case deny_cases[] = {
    {"FrontendDeny: requester twice", requester_twice, "FrontendDeny: field requester repeated"},
    {"FrontendDeny: unknown field 6", unknown_field, "FrontendDeny: unknown field 6"},
    {"FrontendDeny: code 0 (not a refusal)", code_zero, "FrontendDeny: code must name a refusal"},
    {"FrontendDeny: no code", code_absent, "FrontendDeny: code must name a refusal"},
    {"FrontendDeny: unknown code", code_unknown, "FrontendDeny: field code of 10 exceeds 9"},
    {"FrontendDeny: code of 2^32 + 3", code_beyond_32_bits,
     "FrontendDeny: field code of 4294967299 exceeds 9"},
    {"FrontendDeny: code as bytes", code_as_bytes,
     "FrontendDeny: field code has the wrong wire type"},
    {"FrontendDeny: reason of 1025 bytes", reason_too_long,
     "FrontendDeny: field reason of 1025 bytes exceeds 1024"},
    {"FrontendDeny: authenticator of 65 bytes", authenticator_too_long,
     "FrontendDeny: field authenticator of 65 bytes exceeds 64"},
    {"FrontendDeny: requester of 60000 bytes", requester_too_long,
     "FrontendDeny: field requester of 60000 bytes exceeds 2048"},
    {"FrontendDeny: NUL in the reason", reason_nul, "FrontendDeny: reason contains a NUL byte"},
    {"FrontendDeny: NUL in the requester", requester_nul,
     "FrontendDeny: requester contains a NUL byte"},
    {"FrontendDeny: suppressed of 2^40", suppressed_beyond_32_bits,
     "FrontendDeny: field suppressed of 1099511627776 exceeds 4294967295"},
    {"FrontendDeny: suppressed as fixed32", suppressed_as_fixed32,
     "FrontendDeny: field suppressed has the wrong wire type"},
    {"FrontendDeny: reason past the frame", truncated,
     "FrontendDeny: field reason runs past the frame"},
};

static void deny_case_test(void **state)
{
    const deny_case *c = *state;
    dbuf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    c->build(b);
    d_send(b);
    free(b);
    hf_assert_dropped_then_reconnect();
    char *got = hf_log_last_field("front end protocol violation", "reason");
    if (!got || strncmp(got, c->why, strlen(c->why)) != 0)
        fail_msg("the signer logged the reason \"%s\", expected \"%s...\"", got ? got : "(nothing)",
                 c->why);
    free(got);
}

/* ---- floods -------------------------------------------------------------------------- */

/* Valid FrontendDenys as fast as the socket takes them, then a valid request: it must
 * be signed promptly (the denies cost the main thread a parse and a counter each). */
static void test_frontend_deny_flood(void **state)
{
    enum { FLOOD = 20000 };
    dbuf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    double t0 = util_mono_now();
    for (int i = 0; i < FLOOD; i++) {
        b->n = 0;
        uint32_t sup = i % 1000 == 0 ? 7 : 0; /* the front end's own drops, reported */
        d_valid(b, sup);
        d_send(b);
        hd.fdenies++;
        hd.fsuppressed += sup;
    }
    double sent = util_mono_now();
    hf_wait_all_read(hf.ipc);
    double t1 = util_mono_now();
    hf_assert_signs_within(HF_REPLY_MS);
    double signed_at = util_mono_now();
    hd.flood_s += signed_at - t0;
    fprintf(stderr, "  %d FrontendDeny sent in %.2f s, read by %.2f s; then signed in %.3f s\n",
            FLOOD, sent - t0, t1 - t0, signed_at - t1);
    assert_true(hf_signer_alive());
    assert_true(signed_at - t1 < 2.0);
    free(b);
}

/* Requests the signer refuses itself (profile 0), pipelined: one reply each, and the
 * deny entries are limited like the front end's. */
static void test_signer_deny_flood(void **state)
{
    enum { FLOOD = 600 };
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    double t0 = util_mono_now();
    for (int sent = 0, got = 0; got < FLOOD;) {
        /* at most 64 in flight: the replies must not fill the socket */
        while (sent < FLOOD && sent - got < 64) {
            hf_send_request_as(hf.ipc, 0, tbs, len, D_REQ, strlen(D_REQ), 32);
            sent++;
        }
        uint64_t rid;
        Hsmca__Ipc__SignReply *rep = hf_recv_reply(hf.ipc, HF_REPLY_MS, &rid, "a refusal");
        assert_int_equal(rep->code, HSMCA_EPERM);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        got++;
        hd.refusals++;
    }
    hf_assert_signs_within(HF_REPLY_MS);
    hd.flood_s += util_mono_now() - t0;
    fprintf(stderr, "  %d refusals in %.2f s\n", FLOOD, util_mono_now() - t0);
    OPENSSL_free(tbs);
}

/* After stop: every refusal above is an entry or counted in a summary, exactly; the
 * entries per kind stay within the limit; the hostile reason came back byte for byte. */
static void test_deny_entries_after_stop(void **state)
{
    hf_stop_signer();
    char path[1100];
    snprintf(path, sizeof(path), "%s/audit/log", hf.dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char line[AUDIT_LINE_MAX + 1];
    static audit_entry_buf buf;
    uint64_t fd_lines = 0, fd_counted = 0, d_lines = 0, d_counted = 0, summaries = 0, n = 0;
    while (fgets(line, sizeof(line), f)) {
        size_t len = strlen(line);
        audit_entry ent;
        hsmca_err e;
        if (audit_entry_parse(line, len - 1, &ent, &buf, &e) != HSMCA_OK)
            fail_msg("audit log line %llu: %s", (unsigned long long)n, e.msg);
        assert_int_equal(ent.seq, n++);
        if (ent.kind == AUDIT_FRONTEND_DENY) {
            fd_lines++;
            assert_string_equal(ent.code, "PERMISSION_DENIED");
            assert_int_equal(ent.reason.len, strlen(d_reason));
            assert_memory_equal(ent.reason.p, d_reason, strlen(d_reason));
            assert_memory_equal(ent.requester.p, D_REQ, strlen(D_REQ));
            assert_memory_equal(ent.authenticator.p, "jwt", 3);
        } else if (ent.kind == AUDIT_DENY) {
            d_lines++;
        } else if (ent.kind == AUDIT_SUPPRESSED) {
            summaries++;
            assert_int_equal(ent.limit, SIGNER_DENY_ENTRIES_PER_S);
            assert_int_equal(ent.interval_s, SIGNER_DENY_WINDOW_S);
            if (strcmp(ent.of, "frontend-deny") == 0)
                fd_counted += ent.count;
            else
                d_counted += ent.count;
        }
    }
    fclose(f);
    fprintf(stderr,
            "  frontend-deny: %llu sent (+%llu suppressed by the front end) -> %llu entries + "
            "%llu counted; deny: %llu refusals -> %llu entries + %llu counted; %llu summaries "
            "in %.1f s of floods\n",
            (unsigned long long)hd.fdenies, (unsigned long long)hd.fsuppressed,
            (unsigned long long)fd_lines, (unsigned long long)fd_counted,
            (unsigned long long)hd.refusals, (unsigned long long)d_lines,
            (unsigned long long)d_counted, (unsigned long long)summaries, hd.flood_s);
    assert_int_equal(fd_lines + fd_counted, hd.fdenies + hd.fsuppressed);
    /* The signed requests' profile-0 refusals are the only signer refusals here. */
    assert_int_equal(d_lines + d_counted, hd.refusals);
    /* Windows start at the first entry after the last: at most one more than the
     * seconds the floods lasted, each with SIGNER_DENY_ENTRIES_PER_S entries. */
    uint64_t bound = SIGNER_DENY_ENTRIES_PER_S * ((uint64_t)hd.flood_s + 2);
    assert_true(fd_lines <= bound);
    assert_true(d_lines <= bound);
    assert_true(fd_counted > 0 && d_counted > 0);
}

int hf_deny_group_setup(void **state)
{
    hf_group_teardown(state);
    memset(&hd, 0, sizeof(hd));
    return hf_start_signer("hostile-deny", NULL);
}

const struct CMUnitTest *hf_deny_tests(size_t *n)
{
    enum { N_CASES = sizeof(deny_cases) / sizeof(deny_cases[0]) };
    static struct CMUnitTest all[N_CASES + 3];
    for (size_t i = 0; i < N_CASES; i++)
        all[i] = (struct CMUnitTest){deny_cases[i].name, deny_case_test, NULL, NULL,
                                     (void *)&deny_cases[i]};
    all[N_CASES] = (struct CMUnitTest)cmocka_unit_test(test_frontend_deny_flood);
    all[N_CASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_signer_deny_flood);
    all[N_CASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_deny_entries_after_stop);
    *n = N_CASES + 3;
    return all;
}
