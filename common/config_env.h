/* config_env.h - the parser of pkcs11.env, a YAML mapping of NAME: value strings
 * (config.h's config_env), for common/config.c. Not a public header: the rules a name
 * obeys are config_env_name_problem (config.h). */
#ifndef HSMCA_CONFIG_ENV_H
#define HSMCA_CONFIG_ENV_H

#include "config.h"
#include "hsmca_err.h"

#include <yaml.h>

/* Reads the value of the key `key` (its first event is start: a mapping, or a null
 * that empties env) from p into *env. Refused with EINVAL and "NAME:LINE: ..." (name
 * is the file's name): a value that is not a mapping of strings, a name
 * config_env_name_problem refuses, a name given twice, more than CONFIG_MAX_ENV
 * entries, a value with a NUL or of CONFIG_MAX_STR bytes or more. */
HSMCA_MUSTCHECK hsmca_code config_env_parse(yaml_parser_t *p, const char *name, const char *key,
                                            const yaml_event_t *start, config_env *env,
                                            hsmca_err *e);

#endif
