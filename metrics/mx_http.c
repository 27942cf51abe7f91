/* mx_http.c - see mx_http.h. One thread serves every connection, so the front end gets one
 * question at a time; a scrape waits at most MX_TIMEOUT_MS for it. What the front end does
 * not answer is 503 with a body saying so: a probe then fails, and an operator reading the
 * body learns why. */
#include "mx_http.h"

#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "mx_contract.h"
#include "mx_link.h"

/* Bounds on what idle connections can hold: a client (one address) that opens many and
 * sends nothing keeps at most MX_PER_IP of them, each for MX_CONNECTION_TIMEOUT_S, so a
 * probe from another address still gets in. */
#define MX_MAX_CONNECTIONS 64
#define MX_PER_IP 16
#define MX_CONNECTION_TIMEOUT_S 5

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
    if (mx_link_ask(kind, &text, &len, &ok) != 0)
        return fixed(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                     kind == MX_KIND_READY ? "not ready: the front end does not answer\n"
                                           : "unhealthy: the front end does not answer\n");
    unsigned status = ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
    return reply(conn, status,
                 kind == MX_KIND_METRICS ? "text/plain; version=0.0.4; charset=utf-8"
                                         : "text/plain; charset=utf-8",
                 text, len);
}

struct MHD_Daemon *mx_http_start(int listen_fd)
{
    return MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, on_request, NULL,
        MHD_OPTION_LISTEN_SOCKET, listen_fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)MX_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MX_PER_IP,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MX_CONNECTION_TIMEOUT_S, MHD_OPTION_END);
}
