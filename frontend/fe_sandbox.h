/* fe_sandbox.h - confining the front end (docs/ARCHITECTURE.md §1). */
#ifndef HSMCA_FE_SANDBOX_H
#define HSMCA_FE_SANDBOX_H

#include "hsmca_err.h"

/* When running as root: chroot into chroot_dir (created 0755 if missing) and
 * switch to user's (frontend.user) uid/gid with no supplementary groups,
 * verifying the switch cannot be undone. As any other user: chdir("/") only, and
 * a log line saying so. (common/sandbox.h does the work.) */
HSMCA_MUSTCHECK hsmca_code fe_sandbox_drop_privileges(const char *user, const char *chroot_dir, hsmca_err *e);

/* Sets PR_SET_NO_NEW_PRIVS and installs the seccomp allowlist on every thread
 * (TSYNC): the shared groups of common/sandbox.h plus gRPC's, and, when
 * outbound_tcp (TokenReview is on), new TCP sockets and connect(2) to reach the
 * Kubernetes API server. Calls outside the list fail with EPERM; calls that
 * only an attacker would make (execve, ptrace, ...) kill the process. */
HSMCA_MUSTCHECK hsmca_code fe_sandbox_seccomp(int outbound_tcp, hsmca_err *e);

#endif
