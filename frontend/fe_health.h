/* fe_health.h - grpc.health.v1.Health/Check on the gRPC port (what Kubernetes' gRPC probes
 * call): SERVING only while the front end is ready (fe_ready.h). No authentication; the
 * call goes through the front end's limits like any other (fe_server.c). */
#ifndef HSMCA_FE_HEALTH_H
#define HSMCA_FE_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "fe_app.h"

#define FE_HEALTH_METHOD "/grpc.health.v1.Health/Check"
#define FE_HEALTH_MAX_REQUEST 256 /* a HealthCheckRequest is a service name */

/* The answer to a HealthCheckRequest body: 0 (OK) with the HealthCheckResponse in out
 * (*out_len bytes, at most 2), or a gRPC status code with msg: INVALID_ARGUMENT for a body
 * that is not a HealthCheckRequest, NOT_FOUND for a service other than "" and
 * istio.v1.auth.IstioCertificateService (the health protocol's rule). */
int fe_health_check(const fe_app *app, const uint8_t *body, size_t len, uint8_t out[2],
                    size_t *out_len, const char **msg);

#endif
