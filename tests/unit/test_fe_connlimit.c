/* test_fe_connlimit.c - server.max_connections' count (frontend/fe_connlimit.c) on real
 * sockets: admitted up to the cap, refused beyond, a closed connection's place taken
 * back when its descriptor is accepted again or, when the descriptor went to
 * something else, by the sweep at the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fe_connlimit.h"
#include "fe_peercalls.h"

#define CAP 4

/* A connected socket standing for an accepted connection (its peer end leaks to the
 * end of the test on purpose: it keeps the socket open). */
static int conn(void)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    return sv[0];
}

static void test_cap_and_reuse(void **state)
{
    (void)state;
    hsmca_err e;
    fe_connlimit *l = fe_connlimit_new(CAP, 4096, &e);
    assert_non_null(l);
    double now = 100.0;
    int fds[CAP];
    for (int i = 0; i < CAP; i++) {
        fds[i] = conn();
        assert_int_equal(fe_connlimit_admit(l, fds[i], now), 1);
    }
    assert_int_equal(fe_connlimit_open(l), CAP);
    int extra = conn();
    assert_int_equal(fe_connlimit_admit(l, extra, now), 0);
    assert_int_equal(fe_connlimit_refused(l), 1);
    close(extra);

    /* A connection closes; the kernel gives its descriptor to the next one: the
     * count sees the reuse at once, no sweep needed (same instant). */
    int fd = fds[1];
    close(fd);
    int again = conn();
    assert_int_equal(again, fd); /* lowest free descriptor */
    assert_int_equal(fe_connlimit_admit(l, again, now), 1);
    assert_int_equal(fe_connlimit_open(l), CAP);

    /* A connection closes and its descriptor goes to a pipe (not a connection): a new
     * connection on another descriptor is admitted once the sweep ran (at the cap, at
     * most every 50 ms). */
    close(fds[2]);
    int p[2];
    assert_int_equal(pipe(p), 0);
    int next = conn();
    assert_int_equal(fe_connlimit_admit(l, next, now + 0.01), 0); /* swept at `now` */
    assert_int_equal(fe_connlimit_admit(l, next, now + 1.0), 1);  /* sweep: fds[2] gone */
    assert_int_equal(fe_connlimit_open(l), CAP);
    assert_int_equal(fe_connlimit_refused(l), 2);

    /* A descriptor beyond the table cannot be tracked: refused, never miscounted. */
    assert_int_equal(fe_connlimit_admit(l, 5000, now + 2.0), 0);
    fe_connlimit_free(l);
}

static void test_cap_of_one(void **state)
{
    (void)state;
    hsmca_err e;
    fe_connlimit *l = fe_connlimit_new(1, 4096, &e);
    assert_non_null(l);
    int a = conn(), b = conn();
    assert_int_equal(fe_connlimit_admit(l, a, 1.0), 1);
    assert_int_equal(fe_connlimit_admit(l, b, 1.0), 0);
    close(a);
    assert_int_equal(fe_connlimit_admit(l, b, 2.0), 1); /* the sweep found a closed */
    assert_int_equal(fe_connlimit_open(l), 1);
    fe_connlimit_free(l);
}

/* A loopback TCP connection: *client gets the client's end, returns the accepted one. */
static int tcp_pair(int lst, int *client)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(lst, (struct sockaddr *)&a, &len), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(*client >= 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&a, len), 0);
    int fd = accept(lst, NULL, NULL);
    assert_true(fd >= 0);
    return fd;
}

/* Closing by gRPC's peer string (rapid reset): only the admitted connection with that
 * peer address is shut down; its client reads EOF, the other stays open. */
static void test_close_peer(void **state)
{
    (void)state;
    hsmca_err e;
    fe_connlimit *l = fe_connlimit_new(8, 4096, &e);
    assert_non_null(l);
    int lst = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(lst, (struct sockaddr *)&any, sizeof(any)), 0);
    assert_int_equal(listen(lst, 4), 0);
    int c1, c2;
    int s1 = tcp_pair(lst, &c1), s2 = tcp_pair(lst, &c2);
    assert_int_equal(fe_connlimit_admit(l, s1, 1.0), 1);
    assert_int_equal(fe_connlimit_admit(l, s2, 1.0), 1);

    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    assert_int_equal(getsockname(c1, (struct sockaddr *)&me, &len), 0);
    char peer[64];
    snprintf(peer, sizeof(peer), "ipv4:127.0.0.1:%u", ntohs(me.sin_port));
    struct sockaddr_storage ss;
    socklen_t sl;
    assert_int_equal(fe_peer_sockaddr(peer, &ss, &sl, &e), HSMCA_OK);
    assert_int_equal(fe_connlimit_close_peer(l, (struct sockaddr *)&ss, sl), 1);
    char b;
    assert_int_equal(recv(c1, &b, 1, 0), 0); /* EOF: shut down */
    assert_int_equal(send(c2, "x", 1, 0), 1);
    assert_int_equal(recv(s2, &b, 1, 0), 1); /* the other works */

    /* A port nobody has: nothing closed. */
    snprintf(peer, sizeof(peer), "ipv4:127.0.0.1:%u", ntohs(me.sin_port) ^ 1u);
    assert_int_equal(fe_peer_sockaddr(peer, &ss, &sl, &e), HSMCA_OK);
    assert_int_equal(fe_connlimit_close_peer(l, (struct sockaddr *)&ss, sl), 0);

    /* The descriptor closed and reused for another socket: never touched. */
    snprintf(peer, sizeof(peer), "ipv4:127.0.0.1:%u", ntohs(me.sin_port));
    assert_int_equal(fe_peer_sockaddr(peer, &ss, &sl, &e), HSMCA_OK);
    struct sockaddr_in la;
    socklen_t ll = sizeof(la);
    assert_int_equal(getsockname(lst, (struct sockaddr *)&la, &ll), 0);
    int c3 = socket(AF_INET, SOCK_STREAM, 0); /* before s1 is freed, so accept gets s1 */
    assert_int_equal(connect(c3, (struct sockaddr *)&la, ll), 0);
    close(s1);
    int s3 = accept(lst, NULL, NULL);
    assert_int_equal(s3, s1);
    assert_int_equal(fe_connlimit_close_peer(l, (struct sockaddr *)&ss, sl), 0);
    close(c1), close(c2), close(c3), close(s2), close(s3), close(lst);
    fe_connlimit_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_and_reuse),
        cmocka_unit_test(test_cap_of_one),
        cmocka_unit_test(test_close_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
