/* fe_serving.h - the front end's own TLS certificate: issued by the CA through
 * the signer at start-up, renewed in the background at 2/3 of its lifetime, and
 * handed to gRPC on the next handshake (no restart, no dropped connection). */
#ifndef HSMCA_FE_SERVING_H
#define HSMCA_FE_SERVING_H

#include <grpc/grpc_security.h>
#include "fe_app.h"

typedef struct fe_serving fe_serving;

/* Generates a key and gets its certificate from the signer, waiting while the
 * signer is unavailable (it may still be logging in, or the token is down).
 * Exits on a refusal; returns NULL when *stop becomes non-zero while waiting. */
fe_serving *fe_serving_start(fe_app *app, volatile int *stop);

/* Starts the renewal thread (after the sandbox is in place). */
void fe_serving_start_renewal(fe_serving *s);

/* TLS server credentials that always present the newest certificate and
 * request, without requiring or verifying, a client certificate. */
grpc_server_credentials *fe_serving_credentials(fe_serving *s);

#endif
