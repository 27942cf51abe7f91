/* ca_rotate_cfg.h - a rotation step's change to the config file: a few keys of its
 * top-level block mappings (pkcs11.ca_key, ca.cert, ca.next_key, ...) set in the YAML
 * text, every other byte (comments, order, other keys) left as it was, then the file
 * replaced atomically once the new text loads and validates as a config. */
#ifndef HSMCA_CA_ROTATE_CFG_H
#define HSMCA_CA_ROTATE_CFG_H

#include "hsmca_err.h"

#define ROT_CFG_MAX_SETS 12

typedef struct {
    const char *section, *key, *value;
} rot_cfg_set;

/* Sets each section.key to value (a double-quoted YAML scalar; "" clears it): the value of
 * a key already written is replaced in place, a missing key gets a line of its own at the
 * top of its section (indented as the section's first key), a missing section is added at
 * the end. A section written in flow style ({...}) or a key whose value is not a scalar
 * is refused. Then the new text must load and validate (config_load, config_validate)
 * before it replaces path (temporary file, fsync, rename; the file's mode kept). */
HSMCA_MUSTCHECK hsmca_code rot_cfg_apply(const char *path, const rot_cfg_set *sets, int n,
                                         hsmca_err *e);

#endif
