/* test_signer_audit.c - the replay's tracking of intents without a result
 * (signer/signer_audit.h): results close their intent, what stays open is what a
 * restart records as UNKNOWN, and the tracking is bounded. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "signer_audit.h"

#define NOW 1790000000

static void note(signer_open_intents *o, audit_kind k, uint64_t seq, uint64_t intent_seq,
                 int64_t not_after)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = k;
    a.seq = seq;
    a.intent_seq = intent_seq;
    a.request_id = seq + 1000;
    a.not_after = not_after;
    signer_open_intents_note(o, &a, NOW);
}

static void test_results_close_intents(void **state)
{
    signer_open_intents o = {0};
    note(&o, AUDIT_START, 0, 0, 0);
    for (uint64_t s = 1; s <= 10; s++)
        note(&o, AUDIT_ISSUE_INTENT, s, 0, NOW + 3600);
    for (uint64_t s = 1; s <= 10; s++)
        if (s != 4 && s != 9)
            note(&o, AUDIT_ISSUE_RESULT, 100 + s, s, 0);
    note(&o, AUDIT_ISSUE_RESULT, 200, 77, 0); /* names no intent: ignored */
    note(&o, AUDIT_ISSUE_RESULT, 201, 3, 0);  /* a second result: nothing more to close */
    assert_int_equal(signer_open_intents_count(&o), 2);
    uint64_t open[2];
    size_t k = 0;
    for (size_t i = 0; i < o.n; i++)
        if (!o.v[i].closed)
            open[k++] = o.v[i].seq;
    assert_int_equal(k, 2);
    assert_int_equal(open[0], 4);
    assert_int_equal(open[1], 9);
    signer_open_intents_free(&o);
}

/* A long log of pairs keeps the table small (closed ones are compacted away), and a
 * log with more open intents than the bound drops expired ones first, then the oldest. */
static void test_bounded(void **state)
{
    signer_open_intents o = {0};
    uint64_t seq = 0;
    for (int i = 0; i < 200000; i++) {
        note(&o, AUDIT_ISSUE_INTENT, seq, 0, NOW + 60);
        note(&o, AUDIT_ISSUE_RESULT, seq + 1, seq, 0);
        seq += 2;
    }
    assert_int_equal(signer_open_intents_count(&o), 0);
    assert_true(o.cap <= 128);
    /* the bound: half of them expired */
    for (int i = 0; i < SIGNER_OPEN_INTENTS_MAX; i++, seq++)
        note(&o, AUDIT_ISSUE_INTENT, seq, 0, i % 2 ? NOW + 60 : NOW - 1);
    assert_int_equal(signer_open_intents_count(&o), SIGNER_OPEN_INTENTS_MAX);
    note(&o, AUDIT_ISSUE_INTENT, seq++, 0, NOW + 60);
    assert_int_equal(signer_open_intents_count(&o), SIGNER_OPEN_INTENTS_MAX / 2 + 1);
    assert_int_equal(o.untracked, SIGNER_OPEN_INTENTS_MAX / 2);
    for (size_t i = 0; i < o.n; i++)
        assert_true(o.v[i].not_after > NOW);
    /* none expired: the oldest goes */
    while (signer_open_intents_count(&o) < SIGNER_OPEN_INTENTS_MAX)
        note(&o, AUDIT_ISSUE_INTENT, seq++, 0, NOW + 60);
    uint64_t oldest = o.v[0].seq;
    note(&o, AUDIT_ISSUE_INTENT, seq++, 0, NOW + 60);
    assert_int_equal(signer_open_intents_count(&o), SIGNER_OPEN_INTENTS_MAX);
    assert_true(o.v[0].seq > oldest);
    assert_int_equal(o.untracked, SIGNER_OPEN_INTENTS_MAX / 2 + 1);
    signer_open_intents_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_results_close_intents),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
