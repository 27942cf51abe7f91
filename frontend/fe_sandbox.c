/* fe_sandbox.c - see fe_sandbox.h. The user switch, no_new_privs, the seccomp
 * install and the syscall groups every confined process needs are in
 * common/sandbox.c; this file holds only what the front end needs besides. */
#include "fe_sandbox.h"

#include "sandbox.h"

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

hsmca_code fe_sandbox_seccomp(hsmca_err *e)
{
    static const sandbox_group *const own[] = {&grpc_net, &grpc_event, &grpc_runtime};
    return sandbox_seccomp_install(own, sizeof(own) / sizeof(own[0]), e);
}
