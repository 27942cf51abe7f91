/* fe_peercalls.c - see fe_peercalls.h.
 *
 * An open-addressing table keyed by the peer string, sized for twice the
 * connections there can be; an entry lives while its connection holds calls and
 * is deleted by backward shift (no tombstones), so a long-lived front end never
 * fills it with closed connections. One mutex: a lookup is a hash and a probe or
 * two, once when a call starts and once when it ends. */
#include "fe_peercalls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PEER_MAX 72 /* "ipv6:[" 45 characters "%" scope "]:65535" fits */

typedef struct {
    char peer[PEER_MAX]; /* "" when free */
    unsigned held;       /* calls held now */
    unsigned cancels;    /* calls cancelled since `since` */
    double since;        /* start of the cancels' window, or when reported */
    int reported;        /* over a bound: closed, its calls are dropped */
} peer_slot;

struct fe_peercalls {
    pthread_mutex_t mu;
    peer_slot *slot;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t used, room;
    unsigned over, max_cancels;
    double window;
};

static uint64_t hash_peer(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

fe_peercalls *fe_peercalls_new(unsigned max_conns, unsigned over_calls, unsigned max_cancels,
                               double window_s, hsmca_err *e)
{
    size_t cap = 64;
    while (cap < 2 * (size_t)max_conns + 2)
        cap *= 2;
    fe_peercalls *t = calloc(1, sizeof(*t));
    if (t)
        t->slot = calloc(cap, sizeof(*t->slot));
    if (!t || !t->slot) {
        free(t);
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory for the per-connection call table");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    t->mask = cap - 1;
    t->room = cap - cap / 4; /* at most 3/4 full: probes stay short */
    t->over = over_calls;
    t->max_cancels = max_cancels;
    t->window = window_s;
    return t;
}

void fe_peercalls_free(fe_peercalls *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t->slot);
    free(t);
}

/* The slot holding peer, or the free slot where it goes. Under mu. */
static size_t find(const fe_peercalls *t, const char *peer)
{
    size_t i = (size_t)hash_peer(peer) & t->mask;
    while (t->slot[i].peer[0] && strcmp(t->slot[i].peer, peer) != 0)
        i = (i + 1) & t->mask;
    return i;
}

int fe_peercalls_add(fe_peercalls *t, const char *peer, double now, int *counted)
{
    *counted = 0;
    if (!peer || !peer[0] || strlen(peer) >= PEER_MAX)
        return 0;
    int report = 0;
    pthread_mutex_lock(&t->mu);
    size_t i = find(t, peer);
    peer_slot *s = &t->slot[i];
    if (!s->peer[0]) {
        if (t->used >= t->room) {
            pthread_mutex_unlock(&t->mu);
            return 0;
        }
        strcpy(s->peer, peer);
        s->held = s->cancels = 0;
        s->since = now;
        s->reported = 0;
        t->used++;
    }
    s->held++;
    *counted = 1;
    if (s->reported)
        report = 2;
    else if (s->held > t->over) {
        s->reported = 1;
        s->since = now;
        report = 1;
    }
    pthread_mutex_unlock(&t->mu);
    return report;
}

/* Deletes slot i and shifts back the entries of its probe run that would no
 * longer be found (Knuth's algorithm R). Under mu. */
static void delete_slot(fe_peercalls *t, size_t i)
{
    size_t j = i;
    for (;;) {
        t->slot[i].peer[0] = '\0';
        for (;;) {
            j = (j + 1) & t->mask;
            if (!t->slot[j].peer[0])
                return;
            size_t home = (size_t)hash_peer(t->slot[j].peer) & t->mask;
            /* j stays when its home lies cyclically in (i, j] */
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
                continue;
            break;
        }
        t->slot[i] = t->slot[j];
        i = j;
    }
}

/* An entry outlives its calls while its cancels' window runs (a client that resets
 * every stream may hold none between two), and a closed connection's for a second
 * after its last call (the calls gRPC had queued for it keep coming). */
static int stale(const fe_peercalls *t, const peer_slot *s, double now)
{
    if (s->held)
        return 0;
    double keep = s->reported ? 1.0 : s->cancels ? t->window : 0.0;
    return now - s->since >= keep || now < s->since;
}

void fe_peercalls_remove(fe_peercalls *t, const char *peer, double now)
{
    pthread_mutex_lock(&t->mu);
    size_t i = find(t, peer);
    if (t->slot[i].peer[0] && t->slot[i].held && --t->slot[i].held == 0 &&
        stale(t, &t->slot[i], now)) {
        delete_slot(t, i);
        t->used--;
    }
    pthread_mutex_unlock(&t->mu);
}

int fe_peercalls_cancelled(fe_peercalls *t, const char *peer, double now)
{
    int report = 0;
    pthread_mutex_lock(&t->mu);
    size_t i = find(t, peer);
    peer_slot *s = &t->slot[i];
    if (s->peer[0] && !s->reported) {
        if (now - s->since > t->window || now < s->since) {
            s->cancels = 0;
            s->since = now;
        }
        if (++s->cancels > t->max_cancels) {
            s->reported = 1;
            s->since = now;
            report = 1;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return report;
}

void fe_peercalls_sweep(fe_peercalls *t, double now)
{
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i <= t->mask;) {
        if (t->slot[i].peer[0] && stale(t, &t->slot[i], now)) {
            delete_slot(t, i); /* may shift a later entry into i: look again */
            t->used--;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&t->mu);
}

unsigned fe_peercalls_held(fe_peercalls *t, const char *peer)
{
    pthread_mutex_lock(&t->mu);
    size_t i = find(t, peer);
    unsigned n = t->slot[i].peer[0] ? t->slot[i].held : 0;
    pthread_mutex_unlock(&t->mu);
    return n;
}

hsmca_code fe_peer_sockaddr(const char *peer, struct sockaddr_storage *ss, socklen_t *len,
                            hsmca_err *e)
{
    char host[PEER_MAX];
    const char *port;
    memset(ss, 0, sizeof(*ss));
    HSMCA_ENSURE(peer && strlen(peer) < PEER_MAX, e, HSMCA_EINVAL,
                 "peer address: longer than %d characters", PEER_MAX - 1);
    int v6 = strncmp(peer, "ipv6:[", 6) == 0;
    if (v6) {
        const char *end = strstr(peer, "]:");
        HSMCA_ENSURE(end, e, HSMCA_EINVAL, "peer address %s: no ']:' after an IPv6 address", peer);
        size_t n = (size_t)(end - (peer + 6));
        memcpy(host, peer + 6, n);
        host[n] = '\0';
        char *scope = strchr(host, '%'); /* a link-local scope: not needed to match */
        if (scope)
            *scope = '\0';
        port = end + 2;
    } else {
        HSMCA_ENSURE(strncmp(peer, "ipv4:", 5) == 0, e, HSMCA_EINVAL,
                     "peer address %s: neither ipv4: nor ipv6:", peer);
        const char *colon = strrchr(peer, ':');
        HSMCA_ENSURE(colon > peer + 5, e, HSMCA_EINVAL, "peer address %s: no port", peer);
        size_t n = (size_t)(colon - (peer + 5));
        memcpy(host, peer + 5, n);
        host[n] = '\0';
        port = colon + 1;
    }
    char *stop;
    unsigned long p = strtoul(port, &stop, 10);
    HSMCA_ENSURE(*port >= '0' && *port <= '9' && !*stop && p <= 65535, e, HSMCA_EINVAL,
                 "peer address %s: port is not a number up to 65535", peer);
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)p);
        HSMCA_ENSURE(inet_pton(AF_INET6, host, &a->sin6_addr) == 1, e, HSMCA_EINVAL,
                     "peer address %s: not an IPv6 address", peer);
        *len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)p);
        HSMCA_ENSURE(inet_pton(AF_INET, host, &a->sin_addr) == 1, e, HSMCA_EINVAL,
                     "peer address %s: not an IPv4 address", peer);
        *len = sizeof(*a);
    }
    return HSMCA_OK;
}
