/* audit_lock.h - one signer per audit directory (docs/ARCHITECTURE.md §7.1): an exclusive flock(2)
 * on DIR/lock, which holds the holder's pid for the message a second signer gives.
 * Taken before the token is opened and anything in DIR is read, held for the process's
 * life (the kernel drops it at exit, however the process ends), so no two signers ever
 * replay, append to or publish one log. */
#ifndef HSMCA_AUDIT_LOCK_H
#define HSMCA_AUDIT_LOCK_H

#include <signal.h>
#include <sys/types.h>

#include "hsmca_err.h"

/* The lock file's name in the audit directory. */
#define AUDIT_LOCK_FILE "lock"

/* Takes the lock on DIR/lock, creating DIR (0700) and the file (0600), both chowned to
 * owner:group when owner is not (uid_t)-1 and they are new, and writes our pid into it.
 * While another process holds it, logs once that it waits for that pid and tries again
 * until wait_s have passed or *stop (may be NULL) is set. Returns the descriptor in
 * *fd: close-on-exec, to keep open (across a uid change and a seccomp filter: nothing
 * more is asked of it) until audit_lock_release or exit. Errors, naming DIR/lock:
 * EPERM, still held after wait_s (with the holder's pid), or stopped while waiting
 * (*stop set); EIO, the directory or file cannot be made, opened or locked. */
HSMCA_MUSTCHECK hsmca_code audit_lock_take(const char *dir, uid_t owner, gid_t group,
                                           double wait_s, const volatile sig_atomic_t *stop,
                                           int *fd, hsmca_err *e);

/* Releases the lock (closes fd); -1 is ignored. */
void audit_lock_release(int fd);

#endif
