/* mx_main.c - the metrics process: bind metrics.listen, confine itself like the front end
 * (its user, the empty chroot, no_new_privs, a seccomp filter), then serve HTTP.
 *
 * Order: the listening socket is bound before the user switch and the filter (which
 * forbids socket(2) and bind(2)); the filter is installed before the HTTP thread starts,
 * which inherits it, so no request is ever parsed unconfined. */
#include "metrics.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "child_args.h"
#include "config.h"
#include "log.h"
#include "mx_http.h"
#include "mx_link.h"
#include "sandbox.h"
#include "util.h"

#define MX_BIND_RETRY_S 5

static void usage(FILE *f)
{
    fputs("usage: hsmca-metrics --config FILE --ipc-fd N --ctl-fd M\n"
          "\n"
          "The metrics and health listener. Started by `hsmca serve` / `hsmca dev` when\n"
          "metrics.listen is set, not by hand: it serves /metrics, /healthz and /readyz\n"
          "over HTTP and asks the front end (fd N) for each answer. It holds no secret.\n",
          f);
}

/* A listening TCP socket on host:port; -1 after logging why. */
static int listen_on(const char *addr)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (!colon || hl >= sizeof(host))
        return -1;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') { /* [::1]:15014 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
    if (gai != 0) {
        errno = EADDRNOTAVAIL; /* the name did not resolve: said as "cannot assign" */
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
                        bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0)) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        errno = err;
    return fd;
}

/* metrics.listen bound, waiting while it cannot be (a port another process holds may be
 * free later): the CA goes on issuing meanwhile, and one line a minute says why there are
 * no metrics. -1 when a signal in set asks us to stop first. */
static int listen_wait(const char *addr, const sigset_t *set)
{
    double next_log = 0;
    for (;;) {
        int fd = listen_on(addr);
        if (fd >= 0)
            return fd;
        if (util_mono_now() >= next_log) {
            LOG_EVENT(LOG_LVL_ERROR,
                      "cannot serve metrics (metrics.listen; \"\" turns the listener off); "
                      "trying again",
                      LOG_STR("listen", addr), LOG_STR("error", strerror(errno)),
                      LOG_INT("retry_s", MX_BIND_RETRY_S));
            next_log = util_mono_now() + 60;
        }
        struct timespec ts = {MX_BIND_RETRY_S, 0};
        if (sigtimedwait(set, NULL, &ts) > 0)
            return -1;
    }
}

/* libmicrohttpd's one thread: accepting, reading and answering on the socket bound before
 * the filter, its poll loop and the pipe that wakes it. */
static const int http_calls[] = {
    SCMP_SYS(accept),      SCMP_SYS(accept4),     SCMP_SYS(setsockopt), SCMP_SYS(getsockopt),
    SCMP_SYS(getsockname), SCMP_SYS(getpeername), SCMP_SYS(shutdown),   SCMP_SYS(recvfrom),
    SCMP_SYS(sendto),      SCMP_SYS(pipe2),       SCMP_SYS(eventfd2),   SCMP_SYS(select),
    SCMP_SYS(pselect6),    SCMP_SYS(ioctl),
};
static const sandbox_group http_group = {"http", SANDBOX_CALLS(http_calls), NULL};

/* Confines the process: metrics.user (else frontend.user) and frontend.chroot as root,
 * then no_new_privs and the filter. */
static HSMCA_MUSTCHECK hsmca_code confine(const hsmca_config *cfg, hsmca_err *e)
{
    sandbox_user u;
    const char *key = cfg->metrics_user[0] ? "metrics.user" : "frontend.user";
    HSMCA_GUARD(
        sandbox_user_lookup(key, cfg->metrics_user[0] ? cfg->metrics_user : cfg->fe_user, &u, e));
    HSMCA_GUARD(sandbox_drop_user(&u, u.active ? cfg->fe_chroot : NULL, e));
    static const sandbox_group *const own[] = {&http_group};
    return sandbox_seccomp_install(own, 1, e);
}

int metrics_main(int argc, char **argv)
{
    child_args args;
    log_init("metrics");
    int rc = child_args_parse(argc, argv, usage, &args);
    if (rc >= 0)
        return rc;
    static hsmca_config cfg;
    hsmca_err e;
    if (config_load(args.config, &cfg, &e) != HSMCA_OK || config_validate(&cfg, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int lfd = listen_wait(cfg.metrics_listen, &set);
    if (lfd < 0)
        return 0; /* stopped while waiting */
    mx_link_set(args.ipc_fd);
    if (confine(&cfg, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    if (mx_link_watch_ctl(args.ctl_fd, &e) != HSMCA_OK)
        fatal("%s", e.msg);
    struct MHD_Daemon *d = mx_http_start(lfd);
    if (!d)
        fatal("cannot start the HTTP server on %s (libmicrohttpd)", cfg.metrics_listen);
    LOG_EVENT(LOG_LVL_INFO, "serving /metrics, /healthz and /readyz over http",
              LOG_STR("listen", cfg.metrics_listen));
    int sig = 0;
    sigwait(&set, &sig);
    LOG_EVENT(LOG_LVL_INFO, "stopping on signal", LOG_INT("signal", sig));
    mx_http_stop(d);
    return 0;
}
