/* test_audit_replay.c - the one replay of the log's serials and open intents
 * (audit/audit_replay.h): results close their intent and what stays open is what a
 * restart records as UNKNOWN; a result naming anything else, a start over open intents,
 * too many open intents and a repeated serial are violations naming the entry's seq; a
 * serial is free again once its certificate expired by the log's clock, or under another
 * CA key; deny entries and the first intent's outcome change nothing; the serials the
 * signer restores are this key's (and those before any key entry) still valid. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <string.h>

#include "audit_replay.h"

#define NOW 1790000000
#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define KEY_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

typedef struct {
    audit_replay *r;
    uint64_t seq;
    int64_t time;
    hsmca_err e;
} feed;

static void feed_init(feed *f)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(audit_replay_new(&f->r, &f->e), HSMCA_OK);
    f->time = NOW;
}

/* Feeds a at the next seq (byte offset 100 per seq) and returns the replay's verdict. */
static hsmca_code put(feed *f, audit_entry *a)
{
    a->seq = f->seq++;
    a->time = f->time;
    hsmca_err_clear(&f->e);
    return audit_replay_entry(f->r, a, 100 * a->seq, &f->e);
}

static hsmca_code intent(feed *f, const char *serial, int64_t not_after)
{
    audit_entry a = {.kind = AUDIT_ISSUE_INTENT, .request_id = f->seq + 1000};
    snprintf(a.serial, sizeof(a.serial), "%s", serial);
    a.not_after = not_after;
    return put(f, &a);
}

static hsmca_code result(feed *f, uint64_t intent_seq, const char *code)
{
    audit_entry a = {.kind = AUDIT_ISSUE_RESULT, .request_id = intent_seq + 1000};
    a.intent_seq = intent_seq;
    snprintf(a.code, sizeof(a.code), "%s", code);
    return put(f, &a);
}

static hsmca_code simple(feed *f, audit_kind k)
{
    audit_entry a = {.kind = k};
    return put(f, &a);
}

static hsmca_code key(feed *f, const char *spki)
{
    audit_entry a = {.kind = AUDIT_KEY};
    snprintf(a.ca_spki_sha256, sizeof(a.ca_spki_sha256), "%s", spki);
    return put(f, &a);
}

static void violation(feed *f, hsmca_code rc, const char *want)
{
    assert_int_equal(rc, HSMCA_EPERM);
    if (!strstr(f->e.msg, want))
        fail_msg("message \"%s\" does not name \"%s\"", f->e.msg, want);
}

static void test_results_close_intents(void **state)
{
    feed f;
    feed_init(&f);
    assert_int_equal(simple(&f, AUDIT_START), HSMCA_OK);
    char serial[8];
    for (int s = 1; s <= 10; s++) {
        snprintf(serial, sizeof(serial), "4%02d", s);
        assert_int_equal(intent(&f, serial, NOW + 3600), HSMCA_OK);
    }
    for (uint64_t s = 1; s <= 10; s++)
        if (s != 4 && s != 9)
            assert_int_equal(result(&f, s, ""), HSMCA_OK);
    assert_int_equal(audit_replay_open_count(f.r), 2);
    assert_int_equal(audit_replay_open_first(f.r), 4);
    assert_int_equal(audit_replay_intents(f.r), 10);
    size_t it = 0;
    uint64_t seq, rid;
    assert_true(audit_replay_open_next(f.r, &it, &seq, &rid));
    assert_int_equal(seq, 4);
    assert_int_equal(rid, 1004);
    assert_true(audit_replay_open_next(f.r, &it, &seq, &rid));
    assert_int_equal(seq, 9);
    assert_false(audit_replay_open_next(f.r, &it, &seq, &rid));
    /* a result naming no intent, a second result, a wrong request id: broken pairs */
    violation(&f, result(&f, 77, ""), "the result names intent seq 77");
    violation(&f, result(&f, 3, ""), "the result names intent seq 3, which is not");
    audit_entry a = {.kind = AUDIT_ISSUE_RESULT, .request_id = 1, .intent_seq = 4};
    violation(&f, put(&f, &a), "request_id 1, but intent seq 4 has 1004");
    /* a start over open intents: the restart writes UNKNOWN for each first */
    violation(&f, simple(&f, AUDIT_START), "a start, but the intent at seq 4 has no result");
    assert_int_equal(result(&f, 4, "UNKNOWN"), HSMCA_OK);
    assert_int_equal(result(&f, 9, "UNKNOWN"), HSMCA_OK);
    assert_int_equal(simple(&f, AUDIT_START), HSMCA_OK);
    assert_int_equal(audit_replay_open_count(f.r), 0);
    audit_replay_free(f.r);
}

/* A long log of pairs keeps nothing open; more open intents than the bound is refused,
 * naming the intent past it. */
static void test_bounded(void **state)
{
    feed f;
    feed_init(&f);
    char serial[24];
    for (int i = 0; i < 200000; i++) {
        snprintf(serial, sizeof(serial), "41%08x", i);
        assert_int_equal(intent(&f, serial, NOW - 1), HSMCA_OK);
        assert_int_equal(result(&f, f.seq - 1, ""), HSMCA_OK);
    }
    assert_int_equal(audit_replay_open_count(f.r), 0);
    for (unsigned i = 0; i < AUDIT_REPLAY_OPEN_MAX; i++) {
        snprintf(serial, sizeof(serial), "42%08x", i);
        assert_int_equal(intent(&f, serial, NOW - 1), HSMCA_OK);
    }
    assert_int_equal(audit_replay_open_count(f.r), AUDIT_REPLAY_OPEN_MAX);
    char want[64];
    snprintf(want, sizeof(want), "log seq %llu (byte %llu): more than 65536 intents",
             (unsigned long long)f.seq, (unsigned long long)(100 * f.seq));
    violation(&f, intent(&f, "43", NOW - 1), want);
    audit_replay_free(f.r);
}

/* The rule of invariant 6: a repeat under the same CA key while the first certificate is
 * valid, whatever the first intent's outcome, and with refusals between. */
static void test_repeated_serial(void **state)
{
    const char *outcomes[] = {"", "UNAVAILABLE", "UNKNOWN", NULL};
    for (int i = 0; i < 4; i++) {
        feed f;
        feed_init(&f);
        assert_int_equal(key(&f, KEY_A), HSMCA_OK);
        assert_int_equal(intent(&f, "4abc", NOW + 60), HSMCA_OK);
        if (outcomes[i])
            assert_int_equal(result(&f, 1, outcomes[i]), HSMCA_OK);
        assert_int_equal(simple(&f, AUDIT_DENY), HSMCA_OK);
        assert_int_equal(simple(&f, AUDIT_FRONTEND_DENY), HSMCA_OK);
        char want[160];
        snprintf(want, sizeof(want),
                 "log seq %llu (byte %llu): serial 4abc was already in the intent at seq 1 ",
                 (unsigned long long)f.seq, (unsigned long long)(100 * f.seq));
        f.time = NOW + 59;
        violation(&f, intent(&f, "4abc", NOW + 120), want);
        audit_replay_free(f.r);
    }
}

/* Expired by the log's clock (the latest time so far, even when a later entry's clock
 * went back), or under another CA key: not a repeat. Back under the first key, it is. */
static void test_serial_free_again(void **state)
{
    feed f;
    feed_init(&f);
    assert_int_equal(intent(&f, "4abc", NOW + 60), HSMCA_OK); /* before any key entry */
    assert_int_equal(key(&f, KEY_A), HSMCA_OK);
    assert_int_equal(intent(&f, "4abc", NOW + 60), HSMCA_OK); /* another key's serial space */
    assert_int_equal(key(&f, KEY_B), HSMCA_OK);
    assert_int_equal(intent(&f, "4abc", NOW + 60), HSMCA_OK);
    assert_int_equal(intent(&f, "4def", NOW + 60), HSMCA_OK);
    assert_int_equal(key(&f, KEY_A), HSMCA_OK);
    violation(&f, intent(&f, "4abc", NOW + 60), "already in the intent at seq 2 ");
    f.time = NOW + 60; /* the first certificates expire */
    assert_int_equal(simple(&f, AUDIT_STOP), HSMCA_OK);
    f.time = NOW; /* a clock that stepped back does not bring them back */
    assert_int_equal(intent(&f, "4abc", NOW + 600), HSMCA_OK);
    assert_int_equal(key(&f, KEY_B), HSMCA_OK);
    assert_int_equal(intent(&f, "4def", NOW + 600), HSMCA_OK);
    audit_replay_free(f.r);
}

typedef struct {
    int n;
    char seen[8][41];
} restored;

static void collect(void *ctx, const uint8_t *serial, size_t len, int64_t not_after)
{
    restored *r = ctx;
    assert_true(r->n < 8);
    assert_true(not_after > NOW + 10);
    for (size_t i = 0; i < len; i++)
        snprintf(r->seen[r->n] + 2 * i, 3, "%02x", serial[i]);
    r->n++;
}

static int has(const restored *r, const char *hex)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->seen[i], hex) == 0)
            return 1;
    return 0;
}

/* What the signer puts back in its serial set: its key's serials and those from before
 * any key entry, valid after its now; an odd digit count is padded in front. */
static void test_serials_restored(void **state)
{
    feed f;
    feed_init(&f);
    assert_int_equal(intent(&f, "401", NOW + 60), HSMCA_OK);
    assert_int_equal(key(&f, KEY_A), HSMCA_OK);
    assert_int_equal(intent(&f, "4a", NOW + 60), HSMCA_OK);
    assert_int_equal(intent(&f, "4b", NOW + 5), HSMCA_OK);
    assert_int_equal(key(&f, KEY_B), HSMCA_OK);
    assert_int_equal(intent(&f, "4c", NOW + 60), HSMCA_OK);
    restored r = {0};
    assert_int_equal(audit_replay_serials(f.r, KEY_A, NOW + 10, collect, &r), 2);
    assert_true(has(&r, "0401") && has(&r, "4a"));
    memset(&r, 0, sizeof(r));
    assert_int_equal(audit_replay_serials(f.r, KEY_B, NOW + 10, collect, &r), 2);
    assert_true(has(&r, "0401") && has(&r, "4c"));
    audit_replay_free(f.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_close_intents), cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_repeated_serial),       cmocka_unit_test(test_serial_free_again),
        cmocka_unit_test(test_serials_restored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
