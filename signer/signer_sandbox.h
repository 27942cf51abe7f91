/* signer_sandbox.h - the signer confines itself (docs/ARCHITECTURE.md §3.4): once it has read
 * the PIN and opened the token it runs as its own unprivileged user, is not
 * dumpable, has no core dumps, and runs under a seccomp allowlist that permits
 * sockets only as signer.sandbox.network says (unix: a module that talks to a local
 * daemon; inet: a network HSM's client) and SysV IPC only with signer.sandbox.sysv_ipc.
 * The mechanics are common/sandbox.h's; the signer's own syscall groups are in
 * signer_sandbox.c. */
#ifndef HSMCA_SIGNER_SANDBOX_H
#define HSMCA_SIGNER_SANDBOX_H

#include <stdnoreturn.h>

#include "config.h"
#include "hsmca_err.h"
#include "sandbox.h"

typedef struct {
    sandbox_user user;  /* signer.user, resolved before the token is opened */
    config_net network; /* signer.sandbox.network in force (config_signer_network) */
    int sysv_ipc;       /* signer.sandbox.sysv_ipc */
    int old_key;        /* the mode comes from the deprecated signer.seccomp_allow_network */
} signer_sandbox;

/* Call before the PIN is read: logs a deprecated signer.seccomp_allow_network; makes the process
 * non-dumpable (no ptrace or /proc/PID/mem by its own uid) with a core size limit of 0, and, when
 * running as root, resolves signer.user. EINVAL, naming the keys, when signer.user does not exist
 * (with the useradd command to run), is root, or has the uid of frontend.user. */
HSMCA_MUSTCHECK hsmca_code signer_sandbox_prepare(const hsmca_config *cfg, signer_sandbox *sb,
                                                  hsmca_err *e);

/* Call once the token is open and logged in, before the first front-end
 * message: switches to signer.user (as root; no chroot, chdir("/")), makes sure
 * the process is still not dumpable, sets no_new_privs and installs the
 * signer's seccomp allowlist on every thread. */
HSMCA_MUSTCHECK hsmca_code signer_sandbox_enter(const signer_sandbox *sb, hsmca_err *e);

/* Call before signer_sandbox_enter when the admin socket is on: the filter then allows
 * accept4 on listen_fd alone, and reading an accepted caller's credentials. */
void signer_sandbox_allow_admin(int listen_fd);

/* For a module that cannot sign once the filter is in: exits EXIT_CONFIG with a message
 * naming the sandbox's settings, why (the token's answer), and the setting to change. */
/* What to change when a module fails inside the sandbox, for the sandbox's mode: the
 * setting that opens what it may lack (a static string). */
const char *signer_sandbox_hint(const signer_sandbox *sb);

noreturn void signer_sandbox_refuse(const signer_sandbox *sb, const char *why);

#endif
