/* fe_sandbox.c - see fe_sandbox.h. */
#include "fe_sandbox.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

hsmca_code fe_sandbox_drop_privileges(const char *user, const char *chroot_dir, hsmca_err *e)
{
    if (geteuid() != 0) {
        log_info("not started as root: running as uid %d without chroot", (int)geteuid());
        return HSMCA_OK;
    }
    struct passwd *pw = getpwnam(user);
    if (!pw || pw->pw_uid == 0)
        return hsmca_fail(e, HSMCA_EINVAL, "sandbox: user '%s' missing or is root", user);
    uid_t uid = pw->pw_uid;
    gid_t gid = pw->pw_gid;
    if (mkdir(chroot_dir, 0755) != 0 && errno != EEXIST)
        return hsmca_fail(e, HSMCA_EIO, "sandbox: mkdir %s: %s", chroot_dir, strerror(errno));
    if (chroot(chroot_dir) != 0 || chdir("/") != 0)
        return hsmca_fail(e, HSMCA_EIO, "sandbox: chroot %s: %s", chroot_dir, strerror(errno));
    if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
        return hsmca_fail(e, HSMCA_EIO, "sandbox: cannot switch to %s: %s", user, strerror(errno));
    /* Belt and braces: getting root back must now be impossible. */
    if (setuid(0) == 0 || seteuid(0) == 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: could regain root after dropping it");
    log_info("sandbox: chroot %s, running as %s (uid %d)", chroot_dir, user, (int)uid);
    return HSMCA_OK;
}

/* What the front end does after start-up: gRPC's event engine (epoll, eventfd,
 * accept, socket options), threads, memory, time, and the IPC socket. */
static const int allowed_syscalls[] = {
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
    SCMP_SYS(close), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(recvfrom), SCMP_SYS(sendto),
    SCMP_SYS(recvmmsg), SCMP_SYS(sendmmsg), SCMP_SYS(shutdown),
    SCMP_SYS(accept), SCMP_SYS(accept4), SCMP_SYS(getsockname), SCMP_SYS(getpeername),
    SCMP_SYS(setsockopt), SCMP_SYS(getsockopt), SCMP_SYS(fcntl), SCMP_SYS(ioctl),
    SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(select), SCMP_SYS(pselect6),
    SCMP_SYS(epoll_create), SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait),
    SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_pwait2), SCMP_SYS(eventfd), SCMP_SYS(eventfd2),
    SCMP_SYS(pipe), SCMP_SYS(pipe2), SCMP_SYS(dup), SCMP_SYS(dup3),
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list),
    SCMP_SYS(rseq), SCMP_SYS(set_tid_address), SCMP_SYS(gettid), SCMP_SYS(getpid),
    SCMP_SYS(getppid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid),
    SCMP_SYS(getegid), SCMP_SYS(tgkill), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
    SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler),
    SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(mremap), SCMP_SYS(madvise),
    SCMP_SYS(brk), SCMP_SYS(membarrier),
    SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn),
    SCMP_SYS(rt_sigtimedwait), SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall),
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(clock_nanosleep),
    SCMP_SYS(nanosleep), SCMP_SYS(gettimeofday), SCMP_SYS(time), SCMP_SYS(timerfd_create),
    SCMP_SYS(timerfd_settime), SCMP_SYS(getrandom), SCMP_SYS(fstat), SCMP_SYS(newfstatat),
    SCMP_SYS(lseek), SCMP_SYS(prctl), SCMP_SYS(getrusage), SCMP_SYS(uname),
    SCMP_SYS(exit), SCMP_SYS(exit_group),
};

/* Calls with no use in a confined front end other than escaping it. */
static const int fatal_syscalls[] = {
    SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv),
    SCMP_SYS(process_vm_writev), SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root),
    SCMP_SYS(chroot), SCMP_SYS(setuid), SCMP_SYS(setgid), SCMP_SYS(setresuid),
    SCMP_SYS(setresgid), SCMP_SYS(setgroups), SCMP_SYS(unshare), SCMP_SYS(setns),
    SCMP_SYS(bpf), SCMP_SYS(init_module), SCMP_SYS(finit_module), SCMP_SYS(kexec_load),
    SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(userfaultfd),
    SCMP_SYS(perf_event_open), SCMP_SYS(fork), SCMP_SYS(vfork),
};

hsmca_code fe_sandbox_seccomp(hsmca_err *e)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: seccomp_init failed");
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    for (size_t i = 0; rc == 0 && i < sizeof(allowed_syscalls) / sizeof(int); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed_syscalls[i], 0);
    for (size_t i = 0; rc == 0 && i < sizeof(fatal_syscalls) / sizeof(int); i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, fatal_syscalls[i], 0);
    /* glibc falls back to clone(2) when clone3 says ENOSYS; clone3's flags live in
     * memory seccomp cannot inspect, so it is refused outright. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* clone(2) only for threads: a new process could outlive the sandbox's checks. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: seccomp filter: %s", strerror(-rc));
    log_info("sandbox: no_new_privs set, seccomp filter installed");
    return HSMCA_OK;
}
