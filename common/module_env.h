/* module_env.h - the environment the config gives the PKCS#11 module: SOFTHSM2_CONF from
 * pkcs11.softhsm2_conf (config_validate refuses SOFTHSM2_CONF in pkcs11.env beside it),
 * then pkcs11.env, in that order. One list for whatever starts the signer's program
 * (supervisor/sup_env.c) and for the commands that load the module in their own process
 * (ca/: the ceremony, token keygen), so the module reads the same variables everywhere. */
#ifndef HSMCA_MODULE_ENV_H
#define HSMCA_MODULE_ENV_H

#include "config.h"

/* The most variables the config gives the module. */
#define MODULE_ENV_MAX (1 + CONFIG_MAX_ENV)

/* Writes the variables' names and values (pointers into cfg, not copies) into name and
 * value; returns how many. */
int module_env_vars(const hsmca_config *cfg, const char *name[MODULE_ENV_MAX],
                    const char *value[MODULE_ENV_MAX]);

/* Sets them in this process (setenv), for a command that loads the module itself: the
 * rest of this process's environment stays. */
void module_env_apply(const hsmca_config *cfg);

#endif
