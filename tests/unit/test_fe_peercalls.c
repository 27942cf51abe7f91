/* test_fe_peercalls.c - calls held and cancelled per connection (frontend/fe_peercalls.c),
 * the rapid-reset bounds: reported once at the first call or cancel beyond a bound,
 * later calls of the connection dropped, entries forgotten when their windows run
 * out, the table consistent under many peers (backward-shift deletion) and never
 * overfilled; and gRPC's peer strings as socket addresses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "fe_peercalls.h"

#define OVER 8
#define CANCELS 5
#define WINDOW 10.0

static fe_peercalls *table(unsigned conns)
{
    hsmca_err e;
    fe_peercalls *t = fe_peercalls_new(conns, OVER, CANCELS, WINDOW, &e);
    assert_non_null(t);
    return t;
}

static void test_held_bound(void **state)
{
    (void)state;
    fe_peercalls *t = table(16);
    const char *p = "ipv4:10.0.0.1:40000", *q = "ipv4:10.0.0.2:40000";
    int counted;
    for (int i = 0; i < OVER; i++) {
        assert_int_equal(fe_peercalls_add(t, p, 1.0, &counted), 0);
        assert_int_equal(counted, 1);
    }
    assert_int_equal(fe_peercalls_add(t, q, 1.0, &counted), 0); /* another connection */
    assert_int_equal(fe_peercalls_add(t, p, 1.0, &counted), 1); /* OVER + 1: close it */
    assert_int_equal(fe_peercalls_add(t, p, 1.0, &counted), 2); /* closed: drop */
    assert_int_equal(counted, 1);
    assert_int_equal(fe_peercalls_held(t, p), OVER + 2);
    for (int i = 0; i < OVER + 2; i++)
        fe_peercalls_remove(t, p, 1.5);
    assert_int_equal(fe_peercalls_held(t, p), 0);
    /* A closed connection's calls keep coming for a while: still dropped... */
    assert_int_equal(fe_peercalls_add(t, p, 1.6, &counted), 2);
    fe_peercalls_remove(t, p, 1.6);
    /* ...until a second without any, then the address is new again. */
    fe_peercalls_sweep(t, 3.0);
    assert_int_equal(fe_peercalls_add(t, p, 3.0, &counted), 0);
    assert_int_equal(fe_peercalls_held(t, q), 1);
    fe_peercalls_free(t);
}

static void test_cancel_bound(void **state)
{
    (void)state;
    fe_peercalls *t = table(16);
    const char *p = "ipv6:[::1]:50000";
    int counted;
    /* Cancels within the window, each call ended before the next (held 0 between):
     * the entry outlives its calls. */
    for (int i = 0; i < CANCELS; i++) {
        assert_int_equal(fe_peercalls_add(t, p, 1.0 + i, &counted), 0);
        assert_int_equal(fe_peercalls_cancelled(t, p, 1.0 + i), 0);
        fe_peercalls_remove(t, p, 1.0 + i);
        fe_peercalls_sweep(t, 1.0 + i);
    }
    assert_int_equal(fe_peercalls_add(t, p, 6.0, &counted), 0);
    assert_int_equal(fe_peercalls_cancelled(t, p, 6.0), 1); /* CANCELS + 1 */
    assert_int_equal(fe_peercalls_cancelled(t, p, 6.0), 0); /* reported once */
    assert_int_equal(fe_peercalls_add(t, p, 6.0, &counted), 2);
    fe_peercalls_free(t);

    /* The same cancels spread over more than the window: never over. */
    t = table(16);
    for (int i = 0; i < 4 * CANCELS; i++) {
        double now = 1.0 + i * (WINDOW / (CANCELS - 1));
        assert_int_equal(fe_peercalls_add(t, p, now, &counted), 0);
        assert_int_equal(fe_peercalls_cancelled(t, p, now), 0);
        fe_peercalls_remove(t, p, now);
        fe_peercalls_sweep(t, now);
    }
    /* A call that was not counted (table full, long peer) is not cancelled either. */
    assert_int_equal(fe_peercalls_cancelled(t, "ipv4:1.2.3.4:5", 1.0), 0);
    assert_int_equal(fe_peercalls_held(t, "ipv4:1.2.3.4:5"), 0);
    fe_peercalls_free(t);
}

/* Many connections coming and going in a mixed order: every count stays right
 * (probe runs survive deletions), and the table never takes more than it has room
 * for: beyond, calls go uncounted. */
static void test_many_peers(void **state)
{
    (void)state;
    fe_peercalls *t = table(100); /* 256 slots, room for 192 */
    char peer[64];
    int counted, n_counted = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(peer, sizeof(peer), "ipv4:10.0.%d.%d:%d", i / 7, i % 7, 1000 + i);
        for (int k = 0; k <= i % 3; k++) {
            assert_int_equal(fe_peercalls_add(t, peer, 1.0, &counted), 0);
            n_counted += counted;
            if (!counted)
                break;
        }
    }
    assert_int_equal(n_counted < 300 * 2, 1);
    int seen = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(peer, sizeof(peer), "ipv4:10.0.%d.%d:%d", i / 7, i % 7, 1000 + i);
        unsigned held = fe_peercalls_held(t, peer);
        if (held) {
            assert_int_equal(held, (unsigned)(i % 3 + 1));
            seen++;
        }
    }
    assert_int_equal(seen, 192);
    /* Remove every other connection's calls, then check the rest still count. */
    for (int i = 0; i < 300; i += 2) {
        snprintf(peer, sizeof(peer), "ipv4:10.0.%d.%d:%d", i / 7, i % 7, 1000 + i);
        unsigned held = fe_peercalls_held(t, peer);
        for (unsigned k = 0; k < held; k++)
            fe_peercalls_remove(t, peer, 1.0);
        assert_int_equal(fe_peercalls_held(t, peer), 0);
    }
    for (int i = 1; i < 300; i += 2) {
        snprintf(peer, sizeof(peer), "ipv4:10.0.%d.%d:%d", i / 7, i % 7, 1000 + i);
        unsigned held = fe_peercalls_held(t, peer);
        assert_true(held == 0 || held == (unsigned)(i % 3 + 1));
    }
    /* Room again: a new connection is counted. */
    assert_int_equal(fe_peercalls_add(t, "ipv4:192.0.2.1:1", 1.0, &counted), 0);
    assert_int_equal(counted, 1);
    char longpeer[128];
    memset(longpeer, 'a', sizeof(longpeer) - 1);
    longpeer[sizeof(longpeer) - 1] = '\0';
    assert_int_equal(fe_peercalls_add(t, longpeer, 1.0, &counted), 0);
    assert_int_equal(counted, 0);
    fe_peercalls_free(t);
}

static void test_peer_sockaddr(void **state)
{
    (void)state;
    struct sockaddr_storage ss;
    socklen_t len;
    hsmca_err e;
    assert_int_equal(fe_peer_sockaddr("ipv4:127.0.0.1:54321", &ss, &len, &e), HSMCA_OK);
    const struct sockaddr_in *a = (const void *)&ss;
    assert_int_equal(a->sin_family, AF_INET);
    assert_int_equal(ntohs(a->sin_port), 54321);
    assert_int_equal(ntohl(a->sin_addr.s_addr), 0x7f000001);
    assert_int_equal(len, sizeof(*a));

    assert_int_equal(fe_peer_sockaddr("ipv6:[2001:db8::1%eth0]:443", &ss, &len, &e), HSMCA_OK);
    const struct sockaddr_in6 *b = (const void *)&ss;
    assert_int_equal(b->sin6_family, AF_INET6);
    assert_int_equal(ntohs(b->sin6_port), 443);
    assert_int_equal(b->sin6_addr.s6_addr[0], 0x20);
    assert_int_equal(b->sin6_addr.s6_addr[15], 1);

    static const char *const bad[] = {
        "unix:/tmp/sock",  "ipv4:127.0.0.1",
        "ipv4::80",        "ipv4:127.0.0.1:x",
        "ipv4:127.0.0.1:", "ipv4:127.0.0.1:65536",
        "ipv4:1.2.3:80",   "ipv6:[::1:80",
        "ipv6:[zz::1]:80", "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(fe_peer_sockaddr(bad[i], &ss, &len, &e), HSMCA_EINVAL);
        assert_non_null(strstr(e.msg, "peer address"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_bound),
        cmocka_unit_test(test_cancel_bound),
        cmocka_unit_test(test_many_peers),
        cmocka_unit_test(test_peer_sockaddr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
