/* fe_server.h - the gRPC server: fe_server_listen.c binds it, fe_server.c serves the calls
 * and stops it (their shared state: fe_server_int.h). */
#ifndef HSMCA_FE_SERVER_H
#define HSMCA_FE_SERVER_H

#include <grpc/grpc_security.h>

#include "fe_app.h"

typedef struct fe_listener fe_listener;

/* Creates the gRPC server with the TLS credentials (released here) and binds
 * cfg->listen, without accepting yet: the sandbox goes on between the two. */
fe_listener *fe_server_listen(fe_app *app, grpc_server_credentials *creds);

/* Starts serving and runs until *stop becomes non-zero; frees the listener. */
int fe_server_serve(fe_listener *l, volatile int *stop);

#endif
