/* test_ipc_frame.c - IPC framing: encode/decode, size limits, truncation,
 * fd passing, over a real SOCK_SEQPACKET socketpair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc_frame.h"

static int pair[2];

static int setup(void **state)
{
    return socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair);
}

static int teardown(void **state)
{
    close(pair[0]);
    close(pair[1]);
    return 0;
}

static void test_encode_decode_roundtrip(void **state)
{
    uint8_t buf[64];
    size_t len;
    ipc_msg m;
    hsmca_err e;
    assert_int_equal(ipc_frame_encode(7, 0x0102030405060708ull, (const uint8_t *)"abc", 3, buf,
                                      sizeof(buf), &len, &e),
                     HSMCA_OK);
    assert_int_equal(len, IPC_HEADER_LEN + 3);
    assert_int_equal(buf[0], 7);
    assert_int_equal(buf[1], 0x01); /* id is big-endian */
    assert_int_equal(buf[8], 0x08);
    assert_int_equal(ipc_frame_decode(buf, len, &m, &e), HSMCA_OK);
    assert_int_equal(m.type, 7);
    assert_true(m.id == 0x0102030405060708ull);
    assert_int_equal(m.len, 3);
    assert_ptr_equal(m.payload, buf + IPC_HEADER_LEN); /* borrowed, not copied */
    assert_memory_equal(m.payload, "abc", 3);
    assert_int_equal(m.eof, 0);
}

static void test_decode_refuses_short_and_long(void **state)
{
    uint8_t buf[8] = {0};
    ipc_msg m;
    hsmca_err e;
    memset(&m, 0xa5, sizeof(m));
    assert_int_equal(ipc_frame_decode(buf, 8, &m, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "shorter than the header"));
    assert_null(m.payload); /* nothing left over from before on failure */
    assert_int_equal(m.len, 0);
    assert_int_equal(ipc_frame_decode(buf, IPC_MAX_FRAME + 1, &m, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "exceeds"));
}

static void test_encode_refuses_oversized_payload(void **state)
{
    static uint8_t big[IPC_MAX_FRAME + 16], out[IPC_MAX_FRAME + 32];
    size_t len;
    hsmca_err e;
    assert_int_equal(ipc_frame_encode(1, 1, big, IPC_MAX_PAYLOAD + 1, out, sizeof(out), &len, &e),
                     HSMCA_EINVAL);
    assert_int_equal(ipc_send(pair[0], 1, 1, big, IPC_MAX_PAYLOAD + 1, &e), HSMCA_EINVAL);
    /* The largest legal payload goes through whole. */
    assert_int_equal(ipc_send(pair[0], 1, 9, big, IPC_MAX_PAYLOAD, &e), HSMCA_OK);
    static uint8_t rbuf[IPC_MAX_FRAME];
    ipc_msg m;
    assert_int_equal(ipc_recv(pair[1], rbuf, &m, &e), HSMCA_OK);
    assert_int_equal(m.len, IPC_MAX_PAYLOAD);
    assert_true(m.id == 9);
}

static void test_send_recv_over_socket(void **state)
{
    hsmca_err e;
    assert_int_equal(ipc_send(pair[0], IPC_SIGN_REQ, 42, (const uint8_t *)"hello", 5, &e),
                     HSMCA_OK);
    assert_int_equal(ipc_send(pair[0], IPC_SIGN_REPLY, 43, NULL, 0, &e), HSMCA_OK);
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m;
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_OK);
    assert_int_equal(m.type, IPC_SIGN_REQ);
    assert_true(m.id == 42);
    assert_int_equal(m.len, 5);
    assert_memory_equal(m.payload, "hello", 5);
    /* Message boundaries are kept: the second frame arrives on its own. */
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_OK);
    assert_int_equal(m.type, IPC_SIGN_REPLY);
    assert_int_equal(m.len, 0);
}

static void test_recv_refuses_truncated_and_oversized_packets(void **state)
{
    static uint8_t buf[IPC_MAX_FRAME], big[IPC_MAX_FRAME + 100];
    ipc_msg m;
    hsmca_err e;
    assert_int_equal(write(pair[0], "\x01\x00\x00", 3), 3);
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_EINVAL);
    assert_int_equal(m.eof, 0);
    /* A packet over the maximum is cut by the kernel: refused, not parsed. */
    int sz = 1 << 20;
    setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    assert_int_equal(write(pair[0], big, sizeof(big)), (ssize_t)sizeof(big));
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "larger than"));
}

/* Ids above IPC_ID_MAX (what the signing log holds) are refused both ways. */
static void test_id_bound(void **state)
{
    uint8_t buf[64];
    size_t len;
    ipc_msg m;
    hsmca_err e;
    assert_int_equal(ipc_frame_encode(1, IPC_ID_MAX, NULL, 0, buf, sizeof(buf), &len, &e),
                     HSMCA_OK);
    assert_int_equal(ipc_frame_decode(buf, len, &m, &e), HSMCA_OK);
    assert_true(m.id == IPC_ID_MAX);
    assert_int_equal(ipc_frame_encode(1, IPC_ID_MAX + 1, NULL, 0, buf, sizeof(buf), &len, &e),
                     HSMCA_EINVAL);
    memset(buf + 1, 0xff, 8); /* 2^64 - 1 */
    assert_int_equal(ipc_frame_decode(buf, IPC_HEADER_LEN, &m, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "request id 18446744073709551615 above 2^63-1"));
}

/* A frame with a descriptor attached is refused naming the ancillary data, not its size. */
static void test_recv_refuses_ancillary_data(void **state)
{
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m;
    hsmca_err e;
    assert_int_equal(ipc_send_fd(pair[0], STDERR_FILENO, &e), HSMCA_OK);
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "ancillary data attached"));
}

static void test_recv_reports_eof(void **state)
{
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m;
    hsmca_err e;
    close(pair[0]);
    pair[0] = -1;
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_EIO);
    assert_int_equal(m.eof, 1);
}

static void test_empty_packet_is_not_eof(void **state)
{
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m = {.eof = 1}; /* ipc_recv must clear it */
    hsmca_err e;
    assert_int_equal(send(pair[0], "", 0, 0), 0);
    assert_int_equal(ipc_recv(pair[1], buf, &m, &e), HSMCA_EINVAL);
    assert_int_equal(m.eof, 0);
    assert_non_null(strstr(e.msg, "empty packet"));
}

/* ipc_try_recv: nothing waiting is "empty", not an error; frames and the peer's close
 * come as from ipc_recv, without a wait. */
static void test_try_recv_drains_without_waiting(void **state)
{
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m;
    hsmca_err e;
    assert_int_equal(ipc_try_recv(pair[1], buf, &m, &e), HSMCA_OK);
    assert_int_equal(m.empty, 1);
    for (uint64_t id = 1; id <= 3; id++)
        assert_int_equal(ipc_send(pair[0], IPC_SIGN_REQ, id, (const uint8_t *)"x", 1, &e),
                         HSMCA_OK);
    for (uint64_t id = 1; id <= 3; id++) {
        assert_int_equal(ipc_try_recv(pair[1], buf, &m, &e), HSMCA_OK);
        assert_int_equal(m.empty, 0);
        assert_true(m.id == id);
        assert_int_equal(m.len, 1);
    }
    assert_int_equal(ipc_try_recv(pair[1], buf, &m, &e), HSMCA_OK);
    assert_int_equal(m.empty, 1);
    close(pair[0]);
    pair[0] = -1;
    assert_int_equal(ipc_try_recv(pair[1], buf, &m, &e), HSMCA_EIO);
    assert_int_equal(m.eof, 1);
    assert_int_equal(m.empty, 0);
}

static void test_fd_passing(void **state)
{
    int other[2];
    hsmca_err e;
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, other), 0);
    assert_int_equal(ipc_send_fd(pair[0], other[0], &e), HSMCA_OK);
    int got = -1, eof = 0;
    assert_int_equal(ipc_recv_fd(pair[1], &got, &eof, &e), HSMCA_OK);
    assert_true(got >= 0 && got != other[0]);
    /* The received fd is the same socket: data sent on it reaches other[1]. */
    assert_int_equal(write(got, "x", 1), 1);
    char c;
    assert_int_equal(read(other[1], &c, 1), 1);
    assert_int_equal(c, 'x');
    /* A control message without an fd is refused. */
    assert_int_equal(write(pair[0], "F", 1), 1);
    assert_int_equal(ipc_recv_fd(pair[1], &got, &eof, &e), HSMCA_EINVAL);
    close(other[0]);
    close(other[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_encode_decode_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_refuses_short_and_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_refuses_oversized_payload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_recv_over_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recv_refuses_truncated_and_oversized_packets, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_recv_reports_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_id_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recv_refuses_ancillary_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_packet_is_not_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_try_recv_drains_without_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_passing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
