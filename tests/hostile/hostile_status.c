/* hostile_status.c - the signer's figures over the IPC (StatusRequest, type 4, and
 * StatusReply, type 5; proto/signer.proto): a signature moves the issued counter and
 * the C_Sign and queue histograms by one, a refusal its stage's counter; the reply is
 * bounded and names the CA's key type and notAfter; a StatusRequest with a payload is a
 * protocol violation like any malformed frame; a flood of them is answered at most
 * SIGNER_STATUS_PER_S a second and never holds the signer from signing. */
#include "hostile.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "ipc_frame.h"
#include "profile.h"
#include "util.h"

#define STATUS_PER_S 50 /* signer/signer_stats.h SIGNER_STATUS_PER_S */

static void send_status(uint64_t id, const uint8_t *payload, size_t len)
{
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_STATUS_REQ, id, payload, len, &e) != HSMCA_OK)
        fail_msg("ipc_send StatusRequest: %s", e.msg);
}

/* The next frame within HF_REPLY_MS into buf (fails the test on a hang or an EOF). */
static void next_frame(uint8_t *buf, ipc_msg *m, const char *what)
{
    struct pollfd p = {hf.ipc, POLLIN, 0};
    double end = util_mono_now() + HF_REPLY_MS / 1000.0;
    while (poll(&p, 1, 100) <= 0) {
        if (!hf_signer_alive() || util_mono_now() > end) {
            hf_dump_log_tail();
            fail_msg("no frame for %s", what);
        }
    }
    hsmca_err e;
    if (ipc_recv(hf.ipc, buf, m, &e) != HSMCA_OK)
        fail_msg("ipc_recv (%s): %s", what, e.msg);
}

/* Asks for the figures and waits for the reply to this request (replies to earlier
 * requests, left by a test before, are skipped). */
static Hsmca__Ipc__StatusReply *ask(void)
{
    static uint8_t buf[IPC_MAX_FRAME];
    uint64_t id = hf.next_id++;
    send_status(id, NULL, 0);
    ipc_msg m;
    do
        next_frame(buf, &m, "a status reply");
    while (m.id != id);
    assert_int_equal(m.type, IPC_STATUS_REPLY);
    assert_true(m.len <= SIGSTAT_REPLY_MAX);
    Hsmca__Ipc__StatusReply *r = hsmca__ipc__status_reply__unpack(NULL, m.len, m.payload);
    assert_non_null(r);
    return r;
}

static uint64_t at(const uint64_t *v, size_t n, size_t i)
{
    assert_true(i < n);
    return v[i];
}

static int64_t not_after(const X509 *x)
{
    struct tm tm;
    assert_int_equal(ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm), 1);
    return (int64_t)timegm(&tm);
}

/* What a fresh dev CA's signer says before any request of this test. */
static void check_static(const Hsmca__Ipc__StatusReply *r)
{
    assert_int_equal(r->ca_token, SIGSTAT_TOKEN_OK);
    assert_int_equal(r->sessions_open, hf.sessions);
    assert_string_equal(r->ca_key_type, "ec-p256");
    assert_int_equal(r->n_issued, SIGSTAT_PROFILES);
    assert_int_equal(r->n_refused, SIGSTAT_REFUSALS);
    assert_non_null(r->c_sign);
    assert_int_equal(r->c_sign->n_bucket, METRICS_HIST_BUCKETS);
    assert_int_equal(r->ca_not_after, not_after(hf.ca));
    assert_true(r->n_roots_not_after >= 1);
    assert_int_equal(r->roots_not_after[0], not_after(hf.ca)); /* the dev CA is its root */
    assert_true(r->audit_state != SIGSTAT_AUDIT_FAILING);
    assert_true(r->uptime > 0);
}

static void test_status_counts_a_signature_and_a_refusal(void **state)
{
    (void)state;
    hf_assert_signs_within(HF_READY_MS); /* started, logged in */
    Hsmca__Ipc__StatusReply *a = ask();
    check_static(a);
    hf_assert_signs_fresh();
    Hsmca__Ipc__StatusReply *b = ask();
    assert_int_equal(at(b->issued, b->n_issued, SIGSTAT_PROFILE_WORKLOAD),
                     at(a->issued, a->n_issued, SIGSTAT_PROFILE_WORKLOAD) + 1);
    assert_int_equal(b->c_sign->count, a->c_sign->count + 1);
    assert_true(b->c_sign->sum > a->c_sign->sum);
    assert_int_equal(b->queue_wait->count, a->queue_wait->count + 1);
    if (a->audit_state == SIGSTAT_AUDIT_WRITABLE) {
        assert_true(b->audit_entries > a->audit_entries); /* the intent, synced first */
        assert_true(b->audit_bytes > a->audit_bytes);
        assert_true(b->audit_sync->count > a->audit_sync->count);
    }
    /* A refusal at invariant 3 (then the fresh signature hf_assert_refused asks for). */
    tbs_spec s = {.ku_mode = EXT_OMIT};
    hf_refuse_spec(&s, HSMCA_EPERM, "invariant 3: keyUsage missing");
    Hsmca__Ipc__StatusReply *c = ask();
    size_t i3 = SIGSTAT_REFUSED_INVARIANT_1 + 2;
    assert_int_equal(at(c->refused, c->n_refused, i3), at(b->refused, b->n_refused, i3) + 1);
    for (size_t i = 0; i < SIGSTAT_REFUSALS; i++)
        if (i != i3)
            assert_int_equal(c->refused[i], b->refused[i]);
    assert_int_equal(at(c->issued, c->n_issued, SIGSTAT_PROFILE_WORKLOAD),
                     at(b->issued, b->n_issued, SIGSTAT_PROFILE_WORKLOAD) + 1);
    fprintf(stderr, "  status: issued %llu, C_Sign %llu in %.4f s, queue %llu, audit %s %llu "
                    "entries, checkpoint %llu at %lld\n",
            (unsigned long long)c->issued[0], (unsigned long long)c->c_sign->count,
            c->c_sign->sum, (unsigned long long)c->queue_wait->count,
            sigstat_audit_name(c->audit_state), (unsigned long long)c->audit_entries,
            (unsigned long long)c->checkpoint_size, (long long)c->checkpoint_time);
    hsmca__ipc__status_reply__free_unpacked(a, NULL);
    hsmca__ipc__status_reply__free_unpacked(b, NULL);
    hsmca__ipc__status_reply__free_unpacked(c, NULL);
}

static void test_status_with_payload_is_a_violation(void **state)
{
    (void)state;
    static const uint8_t field[] = {0x08, 0x01}; /* field 1 = 1: a StatusRequest has none */
    send_status(hf.next_id++, field, sizeof(field));
    hf_assert_dropped_then_reconnect();
    char *got = hf_log_last_field("front end protocol violation", "reason");
    assert_non_null(got);
    assert_non_null(strstr(got, "StatusRequest: 2 bytes of payload"));
    free(got);
    Hsmca__Ipc__StatusReply *r = ask(); /* the new connection is answered */
    assert_int_equal(r->ca_token, SIGSTAT_TOKEN_OK);
    hsmca__ipc__status_reply__free_unpacked(r, NULL);
}

/* A flood of StatusRequests, unread: at most STATUS_PER_S answers a second, the front end
 * kept, and a SignRequest after them signed. */
static void test_status_flood_is_bounded(void **state)
{
    (void)state;
    enum { FLOOD = 5000 };
    double t0 = util_mono_now();
    for (int i = 0; i < FLOOD; i++)
        send_status(hf.next_id++, NULL, 0);
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    uint64_t id = hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs, len);
    static uint8_t buf[IPC_MAX_FRAME];
    unsigned answered = 0;
    for (;;) {
        ipc_msg m;
        next_frame(buf, &m, "the flood's replies");
        if (m.type == IPC_STATUS_REPLY) {
            answered++;
            continue;
        }
        assert_int_equal(m.type, IPC_SIGN_REPLY);
        assert_int_equal(m.id, id);
        Hsmca__Ipc__SignReply *rep = hsmca__ipc__sign_reply__unpack(NULL, m.len, m.payload);
        assert_non_null(rep);
        hf_assert_signed(rep, tbs, len);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        break;
    }
    double took = util_mono_now() - t0;
    fprintf(stderr, "  %d status requests in %.2f s: %u answered\n", FLOOD, took, answered);
    assert_true(answered >= 1);
    assert_true(answered <= STATUS_PER_S * ((unsigned)took + 2));
    assert_true(hf_signer_alive());
    assert_int_equal(hf_log_count_field("front end protocol violation", "reason", "StatusRequest"),
                     1);
    OPENSSL_free(tbs);
    /* The limit is per second: asked again, the signer answers within a few seconds. */
    double end = util_mono_now() + 5;
    for (;;) {
        uint64_t sid = hf.next_id++;
        send_status(sid, NULL, 0);
        if (hf_wait_readable(hf.ipc, 200)) {
            ipc_msg m;
            next_frame(buf, &m, "a status reply after the flood");
            assert_int_equal(m.type, IPC_STATUS_REPLY);
            break;
        }
        assert_true(util_mono_now() < end);
    }
}

/* Waits (deadline_s) until the CA key's token state is want, asking every 100 ms and
 * sending no request; the reply that says so. */
static Hsmca__Ipc__StatusReply *await_token(uint32_t want, double deadline_s)
{
    double end = util_mono_now() + deadline_s;
    for (;;) {
        Hsmca__Ipc__StatusReply *r = ask();
        if (r->ca_token == want)
            return r;
        uint32_t got = r->ca_token;
        hsmca__ipc__status_reply__free_unpacked(r, NULL);
        if (util_mono_now() > end) {
            hf_dump_log_tail();
            fail_msg("token state %s, not %s, after %.0f s", sigstat_token_name(got),
                     sigstat_token_name(want), deadline_s);
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The shim removes the CA key's token with no request in flight: the signer's probe
 * finds it (reconnecting), and reconnects once it is back (ok, one reconnect more),
 * without a request either; then it signs. */
static void test_status_token_removed_and_back(void **state)
{
    (void)state;
    hf_shim_control("");
    hf_assert_signs_fresh();
    Hsmca__Ipc__StatusReply *a = await_token(SIGSTAT_TOKEN_OK, 10);
    double t0 = util_mono_now();
    hf_shim_control("remove\n");
    Hsmca__Ipc__StatusReply *b = await_token(SIGSTAT_TOKEN_RECONNECTING, 10);
    fprintf(stderr, "  token removed: reconnecting after %.2f s\n", util_mono_now() - t0);
    t0 = util_mono_now();
    hf_shim_control("# reinserted\n");
    Hsmca__Ipc__StatusReply *c = await_token(SIGSTAT_TOKEN_OK, 15);
    fprintf(stderr, "  token back: ok after %.2f s, reconnects %llu -> %llu\n",
            util_mono_now() - t0, (unsigned long long)a->reconnects,
            (unsigned long long)c->reconnects);
    assert_true(c->reconnects > a->reconnects);
    assert_int_equal(c->sessions_open, hf.sessions);
    assert_int_equal(b->sessions_open, 0);
    hf_assert_signs_fresh();
    hsmca__ipc__status_reply__free_unpacked(a, NULL);
    hsmca__ipc__status_reply__free_unpacked(b, NULL);
    hsmca__ipc__status_reply__free_unpacked(c, NULL);
}

/* With the stress group's signer, behind the shim. */
const struct CMUnitTest hf_status_shim_tests[] = {
    cmocka_unit_test(test_status_token_removed_and_back),
};
const size_t hf_n_status_shim_tests =
    sizeof(hf_status_shim_tests) / sizeof(hf_status_shim_tests[0]);

const struct CMUnitTest hf_status_tests[] = {
    cmocka_unit_test(test_status_counts_a_signature_and_a_refusal),
    cmocka_unit_test(test_status_with_payload_is_a_violation),
    cmocka_unit_test(test_status_flood_is_bounded),
};
const size_t hf_n_status_tests = sizeof(hf_status_tests) / sizeof(hf_status_tests[0]);
