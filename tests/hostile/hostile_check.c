/* hostile_check.c - what a reply must show (signed exactly as sent, or refused
 * with the rule that refused) and what must follow a protocol violation. */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ipc_frame.h"
#include "signer_tbs.h"

/* The TBSCertificate inside a DER certificate: the first element of the outer
 * SEQUENCE, taken byte for byte (no re-encoding). */
static void cert_tbs_span(const uint8_t *der, size_t len, const uint8_t **tbs, size_t *tbs_len)
{
    const unsigned char *p = der;
    long l;
    int tag, cls;
    int r = ASN1_get_object(&p, &l, &tag, &cls, (long)len);
    assert_false(r & 0x80);
    assert_int_equal(tag, V_ASN1_SEQUENCE);
    const unsigned char *start = p;
    r = ASN1_get_object(&p, &l, &tag, &cls, (long)(len - (size_t)(p - der)));
    assert_false(r & 0x80);
    assert_int_equal(tag, V_ASN1_SEQUENCE);
    *tbs = start;
    *tbs_len = (size_t)(p - start) + (size_t)l;
    assert_true(*tbs + *tbs_len <= der + len);
}

/* An OK reply whose certificate verifies under the root and carries exactly the
 * TBS we sent: the signer added nothing and changed nothing. */
void hf_assert_signed(const Hsmca__Ipc__SignReply *rep, const uint8_t *tbs, size_t len)
{
    if (rep->code != HSMCA_OK)
        fail_msg("valid TBS refused: code %u, reason \"%s\"", rep->code, rep->reason);
    assert_true(rep->certificate.len > 0);
    const unsigned char *p = rep->certificate.data;
    X509 *x = d2i_X509(NULL, &p, (long)rep->certificate.len);
    assert_non_null(x);
    assert_ptr_equal(p, rep->certificate.data + rep->certificate.len);
    assert_int_equal(X509_verify(x, X509_get0_pubkey(hf.ca)), 1);
    assert_int_equal(X509_check_issued(hf.ca, x), X509_V_OK);
    assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
    const uint8_t *got;
    size_t got_len;
    cert_tbs_span(rep->certificate.data, rep->certificate.len, &got, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, tbs, len);
    hf_note_signed(x);
    X509_free(x);
}

/* The signer still does its job: a fresh valid TBS is signed on the current connection. */
void hf_assert_signs_fresh(void) { hf_assert_signs_within(HF_REPLY_MS); }

void hf_assert_signs_within(int timeout_ms)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    uint64_t id = hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs, len);
    Hsmca__Ipc__SignReply *rep = hf_await_reply(hf.ipc, id, timeout_ms);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
}

/* A refusal with code and a reason that starts with prefix (and does not contain
 * absent, when not NULL), and no certificate. */
static void check_refusal(Hsmca__Ipc__SignReply *rep, hsmca_code code, const char *prefix,
                          const char *absent)
{
    fprintf(stderr, "  refused: code %u (%s), reason \"%s\"\n", rep->code,
            hsmca_code_name((hsmca_code)rep->code), rep->reason);
    if (rep->code == HSMCA_OK)
        fail_msg("signed a TBS that should be refused with \"%s\"", prefix);
    assert_non_null(rep->reason);
    if (rep->code != (uint32_t)code || strncmp(rep->reason, prefix, strlen(prefix)) != 0)
        fail_msg("refused with %s \"%s\", expected %s \"%s...\"",
                 hsmca_code_name((hsmca_code)rep->code), rep->reason, hsmca_code_name(code),
                 prefix);
    if (absent && strstr(rep->reason, absent))
        fail_msg("reason \"%s\" says \"%s\"", rep->reason, absent);
    assert_int_equal(rep->certificate.len, 0);
}

/* Sends tbs; the signer must refuse it with code and a reason that starts with
 * prefix, sign nothing, and then still sign a fresh valid TBS. */
void hf_assert_refused(uint32_t profile, const uint8_t *tbs, size_t len, hsmca_code code,
                       const char *prefix)
{
    Hsmca__Ipc__SignReply *rep = hf_sign(profile, tbs, len);
    check_refusal(rep, code, prefix, NULL);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    hf_assert_signs_fresh();
}

void hf_refuse_spec(const tbs_spec *s, hsmca_code code, const char *prefix)
{
    size_t len;
    uint8_t *tbs = hf_build_tbs(s, &len);
    hf_assert_refused(PROFILE_WORKLOAD, tbs, len, code, prefix);
    OPENSSL_free(tbs);
}

static void case_test(void **state)
{
    const hf_case *c = *state;
    size_t len;
    uint8_t *tbs = hf_build_tbs(&c->spec, &len);
    Hsmca__Ipc__SignReply *rep = hf_sign(c->profile ? c->profile : PROFILE_WORKLOAD, tbs, len);
    if (c->code == HSMCA_OK) {
        hf_assert_signed(rep, tbs, len);
        fprintf(stderr, "  signed, as the profile allows\n");
    } else {
        check_refusal(rep, c->code, c->prefix, c->absent);
    }
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    hf_assert_signs_fresh();
}

struct CMUnitTest hf_case_unit_test(const hf_case *c)
{
    struct CMUnitTest t = {c->name, case_test, NULL, NULL, (void *)c};
    return t;
}

/* ---- protocol violations: the supervisor's side ---------------------------------- */

/* Reads the old connection to its end. Replies may still come for requests
 * [lo, hi) sent before the violation; anything else before EOF is an error. */
static void drain_to_eof(uint64_t lo, uint64_t hi)
{
    static uint8_t buf[IPC_MAX_FRAME];
    for (;;) {
        if (!hf_wait_readable(hf.ipc, HF_DROP_MS)) {
            hf_dump_log_tail();
            fail_msg("the signer did not end the connection within %d ms", HF_DROP_MS);
        }
        ipc_msg m;
        hsmca_err e;
        if (ipc_recv(hf.ipc, buf, &m, &e) != HSMCA_OK) {
            if (m.eof)
                return;
            fail_msg("expected EOF on the front end connection: %s", e.msg);
        }
        if (m.type != IPC_SIGN_REPLY || m.id < lo || m.id >= hi)
            fail_msg("expected EOF on the front end connection, got type %u id %llu", m.type,
                     (unsigned long long)m.id);
    }
}

void hf_assert_dropped_then_reconnect_after(uint64_t lo, uint64_t hi)
{
    drain_to_eof(lo, hi);
    /* The restart request is checked after the reconnection, so that a missing
     * one fails this test only and leaves the signer connected for the next. */
    int k = hf_read_ctl(HF_DROP_MS), got_k = k >= 0;
    if (!hf_signer_alive()) {
        hf_dump_log_tail();
        fail_msg("the signer died on a protocol violation");
    }

    hf_hand_over(0); /* what the supervisor does once the new front end is up */
    hf_assert_signs_fresh();

    if (!got_k) {
        hf_dump_log_tail();
        fail_msg("no restart request on the control channel within %d ms", HF_DROP_MS);
    }
    assert_int_equal(k, CTL_RESTART_PEER);
}

void hf_assert_dropped_then_reconnect(void)
{
    hf_assert_dropped_then_reconnect_after(0, 0);
}
