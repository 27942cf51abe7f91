/* signer_sandbox.c - see signer_sandbox.h.
 *
 * The allowlist is what the signer does once it serves, found with strace -f
 * on a signing load (EC and RSA CA keys, SoftHSM 2.6.1) and on start-up (what a
 * token recovery repeats: C_Finalize, C_Initialize, C_Login). Everything it
 * does before the filter (config, PIN file, dlopen of the module, the first
 * C_Initialize, pwd lookups) needs nothing here. The issuer keys for identity
 * binding arrive on the control channel as a sealed memfd (signer_bind.h): recvmsg,
 * fstat, fcntl(F_GET_SEALS), pread64 and close, all in the shared groups already
 * (common/sandbox.c); nothing is added here for them. */
#include "signer_sandbox.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

/* The PKCS#11 module's own files. SoftHSM's file object store, per C_Sign:
 * openat(O_RDONLY) of the token's `generation` file and of the key object,
 * fcntl(F_GETFL) (fdopen), fcntl(F_SETLKW/F_SETLK) read locks, newfstatat, read,
 * close. When C_Initialize and C_Login run again (token recovery): getdents64
 * over the token directory, openat(O_RDWR|O_CREAT) of token.object, generation
 * and token.lock (which exist: nothing new is created), lseek, write,
 * ftruncate. Vendor modules read their configuration files the same way, and
 * some use flock or fsync their state. (read, write, pread64, close, fstat,
 * newfstatat, lseek and fcntl are in the shared "fd-io" group.)
 * open and openat are allowed whatever their flags, so creating a file (O_CREAT)
 * is not refused: the publisher needs it, and seccomp cannot see paths.
 * Not allowed: unlink, rmdir, chmod, chown, link, symlink, mknod: signing never
 * destroys token objects (key generation and token set-up are operator tools,
 * run unconfined), so a compromised signer cannot delete token files. (rename
 * and mkdir are allowed for the audit publisher, below: a rename over a token
 * file is not stopped by this filter either.)
 * The audit log (audit/audit_log.c, audit.dir) needs the same calls after the
 * sandbox is in: write per entry, fdatasync for its group commit, and to resume
 * after a write error openat(dirfd, "log", O_WRONLY|O_APPEND) (never O_CREAT:
 * the directory and file are created at start, before the sandbox), ftruncate
 * of a partial line and fdatasync. Keep them here when trimming this list.
 * The checkpoint publisher (audit/audit_publish.c, its own thread) writes in audit.dir:
 * openat(O_CREAT) of temp files, write, fsync of files and directories, and the calls in
 * audit_publish_calls below. */
static const int pkcs11_file_calls[] = {
    SCMP_SYS(open),   SCMP_SYS(openat),    SCMP_SYS(stat),      SCMP_SYS(lstat),
    SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(pwrite64),  SCMP_SYS(ftruncate),
    SCMP_SYS(flock),  SCMP_SYS(fsync),     SCMP_SYS(fdatasync), SCMP_SYS(getdents64),
};

/* The publisher's tiles and checkpoints (audit/audit_pubfs.c): every file is written as
 * NAME.tmp and renamed (renameat; renameat2 with RENAME_NOREPLACE for checkpoints/<size>,
 * which never replaces an older one), and tile directories are made as the log grows
 * (mkdirat). Paths are relative to the audit directory's descriptor. Still not allowed:
 * unlink, rmdir, link, chmod, chown. */
static const int audit_publish_calls[] = {SCMP_SYS(mkdirat), SCMP_SYS(renameat),
                                          SCMP_SYS(renameat2)};

/* The pool keeps the PIN on an mlock'ed page (re-login after a token fault
 * needs it); closing the pool wipes and munlocks it. */
static const int pin_page_calls[] = {SCMP_SYS(mlock), SCMP_SYS(munlock)};

/* signer.sandbox.network: unix or inet. A PKCS#11 client library reaches its daemon or
 * appliance over a socket and runs its own event loop. Never accept or listen: the
 * signer serves no one over a socket. What the two daemon clients the tests run
 * (integration.test_tpm, test_p11kit) do once the filter is in, signing and
 * re-initializing after their daemon restarted (strace -f of the signer):
 * - tpm2-pkcs11 through tpm2-abrmd (libtss2-tcti-tabrmd, GLib's GDBus): the D-Bus
 *   messages are sendmsg/recvmsg/poll (the shared "ipc" group) on GLib's bus
 *   connection, made before the filter and kept across C_Finalize; each C_Initialize
 *   gets a new connection to tpm2-abrmd as a descriptor passed over D-Bus, and talks
 *   TPM commands on it with sendto and recvfrom; GLib reads its credentials and
 *   addresses (getsockopt, getsockname, getpeername) and wakes its
 *   threads with eventfd2. Without sendto its first C_Sign under the filter fails.
 * - p11-kit-client.so: socket(AF_UNIX) and connect to the server at every
 *   C_Initialize (only there: until the server restarts it needs nothing but read and
 *   write), then read and write.
 * The rest is what other daemons' clients use for the same job (an HSM's local
 * daemon such as nCipher's hardserver): socket options, select/epoll event loops,
 * self-pipes. */
static const int network_calls[] = {
    SCMP_SYS(connect),     SCMP_SYS(getsockname),   SCMP_SYS(getpeername), SCMP_SYS(getsockopt),
    SCMP_SYS(setsockopt),  SCMP_SYS(sendto),        SCMP_SYS(recvfrom),    SCMP_SYS(select),
    SCMP_SYS(pselect6),    SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl),   SCMP_SYS(epoll_wait),
    SCMP_SYS(epoll_pwait), SCMP_SYS(pipe2),         SCMP_SYS(eventfd2),
};
/* inet only: a network HSM's client resolves its appliance's name (glibc's getaddrinfo:
 * /etc files, a netlink socket for AI_ADDRCONFIG, UDP to the resolver with
 * sendmmsg/recvmmsg, uname) and may bind a UDP client's source address. bind is never
 * allowed with unix: on a unix socket it would create a file, and a client that only
 * connects never names one. */
static const int inet_calls[] = {SCMP_SYS(bind), SCMP_SYS(sendmmsg), SCMP_SYS(recvmmsg),
                                 SCMP_SYS(uname)};

/* signer.sandbox.sysv_ipc: modules that share state between their processes in SysV
 * shared memory and semaphores (opencryptoki's pkcsslotd). */
static const int sysv_ipc_calls[] = {
    SCMP_SYS(shmget), SCMP_SYS(shmat), SCMP_SYS(shmdt),      SCMP_SYS(shmctl),
    SCMP_SYS(semget), SCMP_SYS(semop), SCMP_SYS(semtimedop), SCMP_SYS(semctl),
};

/* socket(2) for the given address families only, and ioctl(2) only for FIONREAD/FIONBIO
 * (not TIOCSTI on a terminal on stderr, and nothing else). (The second datum of
 * SCMP_CMP_EQ is unused; clang wants it spelled out.) */
static int add_socket_rules(scmp_filter_ctx ctx, const int *families, size_t n)
{
    static const unsigned long ioctls[] = {FIONREAD, FIONBIO};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i], 0));
    for (size_t i = 0; rc == 0 && i < sizeof(ioctls) / sizeof(ioctls[0]); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)ioctls[i], 0));
    return rc;
}

static int add_unix_rules(scmp_filter_ctx ctx)
{
    static const int families[] = {AF_UNIX};
    return add_socket_rules(ctx, families, sizeof(families) / sizeof(families[0]));
}

static int add_inet_rules(scmp_filter_ctx ctx)
{
    static const int families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
    return add_socket_rules(ctx, families, sizeof(families) / sizeof(families[0]));
}

static const sandbox_group pkcs11_files = {"pkcs11-files", SANDBOX_CALLS(pkcs11_file_calls), NULL};
static const sandbox_group pin_page = {"pin-page", SANDBOX_CALLS(pin_page_calls), NULL};
static const sandbox_group audit_publish = {"audit-publish", SANDBOX_CALLS(audit_publish_calls),
                                            NULL};
static const sandbox_group net_unix = {"network-unix", SANDBOX_CALLS(network_calls),
                                       add_unix_rules};
static const sandbox_group net_inet = {"network-inet", SANDBOX_CALLS(network_calls),
                                       add_inet_rules};
static const sandbox_group inet_only = {"inet-resolve-bind", SANDBOX_CALLS(inet_calls), NULL};
static const sandbox_group sysv_ipc = {"sysv-ipc", SANDBOX_CALLS(sysv_ipc_calls), NULL};

/* The admin socket (signer/signer_admin.h), bound and listening before the filter: accept4
 * on that one descriptor, and the peer's credentials (SO_PEERCRED, SO_PEERGROUPS) of what
 * it accepted; nothing else of the network. -1: no admin socket. */
static int admin_listen_fd = -1;

void signer_sandbox_allow_admin(int listen_fd)
{
    admin_listen_fd = listen_fd;
}

static int add_admin_rules(scmp_filter_ctx ctx)
{
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(accept4), 1,
                              SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)admin_listen_fd, 0));
    static const int opts[] = {SO_PEERCRED, SO_PEERGROUPS};
    for (size_t i = 0; rc == 0 && i < sizeof(opts) / sizeof(opts[0]); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(getsockopt), 2,
                              SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)SOL_SOCKET, 0),
                              SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)opts[i], 0));
    return rc;
}

static int add_admin_accept(scmp_filter_ctx ctx)
{
    return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(accept4), 1,
                            SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)admin_listen_fd, 0));
}

static const sandbox_group admin_socket = {"admin-socket", NULL, 0, add_admin_rules};
static const sandbox_group admin_accept = {"admin-socket", NULL, 0, add_admin_accept};

/* Not dumpable: ptrace and /proc/PID/{mem,maps,environ} need CAP_SYS_PTRACE
 * even for our own uid, and no core file is written. */
static HSMCA_MUSTCHECK hsmca_code no_dumps(hsmca_err *e)
{
    struct rlimit none = {0, 0};
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: PR_SET_DUMPABLE: %s", strerror(errno));
    if (setrlimit(RLIMIT_CORE, &none) != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: RLIMIT_CORE: %s", strerror(errno));
    return HSMCA_OK;
}

hsmca_code signer_sandbox_prepare(const hsmca_config *cfg, signer_sandbox *sb, hsmca_err *e)
{
    memset(sb, 0, sizeof(*sb));
    sb->network = config_signer_network(cfg);
    sb->sysv_ipc = cfg->signer_sysv_ipc;
    sb->old_key = !cfg->signer_sandbox_network[0] &&
                  (cfg->signer_allow_network || cfg->signer_allow_network_false);
    if (cfg->signer_allow_network || cfg->signer_allow_network_false)
        LOG_EVENT(LOG_LVL_WARN,
                  "signer.seccomp_allow_network is deprecated: write signer.sandbox.network "
                  "instead (none, unix or inet)",
                  LOG_STR("write", cfg->signer_allow_network ? "signer.sandbox.network: inet"
                                                             : "signer.sandbox.network: none"));
    hsmca_code rc = no_dumps(e);
    if (rc == HSMCA_OK)
        rc = sandbox_user_lookup("signer.user", cfg->signer_user, &sb->user, e);
    if (rc == HSMCA_OK) /* the module's groups (a TPM's tss, p11-kit's socket) */
        rc = sandbox_user_groups(&sb->user, "signer.groups", &cfg->signer_groups, e);
    if (rc != HSMCA_OK || !sb->user.active)
        return rc;
    /* config_validate compares the names; two names for one uid are caught here. */
    struct passwd *fe = getpwnam(cfg->fe_user);
    if (fe && fe->pw_uid == sb->user.uid)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "signer.user '%.64s' and frontend.user '%.64s' are the same uid %d: "
                          "the signer needs a user of its own",
                          cfg->signer_user, cfg->fe_user, (int)sb->user.uid);
    return HSMCA_OK;
}

hsmca_code signer_sandbox_enter(const signer_sandbox *sb, hsmca_err *e)
{
    /* No chroot: a PKCS#11 module reads its own configuration and token files
     * by path, at C_Initialize and later. */
    hsmca_code rc = sandbox_drop_user(&sb->user, NULL, e);
    /* A uid change resets the dumpable flag to fs.suid_dumpable, which an
     * administrator may have set to 1: clear it again. */
    if (rc == HSMCA_OK)
        rc = no_dumps(e);
    if (rc != HSMCA_OK)
        return rc;
    const sandbox_group *own[7] = {&pkcs11_files, &pin_page, &audit_publish};
    size_t n = 3;
    if (admin_listen_fd >= 0 && sb->network == CONFIG_NET_NONE)
        own[n++] = &admin_socket;
    else if (admin_listen_fd >= 0) /* the network groups allow getsockopt already */
        own[n++] = &admin_accept;
    if (sb->network == CONFIG_NET_UNIX)
        own[n++] = &net_unix;
    if (sb->network == CONFIG_NET_INET) {
        own[n++] = &net_inet;
        own[n++] = &inet_only;
    }
    if (sb->sysv_ipc)
        own[n++] = &sysv_ipc;
    if ((rc = sandbox_seccomp_install(own, n, e)) != HSMCA_OK)
        return rc;
    /* Tests and operators read this line: the key in force, by the name it was written. */
    static const char *const access[] = {"denied", "unix sockets only", "allowed"};
    char key[64];
    if (sb->old_key)
        snprintf(key, sizeof(key), "signer.seccomp_allow_network: %s",
                 sb->network == CONFIG_NET_INET ? "true" : "false");
    else
        snprintf(key, sizeof(key), "signer.sandbox.network: %s", config_net_name(sb->network));
    LOG_EVENT(LOG_LVL_INFO, "sandbox: signer network access",
              LOG_STR("network", access[sb->network]), LOG_STR("setting", key),
              LOG_STR("sysv_ipc", sb->sysv_ipc ? "allowed" : "denied"),
              LOG_STR("sysv_ipc_setting", sb->sysv_ipc ? "signer.sandbox.sysv_ipc: true"
                                                       : "signer.sandbox.sysv_ipc: false"));
    return HSMCA_OK;
}

/* What to change, for a module that failed under this sandbox. */
const char *signer_sandbox_hint(const signer_sandbox *sb)
{
    if (sb->network == CONFIG_NET_NONE)
        return "a module that talks to a daemon needs signer.sandbox.network: unix (a network "
               "HSM's client: inet), one that uses SysV shared memory signer.sandbox.sysv_ipc: "
               "true";
    if (sb->network == CONFIG_NET_UNIX)
        return sb->sysv_ipc ? "a network HSM's client needs signer.sandbox.network: inet"
                            : "a network HSM's client needs signer.sandbox.network: inet, a module "
                              "that uses SysV shared memory signer.sandbox.sysv_ipc: true";
    if (!sb->sysv_ipc)
        return "a module that uses SysV shared memory needs signer.sandbox.sysv_ipc: true; "
               "hsmca serve under strace -f shows the calls it is refused (EPERM)";
    return "hsmca serve under strace -f shows the calls the module is refused (EPERM)";
}

/* The check re-initializes the module (p11_pool_reinit_module) as signer.user: a
 * module whose files or daemon's socket that user may not open fails it too, and the
 * sandbox's settings would not cure that. */
void signer_sandbox_refuse(const signer_sandbox *sb, const char *why)
{
    fatal_config("the PKCS#11 module failed its check inside the sandbox "
                 "(signer.sandbox.network: %s, sysv_ipc: %s): %s; %s; the check "
                 "re-initializes the module as uid %d (signer.user), as after a token fault, "
                 "then signs with each key: that user must be able to open the module's "
                 "files and its daemon's socket",
                 config_net_name(sb->network), sb->sysv_ipc ? "true" : "false", why,
                 signer_sandbox_hint(sb), (int)getuid());
}
