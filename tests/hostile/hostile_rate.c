/* hostile_rate.c - invariant 7: the rate group, with its own signer and its own
 * dev CA, flooded the way a compromised front end would. */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "config.h"
#include "signer_tbs.h"
#include "util.h"

#define HR_RATE 5   /* issuance.rate_per_second of the rate group's signer */
#define HR_BURST 10 /* issuance.rate_burst */
#define HR_FLOOD 60 /* requests a compromised front end puts in flight at once */

/* What the flood leaves for the tests after it. */
static struct {
    uint8_t *refused_tbs; /* a valid TBS refused for rate (malloc'd), NULL if none */
    size_t refused_len;
} hr;

/* Rewrites DIR/hsmca.yaml before the signer starts, then checks with the real
 * parser that the rate fields, and only they, changed. */
static int rate_prepare(void)
{
    char rate[16], burst[16];
    snprintf(rate, sizeof(rate), "%d", HR_RATE);
    snprintf(burst, sizeof(burst), "%d", HR_BURST);
    const hf_yaml_kv kv[] = {{"issuance", "rate_per_second", rate},
                             {"issuance", "rate_burst", burst}};
    hsmca_config *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    int rc = -1;
    if (!before || !after || hf_rewrite_config(kv, 2, before, after) != 0)
        goto done;
    if (after->rate_per_second != HR_RATE || after->rate_burst != HR_BURST ||
        before->rate_per_second == HR_RATE) {
        fprintf(stderr, "%s: rate %u/s burst %u after the rewrite (before: %u/s)\n", hf.conf,
                after->rate_per_second, after->rate_burst, before->rate_per_second);
        goto done;
    }
    /* Both structs come from config_defaults' memset and the same parser, so
     * everything but the two fields must be byte for byte the same. */
    after->rate_per_second = before->rate_per_second;
    after->rate_burst = before->rate_burst;
    memcpy(after->source_sha256, before->source_sha256, sizeof(after->source_sha256));
    if (memcmp(before, after, sizeof(*before)) != 0) {
        fprintf(stderr, "%s: the rewrite changed more than issuance.rate_*\n", hf.conf);
        goto done;
    }
    fprintf(stderr, "%s: issuance.rate_per_second %d, rate_burst %d\n", hf.conf, HR_RATE, HR_BURST);
    rc = 0;
done:
    free(before);
    free(after);
    return rc;
}

int hf_rate_group_setup(void **state)
{
    hf_group_teardown(state); /* whatever the first group left if its setup failed */
    return hf_start_signer("hostile-rate", rate_prepare);
}

int hf_rate_group_teardown(void **state)
{
    free(hr.refused_tbs);
    hr.refused_tbs = NULL;
    return hf_group_teardown(state);
}

/* The refusal of invariant 7, with the limits this group configured: proof that
 * the signer took them from the rewritten hsmca.yaml. */
static void assert_rate_refusal(const Hsmca__Ipc__SignReply *rep)
{
    char limits[64];
    snprintf(limits, sizeof(limits), "(%d/s, burst %d)", HR_RATE, HR_BURST);
    assert_int_equal(rep->code, HSMCA_ERATE);
    assert_non_null(rep->reason);
    if (!strstr(rep->reason, "invariant 7: signing rate limit") || !strstr(rep->reason, limits))
        fail_msg("rate refusal \"%s\" does not name \"invariant 7: signing rate limit\" %s",
                 rep->reason, limits);
    assert_int_equal(rep->certificate.len, 0);
}

/* Waits for start-up with one signature (a token), then long enough for the
 * bucket to be full again, so the flood meets exactly HR_BURST tokens. */
static void test_rate_ready(void **state)
{
    hf_assert_signs_within(HF_READY_MS);
    usleep(1000 * 1000); /* one token back takes 1/HR_RATE s */
}

/* A compromised front end puts HR_FLOOD valid, distinct requests in flight at
 * once. The bucket holds HR_BURST and refills HR_RATE per second, so at most
 * HR_BURST + HR_RATE * elapsed (rounded up, +1 for timing slack) may be signed;
 * every other reply must be the rate refusal; every signature must verify. The
 * full burst must be served: all of it is there when the flood starts. */
static void test_rate_flood_capped(void **state)
{
    uint8_t *tbs[HR_FLOOD];
    size_t len[HR_FLOOD];
    int seen[HR_FLOOD] = {0};
    for (int i = 0; i < HR_FLOOD; i++)
        tbs[i] = hf_valid_tbs(&len[i]); /* built first, so the sends go back to back */

    double t0 = util_mono_now();
    uint64_t first = hf.next_id;
    for (int i = 0; i < HR_FLOOD; i++)
        assert_int_equal(hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs[i], len[i]),
                         first + (uint64_t)i);

    int n_signed = 0, n_refused = 0;
    for (int got = 0; got < HR_FLOOD; got++) {
        int left_ms = HF_FLOOD_MS - (int)((util_mono_now() - t0) * 1000.0);
        if (left_ms <= 0)
            fail_msg("only %d of %d replies to the flood within %d ms", got, HR_FLOOD, HF_FLOOD_MS);
        uint64_t rid = 0;
        Hsmca__Ipc__SignReply *rep = hf_recv_reply(hf.ipc, left_ms, &rid, "the flood");
        if (rid < first || rid >= first + HR_FLOOD || seen[rid - first])
            fail_msg("reply id %llu: not one of the flood's, or a second reply",
                     (unsigned long long)rid);
        size_t i = (size_t)(rid - first);
        seen[i] = 1;
        if (rep->code == HSMCA_OK) {
            hf_assert_signed(rep, tbs[i], len[i]);
            n_signed++;
        } else {
            assert_rate_refusal(rep);
            n_refused++;
            if (!hr.refused_tbs) { /* kept for test_rate_refusal_keeps_serial */
                hr.refused_tbs = malloc(len[i]);
                assert_non_null(hr.refused_tbs);
                memcpy(hr.refused_tbs, tbs[i], len[i]);
                hr.refused_len = len[i];
            }
        }
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    }
    double elapsed = util_mono_now() - t0;
    double refill = elapsed * HR_RATE;
    int max_signed = HR_BURST + (int)refill + ((double)(int)refill < refill) + 1;
    fprintf(stderr,
            "  flood of %d in %.3f s: %d signed (at most %d allowed), %d refused for rate\n",
            HR_FLOOD, elapsed, n_signed, max_signed, n_refused);
    for (int i = 0; i < HR_FLOOD; i++)
        OPENSSL_free(tbs[i]);
    if (n_signed > max_signed)
        fail_msg("%d of %d signed in %.3f s: the bucket (%d/s, burst %d) allows at most %d",
                 n_signed, HR_FLOOD, elapsed, HR_RATE, HR_BURST, max_signed);
    if (n_signed < HR_BURST)
        fail_msg("only %d signed: a full bucket must serve its burst of %d", n_signed, HR_BURST);
    assert_int_equal(n_signed + n_refused, HR_FLOOD);
    assert_true(hf_signer_alive());
}

/* The bucket refills: ~1.2 s after the flood (6 tokens at 5/s) a valid request
 * is signed again by the same process. */
static void test_rate_refills(void **state)
{
    assert_true(hf_signer_alive());
    usleep(1200 * 1000);
    assert_true(hf_signer_alive());
    hf_assert_signs_fresh();
    assert_true(hf_signer_alive());
}

/* A refusal for rate must not burn the serial: prepare_one takes a token before it
 * records the serial, so the very TBS refused in the flood is signed now. Sent
 * once more it is refused for its serial, so the signature above was not for
 * want of a serial check. (4 tokens here and in test_rate_refills: the bucket
 * holds at least 6.) */
static void test_rate_refusal_keeps_serial(void **state)
{
    if (!hr.refused_tbs)
        fail_msg("the flood left no TBS refused for rate");
    Hsmca__Ipc__SignReply *rep = hf_sign(PROFILE_WORKLOAD, hr.refused_tbs, hr.refused_len);
    if (rep->code == HSMCA_EPERM && strstr(rep->reason, "invariant 6"))
        fail_msg("the serial of a TBS refused for rate was burned: \"%s\"", rep->reason);
    hf_assert_signed(rep, hr.refused_tbs, hr.refused_len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    hf_assert_refused(PROFILE_WORKLOAD, hr.refused_tbs, hr.refused_len, HSMCA_EPERM,
                      "invariant 6: serial issued before");
    assert_true(hf_signer_alive());
}

#define HR_REFUSAL_FLOOD_S 3.0 /* long enough for several limiter windows */
#define HR_IN_FLIGHT 32

/* A refusal flood: for 3 s the front end keeps 32 requests in flight that the
 * validator refuses (the issuer is not the CA's: no token, no serial). The log
 * must not follow it line for line (test_rate_stop counts the lines). */
static void test_rate_refusal_flood(void **state)
{
    tbs_spec spec = {.issuer_cn = "hsmca dev root CA evil"};
    size_t len;
    uint8_t *tbs = hf_build_tbs(&spec, &len);
    unsigned long before = hf.n_refused;
    double t0 = util_mono_now();
    int sent = 0, got = 0;
    for (; sent < HR_IN_FLIGHT; sent++)
        hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs, len);
    while (got < sent) {
        uint64_t rid;
        Hsmca__Ipc__SignReply *rep = hf_recv_reply(hf.ipc, HF_REPLY_MS, &rid, "the refusal flood");
        if (rep->code != HSMCA_EPERM ||
            strcmp(rep->reason, "invariant 1: issuer must equal the CA subject") != 0)
            fail_msg("refusal flood: code %u \"%s\"", rep->code, rep->reason);
        hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
        got++;
        if (util_mono_now() - t0 < HR_REFUSAL_FLOOD_S) {
            hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs, len);
            sent++;
        }
    }
    double secs = util_mono_now() - t0;
    fprintf(stderr, "  %d refusals in %.2f s (%.0f/s)\n", got, secs, got / secs);
    assert_int_equal(hf.n_refused - before, (unsigned long)got);
    OPENSSL_free(tbs);
    hf_assert_signs_fresh();
}

/* The rate group's signer stops cleanly too; its log names the rate refusals and
 * not the PIN, and every refusal the front end received is in the log: one of
 * at most 50 lines a second, or counted in a summary line. */
static void test_rate_stop(void **state)
{
    hf_stop_signer();
    char *log = hf_read_log_without_pin();
    assert_non_null(strstr(log, "signer ready"));
    assert_non_null(strstr(log, "invariant 7: signing rate limit"));
    free(log);
    hf_log_stats st;
    hf_check_log(&st);
    fprintf(stderr,
            "  %lu refusals received (%lu \"queue full\"); %zu refusal lines (at most %zu in one "
            "limiter window, %zu in any 1 s) + %zu summaries of %llu suppressed\n",
            hf.n_refused + hf.n_queue_full, hf.n_queue_full, st.refused_lines,
            st.max_refused_window, st.max_refused_per_s, st.summaries, st.suppressed);
    assert_int_equal(st.refused_lines + st.suppressed, hf.n_refused + hf.n_queue_full);
    /* 50 a window; a window's lines are written a moment after the limiter let
     * them through, so allow a few at the edge. */
    assert_true(st.max_refused_window <= 50 + 5);
    assert_true(st.max_refused_per_s <= 2 * 50);
    assert_true(st.summaries >= (size_t)HR_REFUSAL_FLOOD_S - 1);
}

const struct CMUnitTest hf_rate_tests[] = {
    cmocka_unit_test(test_rate_ready),         cmocka_unit_test(test_rate_flood_capped),
    cmocka_unit_test(test_rate_refills),       cmocka_unit_test(test_rate_refusal_keeps_serial),
    cmocka_unit_test(test_rate_refusal_flood), cmocka_unit_test(test_rate_stop),
};
const size_t hf_n_rate_tests = sizeof(hf_rate_tests) / sizeof(hf_rate_tests[0]);
