/* hostile_ipc.c - protocol violations (DESIGN.md §4): each ends the front end's
 * connection and asks the supervisor for a new front end; none stops the signer. */
#include "hostile.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ipc_frame.h"
#include "signer_tbs.h"

static void test_violation_truncated_frame(void **state)
{
    static const uint8_t five[5] = {IPC_SIGN_REQ, 0, 0, 0, 0};
    hf_send_raw(five, sizeof(five));
    hf_assert_dropped_then_reconnect();
}

static void test_violation_unknown_type(void **state)
{
    /* A valid header and a valid SignRequest: only the type is wrong. */
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = TBS_PROFILE_WORKLOAD;
    req.tbs.data = tbs;
    req.tbs.len = len;
    uint8_t buf[TBS_MAX_LEN + 64];
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    assert_true(n <= sizeof(buf));
    hsmca__ipc__sign_request__pack(&req, buf);
    hsmca_err e;
    if (ipc_send(hf.ipc, 77, hf.next_id++, buf, n, &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    OPENSSL_free(tbs);
    hf_assert_dropped_then_reconnect();
}

static void test_violation_undecodable_payload(void **state)
{
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, junk, sizeof(junk), &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    hf_assert_dropped_then_reconnect();
}

static void test_violation_oversized_frame(void **state)
{
    enum { BIG = 70000 };
    uint8_t *big = malloc(BIG);
    assert_non_null(big);
    memset(big, 0x41, BIG);
    big[0] = IPC_SIGN_REQ; /* a plausible header: only the size is wrong */
    memset(big + 1, 0, 8);
    big[8] = 1;
    hf_send_raw(big, BIG);
    free(big);
    hf_assert_dropped_then_reconnect();
}

/* Requests in flight when the front end breaks the protocol: their replies may
 * reach the old connection or be dropped, but never the new one (the next
 * reply there must carry the id of the next request). */
static void test_violation_with_requests_in_flight(void **state)
{
    enum { N = 16 };
    uint64_t lo = hf.next_id;
    for (int i = 0; i < N; i++) {
        size_t len;
        uint8_t *tbs = hf_valid_tbs(&len);
        hf_send_request(hf.ipc, TBS_PROFILE_WORKLOAD, tbs, len);
        OPENSSL_free(tbs);
    }
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, junk, sizeof(junk), &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    hf_assert_dropped_then_reconnect_after(lo, lo + N);
}

/* A packet of zero bytes is shorter than the header like any truncated frame
 * (DESIGN.md §4: malformed, so the connection ends and the front end is
 * restarted). On SEQPACKET it reads as a 0-byte recvmsg, which must not be
 * taken for an orderly close: the front end is still there and, left without a
 * connection and without a restart, would answer UNAVAILABLE forever. */
static void test_violation_empty_packet(void **state)
{
    hf_send_raw((const uint8_t *)"", 0);
    hf_assert_dropped_then_reconnect();
}

/* Close the control channel like a supervisor that went away: the signer stops
 * cleanly. Then its whole log must be free of the PIN. */
static void test_stop_and_no_pin_in_log(void **state)
{
    hf_stop_signer();
    char *log = hf_read_log_without_pin();
    /* The log is the real one: it saw the start and the violations above. */
    assert_non_null(strstr(log, "signer ready"));
    assert_non_null(strstr(log, "protocol violation"));
    free(log);
}

const struct CMUnitTest hf_ipc_tests[] = {
    cmocka_unit_test(test_violation_truncated_frame),
    cmocka_unit_test(test_violation_unknown_type),
    cmocka_unit_test(test_violation_undecodable_payload),
    cmocka_unit_test(test_violation_oversized_frame),
    cmocka_unit_test(test_violation_with_requests_in_flight),
    cmocka_unit_test(test_violation_empty_packet),
    cmocka_unit_test(test_stop_and_no_pin_in_log),
};
const size_t hf_n_ipc_tests = sizeof(hf_ipc_tests) / sizeof(hf_ipc_tests[0]);
