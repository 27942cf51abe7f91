/* signer_admin.h - the signer's admin socket (docs/ARCHITECTURE.md §5.4; protocol: common/admin_contract.h).
 *
 * A unix socket at admin.socket, created by the signer before it drops privileges and
 * enters its sandbox, owned by signer.user:admin.group, mode 0660 (0600 without a group).
 * Each caller is the unix user the kernel names (SO_PEERCRED, SO_PEERGROUPS): root, a
 * member of admin.group, or (a signer not started as root, `hsmca dev`) the signer's own
 * user; anyone else is refused even if the socket's mode let it connect. Everything is
 * non-blocking on the signer's main loop: a connection is served in one packet each way,
 * at most ADMIN_MAX_CONNS at once, each closed after its reply or ADMIN_TIMEOUT_S. */
#ifndef HSMCA_SIGNER_ADMIN_H
#define HSMCA_SIGNER_ADMIN_H

#include <poll.h>

#include "admin_contract.h"
#include "config.h"
#include "hsmca_err.h"
#include "signer_sandbox.h"

typedef struct signer_admin signer_admin;
typedef struct signer_ctx signer_ctx;

/* Descriptors signer_admin_pollfds may fill. */
#define SIGNER_ADMIN_POLLFDS (ADMIN_MAX_CONNS + 1)

/* Creates and listens on admin.socket (replacing a stale socket there, never another
 * file); *out is NULL when admin.socket is "". EINVAL naming the key when admin.group does
 * not exist or the path cannot be bound. */
HSMCA_MUSTCHECK hsmca_code signer_admin_open(const hsmca_config *cfg, const signer_sandbox *sb,
                                             signer_admin **out, hsmca_err *e);

/* The listening descriptor (for the sandbox), -1 when a is NULL. */
int signer_admin_listen_fd(const signer_admin *a);

/* Fills p (SIGNER_ADMIN_POLLFDS at most) with what to poll; returns how many (0 when a is
 * NULL). */
int signer_admin_pollfds(signer_admin *a, struct pollfd *p);

/* Serves what poll reported on the n descriptors signer_admin_pollfds gave, and closes
 * connections past their time. */
void signer_admin_serve(signer_admin *a, signer_ctx *s, const struct pollfd *p, int n);

/* Closes every connection and the socket. NULL is fine. */
void signer_admin_close(signer_admin *a);

#endif
