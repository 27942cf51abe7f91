/* mx_conns.c - see mx_conns.h. The table's lock is held across shutdown(2): libmicrohttpd
 * tells us a connection closed before it closes the fd, so a slot's fd is never one the
 * kernel has given to someone else. shutdown(2) makes libmicrohttpd's next read or write
 * fail, and it closes the connection itself. */
#include "mx_conns.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* Room for connections shut down but not yet closed by libmicrohttpd. */
#define MX_CONNS_SLOTS (2 * MX_CONNS_MAX)
#define MX_REAP_MS 250

typedef struct {
    struct MHD_Connection *conn; /* NULL: a free slot */
    int fd, cut;                 /* cut: shut down, no longer counted */
    double start;                /* this request's start (monotonic seconds) */
    struct sockaddr_storage addr;
} slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot slots[MX_CONNS_SLOTS];
static atomic_int stopping;
static pthread_t reaper;
static int reaper_running;

static int same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                       &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr));
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return 1;
}

static void cut(slot *s)
{
    shutdown(s->fd, SHUT_RDWR);
    s->cut = 1;
}

/* The slot to cut for room: the oldest request of the address with most connections. */
static slot *victim(void)
{
    slot *best = NULL;
    int best_n = 0;
    for (int i = 0; i < MX_CONNS_SLOTS; i++) {
        slot *s = &slots[i];
        if (!s->conn || s->cut)
            continue;
        int n = 0;
        for (int j = 0; j < MX_CONNS_SLOTS; j++)
            n += slots[j].conn && !slots[j].cut && same_host(&slots[j].addr, &s->addr);
        if (n > best_n || (n == best_n && s->start < best->start)) {
            best = s;
            best_n = n;
        }
    }
    return best;
}

enum MHD_Result mx_conns_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    (void)cls;
    (void)addr;
    (void)addrlen;
    pthread_mutex_lock(&lock);
    int live = 0;
    for (int i = 0; i < MX_CONNS_SLOTS; i++)
        live += slots[i].conn && !slots[i].cut;
    if (live >= MX_CONNS_MAX) {
        slot *v = victim();
        if (v)
            cut(v);
    }
    pthread_mutex_unlock(&lock);
    return MHD_YES;
}

void mx_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    pthread_mutex_lock(&lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        for (int i = 0; i < MX_CONNS_SLOTS && fd; i++) {
            if (slots[i].conn)
                continue;
            slots[i] = (slot){conn, fd->connect_fd, 0, util_mono_now(), {0}};
            if (ad && ad->client_addr) {
                socklen_t l = ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                     : sizeof(struct sockaddr_in);
                memcpy(&slots[i].addr, ad->client_addr, l);
            }
            *socket_context = &slots[i];
            break;
        }
        /* No slot (more than libmicrohttpd's own limit): no deadline, only its timeout. */
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        ((slot *)*socket_context)->conn = NULL;
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&lock);
}

void mx_conns_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                        enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)con_cls;
    (void)toe;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MX_CONNS_SLOTS; i++)
        if (slots[i].conn == conn)
            slots[i].start = util_mono_now();
    pthread_mutex_unlock(&lock);
}

static void *reap(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        struct timespec ts = {0, MX_REAP_MS * 1000000L};
        nanosleep(&ts, NULL);
        double now = util_mono_now();
        pthread_mutex_lock(&lock);
        for (int i = 0; i < MX_CONNS_SLOTS; i++)
            if (slots[i].conn && !slots[i].cut && now - slots[i].start > MX_REQUEST_DEADLINE_S)
                cut(&slots[i]);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

int mx_conns_start(void)
{
    atomic_store(&stopping, 0);
    if (pthread_create(&reaper, NULL, reap, NULL) != 0)
        return -1;
    reaper_running = 1;
    return 0;
}

void mx_conns_stop(void)
{
    atomic_store(&stopping, 1);
    if (reaper_running)
        pthread_join(reaper, NULL);
    reaper_running = 0;
}
