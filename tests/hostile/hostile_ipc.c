/* hostile_ipc.c - protocol violations (docs/ARCHITECTURE.md §5.1, signer/signer_request.c).
 * A frame or a SignRequest outside the protocol ends the front end's connection
 * and asks the supervisor for a new front end ('K' on ctl); it never stops the
 * signer, and the log names what was wrong. SignRequests are written by hand
 * here (protobuf-c cannot write a repeated, mistyped or unknown field). */
#include "hostile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "ipc_frame.h"
#include "signer_tbs.h"
#include "util.h"

/* ---- SignRequest on the wire (proto/signer.proto) ---------------------------------- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_I32 = 5 };
enum { F_PROFILE = 1, F_TBS = 2, F_REQUESTER = 3, F_CSR = 4 };

typedef struct {
    uint8_t p[IPC_MAX_FRAME + 4096]; /* room to overflow a frame on purpose */
    size_t n;
} pb_buf;

static void pb_byte(pb_buf *b, uint8_t v)
{
    assert_true(b->n < sizeof(b->p));
    b->p[b->n++] = v;
}

static void pb_varint(pb_buf *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        pb_byte(b, (uint8_t)(v | 0x80));
    pb_byte(b, (uint8_t)v);
}

static void pb_key(pb_buf *b, uint64_t field, int wire)
{
    pb_varint(b, field << 3 | (uint64_t)wire);
}

static void pb_len(pb_buf *b, uint64_t field, const void *p, size_t n)
{
    pb_key(b, field, WT_LEN);
    pb_varint(b, n);
    assert_true(b->n + n <= sizeof(b->p));
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void pb_uint(pb_buf *b, uint64_t field, uint64_t v)
{
    pb_key(b, field, WT_VARINT);
    pb_varint(b, v);
}

/* profile 1, tbs, requester (rlen bytes) and a 32-byte csr_sha256: a request the
 * signer takes, when the TBS is valid. */
static void pb_request(pb_buf *b, const uint8_t *tbs, size_t len, const void *req, size_t rlen)
{
    static const uint8_t csr[32] = {1};
    pb_uint(b, F_PROFILE, PROFILE_WORKLOAD);
    pb_len(b, F_TBS, tbs, len);
    pb_len(b, F_REQUESTER, req, rlen);
    pb_len(b, F_CSR, csr, sizeof(csr));
}

static uint64_t send_frame(int fd, uint8_t type, const pb_buf *b)
{
    uint64_t id = hf.next_id++;
    hsmca_err e;
    if (ipc_send(fd, type, id, b->p, b->n, &e) != HSMCA_OK)
        fail_msg("ipc_send of %zu bytes: %s", b->n, e.msg);
    return id;
}

uint64_t hf_send_request_as(int fd, uint32_t profile, const uint8_t *tbs, size_t len,
                            const void *requester, size_t rlen, size_t csr_len)
{
    static const uint8_t csr[32] = {2};
    pb_buf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    if (profile)
        pb_uint(b, F_PROFILE, profile);
    if (tbs)
        pb_len(b, F_TBS, tbs, len);
    if (rlen)
        pb_len(b, F_REQUESTER, requester, rlen);
    if (csr_len)
        pb_len(b, F_CSR, csr, csr_len);
    uint64_t id = send_frame(fd, IPC_SIGN_REQ, b);
    free(b);
    return id;
}

/* After a violation: dropped, 'K', a new connection signs, and the last
 * violation line of the log names what was wrong. */
static void assert_violation(const char *why)
{
    hf_assert_dropped_then_reconnect();
    char *got = hf_log_last_field("front end protocol violation", "reason");
    if (!got || strncmp(got, why, strlen(why)) != 0)
        fail_msg("the signer logged the reason \"%s\", expected \"%s...\"", got ? got : "(nothing)",
                 why);
    fprintf(stderr, "  logged: %s\n", got);
    free(got);
}

/* ---- SignRequests outside the wire contract: one builder each ---------------------- */

#define REQ HF_SPIFFE_ID
#define REQ_LEN (sizeof(REQ) - 1)

/* A valid request, then unknown field 11 as bytes up to the 64 KiB frame (5 and 6 are
 * identity binding's authenticator and token, 7 the token's cluster, 8 the request id,
 * 9 and 10 the presented client certificate's serial and issuer). */
static void pad_one_field(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    size_t pad = IPC_MAX_PAYLOAD - b->n - 1 - 3; /* key 0x5a, a 3-byte length */
    static uint8_t zeros[IPC_MAX_FRAME];
    pb_len(b, 11, zeros, pad);
    assert_int_equal(b->n, IPC_MAX_PAYLOAD);
}

/* A valid request, then unknown field 15 = 0 (two bytes) ~32,000 times: what
 * protobuf-c would keep as as many unknown-field records. */
static void pad_many_fields(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    while (b->n + 2 <= IPC_MAX_PAYLOAD)
        pb_uint(b, 15, 0);
}

static void field_zero(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_uint(b, 0, 1);
}

static void field_max(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_uint(b, (1u << 29) - 1, 1);
}

static void profile_twice(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_uint(b, F_PROFILE, PROFILE_SERVING); /* protobuf-c: the last one wins */
}

static void tbs_twice(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_len(b, F_TBS, t, n);
}

static void requester_twice(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_len(b, F_REQUESTER, "spiffe://cluster.local/ns/kube-system/sa/admin", 46);
}

static void csr_twice(pb_buf *b, const uint8_t *t, size_t n)
{
    static const uint8_t csr[32];
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_len(b, F_CSR, csr, sizeof(csr));
}

/* A profile of 2^32 + 1: protobuf-c keeps the low 32 bits (1, the workload
 * profile), so a value outside uint32 would pass for another. */
static void profile_beyond_32_bits(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_uint(b, F_PROFILE, (1ull << 32) + PROFILE_WORKLOAD);
    pb_len(b, F_TBS, t, n);
    pb_len(b, F_REQUESTER, REQ, REQ_LEN);
}

static void profile_as_bytes(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_len(b, F_PROFILE, "\x01", 1);
    pb_len(b, F_TBS, t, n);
}

static void tbs_as_varint(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_uint(b, F_PROFILE, 1);
    pb_uint(b, F_TBS, 1);
}

static void requester_as_fixed32(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_uint(b, F_PROFILE, 1);
    pb_len(b, F_TBS, t, n);
    pb_key(b, F_REQUESTER, WT_I32);
    for (int i = 0; i < 4; i++)
        pb_byte(b, 'x');
}

static void csr_as_fixed64(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    b->n -= 2 + 32; /* drop the csr_sha256 pb_request wrote */
    pb_key(b, F_CSR, WT_I64);
    for (int i = 0; i < 8; i++)
        pb_byte(b, 0);
}

static void tbs_as_group(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_uint(b, F_PROFILE, 1);
    pb_key(b, F_TBS, WT_SGROUP);
}

static void key_overlong(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, REQ, REQ_LEN);
    for (int i = 0; i < 11; i++) /* a varint of 11 bytes */
        pb_byte(b, 0x80);
    pb_byte(b, 0);
}

static void length_overlong(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_uint(b, F_PROFILE, 1);
    pb_key(b, F_TBS, WT_LEN);
    for (int i = 0; i < 10; i++) /* 2^70-ish: more than 64 bits */
        pb_byte(b, 0xff);
    pb_byte(b, 0x01);
}

static void tbs_past_frame(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_uint(b, F_PROFILE, 1);
    pb_key(b, F_TBS, WT_LEN);
    pb_varint(b, n + 1); /* one byte more than follows */
    memcpy(b->p + b->n, t, n);
    b->n += n;
}

static void requester_60k(pb_buf *b, const uint8_t *t, size_t n)
{
    static uint8_t big[60 * 1024];
    memset(big, 'a', sizeof(big));
    pb_request(b, t, n, big, sizeof(big));
}

static void requester_2049(pb_buf *b, const uint8_t *t, size_t n)
{
    static uint8_t big[2049];
    memset(big, 'a', sizeof(big));
    pb_request(b, t, n, big, sizeof(big));
}

static void tbs_16385(pb_buf *b, const uint8_t *t, size_t n)
{
    static uint8_t big[PROFILE_TBS_MAX + 1];
    pb_request(b, big, sizeof(big), REQ, REQ_LEN);
}

static void tbs_60k(pb_buf *b, const uint8_t *t, size_t n)
{
    static uint8_t big[60 * 1024];
    pb_request(b, big, sizeof(big), REQ, REQ_LEN);
}

static void csr_31(pb_buf *b, const uint8_t *t, size_t n)
{
    static const uint8_t csr[31];
    pb_uint(b, F_PROFILE, 1);
    pb_len(b, F_TBS, t, n);
    pb_len(b, F_CSR, csr, sizeof(csr));
}

static void csr_33(pb_buf *b, const uint8_t *t, size_t n)
{
    static const uint8_t csr[33];
    pb_uint(b, F_PROFILE, 1);
    pb_len(b, F_TBS, t, n);
    pb_len(b, F_CSR, csr, sizeof(csr));
}

static void requester_nul(pb_buf *b, const uint8_t *t, size_t n)
{
    static const char r[] = "spiffe://cluster.local/ns/default/sa/sleep\0spiffe://x/admin";
    pb_request(b, t, n, r, sizeof(r) - 1); /* protobuf-c would log the first half */
}

/* The presented certificate's serial (field 9) and issuer (field 10): both or neither. */
static void client_serial_alone(pb_buf *b, const uint8_t *t, size_t n)
{
    static const uint8_t serial[8] = {0x3a};
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_len(b, 9, serial, sizeof(serial));
}

static void client_issuer_31(pb_buf *b, const uint8_t *t, size_t n)
{
    static const uint8_t serial[8] = {0x3a}, issuer[31];
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_len(b, 9, serial, sizeof(serial));
    pb_len(b, 10, issuer, sizeof(issuer));
}

static void client_serial_21(pb_buf *b, const uint8_t *t, size_t n)
{
    static const uint8_t serial[21] = {0x3a}, issuer[32];
    pb_request(b, t, n, REQ, REQ_LEN);
    pb_len(b, 9, serial, sizeof(serial));
    pb_len(b, 10, issuer, sizeof(issuer));
}

static void requester_only_nul(pb_buf *b, const uint8_t *t, size_t n)
{
    pb_request(b, t, n, "\0", 1);
}

typedef struct {
    const char *name;
    void (*build)(pb_buf *b, const uint8_t *tbs, size_t len);
    const char *why; /* what the violation line must say */
} wire_case;

static const wire_case wire_cases[] = {
    {"SignRequest padded with one unknown field to 64 KiB", pad_one_field,
     "SignRequest: unknown field 11"},
    {"client_serial without client_issuer", client_serial_alone,
     "SignRequest: client_serial (8 bytes) and client_issuer (0 bytes, 32 needed) come "
     "together"},
    {"client_issuer of 31 bytes", client_issuer_31,
     "SignRequest: client_serial (8 bytes) and client_issuer (31 bytes, 32 needed) come "
     "together"},
    {"client_serial of 21 bytes", client_serial_21,
     "SignRequest: field client_serial of 21 bytes exceeds 20"},
    {"SignRequest padded with 32,000 unknown fields", pad_many_fields,
     "SignRequest: unknown field 15"},
    {"field number 0", field_zero, "SignRequest: unknown field 0"},
    {"field number 2^29-1", field_max, "SignRequest: unknown field 536870911"},
    {"profile twice", profile_twice, "SignRequest: field profile repeated"},
    {"tbs twice", tbs_twice, "SignRequest: field tbs repeated"},
    {"requester twice", requester_twice, "SignRequest: field requester repeated"},
    {"csr_sha256 twice", csr_twice, "SignRequest: field csr_sha256 repeated"},
    {"profile of 2^32 + 1", profile_beyond_32_bits,
     "SignRequest: field profile of 4294967297 exceeds 4294967295"},
    {"profile as bytes", profile_as_bytes, "SignRequest: field profile has the wrong wire type"},
    {"tbs as a varint", tbs_as_varint, "SignRequest: field tbs has the wrong wire type"},
    {"requester as fixed32", requester_as_fixed32,
     "SignRequest: field requester has the wrong wire type"},
    {"csr_sha256 as fixed64", csr_as_fixed64,
     "SignRequest: field csr_sha256 has the wrong wire type"},
    {"tbs as a group", tbs_as_group, "SignRequest: field tbs has the wrong wire type"},
    {"field key of 12 bytes", key_overlong,
     "SignRequest: malformed or non-minimal field key at offset"},
    {"tbs length beyond 64 bits", length_overlong, "SignRequest: field tbs malformed"},
    {"tbs running past the frame", tbs_past_frame, "SignRequest: field tbs runs past the frame"},
    {"requester of 60 KiB", requester_60k,
     "SignRequest: field requester of 61440 bytes exceeds 2048"},
    {"requester of 2049 bytes", requester_2049,
     "SignRequest: field requester of 2049 bytes exceeds 2048"},
    {"tbs of 16385 bytes", tbs_16385, "SignRequest: field tbs of 16385 bytes exceeds 16384"},
    {"tbs of 60 KiB", tbs_60k, "SignRequest: field tbs of 61440 bytes exceeds 16384"},
    {"csr_sha256 of 31 bytes", csr_31, "SignRequest: csr_sha256 of 31 bytes"},
    {"csr_sha256 of 33 bytes", csr_33, "SignRequest: field csr_sha256 of 33 bytes exceeds 32"},
    {"NUL inside the requester", requester_nul, "SignRequest: requester contains a NUL byte"},
    {"requester of one NUL", requester_only_nul, "SignRequest: requester contains a NUL byte"},
};

static void wire_case_test(void **state)
{
    const wire_case *c = *state;
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    pb_buf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    c->build(b, tbs, len);
    fprintf(stderr, "  SignRequest of %zu bytes\n", b->n);
    send_frame(hf.ipc, IPC_SIGN_REQ, b);
    free(b);
    OPENSSL_free(tbs);
    assert_violation(c->why);
}

const struct CMUnitTest *hf_wire_tests(size_t *n)
{
    static struct CMUnitTest all[sizeof(wire_cases) / sizeof(wire_cases[0])];
    for (size_t i = 0; i < sizeof(wire_cases) / sizeof(wire_cases[0]); i++)
        all[i] = (struct CMUnitTest){wire_cases[i].name, wire_case_test, NULL, NULL,
                                     (void *)&wire_cases[i]};
    *n = sizeof(all) / sizeof(all[0]);
    return all;
}

/* ---- frames outside the protocol ----------------------------------------------------- */

static void test_violation_truncated_frame(void **state)
{
    static const uint8_t five[5] = {IPC_SIGN_REQ, 0, 0, 0, 0};
    hf_send_raw(five, sizeof(five));
    assert_violation("IPC frame: 5 bytes is shorter than the header");
}

/* A valid header and a valid SignRequest: only the type is wrong. */
static void test_violation_unknown_type(void **state)
{
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    pb_buf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    pb_request(b, tbs, len, REQ, REQ_LEN);
    send_frame(hf.ipc, 77, b);
    assert_violation("unknown message type 77");
    /* A reply is the signer's to send, never the front end's. */
    send_frame(hf.ipc, IPC_SIGN_REPLY, b);
    assert_violation("unknown message type 2");
    free(b);
    OPENSSL_free(tbs);
}

static void test_violation_undecodable_payload(void **state)
{
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, junk, sizeof(junk), &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    assert_violation("SignRequest: malformed or non-minimal field key at offset 3");
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
    assert_violation("IPC frame: packet larger than 65536 bytes");
}

/* A valid SignRequest frame (header and payload) with the given id, in out. */
static size_t valid_frame(uint64_t id, uint8_t *out, size_t cap)
{
    size_t len, n;
    uint8_t *tbs = hf_valid_tbs(&len);
    pb_buf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    pb_request(b, tbs, len, REQ, REQ_LEN);
    assert_true(IPC_HEADER_LEN + b->n <= cap);
    out[0] = IPC_SIGN_REQ;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (uint8_t)(id >> (56 - 8 * i));
    memcpy(out + IPC_HEADER_LEN, b->p, b->n);
    n = IPC_HEADER_LEN + b->n;
    free(b);
    OPENSSL_free(tbs);
    return n;
}

/* An id is valid on the wire up to 2^64-1, but the signing log holds ids as int64: a larger
 * one is a malformed frame, named as such, and never a request whose audit entry cannot be
 * written. */
static void test_violation_id_out_of_range(void **state)
{
    static uint8_t frame[IPC_MAX_FRAME];
    hf_send_raw(frame, valid_frame(UINT64_MAX, frame, sizeof(frame)));
    assert_violation("IPC frame: request id 18446744073709551615 above 2^63-1");
    hf_send_raw(frame, valid_frame(IPC_ID_MAX + 1, frame, sizeof(frame)));
    assert_violation("IPC frame: request id 9223372036854775808 above 2^63-1");
}

/* A frame with a descriptor attached (SCM_RIGHTS): the IPC carries no ancillary data,
 * and the refusal says so rather than blame the packet's size. */
static void test_violation_fd_attached(void **state)
{
    static uint8_t frame[IPC_MAX_FRAME];
    size_t n = valid_frame(hf.next_id++, frame, sizeof(frame));
    int fd = dup(STDERR_FILENO);
    assert_true(fd >= 0);
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct iovec iov = {frame, n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                        .msg_controllen = sizeof(cm.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t w = sendmsg(hf.ipc, &mh, MSG_NOSIGNAL);
    close(fd);
    if (w < 0 || (size_t)w != n)
        fail_msg("sendmsg with SCM_RIGHTS: %zd (%s)", w, strerror(errno));
    assert_violation("IPC frame: ancillary data attached (a file descriptor, SCM_RIGHTS)");
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
        hf_send_request(hf.ipc, PROFILE_WORKLOAD, tbs, len);
        OPENSSL_free(tbs);
    }
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, junk, sizeof(junk), &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    hf_assert_dropped_then_reconnect_after(lo, lo + N);
}

/* A packet of zero bytes is shorter than the header like any truncated frame
 * (docs/ARCHITECTURE.md §5.1: malformed, so the connection ends and the front end is
 * restarted). On SEQPACKET it reads as a 0-byte recvmsg, which must not be
 * taken for an orderly close: the front end is still there and, left without a
 * connection and without a restart, would answer UNAVAILABLE forever. */
static void test_violation_empty_packet(void **state)
{
    hf_send_raw((const uint8_t *)"", 0);
    assert_violation("IPC frame: empty packet");
}

/* Thousands of 64 KiB SignRequests padded with an unknown field, a few per
 * connection, across as many reconnections: each is refused before anything is
 * allocated, so the signer's resident size does not grow. */
static void test_padded_requests_keep_rss_flat(void **state)
{
    enum { PACKETS = 3000, MAX_ROUNDS = 4000, PER_CONN = 8 };
    size_t len;
    uint8_t *tbs = hf_valid_tbs(&len);
    pb_buf *b = calloc(1, sizeof(*b));
    assert_non_null(b);
    pad_one_field(b, tbs, len);
    uint8_t *frame = malloc(IPC_MAX_FRAME);
    assert_non_null(frame);
    frame[0] = IPC_SIGN_REQ;
    memset(frame + 1, 0, 8);
    memcpy(frame + IPC_HEADER_LEN, b->p, b->n);
    long before = hf_vm_rss_kb();
    int sent = 0, rounds = 0, ks = 0;
    double t0 = util_mono_now();
    while (sent < PACKETS && rounds < MAX_ROUNDS) {
        /* As many as the socket takes before the signer cuts us off. */
        for (int i = 0; i < PER_CONN; i++) {
            frame[8] = (uint8_t)i;
            if (send(hf.ipc, frame, IPC_HEADER_LEN + b->n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                break;
            sent++;
        }
        if (hf_read_ctl(HF_DROP_MS) != CTL_RESTART_PEER)
            fail_msg("round %d: no restart request after a padded SignRequest", rounds);
        ks++;
        hf_hand_over(0);
        rounds++;
    }
    double secs = util_mono_now() - t0;
    long after = hf_vm_rss_kb();
    fprintf(stderr,
            "  %d padded SignRequests of %zu bytes over %d connections in %.2f s: %d restart "
            "requests; signer VmRSS %ld KiB before, %ld KiB after\n",
            sent, b->n + IPC_HEADER_LEN, rounds, secs, ks, before, after);
    free(frame);
    free(b);
    OPENSSL_free(tbs);
    assert_true(sent >= PACKETS);
    if (after - before > 4096)
        fail_msg("the signer grew by %ld KiB", after - before);
    hf_assert_signs_fresh();
}

const struct CMUnitTest hf_ipc_tests[] = {
    cmocka_unit_test(test_violation_truncated_frame),
    cmocka_unit_test(test_violation_unknown_type),
    cmocka_unit_test(test_violation_undecodable_payload),
    cmocka_unit_test(test_violation_oversized_frame),
    cmocka_unit_test(test_violation_with_requests_in_flight),
    cmocka_unit_test(test_violation_empty_packet),
    cmocka_unit_test(test_violation_id_out_of_range),
    cmocka_unit_test(test_violation_fd_attached),
    cmocka_unit_test(test_padded_requests_keep_rss_flat),
};
const size_t hf_n_ipc_tests = sizeof(hf_ipc_tests) / sizeof(hf_ipc_tests[0]);
