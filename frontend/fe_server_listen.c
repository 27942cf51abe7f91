/* fe_server_listen.c - fe_server_listen (fe_server.h): the gRPC server before it
 * serves. It fits server.max_connections to the descriptor limit, creates the
 * per-connection bounds (fe_connlimit, fe_peercalls) and the refusal logs, and
 * builds the channel arguments that bound what gRPC core holds per connection and
 * per message. */
#include "fe_server.h"
#include "fe_server_int.h"
#include "fe_metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <grpc/grpc_security.h>

/* Refusal lines on stderr a second at most, as the signer's (the audit log counts
 * every refusal, through FrontendDeny); beyond, a summary line counts them. */
#define FE_REFUSAL_LINES_PER_S 50
/* Room for request metadata: gRPC's 8 KiB default refused a bearer token of about
 * 8000 bytes itself, so the JWT check's own limit (IPC_TOKEN_MAX) never applied; with
 * 16 KiB a token up to that limit reaches it. */
#define FE_MAX_METADATA_BYTES 16384
_Static_assert(FE_MAX_METADATA_BYTES >= 2 * IPC_TOKEN_MAX, "a token at its cap and the rest fit");
/* Room for the channel arguments fe_server_listen passes. */
#define FE_ARGS_ROOM 10

/* Room for server.max_connections descriptors, plus the front end's own (signer,
 * supervisor, gRPC's eventfds and epoll) and the sockets refused and not yet closed:
 * the soft RLIMIT_NOFILE is raised as far as the hard one allows. Beyond the limit
 * accept(2) fails with EMFILE, and gRPC 1.51 then stops its listener for good
 * (tcp_server_posix.cc: on_read), so the cap must hold first: when the hard limit is
 * too low the cap is lowered, and said. Returns the cap in force; *fd_limit gets the
 * soft limit. */
#define FE_FD_RESERVE 256u

static unsigned fit_fd_limit(unsigned max_conn, unsigned *fd_limit)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        rl.rlim_cur = rl.rlim_max = 1024;
    }
    rlim_t want = (rlim_t)max_conn + FE_FD_RESERVE;
    if (rl.rlim_cur < want && rl.rlim_cur != RLIM_INFINITY) {
        rlim_t to = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        struct rlimit nl = {to, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &nl) == 0)
            rl.rlim_cur = to;
        else
            LOG_EVENT(LOG_LVL_WARN, "cannot raise the descriptor limit", LOG_UINT("to", to),
                      LOG_STR("error", strerror(errno)));
    }
    rlim_t cur = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 4000000u ? 4000000u : rl.rlim_cur;
    *fd_limit = (unsigned)cur;
    if (cur < want) {
        unsigned cap = cur > 2 * FE_FD_RESERVE ? (unsigned)cur - FE_FD_RESERVE : (unsigned)cur / 2;
        LOG_EVENT(LOG_LVL_WARN, "server.max_connections does not fit the descriptor limit",
                  LOG_UINT("max_connections", max_conn), LOG_UINT("fd_limit", cur),
                  LOG_UINT("fd_limit_hard", rl.rlim_max), LOG_UINT("connections", cap));
        return cap;
    }
    return max_conn;
}

static grpc_arg int_arg(const char *key, int value)
{
    grpc_arg a;
    memset(&a, 0, sizeof(a));
    a.type = GRPC_ARG_INTEGER;
    a.key = (char *)key;
    a.value.integer = value;
    return a;
}

/* The per-connection bounds (server.max_connections, fe_peercalls) and the refusal
 * logs into srv. 0 when one could not be made: said, and nothing is kept. */
static int new_bounds(fe_server *srv, unsigned max_conn, unsigned fd_limit)
{
    hsmca_err e;
    fe_connlimit *conns = fe_connlimit_new(max_conn, fd_limit, &e);
    srv->busy_log = log_limiter_new(1, 10.0);
    srv->refuse_log = log_limiter_new(FE_REFUSAL_LINES_PER_S, 1.0);
    srv->reset_log = log_limiter_new(4, 10.0);
    srv->peers = conns ? fe_peercalls_new(max_conn, FE_MAX_CALLS_PER_CONN, FE_MAX_CANCELS,
                                          FE_CANCEL_WINDOW_S, &e)
                       : NULL;
    if (!srv->peers || !srv->busy_log || !srv->refuse_log || !srv->reset_log) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot set up the connection limits",
                  LOG_STR("error", conns && srv->peers ? "out of memory" : e.msg));
        fe_connlimit_free(conns);
        fe_peercalls_free(srv->peers);
        fe_server_free_limiters(srv);
        return 0;
    }
    srv->conns = conns;
    fe_metrics_set_connlimit(conns);
    return 1;
}

/* The channel arguments of srv's server into args (room for FE_ARGS_ROOM); returns
 * how many. */
static size_t channel_args(const fe_server *srv, const hsmca_config *cfg, grpc_arg *args)
{
    size_t n = 0;
    /* gRPC refuses over-large messages itself (RESOURCE_EXHAUSTED); between the
     * configured cap and twice it, fe_check_request answers INVALID_ARGUMENT
     * with the limit in the message. */
    args[n++] = int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, (int)cfg->max_request_bytes * 2);
    /* istio-agent has one CreateCertificate in flight per connection; 100 is HTTP/2's
     * recommended floor (RFC 9113 §6.5.2) and bounds what one connection can queue. */
    args[n++] = int_arg(GRPC_ARG_MAX_CONCURRENT_STREAMS, FE_MAX_STREAMS);
    /* A connection that never finishes its TLS handshake, or keeps no call, is closed
     * (server.handshake_timeout, server.idle_timeout): each holds memory and a
     * descriptor, and a storm of them must not take the front end over. */
    args[n++] = int_arg(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, (int)cfg->handshake_timeout * 1000);
    args[n++] =
        int_arg(GRPC_ARG_MAX_CONNECTION_IDLE_MS, /* milliseconds in an int: clamped */
                (int)(cfg->idle_timeout > 2000000 ? 2000000000u : cfg->idle_timeout * 1000u));
    /* Per-connection memory (docs/PERFORMANCE.md): TLS records of at most 4 KiB out
     * (the frame protector's buffer is that size, not 16 KiB; a response is ~3 KiB). */
    args[n++] = int_arg(GRPC_ARG_TSI_MAX_FRAME_SIZE, 4096);
    args[n].type = GRPC_ARG_POINTER;
    args[n].key = (char *)GRPC_ARG_RESOURCE_QUOTA;
    args[n].value.pointer.p = srv->quota;
    args[n++].value.pointer.vtable = grpc_resource_quota_arg_vtable();
    args[n++] = fe_connlimit_arg(srv->conns); /* server.max_connections */
    /* Tokens up to IPC_TOKEN_MAX must get through: gRPC's default is 8 KiB. */
    args[n++] = int_arg(GRPC_ARG_MAX_METADATA_SIZE, FE_MAX_METADATA_BYTES);
    return n;
}

fe_listener *fe_server_listen(fe_app *app, grpc_server_credentials *creds)
{
    fe_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    fe_server *srv = &l->srv;
    srv->app = app;
    const hsmca_config *cfg = app->cfg;
    unsigned fd_limit = 0;
    unsigned max_conn = fit_fd_limit(cfg->max_connections, &fd_limit);
    if (!new_bounds(srv, max_conn, fd_limit)) {
        free(l);
        return NULL;
    }
    /* server.memory_limit_mib: what gRPC core allocates through its memory quota (its
     * own buffers and calls, not OpenSSL's). Under pressure gRPC drops new connections
     * and reclaims; it does not bound idle connections (docs/PERFORMANCE.md):
     * server.max_connections does. gRPC 1.51 buffers a message until its announced
     * length has arrived before it checks GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH: a 5-byte
     * prefix announcing 4 GiB followed by a stream of bytes grows the front end without
     * bound; under the quota the transport resets such a stream (docs/SECURITY.md
     * §4.12; test_hostile_clients: test_grpc_prefix_4gib_flood). */
    srv->quota = grpc_resource_quota_create("hsmca-frontend");
    grpc_resource_quota_resize(srv->quota, (size_t)cfg->memory_limit_mib << 20);

    grpc_arg args[FE_ARGS_ROOM];
    grpc_channel_args chargs = {channel_args(srv, cfg, args), args};
    LOG_EVENT(LOG_LVL_INFO, "limits", LOG_UINT("connections", max_conn),
              LOG_UINT("grpc_memory_mib", cfg->memory_limit_mib),
              LOG_UINT("queued_requests", cfg->max_queued_requests),
              LOG_UINT("fd_limit", fd_limit));

    srv->cq = grpc_completion_queue_create_for_next(NULL);
    srv->server = grpc_server_create(&chargs, NULL);
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    int port = grpc_server_add_http2_port(srv->server, cfg->listen, creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot listen", LOG_STR("listen", cfg->listen));
        grpc_server_destroy(srv->server);
        grpc_completion_queue_destroy(srv->cq);
        grpc_resource_quota_unref(srv->quota);
        fe_server_free_limiters(srv);
        fe_peercalls_free(srv->peers);
        free(l);
        return NULL;
    }
    return l;
}
