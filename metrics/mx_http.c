/* mx_http.c - see mx_http.h. One thread serves every connection, so the front end gets one
 * question at a time; a scrape waits at most MX_TIMEOUT_MS for it. What the front end does
 * not answer is 503 with a body saying so: a probe then fails, and an operator reading the
 * body learns why.
 *
 * What clients can hold is bounded by mx_conns.h (a deadline per request, room always made
 * for a new connection). What scrapes cost the front end is bounded here: an exposition
 * is reused for MX_METRICS_REUSE_S, so a flood of scrapes renders at most one a period and
 * a health question waits behind no render but the one in flight. */
#include "mx_http.h"

#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "mx_conns.h"
#include "mx_contract.h"
#include "mx_link.h"
#include "util.h"

/* libmicrohttpd's idle timeout (mx_conns.h's deadline is the tighter bound). */
#define MX_CONNECTION_TIMEOUT_S 5
#define MX_METRICS_REUSE_S 1.0

/* The latest exposition (only libmicrohttpd's thread touches it). */
static struct {
    char *text;
    size_t len;
    double at;
} last;

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result fixed(struct MHD_Connection *conn, unsigned status, const char *text)
{
    char *body = strdup(text);
    return body ? reply(conn, status, "text/plain; charset=utf-8", body, strlen(body)) : MHD_NO;
}

/* /metrics: the exposition rendered less than MX_METRICS_REUSE_S ago, else a new one. */
static enum MHD_Result metrics(struct MHD_Connection *conn)
{
    static const char type[] = "text/plain; version=0.0.4; charset=utf-8";
    double now = util_mono_now();
    if (!last.text || now - last.at >= MX_METRICS_REUSE_S || now < last.at) {
        char *text;
        size_t len;
        int ok;
        if (mx_link_ask(MX_KIND_METRICS, &text, &len, &ok) != 0)
            return fixed(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                         "unhealthy: the front end does not answer\n");
        if (!ok)
            return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, type, text, len);
        free(last.text);
        last.text = text;
        last.len = len;
        last.at = now;
    }
    char *copy = malloc(last.len + 1);
    if (!copy)
        return MHD_NO;
    memcpy(copy, last.text, last.len + 1);
    return reply(conn, MHD_HTTP_OK, type, copy, last.len);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)cls;
    (void)version;
    (void)upload_data;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return fixed(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
    if (*upload_data_size)
        return fixed(conn, MHD_HTTP_BAD_REQUEST, "no body expected\n");
    if (!*con_cls) { /* the headers only: answer on the next call */
        *con_cls = (void *)1;
        return MHD_YES;
    }
    char kind = !strcmp(url, "/metrics")   ? MX_KIND_METRICS
                : !strcmp(url, "/healthz") ? MX_KIND_HEALTH
                : !strcmp(url, "/readyz")  ? MX_KIND_READY
                                           : 0;
    if (!kind)
        return fixed(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n");
    char *text;
    size_t len;
    int ok;
    if (kind == MX_KIND_METRICS)
        return metrics(conn);
    if (mx_link_ask(kind, &text, &len, &ok) != 0)
        return fixed(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                     kind == MX_KIND_READY ? "not ready: the front end does not answer\n"
                                           : "unhealthy: the front end does not answer\n");
    unsigned status = ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
    return reply(conn, status, "text/plain; charset=utf-8", text, len);
}

struct MHD_Daemon *mx_http_start(int listen_fd)
{
    if (mx_conns_start() != 0)
        return NULL;
    /* libmicrohttpd's limit leaves room for connections mx_conns has shut down and it has
     * not yet closed; mx_conns keeps the open ones to MX_CONNS_MAX. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, mx_conns_accept, NULL, on_request, NULL,
        MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(2 * MX_CONNS_MAX), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)MX_CONNECTION_TIMEOUT_S, MHD_OPTION_NOTIFY_CONNECTION, mx_conns_notify, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, mx_conns_completed, NULL, MHD_OPTION_END);
    if (!d)
        mx_conns_stop();
    return d;
}

void mx_http_stop(struct MHD_Daemon *d)
{
    mx_conns_stop();
    MHD_stop_daemon(d);
}
