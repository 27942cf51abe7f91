/* ca_rotate_cfg.c - see ca_rotate_cfg.h. libyaml's event marks give each scalar's byte
 * range, so a value is replaced without re-emitting (and losing) the rest of the file. */
#include "ca_rotate_cfg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "config.h"
#include "util.h"
#include "yaml_strict.h"

#define CFG_FILE_MAX (1024 * 1024)

typedef struct {
    int found_section, found_key, flow;
    size_t val_start, val_end;   /* the key's scalar value */
    size_t first_key_line_start; /* where the section's first key's line starts */
    int first_key_col;
} locate;

/* Skips one node whose start event ev was just read (a scalar, or a whole collection). */
static int skip_node(yaml_parser_t *p, const yaml_event_t *ev)
{
    if (ev->type != YAML_MAPPING_START_EVENT && ev->type != YAML_SEQUENCE_START_EVENT)
        return 1;
    for (int depth = 1; depth > 0;) {
        yaml_event_t x;
        if (!yaml_parser_parse(p, &x))
            return 0;
        if (x.type == YAML_MAPPING_START_EVENT || x.type == YAML_SEQUENCE_START_EVENT)
            depth++;
        else if (x.type == YAML_MAPPING_END_EVENT || x.type == YAML_SEQUENCE_END_EVENT)
            depth--;
        else if (x.type == YAML_STREAM_END_EVENT)
            depth = 0;
        yaml_event_delete(&x);
    }
    return 1;
}

/* Inside the section's mapping (its start read): finds key. */
static int find_key(yaml_parser_t *p, const char *text, const char *key, locate *l)
{
    for (int first = 1;; first = 0) {
        yaml_event_t k, v;
        if (!yaml_parser_parse(p, &k))
            return 0;
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return 1;
        }
        int ok = k.type == YAML_SCALAR_EVENT;
        if (ok && first) {
            size_t i = k.start_mark.index;
            while (i > 0 && text[i - 1] != '\n')
                i--;
            l->first_key_line_start = i;
            l->first_key_col = (int)k.start_mark.column;
        }
        int match = ok && !strcmp((const char *)k.data.scalar.value, key);
        yaml_event_delete(&k);
        if (!ok || !yaml_parser_parse(p, &v))
            return 0;
        if (match && v.type == YAML_SCALAR_EVENT) {
            l->found_key = 1;
            l->val_start = v.start_mark.index;
            l->val_end = v.end_mark.index;
        } else if (match) {
            yaml_event_delete(&v);
            return 0;
        }
        ok = skip_node(p, &v);
        yaml_event_delete(&v);
        if (!ok)
            return 0;
    }
}

/* The top-level mapping: finds section, then key in it. 0: refused. */
static int find(const char *text, size_t len, const char *section, const char *key, locate *l)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return 0;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int ok = 1, depth = 0, done = 0;
    while (ok && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev))
            break;
        if (ev.type == YAML_STREAM_END_EVENT || ev.type == YAML_DOCUMENT_END_EVENT) {
            done = 1;
        } else if (ev.type == YAML_MAPPING_START_EVENT && depth == 0) {
            depth = 1;
        } else if (depth == 1 && ev.type == YAML_SCALAR_EVENT) {
            int match = !strcmp((const char *)ev.data.scalar.value, section);
            yaml_event_t v;
            if (!yaml_parser_parse(&p, &v)) {
                ok = 0;
            } else {
                if (match && v.type == YAML_MAPPING_START_EVENT) {
                    l->found_section = 1;
                    l->flow = v.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
                    ok = !l->flow && find_key(&p, text, key, l);
                    done = 1;
                } else {
                    ok = !match && skip_node(&p, &v);
                }
                yaml_event_delete(&v);
            }
        } else if (depth == 1 && ev.type == YAML_MAPPING_END_EVENT) {
            done = 1;
        }
        yaml_event_delete(&ev);
    }
    ok = ok && done;
    yaml_parser_delete(&p);
    return ok;
}

/* Replaces text[start..end) with ins (a new buffer). */
static char *splice(const char *text, size_t len, size_t start, size_t end, const char *ins)
{
    size_t n = strlen(ins);
    char *out = malloc(len - (end - start) + n + 1);
    if (!out)
        return NULL;
    memcpy(out, text, start);
    memcpy(out + start, ins, n);
    memcpy(out + start + n, text + end, len - end);
    out[len - (end - start) + n] = '\0';
    return out;
}

static HSMCA_MUSTCHECK hsmca_code set_one(char **text, const rot_cfg_set *s, hsmca_err *e)
{
    size_t len = strlen(*text);
    locate l = {0};
    HSMCA_ENSURE(strlen(s->value) < CONFIG_MAX_STR && !strpbrk(s->value, "\"\\\n"), e, HSMCA_EINVAL,
                 "%s.%s: the value has a quote, backslash or newline, or is too "
                 "long",
                 s->section, s->key);
    if (!find(*text, len, s->section, s->key, &l))
        return hsmca_fail(e, HSMCA_EINVAL,
                          "the config's %s section (or its %s) is not "
                          "written as a block mapping of plain values: edit it by hand",
                          s->section, s->key);
    char line[CONFIG_MAX_STR + 200];
    char *out;
    if (l.found_key) {
        snprintf(line, sizeof(line), "\"%s\"", s->value);
        out = splice(*text, len, l.val_start, l.val_end, line);
    } else if (l.found_section) {
        snprintf(line, sizeof(line), "%*s%s: \"%s\"\n", l.first_key_col, "", s->key, s->value);
        out = splice(*text, len, l.first_key_line_start, l.first_key_line_start, line);
    } else {
        snprintf(line, sizeof(line), "%s%s:\n  %s: \"%s\"\n",
                 len && (*text)[len - 1] != '\n' ? "\n" : "", s->section, s->key, s->value);
        out = splice(*text, len, len, len, line);
    }
    HSMCA_ENSURE(out, e, HSMCA_ENOMEM, "out of memory");
    free(*text);
    *text = out;
    return HSMCA_OK;
}

/* The new text as a config: written beside path, loaded and validated there. */
static HSMCA_MUSTCHECK hsmca_code check_and_replace(const char *path, const char *text, mode_t mode,
                                                    hsmca_err *e)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.rotate", path);
    HSMCA_GUARD(util_write_file_atomic(tmp, text, strlen(text), mode, e));
    hsmca_config *c = calloc(1, sizeof(*c));
    hsmca_err why;
    hsmca_err_clear(&why);
    hsmca_code rc = !c ? HSMCA_ENOMEM : config_load(tmp, c, &why);
    if (rc == HSMCA_OK)
        rc = config_validate(c, &why);
    free(c);
    if (rc != HSMCA_OK) {
        static const char lead[] = "the changed config would not load, left unchanged: ";
        unlink(tmp);
        if (sizeof(lead) + strlen(why.msg) <= sizeof(e->msg))
            return hsmca_fail(e, rc, "%s%s", lead, why.msg);
        /* The loader's reason is never cut short to fit this sentence: a line of its own. */
        fprintf(stderr, "%s\n", why.msg);
        return hsmca_fail(e, rc, "the changed config would not load (above): left unchanged");
    }
    /* The checked text replaces path by the one atomic writer (the directory synced too). */
    hsmca_err how;
    rc = util_write_file_atomic(path, text, strlen(text), mode, &how);
    unlink(tmp);
    if (rc != HSMCA_OK)
        return hsmca_fail(e, rc, "cannot replace the config %.150s: %s; left unchanged", path,
                          how.msg);
    return HSMCA_OK;
}

hsmca_code rot_cfg_apply(const char *path, const rot_cfg_set *sets, int n, hsmca_err *e)
{
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    HSMCA_ENSURE(stat(path, &st) == 0, e, HSMCA_EIO, "config %.200s: cannot stat it", path);
    HSMCA_GUARD(util_read_file(path, CFG_FILE_MAX, &text, &len, e));
    if (yaml_strict_check(path, "config", text, len, e) != HSMCA_OK) {
        free(text);
        return e->code;
    }
    hsmca_code rc = HSMCA_OK;
    for (int i = 0; rc == HSMCA_OK && i < n; i++)
        rc = set_one(&text, &sets[i], e);
    if (rc == HSMCA_OK)
        rc = check_and_replace(path, text, st.st_mode & 07777, e);
    free(text);
    return rc;
}
