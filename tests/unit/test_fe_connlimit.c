/* test_fe_connlimit.c - server.max_connections' count (frontend/fe_connlimit.c) on real
 * sockets: admitted up to the cap, refused beyond, a closed connection's place taken
 * back when its descriptor is accepted again or, when the descriptor went to
 * something else, by the sweep at the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <sys/socket.h>
#include <unistd.h>

#include "fe_connlimit.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_and_reuse),
        cmocka_unit_test(test_cap_of_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
