/* test_signer_audit.c - the signer's replay at start (signer/signer_audit.h) against the
 * offline verifier on the same fixture logs (audit_fx.h): the signer's path (audit_log_open
 * with signer_replay_entry, then the serials restored) and audit_verify accept the same
 * logs and refuse the same ones with the same message: a repeated serial (whatever the
 * first intent's outcome), a broken pair, a start over an open intent; a serial repeated
 * after its certificate expired, or under another CA key, is accepted by both. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_fx.h"
#include "audit_log.h"
#include "audit_verify.h"
#include "signer_audit.h"
#include "testutil.h"

#define N 60

typedef afx_fixture fx;

static int setup(void **state)
{
    *state = afx_fixture_new("signer_audit", N);
    return 0;
}

static int teardown(void **state)
{
    afx_fixture_free(*state);
    return 0;
}

static void parse_line(fx *f, uint64_t seq, audit_entry *ent, audit_entry_buf *buf)
{
    afx_parse(&f->log, seq, ent, buf);
}

/* The fixture's entries again, as they were. */
static void fresh(fx *f)
{
    afx_log_free(&f->log);
    afx_entries(&f->log, N, 0, NULL);
}

/* The seq of the k-th issue-intent (from 0) whose result is (failed) or is not an error. */
static uint64_t nth_intent(fx *f, int k, int failed)
{
    for (uint64_t s = 0; s + 1 < f->log.n; s++) {
        static audit_entry_buf b1, b2;
        audit_entry in, res;
        parse_line(f, s, &in, &b1);
        if (in.kind != AUDIT_ISSUE_INTENT)
            continue;
        parse_line(f, s + 1, &res, &b2);
        if (res.kind == AUDIT_ISSUE_RESULT && !res.cert_sha256[0] == !!failed && k-- == 0)
            return s;
    }
    fail_msg("no such intent");
    return 0;
}

/* Intent at seq takes the serial of the intent at from. */
static void copy_serial(fx *f, uint64_t seq, uint64_t from)
{
    static audit_entry_buf b1, b2;
    audit_entry a, b;
    parse_line(f, from, &a, &b1);
    parse_line(f, seq, &b, &b2);
    memcpy(b.serial, a.serial, sizeof(b.serial));
    afx_set(&f->log, seq, &b);
}

typedef struct {
    hsmca_code rc;
    hsmca_err e;
    uint64_t open, restored;
} verdict;

/* Writes the fixture and runs both users on it: they must agree; returns their verdict. */
static verdict both(fx *f)
{
    tu_system("rm -rf '%s'", f->dir);
    uint64_t size = f->log.n;
    afx_write(f->dir, &f->log, &size, 1, f->key, &f->vk);
    verdict v, s;
    memset(&v, 0, sizeof(v));
    memset(&s, 0, sizeof(s));
    audit_verify_opts o = {.dir = f->dir, .vkey = &f->vk};
    audit_verify_report r;
    v.rc = audit_verify(&o, &r, &v.e);
    v.open = r.open_intents;

    signer_replay sr = {.serials = serial_set_new(), .now = AFX_TIME0};
    assert_int_equal(audit_replay_new(&sr.replay, &s.e), HSMCA_OK);
    audit_log *l;
    audit_replay_stats st;
    s.rc = audit_log_open(f->dir, (uid_t)-1, (gid_t)-1, signer_replay_entry, &sr, &l, &st, &s.e);
    if (s.rc == HSMCA_OK) {
        signer_replay_restore(&sr);
        s.open = audit_replay_open_count(sr.replay);
        s.restored = sr.restored;
        assert_int_equal(serial_set_count(sr.serials), sr.restored);
        audit_log_close(l);
    }
    signer_replay_free(&sr);
    serial_set_free(sr.serials);

    assert_int_equal(s.rc, v.rc);
    if (v.rc != HSMCA_OK)
        assert_string_equal(s.e.msg, v.e.msg);
    else
        assert_int_equal(s.open, v.open);
    return s;
}

static void expect_refused(fx *f, const char *want)
{
    verdict s = both(f);
    assert_int_equal(s.rc, HSMCA_EPERM);
    if (!strstr(s.e.msg, want))
        fail_msg("message \"%s\" does not name \"%s\"", s.e.msg, want);
}

static void test_good(void **state)
{
    fx *f = *state;
    verdict s = both(f);
    assert_int_equal(s.rc, HSMCA_OK);
    assert_int_equal(s.open, 1); /* the fixture's last intent */
    assert_true(s.restored > 20);
}

static void test_repeated_serial(void **state)
{
    fx *f = *state;
    uint64_t first = nth_intent(f, 0, 0), again = nth_intent(f, 3, 0);
    copy_serial(f, again, first);
    char want[96];
    snprintf(want, sizeof(want), "log seq %llu (byte ", (unsigned long long)again);
    expect_refused(f, want);
    snprintf(want, sizeof(want), "already in the intent at seq %llu ", (unsigned long long)first);
    expect_refused(f, want);
}

/* A failed signature, or a crash's UNKNOWN, leaves the serial taken. */
static void test_repeated_serial_of_failed_intent(void **state)
{
    fx *f = *state;
    uint64_t failed = nth_intent(f, 0, 1), later = 0;
    for (int k = 0; later <= failed; k++)
        later = nth_intent(f, k, 0);
    copy_serial(f, later, failed);
    expect_refused(f, "invariant 6");
    fresh(f);
    uint64_t open = f->log.n - 1; /* the fixture's last intent, left open */
    audit_entry unknown = {.kind = AUDIT_ISSUE_RESULT, .intent_seq = open};
    static audit_entry_buf b;
    audit_entry in;
    parse_line(f, open, &in, &b);
    unknown.request_id = in.request_id;
    snprintf(unknown.code, sizeof(unknown.code), "UNKNOWN");
    unknown.error = (audit_str){"outcome unknown", 15, 0};
    afx_add(&f->log, &unknown);
    afx_add(&f->log, &(audit_entry){.kind = AUDIT_START});
    afx_add(&f->log, &in);
    expect_refused(f, "invariant 6");
}

/* Expired by the log's clock before the repeat, or another CA key's: accepted by both. */
static void test_serial_free_again(void **state)
{
    fx *f = *state;
    uint64_t first = nth_intent(f, 0, 0), again = nth_intent(f, 3, 0);
    static audit_entry_buf b;
    audit_entry a;
    parse_line(f, first, &a, &b);
    a.not_after = AFX_TIME0 + (int64_t)first + 1;
    afx_set(&f->log, first, &a);
    copy_serial(f, again, first);
    assert_int_equal(both(f).rc, HSMCA_OK);

    fresh(f);
    audit_entry k = {.kind = AUDIT_KEY};
    snprintf(k.ca_key_alg, sizeof(k.ca_key_alg), "ecdsa-with-SHA256");
    snprintf(k.ca_key_type, sizeof(k.ca_key_type), "ec-prime256v1");
    memset(k.ca_spki_sha256, 'c', 64);
    memset(k.ca_cert_sha256, 'd', 64);
    afx_add(&f->log, &k);
    uint64_t seq = f->log.n;
    parse_line(f, nth_intent(f, 1, 0), &a, &b);
    a.request_id = 99;
    afx_add(&f->log, &a);
    assert_int_equal(both(f).rc, HSMCA_OK);
    /* the same serial again under that key */
    a.request_id = 100;
    afx_add(&f->log, &a);
    char want[96];
    snprintf(want, sizeof(want), "already in the intent at seq %llu ", (unsigned long long)seq);
    expect_refused(f, want);
}

static void test_broken_pairs(void **state)
{
    fx *f = *state;
    uint64_t in = nth_intent(f, 2, 0);
    static audit_entry_buf b;
    audit_entry res;
    parse_line(f, in + 1, &res, &b);
    res.request_id++;
    afx_set(&f->log, in + 1, &res);
    expect_refused(f, "request_id");
    res.request_id--;
    res.intent_seq = nth_intent(f, 0, 0); /* already has its result */
    afx_set(&f->log, in + 1, &res);
    expect_refused(f, "which is not an earlier issue-intent without a result");
    fresh(f);
    afx_add(&f->log, &(audit_entry){.kind = AUDIT_START}); /* the last intent still open */
    expect_refused(f, "a start, but the intent at seq");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeated_serial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeated_serial_of_failed_intent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serial_free_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_pairs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
