/* config_lines.h - where each key of a YAML config file is written: "pkcs11.pin_file" ->
 * its line, for `hsmca config check`'s messages. The parser itself (common/config.c)
 * keeps no line once a value is read; this index is built from the same bytes apart. */
#ifndef HSMCA_CONFIG_LINES_H
#define HSMCA_CONFIG_LINES_H

#include <stddef.h>

#define CONFIG_LINES_MAX 512
#define CONFIG_LINES_PATH 96

typedef struct {
    struct {
        char path[CONFIG_LINES_PATH]; /* "auth.jwt.jwks_file", "auth.clusters[0].id" */
        int line;                     /* 1-based */
    } e[CONFIG_LINES_MAX];
    int n;
} config_lines;

/* Indexes the keys of the YAML in buf[0..len): every mapping key by its dotted path,
 * a mapping inside a sequence as "key[i]". A document libyaml cannot load leaves the
 * index empty (the parser's message has the line then). */
void config_lines_build(const char *buf, size_t len, config_lines *l);

/* The line of path, or 0 when the file does not write it. */
int config_lines_find(const config_lines *l, const char *path);

/* The key at line (its path), or NULL. */
const char *config_lines_at(const config_lines *l, int line);

/* The first written key a message names ("config: server.listen '...' must be ...":
 * "server.listen"), or NULL; its line in *line. */
const char *config_lines_named(const config_lines *l, const char *msg, int *line);

#endif
