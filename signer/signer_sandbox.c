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
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

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
 * Not allowed: unlink, chmod, chown, link: signing never creates or destroys
 * token objects (key generation and token set-up are operator tools, run
 * unconfined), so a compromised signer cannot delete token files. (rename and
 * mkdir are allowed for the audit publisher only, below: seccomp cannot see
 * paths, so a rename over a token file is not stopped by this filter.)
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

/* signer.seccomp_allow_network: a network HSM's client library connects to its
 * appliance (TCP, or a unix socket to a local daemon such as nCipher's
 * hardserver), resolves its name (glibc's getaddrinfo: /etc files, a netlink
 * socket for AI_ADDRCONFIG, UDP to the resolver, uname), and may run its own
 * event loop. Never accept or listen: the signer serves no one over the
 * network. */
static const int network_calls[] = {
    SCMP_SYS(connect),       SCMP_SYS(bind),       SCMP_SYS(getsockname), SCMP_SYS(getpeername),
    SCMP_SYS(getsockopt),    SCMP_SYS(setsockopt), SCMP_SYS(sendto),      SCMP_SYS(recvfrom),
    SCMP_SYS(sendmmsg),      SCMP_SYS(recvmmsg),   SCMP_SYS(select),      SCMP_SYS(pselect6),
    SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl),  SCMP_SYS(epoll_wait),  SCMP_SYS(epoll_pwait),
    SCMP_SYS(pipe2),         SCMP_SYS(eventfd2),   SCMP_SYS(uname),
};

/* socket(2) for the address families a client needs, and ioctl(2) only for
 * FIONREAD/FIONBIO (not TIOCSTI on a terminal on stderr, and nothing else).
 * (The second datum of SCMP_CMP_EQ is unused; clang wants it spelled out.) */
static int add_network_rules(scmp_filter_ctx ctx)
{
    static const int families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
    static const unsigned long ioctls[] = {FIONREAD, FIONBIO};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(families) / sizeof(families[0]); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i], 0));
    for (size_t i = 0; rc == 0 && i < sizeof(ioctls) / sizeof(ioctls[0]); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)ioctls[i], 0));
    return rc;
}

static const sandbox_group pkcs11_files = {"pkcs11-files", SANDBOX_CALLS(pkcs11_file_calls), NULL};
static const sandbox_group pin_page = {"pin-page", SANDBOX_CALLS(pin_page_calls), NULL};
static const sandbox_group audit_publish = {"audit-publish", SANDBOX_CALLS(audit_publish_calls),
                                            NULL};
static const sandbox_group network = {"network", SANDBOX_CALLS(network_calls), add_network_rules};

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
    sb->allow_network = cfg->signer_allow_network;
    hsmca_code rc = no_dumps(e);
    if (rc == HSMCA_OK)
        rc = sandbox_user_lookup("signer.user", cfg->signer_user, &sb->user, e);
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
    const sandbox_group *own[] = {&pkcs11_files, &pin_page, &audit_publish, &network};
    size_t n = sb->allow_network ? 4 : 3;
    if ((rc = sandbox_seccomp_install(own, n, e)) != HSMCA_OK)
        return rc;
    log_info("sandbox: signer network access %s (signer.seccomp_allow_network: %s)",
             sb->allow_network ? "allowed" : "denied", sb->allow_network ? "true" : "false");
    return HSMCA_OK;
}
