/* sandbox.h - a child process confines itself once it holds what it needs
 * (docs/ARCHITECTURE.md §1, §3.4): it switches to its own unprivileged user, sets
 * PR_SET_NO_NEW_PRIVS and installs a seccomp allowlist on every thread.
 *
 * The front end and the signer share this module and the syscall groups every
 * confined process needs; each adds only its own groups (frontend/fe_sandbox.c,
 * signer/signer_sandbox.c), so neither allows what only the other needs. */
#ifndef HSMCA_SANDBOX_H
#define HSMCA_SANDBOX_H

#include <stddef.h>
#include <sys/types.h>

#include <seccomp.h>

#include "config.h"
#include "hsmca_err.h"

/* Supplementary groups a process may keep (signer.groups): a config list's bound. */
#define SANDBOX_MAX_GROUPS CONFIG_MAX_LIST
#define SANDBOX_GROUP_NAME 33 /* a group name as useradd allows it, and its NUL */

/* The user a process switches to, resolved while /etc/passwd is still readable. */
typedef struct {
    int active;       /* 1: started as root, switch to uid/gid; 0: keep our uid */
    uid_t uid;
    gid_t gid;
    char name[64];
    const char *key;  /* the config key that named it ("signer.user"), for messages */
    /* The supplementary groups kept after the switch (sandbox_user_groups); none by
     * default: the front end keeps none, the signer those of signer.groups. */
    gid_t groups[SANDBOX_MAX_GROUPS];
    char group_names[SANDBOX_MAX_GROUPS][SANDBOX_GROUP_NAME];
    int n_groups;
} sandbox_user;

/* Resolves `user` (named by config key `key`, a literal) when running as root.
 * Refuses, with EINVAL and a message naming the key, a user that does not
 * exist (the message gives the useradd command that creates it) and one whose
 * uid or primary gid is 0. As any other user: u->active = 0 and HSMCA_OK. */
HSMCA_MUSTCHECK hsmca_code sandbox_user_lookup(const char *key, const char *user, sandbox_user *u, hsmca_err *e);

/* The gid of group `name` (named by config key `key`, a literal): a numeric gid, or a
 * name looked up in the group database (getgrnam). Refuses, with EINVAL and a message
 * naming the key and the group, a group that does not exist (the message gives the
 * groupadd command) and gid 0. Works as any user: the supervisor checks at start. */
HSMCA_MUSTCHECK hsmca_code sandbox_group_lookup(const char *key, const char *name, gid_t *gid,
                                                hsmca_err *e);

/* When u->active, resolves groups (config key `key`) with sandbox_group_lookup into u,
 * to be kept by sandbox_drop_user; call it before any chroot, while /etc/group is still
 * readable. Otherwise HSMCA_OK and nothing kept (a process not started as root keeps
 * the groups it has). */
HSMCA_MUSTCHECK hsmca_code sandbox_user_groups(sandbox_user *u, const char *key,
                                               const config_list *groups, hsmca_err *e);

/* When u->active: chroot into chroot_dir (created 0755 if missing) unless it is
 * NULL, chdir("/"), set the supplementary groups to u's (none unless
 * sandbox_user_groups named some), setresgid, setresuid; then verifies that neither
 * root nor group 0 can be regained, that the groups are exactly u's, and re-arms the
 * parent-death signal the credential change cleared; logs the groups kept. Otherwise
 * only chdir("/") and a log line saying the process keeps its uid. */
HSMCA_MUSTCHECK hsmca_code sandbox_drop_user(const sandbox_user *u, const char *chroot_dir, hsmca_err *e);

/* A named set of syscalls one process needs for one reason. `calls` are allowed
 * whatever their arguments; `add`, when set, adds rules that check arguments
 * (it returns 0 or a negative errno from libseccomp). */
typedef struct {
    const char *name;
    const int *calls;
    size_t n;
    int (*add)(scmp_filter_ctx ctx);
} sandbox_group;

#define SANDBOX_CALLS(array) (array), (sizeof(array) / sizeof((array)[0]))

/* Sets PR_SET_NO_NEW_PRIVS and installs, on every thread (TSYNC), a filter
 * that allows the shared groups (memory, threads, signals, time, identity,
 * randomness, I/O on descriptors already open, the IPC sockets, exit) and the
 * caller's `own` groups; clone(2) only with CLONE_THREAD; clone3 fails ENOSYS
 * (glibc then uses clone); calls that only an attacker makes (execve, ptrace,
 * mount, the setuid family, ...) kill the process; everything else fails with
 * EPERM. Logs the names of the groups allowed. */
HSMCA_MUSTCHECK hsmca_code sandbox_seccomp_install(const sandbox_group *const *own, size_t n_own, hsmca_err *e);

#endif
