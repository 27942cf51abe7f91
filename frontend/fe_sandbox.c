/* fe_sandbox.c - see fe_sandbox.h. The user switch, no_new_privs, the seccomp
 * install and the syscall groups every confined process needs are in
 * common/sandbox.c; this file holds only what the front end needs besides. */
#include "fe_sandbox.h"

#include "sandbox.h"

#include <sys/socket.h>

hsmca_code fe_sandbox_drop_privileges(const char *user, const char *chroot_dir, hsmca_err *e)
{
    sandbox_user u;
    hsmca_code rc = sandbox_user_lookup("frontend.user", user, &u, e);
    if (rc != HSMCA_OK)
        return rc;
    return sandbox_drop_user(&u, u.active ? chroot_dir : NULL, e);
}

/* gRPC's event engine on the listening socket bound before the filter:
 * accepting connections, socket options, TLS records. */
static const int grpc_net_calls[] = {
    SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(recvmmsg), SCMP_SYS(sendmmsg),
    SCMP_SYS(accept), SCMP_SYS(accept4), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
    SCMP_SYS(setsockopt), SCMP_SYS(getsockopt), SCMP_SYS(ioctl),
};

/* gRPC's pollers and wakeups: epoll, eventfd, pipes, timers. */
static const int grpc_event_calls[] = {
    SCMP_SYS(select), SCMP_SYS(pselect6), SCMP_SYS(epoll_create), SCMP_SYS(epoll_create1),
    SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_pwait2),
    SCMP_SYS(eventfd), SCMP_SYS(eventfd2), SCMP_SYS(pipe), SCMP_SYS(pipe2), SCMP_SYS(dup),
    SCMP_SYS(dup3), SCMP_SYS(timerfd_create), SCMP_SYS(timerfd_settime),
};

/* Abseil asks for scheduling parameters ("pthread_getschedparam failed"
 * otherwise), gRPC names its threads (prctl PR_SET_NAME), reads its resource
 * usage and the host name, and uses membarrier. */
static const int grpc_runtime_calls[] = {
    SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler), SCMP_SYS(prctl),
    SCMP_SYS(getrusage), SCMP_SYS(uname), SCMP_SYS(membarrier),
};

static const sandbox_group grpc_net = {"grpc-net", SANDBOX_CALLS(grpc_net_calls), NULL};
static const sandbox_group grpc_event = {"grpc-event", SANDBOX_CALLS(grpc_event_calls), NULL};
static const sandbox_group grpc_runtime = {"grpc-runtime", SANDBOX_CALLS(grpc_runtime_calls),
                                           NULL};

/* TokenReview (fe_tokenreview.c, fe_https.c): a new TCP socket over IPv4 or IPv6
 * and connect(2) to the API server, whose address was resolved before the
 * sandbox. No other socket family or type: no UDP (no resolver), no raw, no
 * AF_UNIX or netlink. connect's address cannot be checked by seccomp. */
static const int k8s_api_calls[] = {SCMP_SYS(connect)};

static int k8s_api_add(scmp_filter_ctx ctx)
{
    static const int families[] = {AF_INET, AF_INET6};
    for (size_t i = 0; i < 2; i++) {
        /* The type may carry SOCK_NONBLOCK / SOCK_CLOEXEC (fe_https.c sets them). */
        int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i], 0),
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM));
        if (rc < 0)
            return rc;
    }
    return 0;
}

static const sandbox_group k8s_api = {"k8s-api", SANDBOX_CALLS(k8s_api_calls), k8s_api_add};

hsmca_code fe_sandbox_seccomp(int outbound_tcp, hsmca_err *e)
{
    static const sandbox_group *const own[] = {&grpc_net, &grpc_event, &grpc_runtime, &k8s_api};
    size_t n = sizeof(own) / sizeof(own[0]);
    return sandbox_seccomp_install(own, outbound_tcp ? n : n - 1, e);
}
