/* fe_health.c - see fe_health.h. The request is one optional string field (service = 1),
 * read by hand with the same strict varints as the rest of the front end (pbwire.h):
 * anything else in it is refused, not skipped. */
#include "fe_health.h"

#include <string.h>

#include "fe_ready.h"
#include "pbwire.h"

#define SERVICE_CA "istio.v1.auth.IstioCertificateService"

enum { STATUS_SERVING = 1, STATUS_NOT_SERVING = 2 }; /* HealthCheckResponse.ServingStatus */

/* The service named in body; 0 on success. An empty body is service "". */
static int service_of(const uint8_t *body, size_t len, const uint8_t **name, size_t *name_len)
{
    *name = NULL;
    *name_len = 0;
    size_t off = 0;
    while (off < len) {
        uint64_t key, n;
        if (!pbwire_varint(body, len, &off, &key) || key != ((1u << 3) | PBWIRE_LEN) ||
            !pbwire_varint(body, len, &off, &n) || n > len - off)
            return -1;
        *name = body + off; /* the last occurrence wins, as for any proto3 scalar */
        *name_len = (size_t)n;
        off += (size_t)n;
    }
    return 0;
}

int fe_health_check(const fe_app *app, const uint8_t *body, size_t len, uint8_t out[2],
                    size_t *out_len, const char **msg)
{
    const uint8_t *name;
    size_t n;
    if (len > FE_HEALTH_MAX_REQUEST || service_of(body, len, &name, &n) != 0) {
        *msg = "health: not a HealthCheckRequest";
        return 3; /* INVALID_ARGUMENT */
    }
    if (n && (n != strlen(SERVICE_CA) || memcmp(name, SERVICE_CA, n) != 0)) {
        *msg = "health: unknown service (\"\" or " SERVICE_CA ")";
        return 5; /* NOT_FOUND */
    }
    out[0] = (1u << 3) | PBWIRE_VARINT; /* status = 1 */
    out[1] = fe_ready(app, NULL) ? STATUS_SERVING : STATUS_NOT_SERVING;
    *out_len = 2;
    *msg = "";
    return 0;
}
