/* config_lines.c - see config_lines.h. libyaml's document API: the bytes passed
 * yaml_strict_check first (at most 1 MiB, shallow, no aliases), so loading them whole is
 * cheap and safe. */
#include "config_lines.h"

#include <stdio.h>
#include <string.h>

#include <yaml.h>

#include "yaml_strict.h"

#define LINES_MAX_DEPTH 8 /* the schema nests 4 deep (auth.clusters[].jwt.issuer) */

static void add(config_lines *l, const char *path, int line)
{
    if (l->n >= CONFIG_LINES_MAX)
        return;
    snprintf(l->e[l->n].path, sizeof(l->e[l->n].path), "%s", path);
    l->e[l->n++].line = line;
}

static void walk(yaml_document_t *d, yaml_node_t *n, const char *prefix, int depth, config_lines *l)
{
    char sub[CONFIG_LINES_PATH];
    if (!n || depth > LINES_MAX_DEPTH)
        return;
    if (n->type == YAML_SEQUENCE_NODE) {
        int i = 0;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++, i++) {
            yaml_node_t *item = yaml_document_get_node(d, *it);
            if (item && item->type == YAML_MAPPING_NODE) {
                snprintf(sub, sizeof(sub), "%s[%d]", prefix, i);
                walk(d, item, sub, depth + 1, l);
            }
        }
        return;
    }
    if (n->type != YAML_MAPPING_NODE)
        return;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (!k || k->type != YAML_SCALAR_NODE)
            continue;
        snprintf(sub, sizeof(sub), "%s%s%s", prefix, *prefix ? "." : "",
                 (const char *)k->data.scalar.value);
        add(l, sub, (int)k->start_mark.line + 1);
        walk(d, yaml_document_get_node(d, p->value), sub, depth + 1, l);
    }
}

void config_lines_build(const char *buf, size_t len, config_lines *l)
{
    yaml_parser_t p;
    yaml_document_t d;
    hsmca_err e;
    l->n = 0;
    /* A file past the limits is left unindexed: config_load refuses it with the same
     * message, at once. */
    if (yaml_strict_check("config", "config", buf, len, &e) != HSMCA_OK)
        return;
    if (!yaml_parser_initialize(&p))
        return;
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (yaml_parser_load(&p, &d)) {
        walk(&d, yaml_document_get_root_node(&d), "", 0, l);
        yaml_document_delete(&d);
    }
    yaml_parser_delete(&p);
}

int config_lines_find(const config_lines *l, const char *path)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->e[i].path, path))
            return l->e[i].line;
    return 0;
}

const char *config_lines_at(const config_lines *l, int line)
{
    const char *found = NULL;
    for (int i = 0; i < l->n; i++)
        if (l->e[i].line == line)
            found = l->e[i].path; /* the innermost: "pkcs11: {a: 1}" on one line */
    return found;
}

static int path_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '[' ||
           c == ']';
}

const char *config_lines_named(const config_lines *l, const char *msg, int *line)
{
    for (const char *s = msg; *s; s++) {
        if (!(*s >= 'a' && *s <= 'z') || (s > msg && path_char(s[-1])))
            continue;
        size_t n = 0;
        while (path_char(s[n]))
            n++;
        while (n > 0 && s[n - 1] == '.')
            n--;
        char word[CONFIG_LINES_PATH];
        if (n >= sizeof(word) || !memchr(s, '.', n))
            continue;
        memcpy(word, s, n);
        word[n] = '\0';
        for (int i = 0; i < l->n; i++)
            if (!strcmp(l->e[i].path, word)) {
                *line = l->e[i].line;
                return l->e[i].path;
            }
    }
    return NULL;
}
