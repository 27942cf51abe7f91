/* signer_main.c - the signer process: start-up checks, then the IPC loop.
 *
 * The main thread reads frames from the front end and dispatches them through
 * an allow-table; a checker thread validates and logs each request, worker
 * threads (one per PKCS#11 session) sign and reply (signer_work.h). A
 * protocol violation ends the front end's connection and asks the supervisor
 * to restart the front end; it never stops the signer. */
#include "signer.h"
#include "signer_check.h"
#include "signer_core.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit_lock.h"
#include "child_args.h"
#include "config.h"
#include "ipc_frame.h"
#include "log.h"
#include "signer.pb-c.h"
#include "signer_admin.h"
#include "signer_audit.h"
#include "signer_ica.h"
#include "signer_policy.h"
#include "signer_probe.h"
#include "signer_sandbox.h"
#include "signer_stats.h"
#include "signer_work.h"

static volatile sig_atomic_t signer_stop;

static void on_term(int sig)
{
    signer_stop = 1;
}

static void usage(FILE *f)
{
    fputs("usage: hsmca-signer --config FILE --ipc-fd N --ctl-fd M\n"
          "       hsmca-signer --check --config FILE   (what `hsmca token check` runs)\n"
          "\n"
          "The privileged signer process. Started by `hsmca serve` / `hsmca dev`,\n"
          "not by hand: it holds the PKCS#11 session and the PIN, checks every TBS\n"
          "certificate the front end sends on fd N against its profile, and signs\n"
          "only those that pass. fd M is its control channel to the supervisor.\n",
          f);
}

/* Unknown type or malformed payload: end this connection and ask the supervisor
 * for a fresh front end (OpenBSD style: a peer that breaks the protocol is not
 * argued with). */
static void drop_peer(signer_ctx *s, const char *why)
{
    LOG_EVENT(LOG_LVL_WARN, "front end protocol violation: closing its connection",
              LOG_STR("reason", why));
    signer_conn_close(s);
    signer_ask_new_frontend(s);
}

/* The wire check and the queue's room come before protobuf-c allocates anything. */
static void handle_sign_req(signer_ctx *s, uint64_t id, const uint8_t *p, size_t n)
{
    signer_request_shape shape;
    hsmca_err e;
    if (signer_request_check(p, n, &shape, &e) != HSMCA_OK) {
        drop_peer(s, e.msg);
        return;
    }
    if (signer_queue_reserve(s, &shape, id) != HSMCA_OK)
        return; /* answered RESOURCE_EXHAUSTED */
    /* The wire check admitted the payload, so protobuf-c can fail only for memory: that
     * request is refused (hsmca_err.h), not the front end. */
    Hsmca__Ipc__SignRequest *req = hsmca__ipc__sign_request__unpack(NULL, n, p);
    signer_submit(s, id, req, &shape); /* takes ownership of req; NULL is refused */
}

/* A refusal the front end made, for the signing log. Checked on the wire like a
 * SignRequest (a malformed one is a protocol violation); no reply; the entry is
 * appended under a flood limit and not waited for, so a flood of these neither
 * becomes a flood of lines nor holds this thread. */
static void handle_frontend_deny(signer_ctx *s, uint64_t id, const uint8_t *p, size_t n)
{
    hsmca_err e;
    if (signer_deny_check(p, n, &e) != HSMCA_OK) {
        drop_peer(s, e.msg);
        return;
    }
    Hsmca__Ipc__FrontendDeny *d = hsmca__ipc__frontend_deny__unpack(NULL, n, p);
    if (!d) { /* admitted by the wire check: out of memory, so this entry is lost */
        LOG_EVENT(LOG_LVL_ERROR,
                  "FrontendDeny not unpacked (out of memory): its entry is not written",
                  LOG_UINT("request_id", id));
        return;
    }
    signer_audit_frontend_deny(s, id, d);
    hsmca__ipc__frontend_deny__free_unpacked(d, NULL);
}

/* The signer's figures (signer_stats.h): an empty payload only; answered from counters
 * on this thread, without waiting for the token, the log or the front end. */
static void handle_status_req(signer_ctx *s, uint64_t id, const uint8_t *p, size_t n)
{
    (void)p;
    hsmca_err e;
    if (signer_status_check(n, &e) != HSMCA_OK) {
        drop_peer(s, e.msg);
        return;
    }
    signer_stats_answer(s, id);
}

/* The allow-table: every message type the front end may send, and its handler. */
static const struct {
    uint8_t type;
    void (*handler)(signer_ctx *, uint64_t, const uint8_t *, size_t);
} signer_dispatch[] = {
    {IPC_SIGN_REQ, handle_sign_req},
    {IPC_FRONTEND_DENY, handle_frontend_deny},
    {IPC_STATUS_REQ, handle_status_req},
};

/* Frames read per wake-up of the main loop at most: a burst is drained without a poll
 * per frame, and the control channel and the watchdog wait for one batch only. */
#define SIGNER_READS_PER_WAKE 64

/* One frame from the front end, waiting for it (first) or not; 0 when none was waiting
 * or the connection ended. */
static int signer_dispatch_frontend(signer_ctx *s, int fd, int first)
{
    static uint8_t buf[IPC_MAX_FRAME];
    ipc_msg m;
    hsmca_err e;
    hsmca_code rc = first ? ipc_recv(fd, buf, &m, &e) : ipc_try_recv(fd, buf, &m, &e);
    if (rc == HSMCA_OK && m.empty)
        return 0;
    if (rc != HSMCA_OK) {
        if (m.eof) {
            log_event(LOG_LVL_INFO, "front end closed its connection", NULL, 0);
            signer_conn_close(s);
        } else if (e.code == HSMCA_EIO) {
            LOG_EVENT(LOG_LVL_WARN, "front end connection error", LOG_STR("error", e.msg));
            signer_conn_close(s);
        } else {
            drop_peer(s, e.msg);
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(signer_dispatch) / sizeof(signer_dispatch[0]); i++) {
        if (signer_dispatch[i].type == m.type) {
            signer_dispatch[i].handler(s, m.id, m.payload, m.len);
            /* A handler that dropped the peer closed fd: read no more from it. */
            return signer_conn_fd(s) == fd;
        }
    }
    char why[64];
    snprintf(why, sizeof(why), "unknown message type %u", m.type);
    drop_peer(s, why);
    return 0;
}

/* One message from the supervisor: a new front end connection (CTL_NEW_PEER) or the
 * issuer keys for identity binding (CTL_KEYS). Returns 1 when the supervisor is gone. */
static int signer_control(signer_ctx *s, int ctl_fd)
{
    char type;
    int fd, eof;
    hsmca_err e;
    if (ipc_recv_ctl(ctl_fd, &type, &fd, &eof, &e) != HSMCA_OK) {
        if (eof) {
            log_event(LOG_LVL_INFO, "supervisor went away; stopping", NULL, 0);
            return 1;
        }
        LOG_EVENT(LOG_LVL_WARN, "control channel error", LOG_STR("error", e.msg));
        return 0;
    }
    if (type == CTL_NEW_PEER && fd >= 0) {
        log_event(LOG_LVL_INFO, "new front end connection", NULL, 0);
        signer_conn_set(s, fd);
        return 0;
    }
    if (type == CTL_POLICY && fd >= 0) {
        signer_policy_on_push(s, fd);
    } else if (type == CTL_RELOAD_FAILED && fd >= 0) {
        signer_policy_on_failed(fd);
    } else if (ctl_keys_cluster(type) >= 0 && fd >= 0) {
        if (signer_keys_load_fd(s, ctl_keys_cluster(type), fd, &e) != HSMCA_OK)
            LOG_EVENT(LOG_LVL_WARN, "issuer keys not taken (the previous ones stay)",
                      LOG_STR("error", e.msg));
    } else {
        char hex[8];
        snprintf(hex, sizeof(hex), "0x%02x", (unsigned char)type);
        LOG_EVENT(LOG_LVL_WARN, "control channel: unexpected message", LOG_STR("type", hex));
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

static int signer_loop(signer_ctx *s, int ctl_fd, signer_admin *adm)
{
    while (!signer_stop) {
        int fd = signer_conn_fd(s);
        struct pollfd pfd[2 + SIGNER_ADMIN_POLLFDS] = {{ctl_fd, POLLIN, 0}, {fd, POLLIN, 0}};
        int na = signer_admin_pollfds(adm, pfd + 2);
        int r = poll(pfd, (nfds_t)(2 + na), 200); /* a negative fd (no front end) is skipped */
        if (signer_tick(s))
            return EXIT_RESTART;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            fatal("poll: %s", strerror(errno));
        signer_admin_serve(adm, s, pfd + 2, na);
        if (pfd[0].revents) {
            if (signer_control(s, ctl_fd) != 0)
                return 0;
            continue;
        }
        if (fd >= 0 && pfd[1].revents)
            for (int i = 0; i < SIGNER_READS_PER_WAKE && !signer_stop &&
                            signer_dispatch_frontend(s, fd, i == 0);
                 i++) {
            }
    }
    log_event(LOG_LVL_INFO, "stopping on signal", NULL, 0);
    return 0;
}

/* How long a new signer waits for the one before it to let go of audit.dir. */
#define SIGNER_LOCK_WAIT_S 5.0

/* One signer per audit.dir (audit_lock.h), from before the token is opened and the log
 * read until exit: a new one waits, bounded, for the old one to stop, then refuses
 * (EXIT_CONFIG). Not released before exit: a thread left in a hung call at stop may
 * still read the log. */
static void take_audit_lock(const hsmca_config *cfg, const signer_sandbox *sb)
{
    int fd;
    hsmca_err e;
    if (!cfg->audit_dir[0])
        return;
    hsmca_code rc = audit_lock_take(cfg->audit_dir, sb->user.active ? sb->user.uid : (uid_t)-1,
                                    sb->user.active ? sb->user.gid : (gid_t)-1,
                                    SIGNER_LOCK_WAIT_S, &signer_stop, &fd, &e);
    if (rc != HSMCA_OK && signer_stop) {
        log_event(LOG_LVL_INFO, "stopped while waiting for the audit log's lock", NULL, 0);
        _exit(0);
    }
    if (rc == HSMCA_EIO)
        fatal("cannot serve yet (audit log), will retry: %s", e.msg);
    if (rc != HSMCA_OK)
        fatal_config("refusing to serve: %s", e.msg);
}

int signer_main(int argc, char **argv)
{
    /* The check mode is the start-up below without serving (signer_check.h). */
    if (argc > 1 && !strcmp(argv[1], "--check"))
        return signer_check_main(argc, argv);
    child_args args;
    log_init("signer");
    int parsed = child_args_parse(argc, argv, usage, &args);
    if (parsed >= 0)
        return parsed;
    const char *config_path = args.config;
    int ipc_fd = args.ipc_fd, ctl_fd = args.ctl_fd;
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    hsmca_config cfg;
    hsmca_err e;
    if (config_load(config_path, &cfg, &e) != HSMCA_OK || config_validate(&cfg, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    /* Not dumpable and signer.user resolved before the PIN is read; confined
     * once the token is open, before the first front-end message. */
    signer_sandbox sb;
    if (signer_sandbox_prepare(&cfg, &sb, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    take_audit_lock(&cfg, &sb); /* held until exit */
    signer_ctx *s = signer_start(&cfg, &e);
    if (!s && e.code == HSMCA_EUNAVAIL)
        fatal("cannot serve yet (token or audit log), will retry: %s", e.msg);
    if (!s)
        fatal_config("refusing to serve: %s", e.msg);
    signer_stats_start(s); /* reads ca.root_bundle: before the sandbox */
    /* The admin socket is bound, and what fetch hands out read, before the switch of user. */
    signer_admin *adm = NULL;
    if (signer_admin_open(&cfg, &sb, &adm, &e) != HSMCA_OK ||
        (adm && signer_ica_load(signer_ca(s), &e) != HSMCA_OK))
        fatal_config("refusing to serve: %s", e.msg);
    if (adm)
        signer_sandbox_allow_admin(signer_admin_listen_fd(adm));
    if (signer_sandbox_enter(&sb, &e) != HSMCA_OK)
        fatal_config("%s", e.msg);
    /* The first signature under the filter: a module that needs what the sandbox
     * refuses stops the start here, naming the setting, not at the first request. */
    if (signer_self_test(s, &e) != HSMCA_OK)
        signer_sandbox_refuse(&sb, e.msg);
    if (signer_publish_start(s, &e) != HSMCA_OK)
        fatal("%s", e.msg);
    signer_probe_start(s); /* after the self-test: the probe never races the start */
    signer_set_ctl_fd(s, ctl_fd);
    signer_conn_set(s, ipc_fd);
    int rc = signer_loop(s, ctl_fd, adm);
    signer_admin_close(adm);
    signer_stop_all(s);
    return rc;
}
