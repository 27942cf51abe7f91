/* sandbox.c - see sandbox.h. */
#include "sandbox.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

hsmca_code sandbox_user_lookup(const char *key, const char *user, sandbox_user *u, hsmca_err *e)
{
    memset(u, 0, sizeof(*u));
    u->key = key;
    snprintf(u->name, sizeof(u->name), "%s", user);
    if (geteuid() != 0)
        return HSMCA_OK;
    if (strlen(user) >= sizeof(u->name))
        return hsmca_fail(e, HSMCA_EINVAL, "%s '%.64s...' is too long for a user name", key,
                          user);
    errno = 0;
    struct passwd *pw = getpwnam(user);
    if (!pw && errno != 0 && errno != ENOENT && errno != ESRCH)
        return hsmca_fail(e, HSMCA_EIO, "%s '%s': cannot look the user up: %s", key, user,
                          strerror(errno));
    if (!pw)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "%s '%s' does not exist: create it with useradd --system "
                          "--no-create-home --shell /usr/sbin/nologin %s",
                          key, user, user);
    if (pw->pw_uid == 0 || pw->pw_gid == 0)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "%s '%s' has uid %d, gid %d: it must be an unprivileged user", key,
                          user, (int)pw->pw_uid, (int)pw->pw_gid);
    u->active = 1;
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    return HSMCA_OK;
}

hsmca_code sandbox_group_lookup(const char *key, const char *name, gid_t *gid, hsmca_err *e)
{
    uint32_t n;
    if (name[0] && config_parse_u32(name, strlen(name), 0, &n) == 0) {
        *gid = (gid_t)n; /* a numeric gid need not be in the group database */
    } else {
        errno = 0;
        struct group *gr = getgrnam(name);
        if (!gr && errno != 0 && errno != ENOENT && errno != ESRCH)
            return hsmca_fail(e, HSMCA_EIO, "%s: cannot look group '%.64s' up: %s", key, name,
                              strerror(errno));
        if (!gr)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "%s: group '%.64s' does not exist: create it with groupadd "
                              "--system %.64s, or remove it from %s",
                              key, name, name, key);
        *gid = gr->gr_gid;
    }
    if (*gid == 0)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "%s: group '%.64s' is gid 0: a confined process must not keep root's "
                          "group",
                          key, name);
    return HSMCA_OK;
}

hsmca_code sandbox_user_groups(sandbox_user *u, const char *key, const config_list *groups,
                               hsmca_err *e)
{
    u->n_groups = 0;
    if (!u->active)
        return HSMCA_OK;
    for (int i = 0; i < groups->n && i < SANDBOX_MAX_GROUPS; i++) {
        HSMCA_GUARD(sandbox_group_lookup(key, groups->items[i], &u->groups[i], e));
        snprintf(u->group_names[i], sizeof(u->group_names[i]), "%s", groups->items[i]);
        u->n_groups = i + 1;
    }
    return HSMCA_OK;
}

/* The supplementary groups are exactly u's (in any order), none of them 0. */
static int groups_are(const sandbox_user *u)
{
    gid_t have[SANDBOX_MAX_GROUPS + 1];
    int n = getgroups(SANDBOX_MAX_GROUPS + 1, have);
    if (n < 0 || n > SANDBOX_MAX_GROUPS)
        return 0;
    for (int i = 0; i < n; i++) {
        int wanted = 0;
        for (int j = 0; j < u->n_groups; j++)
            wanted |= have[i] == u->groups[j];
        if (!wanted || have[i] == 0)
            return 0;
    }
    for (int j = 0; j < u->n_groups; j++) {
        int got = 0;
        for (int i = 0; i < n; i++)
            got |= have[i] == u->groups[j];
        if (!got)
            return 0;
    }
    return 1;
}

/* "tss (gid 106), 998 (gid 998)" or "none", for the log. */
static void groups_text(const sandbox_user *u, char *out, size_t outsz)
{
    size_t used = 0;
    snprintf(out, outsz, "none");
    for (int i = 0; i < u->n_groups && used < outsz; i++) {
        int n = snprintf(out + used, outsz - used, "%s%s (gid %d)", i ? ", " : "",
                         u->group_names[i], (int)u->groups[i]);
        if (n < 0)
            return;
        used += (size_t)n;
    }
}

/* After the switch: every id is the target's, the supplementary groups are u's,
 * and getting uid 0 or gid 0 back fails. */
static int switch_is_final(const sandbox_user *u)
{
    uid_t r, ef, s;
    gid_t gr, gef, gs;
    if (getresuid(&r, &ef, &s) != 0 || r != u->uid || ef != u->uid || s != u->uid)
        return 0;
    if (getresgid(&gr, &gef, &gs) != 0 || gr != u->gid || gef != u->gid || gs != u->gid)
        return 0;
    if (!groups_are(u))
        return 0;
    return setuid(0) != 0 && seteuid(0) != 0 && setgid(0) != 0 && setegid(0) != 0;
}

hsmca_code sandbox_drop_user(const sandbox_user *u, const char *chroot_dir, hsmca_err *e)
{
    if (!u->active) {
        /* Not a directory we could later be denied or that could be unmounted. */
        if (chdir("/") != 0)
            return hsmca_fail(e, HSMCA_EIO, "sandbox: chdir /: %s", strerror(errno));
        LOG_EVENT(LOG_LVL_INFO, "sandbox: not started as root: keeping the uid, no chroot",
                  LOG_INT("uid", geteuid()), LOG_STR("unused", u->key), LOG_STR("user", u->name));
        return HSMCA_OK;
    }
    /* The kernel clears the parent-death signal when the effective ids change;
     * without it a child could outlive its supervisor. */
    int pdeath = 0;
    pid_t parent = getppid();
    if (prctl(PR_GET_PDEATHSIG, &pdeath) != 0)
        pdeath = 0;
    if (chroot_dir) {
        if (mkdir(chroot_dir, 0755) != 0 && errno != EEXIST)
            return hsmca_fail(e, HSMCA_EIO, "sandbox: mkdir %s: %s", chroot_dir,
                              strerror(errno));
        if (chroot(chroot_dir) != 0)
            return hsmca_fail(e, HSMCA_EIO, "sandbox: chroot %s: %s", chroot_dir,
                              strerror(errno));
    }
    if (chdir("/") != 0)
        return hsmca_fail(e, HSMCA_EIO, "sandbox: chdir /: %s", strerror(errno));
    /* glibc applies each of these to every thread of the process. */
    if (setgroups((size_t)u->n_groups, u->groups) != 0 || setresgid(u->gid, u->gid, u->gid) != 0 ||
        setresuid(u->uid, u->uid, u->uid) != 0)
        return hsmca_fail(e, HSMCA_EIO, "sandbox: cannot switch to %s '%s': %s", u->key, u->name,
                          strerror(errno));
    /* Belt and braces: getting root back must now be impossible. */
    if (!switch_is_final(u))
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: could regain root after dropping it");
    if (pdeath > 0) {
        if (prctl(PR_SET_PDEATHSIG, pdeath) != 0)
            return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: PR_SET_PDEATHSIG: %s",
                              strerror(errno));
        if (getppid() != parent)
            return hsmca_fail(e, HSMCA_EIO, "sandbox: the supervisor went away");
    }
    char groups[SANDBOX_MAX_GROUPS * (SANDBOX_GROUP_NAME + 24)];
    groups_text(u, groups, sizeof(groups));
    LOG_EVENT(LOG_LVL_INFO, "sandbox: switched user", LOG_STR("user", u->name),
              LOG_INT("uid", u->uid), LOG_INT("gid", u->gid),
              LOG_STR("chroot", chroot_dir ? chroot_dir : "none"), LOG_STR("groups", groups));
    return HSMCA_OK;
}

/* --- seccomp: the groups every confined process needs --------------------- */

/* malloc, thread stacks, the dynamic loader's mappings. */
static const int memory_calls[] = {
    SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(mremap),
    SCMP_SYS(madvise), SCMP_SYS(brk),
};

/* Locks, thread start and exit (clone itself is checked in install()), and the
 * pid/tid lookups glibc and PKCS#11 modules make (SoftHSM calls getpid() on
 * every call to notice a fork). */
static const int thread_calls[] = {
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
    SCMP_SYS(set_tid_address), SCMP_SYS(gettid), SCMP_SYS(getpid), SCMP_SYS(getppid),
    SCMP_SYS(tgkill), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(exit),
};

/* SIGTERM handling, pthread cancellation, sigwait. */
static const int signal_calls[] = {
    SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigreturn),
    SCMP_SYS(rt_sigtimedwait), SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall),
};

/* Clocks (the vDSO falls back to the syscall), sleeps and timed waits. */
static const int time_calls[] = {
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(clock_nanosleep),
    SCMP_SYS(nanosleep), SCMP_SYS(gettimeofday), SCMP_SYS(time),
};

/* Who we are (never who we become: the setuid family is fatal below). */
static const int identity_calls[] = {
    SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid),
};

/* OpenSSL's DRBG seeds and reseeds from getrandom. */
static const int random_calls[] = {SCMP_SYS(getrandom)};

/* I/O on descriptors already open: stderr (the JSON log), the IPC and control
 * sockets, and files a library opened. */
static const int fdio_calls[] = {
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
    SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(lseek), SCMP_SYS(fcntl),
};

/* The SOCK_SEQPACKET socketpairs to the peer and the supervisor: frames,
 * descriptors passed with SCM_RIGHTS, waiting, and closing a broken peer. */
static const int ipc_calls[] = {
    SCMP_SYS(recvmsg), SCMP_SYS(sendmsg), SCMP_SYS(shutdown), SCMP_SYS(poll), SCMP_SYS(ppoll),
};

static const int exit_calls[] = {SCMP_SYS(exit_group)};

static const sandbox_group common_groups[] = {
    {"memory", SANDBOX_CALLS(memory_calls), NULL},
    {"threads", SANDBOX_CALLS(thread_calls), NULL},
    {"signals", SANDBOX_CALLS(signal_calls), NULL},
    {"time", SANDBOX_CALLS(time_calls), NULL},
    {"identity", SANDBOX_CALLS(identity_calls), NULL},
    {"random", SANDBOX_CALLS(random_calls), NULL},
    {"fd-io", SANDBOX_CALLS(fdio_calls), NULL},
    {"ipc", SANDBOX_CALLS(ipc_calls), NULL},
    {"exit", SANDBOX_CALLS(exit_calls), NULL},
};

/* Calls with no use in a confined process other than escaping it: they kill
 * the whole process rather than fail, so an exploit cannot probe them. */
static const int fatal_calls[] = {
    SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv),
    SCMP_SYS(process_vm_writev), SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root),
    SCMP_SYS(chroot), SCMP_SYS(setuid), SCMP_SYS(setgid), SCMP_SYS(setreuid),
    SCMP_SYS(setregid), SCMP_SYS(setresuid), SCMP_SYS(setresgid), SCMP_SYS(setfsuid),
    SCMP_SYS(setfsgid), SCMP_SYS(setgroups), SCMP_SYS(unshare), SCMP_SYS(setns),
    SCMP_SYS(bpf), SCMP_SYS(init_module), SCMP_SYS(finit_module), SCMP_SYS(kexec_load),
    SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(userfaultfd),
    SCMP_SYS(perf_event_open), SCMP_SYS(fork), SCMP_SYS(vfork),
};

static int add_group(scmp_filter_ctx ctx, const sandbox_group *g)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g->n; i++)
        if (g->calls[i] >= 0) /* < 0: a syscall this architecture does not have */
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, g->calls[i], 0);
    if (rc == 0 && g->add)
        rc = g->add(ctx);
    return rc;
}

static int add_fixed_rules(scmp_filter_ctx ctx)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(fatal_calls) / sizeof(fatal_calls[0]); i++)
        if (fatal_calls[i] >= 0)
            rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, fatal_calls[i], 0);
    /* glibc falls back to clone(2) when clone3 says ENOSYS; clone3's flags live in
     * memory seccomp cannot inspect, so it is refused outright. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* clone(2) only for threads: a new process could outlive the sandbox's checks. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    return rc;
}

hsmca_code sandbox_seccomp_install(const sandbox_group *const *own, size_t n_own, hsmca_err *e)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: PR_SET_NO_NEW_PRIVS: %s",
                          strerror(errno));
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: seccomp_init failed");
    /* Every thread, including those libraries started before us; the kernel
     * also sets no_new_privs on each of them. */
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    char names[256] = "";
    size_t used = 0;
    const size_t n_common = sizeof(common_groups) / sizeof(common_groups[0]);
    for (size_t i = 0; rc == 0 && i < n_common + n_own; i++) {
        const sandbox_group *g = i < n_common ? &common_groups[i] : own[i - n_common];
        rc = add_group(ctx, g);
        int w = snprintf(names + used, sizeof(names) - used, "%s%s", used ? " " : "", g->name);
        if (w > 0 && (size_t)w < sizeof(names) - used)
            used += (size_t)w;
    }
    if (rc == 0)
        rc = add_fixed_rules(ctx);
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc != 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "sandbox: seccomp filter: %s", strerror(-rc));
    LOG_EVENT(LOG_LVL_INFO, "sandbox: no_new_privs set, seccomp filter installed",
              LOG_STR("allowed", names));
    return HSMCA_OK;
}
