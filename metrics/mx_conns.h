/* mx_conns.h - the metrics listener's connections (libmicrohttpd's internal thread plus
 * one reaper thread): at most MX_CONNS_MAX open, each request (from the connection's
 * accept or its previous answer, to the end of its answer) done within
 * MX_REQUEST_DEADLINE_S or the connection is shut down. A trickle of bytes does not extend
 * it, as libmicrohttpd's own timeout (an idle timeout) would. A new connection is always
 * admitted: when the table is full, the oldest request of the address holding the most
 * connections makes room. So a probe is never refused for a slot, and what a client holds
 * it holds for MX_REQUEST_DEADLINE_S at most. */
#ifndef HSMCA_MX_CONNS_H
#define HSMCA_MX_CONNS_H

#include <sys/socket.h>

#include <microhttpd.h>

#define MX_CONNS_MAX 64
#define MX_REQUEST_DEADLINE_S 3

/* libmicrohttpd's accept policy: makes room for the new connection (always MHD_YES). */
enum MHD_Result mx_conns_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);

/* libmicrohttpd's connection notifier: records a started connection, forgets a closed one
 * (before libmicrohttpd closes its fd). */
void mx_conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                     enum MHD_ConnectionNotificationCode code);

/* libmicrohttpd's request-completed callback: the connection's next request gets a new
 * deadline. */
void mx_conns_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                        enum MHD_RequestTerminationCode toe);

/* Starts / stops the thread that shuts down connections past their deadline. 0 or -1. */
int mx_conns_start(void);
void mx_conns_stop(void);

#endif
