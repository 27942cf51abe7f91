/* test_audit_ica_race.c - the intermediate rules that keep a log whole (audit/audit_ica.h):
 * audit_ica_check refuses what audit_ica_apply would and changes nothing; no deny and no
 * revoke while a signature is in flight; approval.required in force reaches waiting
 * requests (never below the recorded count); users compared by uid; any number of
 * requests; and the replay (audit/audit_replay.h) goes on with the workload rules past a
 * broken CA-profile rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_entry.h"
#include "audit_ica.h"
#include "audit_replay.h"

#define CSR_B64 "MIIBAA=="

static audit_entry step(audit_kind k, uint64_t seq, uint64_t id, const char *user, int64_t uid)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = k;
    a.seq = seq;
    a.time = 1000 + (int64_t)seq;
    a.request_id = id;
    a.requester = (audit_str){user, strlen(user), 0};
    a.has_uid = uid >= 0;
    a.uid = uid >= 0 ? (uint64_t)uid : 0;
    return a;
}

static audit_entry request(uint64_t seq, const char *user, int64_t uid, uint64_t required)
{
    audit_entry a = step(AUDIT_ICA_REQUEST, seq, 0, user, uid);
    a.csr = (audit_str){CSR_B64, strlen(CSR_B64), 0};
    memset(a.key_sha256, 'b', 64);
    strcpy(a.cluster, "cluster-a");
    a.required = required;
    a.expires = 100000;
    return a;
}

static audit_entry intent(uint64_t seq, uint64_t id, const char *serial)
{
    audit_entry a = step(AUDIT_ISSUE_INTENT, seq, id, "carol", -1);
    strcpy(a.profile, AUDIT_ICA_PROFILE);
    strcpy(a.serial, serial);
    memset(a.tbs_sha256, 'e', 64);
    a.not_after = 90000;
    return a;
}

static audit_entry result(uint64_t seq, uint64_t id, uint64_t intent_seq)
{
    audit_entry a = step(AUDIT_ISSUE_RESULT, seq, id, "", -1);
    a.intent_seq = intent_seq;
    strcpy(a.code, "UNAVAILABLE");
    a.error = (audit_str){"token", 5, 0};
    return a;
}

static audit_entry config(uint64_t seq, uint64_t m)
{
    audit_entry a = step(AUDIT_CONFIG, seq, 0, "", -1);
    memset(a.config_sha256, 'a', 64);
    memset(a.policy_sha256, 'a', 64);
    a.approval_required = m;
    return a;
}

/* Checks a, then applies it, both expecting rc (the message holding want when refused). */
static void apply(audit_ica *t, audit_entry a, hsmca_code rc, const char *want)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(audit_ica_check(t, &a, &e), rc);
    if (want && !strstr(e.msg, want))
        fail_msg("check: '%s' does not say '%s'", e.msg, want);
    hsmca_err_clear(&e);
    assert_int_equal(audit_ica_apply(t, &a, 0, &e), rc);
    if (want && !strstr(e.msg, want))
        fail_msg("apply: '%s' does not say '%s'", e.msg, want);
}

/* A deny, or a revoke of its serial, while the intent has no result: refused, by the
 * check the signer runs before it writes as by the replay. */
static void test_in_flight(void **state)
{
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    apply(t, request(3, "alice", 1000, 1), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 4, 3, "bob", 1001), HSMCA_OK, NULL);
    apply(t, intent(5, 3, "4a01"), HSMCA_OK, NULL);
    audit_entry deny = step(AUDIT_ICA_DENY, 6, 3, "carol", 1002);
    deny.reason = (audit_str){"no", 2, 0};
    apply(t, deny, HSMCA_EPERM,
          "intermediate request 3: a signature is in flight (intent seq 5); deny refused: "
          "revoke the certificate once it is issued");
    audit_entry rv = step(AUDIT_REVOKE, 6, 0, "root", 0);
    strcpy(rv.serial, "4a01");
    strcpy(rv.profile, "workload");
    rv.reason = (audit_str){"keyCompromise", 13, 0};
    apply(t, rv, HSMCA_EPERM, "a signature is in flight (intent seq 5); revoke of serial 4a01");
    apply(t, intent(6, 3, "4a02"), HSMCA_EPERM, "a second issue-intent");
    /* A workload result with the same request id names another intent: still open. */
    apply(t, result(6, 3, 4), HSMCA_OK, NULL);
    apply(t, deny, HSMCA_EPERM, "in flight");
    /* Not signed (its result): the request may be denied now. */
    apply(t, result(7, 3, 5), HSMCA_OK, NULL);
    deny.seq = 8;
    apply(t, deny, HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 2000), ICA_DENIED);
    assert_null(audit_ica_find(t, 3)->csr_b64); /* a denied request's CSR is freed */
    audit_ica_free(t);
}

/* approval.required in force: max(recorded, in force), a request in flight keeps its. */
static void test_required_in_force(void **state)
{
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    apply(t, config(1, 2), HSMCA_OK, NULL);
    apply(t, request(3, "alice", 1000, 2), HSMCA_OK, NULL);
    apply(t, config(4, 3), HSMCA_OK, NULL); /* raised after the request */
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "bob", 1001), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 6, 3, "carol", 1002), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 2000), ICA_PENDING);
    apply(t, intent(7, 3, "4a01"), HSMCA_EPERM, "which has 2 of its 3 approvals");
    apply(t, step(AUDIT_ICA_APPROVE, 7, 3, "dave", 1003), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 3), 2000), ICA_APPROVED);
    apply(t, intent(8, 3, "4a01"), HSMCA_OK, NULL);
    /* Lowered: a request made at 2 still needs 2; a new one needs the new count. */
    apply(t, config(9, 1), HSMCA_OK, NULL);
    apply(t, request(10, "alice", 1000, 2), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 11, 10, "bob", 1001), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 10), 2000), ICA_PENDING);
    apply(t, intent(12, 10, "4a02"), HSMCA_EPERM, "which has 1 of its 2 approvals");
    apply(t, request(13, "alice", 1000, 1), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 14, 13, "bob", 1001), HSMCA_OK, NULL);
    assert_int_equal(audit_ica_state_of(audit_ica_find(t, 13), 2000), ICA_APPROVED);
    /* An older log (no approval_required): the recorded count alone. */
    audit_ica *old;
    assert_int_equal(audit_ica_new(&old, NULL), HSMCA_OK);
    apply(old, config(1, 0), HSMCA_OK, NULL);
    apply(old, request(3, "alice", -1, 1), HSMCA_OK, NULL);
    apply(old, step(AUDIT_ICA_APPROVE, 4, 3, "bob", -1), HSMCA_OK, NULL);
    apply(old, intent(5, 3, "4a01"), HSMCA_OK, NULL);
    audit_ica_free(old);
    audit_ica_free(t);
}

/* Users are one when their uids are; without uids, by name. */
static void test_uids(void **state)
{
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    apply(t, request(3, "alice", 1000, 2), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 4, 3, "alice2", 1000), HSMCA_EPERM,
          "a requester's own approval does not count");
    apply(t, step(AUDIT_ICA_APPROVE, 4, 3, "bob", 1001), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "bobby", 1001), HSMCA_EPERM,
          "already (the same user counts once) as bob");
    /* A name, two uids (a user re-created): two users. */
    apply(t, step(AUDIT_ICA_APPROVE, 5, 3, "alice", 1005), HSMCA_OK, NULL);
    /* An older log's entries (no uid): by name. */
    apply(t, request(6, "carol", -1, 2), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 7, 6, "carol", -1), HSMCA_EPERM, "does not count");
    apply(t, step(AUDIT_ICA_APPROVE, 7, 6, "dave", -1), HSMCA_OK, NULL);
    apply(t, step(AUDIT_ICA_APPROVE, 8, 6, "dave", 1009), HSMCA_EPERM, "approved it already");
    size_t all;
    assert_int_equal(audit_ica_waiting(t, "alice-alias", 1000, 2000, &all), 1);
    assert_int_equal(all, 2);
    assert_int_equal(audit_ica_waiting(t, "carol", -1, 2000, &all), 1);
    /* Its line: uid after ttl_s, absent when not logged. */
    char line[AUDIT_LINE_MAX];
    size_t n;
    audit_entry a = step(AUDIT_ICA_APPROVE, 4, 3, "bob", 1001);
    assert_int_equal(audit_entry_encode(&a, line, &n, NULL), HSMCA_OK);
    line[n] = '\0';
    assert_string_equal(line, "{\"kind\":\"intermediate-approve\",\"request_id\":3,"
                              "\"requester\":\"bob\",\"seq\":4,\"time\":1004,\"uid\":1001}\n");
    static audit_entry_buf buf;
    audit_entry b;
    assert_int_equal(audit_entry_parse(line, n - 1, &b, &buf, NULL), HSMCA_OK);
    assert_true(b.has_uid && b.uid == 1001);
    a = config(9, 3);
    assert_int_equal(audit_entry_encode(&a, line, &n, NULL), HSMCA_OK);
    assert_int_equal(strncmp(line, "{\"approval_required\":3,\"config_sha256\"", 38), 0);
    assert_int_equal(audit_entry_parse(line, n - 1, &b, &buf, NULL), HSMCA_OK);
    assert_int_equal(b.approval_required, 3);
    audit_ica_free(t);
}

/* No log-lifetime cap: many more requests than any old bound, the expired ones' CSRs
 * freed as later requests come. */
static void test_many_requests(void **state)
{
    audit_ica *t;
    assert_int_equal(audit_ica_new(&t, NULL), HSMCA_OK);
    uint64_t seq = 1;
    for (int i = 0; i < 10000; i++) {
        audit_entry a = request(seq, "alice", 1000, 2);
        a.time = 1000 + i;
        a.expires = a.time + 10;
        apply(t, a, HSMCA_OK, NULL);
        seq++;
    }
    assert_int_equal(audit_ica_count(t), 10000);
    assert_null(audit_ica_at(t, 0)->csr_b64);
    assert_non_null(audit_ica_at(t, 9999)->csr_b64);
    size_t all;
    assert_true(audit_ica_waiting(t, "alice", 1000, 1000 + 9999, &all) <= 11);
    audit_ica_free(t);
}

/* The replay notes a broken CA-profile rule and goes on with the workload rules. */
static void test_replay_goes_on(void **state)
{
    audit_replay *r;
    hsmca_err e;
    assert_int_equal(audit_replay_new(&r, NULL), HSMCA_OK);
    audit_entry a = request(0, "alice", 1000, 1);
    assert_int_equal(audit_replay_entry(r, &a, 0, &e), HSMCA_OK);
    a = step(AUDIT_ICA_APPROVE, 1, 0, "bob", 1001);
    assert_int_equal(audit_replay_entry(r, &a, 0, &e), HSMCA_OK);
    a = intent(2, 0, "4a01");
    assert_int_equal(audit_replay_entry(r, &a, 0, &e), HSMCA_OK);
    a = step(AUDIT_ICA_DENY, 3, 0, "carol", 1002);
    a.reason = (audit_str){"no", 2, 0};
    assert_int_equal(audit_replay_entry(r, &a, 0, &e), HSMCA_OK); /* the race's line */
    uint64_t seq = 0;
    const char *why = audit_replay_ca_broken(r, &seq);
    assert_non_null(why);
    assert_int_equal(seq, 3);
    assert_non_null(strstr(why, "a signature is in flight"));
    /* The workload rules still hold: a result naming no open intent is refused. */
    a = result(4, 0, 2);
    assert_int_equal(audit_replay_entry(r, &a, 0, &e), HSMCA_OK);
    a = result(5, 0, 2);
    assert_int_equal(audit_replay_entry(r, &a, 0, &e), HSMCA_EPERM);
    audit_replay_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_flight),
        cmocka_unit_test(test_required_in_force),
        cmocka_unit_test(test_uids),
        cmocka_unit_test(test_many_requests),
        cmocka_unit_test(test_replay_goes_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
