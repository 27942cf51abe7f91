/* yaml_strict.h - libyaml events with the refusals every hsmca YAML file shares.
 *
 * The config (common/config.c) and the SAN policy file (policy/policy_file.c) are
 * fixed schemas read with libyaml's event API. Both refuse the same things before
 * their schema looks at an event: syntax errors, invalid UTF-8, anchors and aliases
 * (billion laughs) and explicit tags (one meaning per value). Every reader of a YAML
 * file (those two, `config check`'s line index, `ca rotate`'s config editing, the
 * kubeconfig) first passes the bytes through yaml_strict_check: the same size, depth
 * and alias limits for all. */
#ifndef HSMCA_YAML_STRICT_H
#define HSMCA_YAML_STRICT_H

#include "hsmca_err.h"
#include <stddef.h>
#include <yaml.h>

/* The limits of every YAML file hsmca reads (config, policy file, kubeconfig), whoever
 * reads it: libyaml has none, and its scanner is quadratic in the nesting depth. */
#define YAML_STRICT_MAX_BYTES (1024 * 1024)
#define YAML_STRICT_MAX_DEPTH 16

/* Checks buf[0..len) against those limits before any reader looks at it (what names the
 * file's kind: "config", "policy file", "kubeconfig"): at most YAML_STRICT_MAX_BYTES,
 * nested at most YAML_STRICT_MAX_DEPTH deep ("NAME:LINE: nested deeper than 16 levels
 * (the limit of every hsmca YAML file)"), and yaml_strict_next's refusals (syntax, UTF-8,
 * anchors and aliases, tags). It stops at the first refusal, so a bomb costs nothing. */
HSMCA_MUSTCHECK hsmca_code yaml_strict_check(const char *name, const char *what, const char *buf,
                                             size_t len, hsmca_err *e);

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
