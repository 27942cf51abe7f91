/* fe_peercalls.h - calls held per connection, against rapid reset (CVE-2023-44487).
 *
 * HTTP/2 lets a client keep at most SETTINGS_MAX_CONCURRENT_STREAMS streams open
 * (100 here), but a stream the client resets closes at once in the transport while
 * its call lives on in gRPC core and in the front end until we have ended it. gRPC
 * core 1.51 has no limit on that (later releases added one), so HEADERS + RST_STREAM
 * in a loop makes calls faster than the front end ends them, each holding gRPC core
 * memory (docs/SECURITY.md §7).
 * A connection holding many more calls than it may have streams open is doing
 * exactly that, and so is one whose calls keep being cancelled: this table counts,
 * by gRPC's peer string, the calls each connection holds and the calls of it that
 * were cancelled in a window, and says when one goes over either bound; fe_server.c
 * then closes that connection through fe_connlimit and drops the calls gRPC had
 * already queued for it. */
#ifndef HSMCA_FE_PEERCALLS_H
#define HSMCA_FE_PEERCALLS_H

#include <sys/socket.h>

#include "hsmca_err.h"

typedef struct fe_peercalls fe_peercalls;

/* A table for up to max_conns connections at once; a connection is reported when
 * it holds more than over_calls calls, or more than max_cancels of its calls were
 * cancelled within window_s seconds. NULL and e set on failure. */
fe_peercalls *fe_peercalls_new(unsigned max_conns, unsigned over_calls, unsigned max_cancels,
                               double window_s, hsmca_err *e);
void fe_peercalls_free(fe_peercalls *t);

/* One more call held for peer (gRPC's "ipv4:a.b.c.d:port" / "ipv6:[...]:port").
 * *counted: 1 when counted (pair it with fe_peercalls_remove), 0 when not (a
 * peer string too long or the table full: such calls go uncounted, which only
 * weakens the check). Returns 1 once per stretch of held calls, at the first call
 * beyond the bound: the caller closes that connection; 2 for each later call of the
 * same stretch (the connection was closed: the caller drops the call); else 0.
 * Thread-safe. */
int fe_peercalls_add(fe_peercalls *t, const char *peer, double now, int *counted);

/* A call of peer was cancelled (the client reset it, or went away, before its
 * answer). Returns 1 when that takes the connection over the cancels' bound (the
 * caller closes it; later calls get 2 from fe_peercalls_add), else 0. */
int fe_peercalls_cancelled(fe_peercalls *t, const char *peer, double now);

/* The call counted by fe_peercalls_add for peer has ended. now: monotonic seconds,
 * as for the others. */
void fe_peercalls_remove(fe_peercalls *t, const char *peer, double now);

/* Forgets connections that hold no call and whose windows have run out; the front
 * end calls it every second. */
void fe_peercalls_sweep(fe_peercalls *t, double now);

/* Calls held for peer now (for tests). */
unsigned fe_peercalls_held(fe_peercalls *t, const char *peer);

/* gRPC's peer string as a socket address (IPv4 or IPv6, with its port). */
HSMCA_MUSTCHECK hsmca_code fe_peer_sockaddr(const char *peer, struct sockaddr_storage *ss,
                                            socklen_t *len, hsmca_err *e);

#endif
