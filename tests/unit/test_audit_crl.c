/* test_audit_crl.c - the revoke and crl entries (audit/audit_entry.h) round-trip in
 * canonical form and refuse bad fields; their rules (audit/audit_crl.h), which the signer
 * and `hsmca audit verify` share: a known reason, a serial revoked once, cRLNumber always
 * growing, each CRL counting the revocations before it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_crl.h"
#include "audit_entry.h"

static char g_line[AUDIT_LINE_MAX];

static audit_entry revoke(uint64_t seq, const char *serial, const char *reason)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_REVOKE;
    a.seq = seq;
    a.time = 1000 + (int64_t)seq;
    snprintf(a.serial, sizeof(a.serial), "%s", serial);
    strcpy(a.profile, "intermediate");
    a.reason = (audit_str){reason, strlen(reason), 0};
    a.requester = (audit_str){"alice", 5, 0};
    return a;
}

static audit_entry crl(uint64_t seq, uint64_t number, uint64_t count)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_CRL;
    a.seq = seq;
    a.time = 2000;
    a.crl_number = number;
    a.count = count;
    a.not_before = 2000;
    a.not_after = 2000 + 7 * 86400;
    memset(a.crl_sha256, 'c', 64);
    return a;
}

/* A revoke-identity (lift: its lift) on target, ns: a namespace's prefix. */
static audit_entry ban(uint64_t seq, const char *target, int ns, int64_t expires, int lift)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = lift ? AUDIT_BAN_LIFT : AUDIT_BAN;
    a.seq = seq;
    a.time = 3000 + (int64_t)seq;
    strcpy(a.profile, ns ? "namespace" : "identity");
    a.identity = (audit_str){target, strlen(target), 0};
    if (!lift)
        a.reason = (audit_str){"keyCompromise", 13, 0};
    a.requester = (audit_str){"alice", 5, 0};
    a.expires = expires;
    return a;
}

static audit_entry intent(uint64_t seq, const char *serial, const char *sans, int64_t not_after)
{
    audit_entry a;
    memset(&a, 0, sizeof(a));
    a.kind = AUDIT_ISSUE_INTENT;
    a.seq = seq;
    a.time = 3000 + (int64_t)seq;
    snprintf(a.serial, sizeof(a.serial), "%s", serial);
    strcpy(a.profile, "workload");
    a.sans = (audit_str){sans, strlen(sans), 0};
    a.not_after = not_after;
    return a;
}

static void roundtrip(const audit_entry *a, const char *want)
{
    size_t n;
    audit_entry b;
    audit_entry_buf *buf = calloc(1, sizeof(*buf));
    assert_non_null(buf);
    assert_int_equal(audit_entry_encode(a, g_line, &n, NULL), HSMCA_OK);
    if (!strstr(g_line, want))
        fail_msg("'%s' does not hold '%s'", g_line, want);
    assert_int_equal(audit_entry_parse(g_line, n - 1, &b, buf, NULL), HSMCA_OK);
    assert_int_equal(b.kind, a->kind);
    assert_int_equal(b.crl_number, a->crl_number);
    assert_string_equal(b.serial, a->serial);
    free(buf);
}

static void test_lines(void **state)
{
    (void)state;
    audit_entry r = revoke(5, "4a3f", "keyCompromise");
    roundtrip(&r, "{\"kind\":\"revoke\",\"profile\":\"intermediate\",\"reason\":\"keyCompromise\","
                  "\"requester\":\"alice\",\"seq\":5,\"serial\":\"4a3f\",\"time\":1005}");
    audit_entry c = crl(6, 3, 1);
    roundtrip(&c, "{\"count\":1,\"crl_number\":3,\"crl_sha256\":\"cccc");
    roundtrip(&c, "\"kind\":\"crl\",\"not_after\":606800,\"not_before\":2000,\"seq\":6,"
                  "\"time\":2000}");
}

static void collect(void *ctx, const char *serial)
{
    strcat(ctx, serial);
    strcat(ctx, " ");
}

/* revoke-identity and its lift: canonical lines; the rules; the index finds the
 * unexpired certificates of an identity or a namespace, none revoked already. */
static void test_identity(void **state)
{
    (void)state;
    const char *id = "spiffe://td/ns/app/sa/web";
    audit_entry b = ban(7, id, 0, 0, 0), l = ban(9, id, 0, 0, 1);
    roundtrip(&b, "{\"expires\":0,\"identity\":\"spiffe://td/ns/app/sa/web\",\"kind\":"
                  "\"revoke-identity\",\"profile\":\"identity\",\"reason\":\"keyCompromise\","
                  "\"requester\":\"alice\",\"seq\":7,\"time\":3007}");
    roundtrip(&l, "{\"identity\":\"spiffe://td/ns/app/sa/web\",\"kind\":\"revoke-identity-lift\","
                  "\"profile\":\"identity\",\"requester\":\"alice\",\"seq\":9,\"time\":3009}");
    audit_entry bad = ban(7, id, 0, 0, 0);
    strcpy(bad.profile, "cluster");
    size_t n;
    assert_int_equal(audit_entry_encode(&bad, g_line, &n, NULL), HSMCA_EINVAL);
    bad = ban(7, id, 0, -1, 0);
    assert_int_equal(audit_entry_encode(&bad, g_line, &n, NULL), HSMCA_EINVAL);

    audit_crl *t;
    hsmca_err e;
    assert_int_equal(audit_crl_new(&t, NULL), HSMCA_OK);
    audit_entry es[] = {intent(1, "0a", "uri:spiffe://td/ns/app/sa/web", 9000),
                        intent(2, "0b", "uri:spiffe://td/ns/app/sa/web,dns:web.app", 9000),
                        intent(3, "0c", "uri:spiffe://td/ns/app/sa/db", 9000),
                        intent(4, "0d", "uri:spiffe://td/ns/app/sa/web", 3001),
                        intent(5, "0e", "uri:spiffe://td/ns/app2/sa/web", 9000),
                        revoke(6, "0b", "superseded")};
    for (size_t i = 0; i < sizeof(es) / sizeof(es[0]); i++)
        assert_int_equal(audit_crl_apply(t, &es[i], 0, NULL), HSMCA_OK);
    char got[200] = "";
    assert_int_equal(audit_crl_serials_of(t, id, 0, 3010, collect, got), 1);
    assert_string_equal(got, "0a ");
    got[0] = 0;
    assert_int_equal(audit_crl_serials_of(t, "spiffe://td/ns/app", 1, 3010, collect, got), 2);
    assert_string_equal(got, "0a 0c ");
    /* A lift with nothing to lift; a ban on a malformed target: refused, by name. */
    assert_int_equal(audit_crl_apply(t, &l, 0, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "no revocation by identity names"));
    audit_entry nsbad = ban(8, "spiffe://td/ns/app/sa/web", 1, 0, 0);
    assert_int_equal(audit_crl_apply(t, &nsbad, 0, &e), HSMCA_EPERM);
    /* In force: on the ID, and through its namespace; not on others; until its end. */
    assert_int_equal(audit_crl_apply(t, &b, 0, NULL), HSMCA_OK);
    assert_non_null(audit_crl_ban_of(t, id, strlen(id), 3010));
    assert_null(audit_crl_ban_of(t, "spiffe://td/ns/app/sa/db", 24, 3010));
    audit_entry nsb = ban(8, "spiffe://td/ns/app", 1, 5000, 0);
    assert_int_equal(audit_crl_apply(t, &nsb, 0, NULL), HSMCA_OK);
    assert_non_null(audit_crl_ban_of(t, "spiffe://td/ns/app/sa/db", 24, 4999));
    assert_null(audit_crl_ban_of(t, "spiffe://td/ns/app/sa/db", 24, 5000));
    assert_null(audit_crl_ban_of(t, "spiffe://td/ns/app2/sa/web", 26, 4000));
    assert_int_equal(audit_crl_apply(t, &l, 0, NULL), HSMCA_OK);
    const audit_crl_ban *left = audit_crl_ban_of(t, id, strlen(id), 3010);
    assert_true(left && left->ns); /* the namespace's, until its end */
    assert_null(audit_crl_ban_of(t, id, strlen(id), 5000));
    assert_int_equal(audit_crl_apply(t, &l, 0, &e), HSMCA_EPERM); /* lifted already */
    audit_crl_free(t);
}

static void test_fields_refused(void **state)
{
    (void)state;
    size_t n;
    audit_entry a = revoke(5, "4a3", "keyCompromise"); /* not whole octets */
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = revoke(5, "4a3f", "");
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = revoke(5, "4a3f", "keyCompromise");
    a.requester = (audit_str){"", 0, 0};
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = crl(6, 0, 0);
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
    a = crl(6, 1, 0);
    a.crl_sha256[0] = '\0';
    assert_int_equal(audit_entry_encode(&a, g_line, &n, NULL), HSMCA_EINVAL);
}

static void apply(audit_crl *t, audit_entry a, hsmca_code rc, const char *want)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(audit_crl_apply(t, &a, 0, &e), rc);
    if (want && !strstr(e.msg, want))
        fail_msg("'%s' does not say '%s'", e.msg, want);
}

static void test_rules(void **state)
{
    (void)state;
    audit_crl *t;
    assert_int_equal(audit_crl_new(&t, NULL), HSMCA_OK);
    apply(t, crl(1, 1, 0), HSMCA_OK, NULL);
    assert_false(audit_crl_changed(t));
    apply(t, revoke(2, "4a3f", "certificateHold"), HSMCA_EPERM, "reason is not one of");
    apply(t, revoke(2, "4a3f", "keyCompromise"), HSMCA_OK, NULL);
    assert_true(audit_crl_changed(t));
    apply(t, revoke(3, "4a3f", "superseded"), HSMCA_EPERM, "revoked already");
    apply(t, crl(3, 1, 1), HSMCA_EPERM, "cRLNumber only grows");
    apply(t, crl(3, 2, 0), HSMCA_EPERM, "a CRL of 0 revocations where the log has 1");
    audit_entry bad = crl(3, 2, 1);
    bad.not_after = bad.not_before;
    apply(t, bad, HSMCA_EPERM, "nextUpdate is not after its thisUpdate");
    apply(t, crl(3, 2, 1), HSMCA_OK, NULL);
    assert_false(audit_crl_changed(t));
    assert_int_equal(audit_crl_last_number(t), 2);
    assert_int_equal(audit_crl_count(t), 1);
    assert_int_equal(audit_crl_at(t, 0)->reason, 1);
    assert_int_equal(audit_crl_at(t, 0)->time, 1002);
    assert_true(audit_crl_revoked(t, "4a3f"));
    assert_false(audit_crl_revoked(t, "4a3e"));
    assert_int_equal(audit_crl_reason_code("aACompromise", 12), 10);
    assert_int_equal(audit_crl_reason_code("removeFromCRL", 13), -1);
    audit_crl_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_fields_refused),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
