/* grpc_unary.h - one unary gRPC call to a CA over TLS, for the command-line clients
 * (`hsmca request`, `hsmca probe --grpc`): the server's certificate must chain to the
 * given roots and name the host of the address, as istio-agent checks it. */
#ifndef HSMCA_GRPC_UNARY_H
#define HSMCA_GRPC_UNARY_H

#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

typedef struct {
    const char *who;      /* names the command in messages: "hsmca request" */
    const char *addr;     /* host:port; the host is the name the certificate must hold */
    const char *root_pem; /* the roots to trust */
    grpc_ssl_pem_key_cert_pair *pair; /* the TLS client certificate, or NULL */
    const char *bearer;   /* sent as `authorization: Bearer ...`, or NULL */
    const char *method;   /* "/package.Service/Method" */
    long timeout_s;       /* the call's deadline */
} grpc_unary;

/* The name of a gRPC status code ("UNAVAILABLE"). */
const char *grpc_unary_status_name(grpc_status_code s);

/* Calls u->method with body (grpc_init() done by the caller). 0 with *resp set (the
 * caller unrefs it) when the status is OK and a message came back; otherwise 1, with
 * "WHO: STATUS: details" (or why the call did not complete) printed on stderr. */
int grpc_unary_call(const grpc_unary *u, const uint8_t *body, size_t len, grpc_slice *resp);

#endif
