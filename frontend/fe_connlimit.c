/* fe_connlimit.c - see fe_connlimit.h.
 *
 * Counting without close events: each admitted socket is remembered by its
 * descriptor and inode (sockets have unique inodes while open).
 * - accept(2) returns a descriptor only when it is free, so an accepted fd that is
 *   remembered means that connection has closed: forget it first. The kernel hands
 *   out the lowest free descriptor, so a connection that closes is usually seen at
 *   the very next accept.
 * - When the count reaches the cap, a sweep fstat()s the remembered descriptors and
 *   forgets those closed or reused (another inode). A sweep costs one fstat per
 *   connection, so at the cap it runs at most every CONNLIMIT_SWEEP_S: a flood of
 *   connections costs at most 1/CONNLIMIT_SWEEP_S sweeps a second.
 *
 * The layout of gRPC's socket mutator is internal to gRPC core (socket_mutator.h,
 * not installed); it is mirrored here for 1.51 (Debian 12: checked against the
 * library's grpc_socket_mutator_mutate_fd, which reads mutate_fd_2 at offset 24 of
 * the vtable and passes {fd, usage}). test_conn_limits.py fails if it ever stops
 * matching: the cap would not hold. */
#include "fe_connlimit.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <grpc/support/sync.h>

#include "log.h"
#include "util.h"

#define CONNLIMIT_SWEEP_S 0.05
#define CONNLIMIT_LOG_S 10.0 /* at most one "refused" line per this, with the count */

/* gRPC core 1.51, src/core/lib/iomgr/socket_mutator.h. */
typedef enum {
    GRPC_FD_CLIENT_CONNECTION_USAGE,
    GRPC_FD_SERVER_LISTENER_USAGE,
    GRPC_FD_SERVER_CONNECTION_USAGE,
} fe_grpc_fd_usage;

typedef struct {
    int fd;
    fe_grpc_fd_usage usage;
} fe_grpc_mutate_socket_info;

typedef struct fe_grpc_socket_mutator fe_grpc_socket_mutator;

typedef struct {
    bool (*mutate_fd)(int fd, fe_grpc_socket_mutator *m);
    int (*compare)(fe_grpc_socket_mutator *a, fe_grpc_socket_mutator *b);
    void (*destroy)(fe_grpc_socket_mutator *m);
    bool (*mutate_fd_2)(const fe_grpc_mutate_socket_info *info, fe_grpc_socket_mutator *m);
} fe_grpc_socket_mutator_vtable;

struct fe_grpc_socket_mutator {
    const fe_grpc_socket_mutator_vtable *vtable;
    gpr_refcount refcount;
};

struct fe_connlimit {
    fe_grpc_socket_mutator base; /* first: gRPC passes &base */
    pthread_mutex_t mu;
    unsigned max, open;
    unsigned cap; /* entries of ino */
    unsigned top; /* 1 + the highest fd remembered */
    ino_t *ino;   /* by fd; 0: not an admitted connection */
    double last_sweep;
    uint64_t refused, refused_logged;
    double last_log;
};

static void sweep(fe_connlimit *l)
{
    unsigned top = 0;
    for (unsigned fd = 0; fd < l->top; fd++) {
        if (!l->ino[fd])
            continue;
        struct stat st;
        if (fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_ino != l->ino[fd]) {
            l->ino[fd] = 0;
            l->open--;
        } else {
            top = fd + 1;
        }
    }
    l->top = top;
}

int fe_connlimit_admit(fe_connlimit *l, int fd, double now)
{
    struct stat st;
    if (fd < 0 || (unsigned)fd >= l->cap || fstat(fd, &st) != 0)
        return 0; /* cannot be tracked: refusing keeps the count honest */
    pthread_mutex_lock(&l->mu);
    if (l->ino[fd]) { /* its earlier connection has closed */
        l->ino[fd] = 0;
        l->open--;
    }
    if (l->open >= l->max && (now - l->last_sweep >= CONNLIMIT_SWEEP_S || now < l->last_sweep)) {
        sweep(l);
        l->last_sweep = now;
    }
    int ok = l->open < l->max;
    uint64_t report = 0;
    if (ok) {
        l->ino[fd] = st.st_ino ? st.st_ino : 1;
        l->open++;
        if ((unsigned)fd >= l->top)
            l->top = (unsigned)fd + 1;
    } else {
        l->refused++;
        if (now - l->last_log >= CONNLIMIT_LOG_S || now < l->last_log) {
            report = l->refused - l->refused_logged;
            l->refused_logged = l->refused;
            l->last_log = now;
        }
    }
    unsigned open = l->open;
    pthread_mutex_unlock(&l->mu);
    if (report)
        LOG_EVENT(LOG_LVL_WARN,
                  "server.max_connections: new connections refused (closed at once) since the "
                  "last report",
                  LOG_UINT("open", open), LOG_UINT("refused", report));
    return ok;
}

static bool mutate_fd_2(const fe_grpc_mutate_socket_info *info, fe_grpc_socket_mutator *m)
{
    if (info->usage != GRPC_FD_SERVER_CONNECTION_USAGE)
        return true;
    /* Always true: false would stop gRPC's listener for good. A refused socket is
     * shut down instead; the handshake then ends at once and gRPC closes it. */
    if (!fe_connlimit_admit((fe_connlimit *)m, info->fd, util_mono_now()))
        shutdown(info->fd, SHUT_RDWR);
    return true;
}

static bool mutate_fd(int fd, fe_grpc_socket_mutator *m)
{
    (void)fd, (void)m;
    return true; /* 1.51 calls mutate_fd_2 when set; this one is for older cores */
}

static int compare(fe_grpc_socket_mutator *a, fe_grpc_socket_mutator *b)
{
    return (a > b) - (a < b);
}

static void destroy(fe_grpc_socket_mutator *m)
{
    (void)m; /* lives as long as the process */
}

static const fe_grpc_socket_mutator_vtable mutator_vtable = {mutate_fd, compare, destroy,
                                                             mutate_fd_2};

/* The channel argument's own vtable: gRPC copies and drops the pointer with it. */
static void *arg_copy(void *p)
{
    gpr_ref(&((fe_grpc_socket_mutator *)p)->refcount);
    return p;
}

static void arg_destroy(void *p)
{
    gpr_unref(&((fe_grpc_socket_mutator *)p)->refcount); /* never reaches 0: ours */
}

static int arg_cmp(void *a, void *b)
{
    return (a > b) - (a < b);
}

static const grpc_arg_pointer_vtable arg_vtable = {arg_copy, arg_destroy, arg_cmp};

fe_connlimit *fe_connlimit_new(unsigned max, unsigned fd_limit, hsmca_err *e)
{
    fe_connlimit *l = calloc(1, sizeof(*l));
    if (l)
        l->ino = calloc(fd_limit ? fd_limit : 1, sizeof(*l->ino));
    if (!l || !l->ino) {
        if (l)
            free(l);
        hsmca_fail(e, HSMCA_ENOMEM, "out of memory for server.max_connections' table");
        return NULL;
    }
    l->base.vtable = &mutator_vtable;
    gpr_ref_init(&l->base.refcount, 1);
    pthread_mutex_init(&l->mu, NULL);
    l->max = max;
    l->cap = fd_limit;
    l->last_sweep = l->last_log = -1e9;
    return l;
}

void fe_connlimit_free(fe_connlimit *l)
{
    if (!l)
        return;
    pthread_mutex_destroy(&l->mu);
    free(l->ino);
    free(l);
}

grpc_arg fe_connlimit_arg(fe_connlimit *l)
{
    grpc_arg a;
    memset(&a, 0, sizeof(a));
    a.type = GRPC_ARG_POINTER;
    a.key = (char *)GRPC_ARG_SOCKET_MUTATOR;
    a.value.pointer.p = &l->base;
    a.value.pointer.vtable = &arg_vtable;
    return a;
}

/* Same family, address and port (not flow label or scope, which gRPC's peer
 * string does not carry). */
static int same_peer(const struct sockaddr_storage *a, socklen_t alen, const struct sockaddr *b,
                     socklen_t blen)
{
    if (a->ss_family == AF_INET6 && b->sa_family == AF_INET &&
        alen >= sizeof(struct sockaddr_in6) && blen >= sizeof(struct sockaddr_in)) {
        /* a dual-stack listener: gRPC names a v4-mapped peer ipv4: */
        const struct sockaddr_in6 *x = (const void *)a;
        const struct sockaddr_in *y = (const void *)b;
        return IN6_IS_ADDR_V4MAPPED(&x->sin6_addr) && x->sin6_port == y->sin_port &&
               memcmp(&x->sin6_addr.s6_addr[12], &y->sin_addr, 4) == 0;
    }
    if (a->ss_family != b->sa_family)
        return 0;
    if (a->ss_family == AF_INET && alen >= sizeof(struct sockaddr_in) &&
        blen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->ss_family == AF_INET6 && alen >= sizeof(struct sockaddr_in6) &&
        blen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
    }
    return 0;
}

int fe_connlimit_close_peer(fe_connlimit *l, const struct sockaddr *sa, socklen_t len)
{
    int found = 0;
    pthread_mutex_lock(&l->mu);
    for (unsigned fd = 0; fd < l->top && !found; fd++) {
        if (!l->ino[fd])
            continue;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        struct stat st;
        if (getpeername((int)fd, (struct sockaddr *)&ss, &sl) != 0 || !same_peer(&ss, sl, sa, len))
            continue;
        if (fstat((int)fd, &st) != 0 || st.st_ino != l->ino[fd])
            continue; /* closed and reused: not the connection admitted here */
        shutdown((int)fd, SHUT_RDWR);
        found = 1;
    }
    pthread_mutex_unlock(&l->mu);
    return found;
}

unsigned fe_connlimit_open(fe_connlimit *l)
{
    pthread_mutex_lock(&l->mu);
    unsigned n = l->open;
    pthread_mutex_unlock(&l->mu);
    return n;
}

uint64_t fe_connlimit_refused(fe_connlimit *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t n = l->refused;
    pthread_mutex_unlock(&l->mu);
    return n;
}
