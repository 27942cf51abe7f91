/* fe_connlimit.h - server.max_connections: at most N TCP connections in the front
 * end; beyond it a new connection is closed at once and the others keep working.
 *
 * gRPC core 1.51 has no such limit (grpc.max_allowed_incoming_connections came
 * later), and a socket mutator that refuses an accepted socket stops the whole
 * listener (tcp_server_posix.cc: on_read, goto error). So the cap is a socket
 * mutator that always says yes but shuts an excess socket down (shutdown(2)):
 * the TLS handshake reads EOF at once and gRPC closes it. gRPC never tells when a
 * connection closes; the count is kept from the descriptors themselves (see the
 * .c). */
#ifndef HSMCA_FE_CONNLIMIT_H
#define HSMCA_FE_CONNLIMIT_H

#include <grpc/grpc.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hsmca_err.h"

typedef struct fe_connlimit fe_connlimit;

/* A cap of max connections, for descriptors below fd_limit (RLIMIT_NOFILE).
 * NULL and e set on failure. Lives as long as the process (gRPC holds it). */
fe_connlimit *fe_connlimit_new(unsigned max, unsigned fd_limit, hsmca_err *e);

/* Frees l; only once nothing (no gRPC server) holds it: the front end never does. */
void fe_connlimit_free(fe_connlimit *l);

/* The channel argument (GRPC_ARG_SOCKET_MUTATOR) that installs it on a server. */
grpc_arg fe_connlimit_arg(fe_connlimit *l);

/* The decision for an accepted socket fd: 1 admitted (counted), 0 refused (the
 * caller shuts it down). Exposed for the unit test; the mutator calls it. now is
 * monotonic seconds. */
int fe_connlimit_admit(fe_connlimit *l, int fd, double now);

/* Shuts down (shutdown(2), both ways) the admitted connection whose peer address is
 * sa: gRPC then reads EOF and closes it with all its calls. Checks each remembered
 * descriptor's peer and inode under the lock, so a descriptor gRPC has closed and
 * reused for another connection is never touched. 1 when found, 0 when not. */
int fe_connlimit_close_peer(fe_connlimit *l, const struct sockaddr *sa, socklen_t len);

/* Connections counted now, and refused since the start. */
unsigned fe_connlimit_open(fe_connlimit *l);
uint64_t fe_connlimit_refused(fe_connlimit *l);

#endif
