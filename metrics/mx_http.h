/* mx_http.h - the HTTP side of the metrics process (libmicrohttpd): GET /metrics,
 * /healthz and /readyz, each answered from the front end (mx_link.h). */
#ifndef HSMCA_MX_HTTP_H
#define HSMCA_MX_HTTP_H

struct MHD_Daemon;

/* Serves on listen_fd (bound and listening) from one internal thread. NULL on failure. */
struct MHD_Daemon *mx_http_start(int listen_fd);
/* Stops the server started by mx_http_start and its deadline thread. */
void mx_http_stop(struct MHD_Daemon *d);

#endif
