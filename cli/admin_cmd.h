/* admin_cmd.h - `hsmca admin ...` and the admin socket's client (common/admin_contract.h),
 * which `hsmca intermediate ...` uses too. */
#ifndef HSMCA_ADMIN_CMD_H
#define HSMCA_ADMIN_CMD_H

#include <jansson.h>

#include "hsmca_err.h"

/* `hsmca admin status --config F [--socket P] [--json]`. */
int admin_main(int argc, char **argv);

/* Sends req to the signer's admin socket (socket_path, or admin.socket of the config at
 * config_path) and returns its reply (caller json_decref's). An {"ok": false} reply is
 * HSMCA_EPERM with its error text; an unreachable socket HSMCA_EUNAVAIL naming it. */
HSMCA_MUSTCHECK hsmca_code admin_call(const char *config_path, const char *socket_path,
                                      json_t *req, json_t **reply, hsmca_err *e);

#endif
