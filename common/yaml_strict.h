/* yaml_strict.h - libyaml events with the refusals every hsmca YAML file shares.
 *
 * The config (common/config.c) and the SAN policy file (policy/policy_file.c) are
 * fixed schemas read with libyaml's event API. Both refuse the same things before
 * their schema looks at an event: syntax errors, invalid UTF-8, anchors and aliases
 * (billion laughs) and explicit tags (one meaning per value). */
#ifndef HSMCA_YAML_STRICT_H
#define HSMCA_YAML_STRICT_H

#include "hsmca_err.h"
#include <stddef.h>
#include <yaml.h>

/* The 1-based line an event starts on. */
size_t yaml_strict_line(const yaml_event_t *ev);

/* The next event of p into *ev. Refused with EINVAL (ENOMEM when libyaml runs out):
 * "NAME:LINE: YAML syntax error: ...", "NAME: byte N: not valid UTF-8: ...",
 * "NAME:LINE: anchors and aliases are not allowed in the WHAT" and the same for YAML
 * tags. On refusal nothing is left in *ev to delete. */
HSMCA_MUSTCHECK hsmca_code yaml_strict_next(yaml_parser_t *p, const char *name, const char *what,
                                            yaml_event_t *ev, hsmca_err *e);

/* 1 for a plain scalar that YAML 1.2 reads as null: "", "~", null, Null, NULL. */
int yaml_strict_is_null(const yaml_event_t *ev);

#endif
