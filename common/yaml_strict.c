/* yaml_strict.c - see yaml_strict.h. */
#include "yaml_strict.h"

#include <string.h>

size_t yaml_strict_line(const yaml_event_t *ev)
{
    return ev->start_mark.line + 1;
}

static const char *problem(const yaml_parser_t *p)
{
    return p->problem ? p->problem : "malformed YAML";
}

hsmca_code yaml_strict_next(yaml_parser_t *p, const char *name, const char *what, yaml_event_t *ev,
                            hsmca_err *e)
{
    if (!yaml_parser_parse(p, ev)) {
        if (p->error == YAML_MEMORY_ERROR)
            return hsmca_fail(e, HSMCA_ENOMEM, "%s: out of memory parsing YAML", name);
        /* The reader decodes ahead of the scanner: it knows a byte offset only. */
        if (p->error == YAML_READER_ERROR)
            return hsmca_fail(e, HSMCA_EINVAL, "%s: byte %zu: not valid UTF-8: %s", name,
                              p->problem_offset, problem(p));
        return hsmca_fail(e, HSMCA_EINVAL, "%s:%zu: YAML syntax error: %s", name,
                          p->problem_mark.line + 1, problem(p));
    }
    const yaml_char_t *anchor = NULL, *tag = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT: anchor = ev->data.alias.anchor; break;
    case YAML_SCALAR_EVENT:
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
        break;
    default: break;
    }
    if (anchor || tag) {
        size_t line = yaml_strict_line(ev);
        yaml_event_delete(ev);
        return hsmca_fail(e, HSMCA_EINVAL, "%s:%zu: %s are not allowed in the %s", name, line,
                          anchor ? "anchors and aliases" : "YAML tags", what);
    }
    return HSMCA_OK;
}

int yaml_strict_is_null(const yaml_event_t *ev)
{
    if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *v = (const char *)ev->data.scalar.value;
    return !strcmp(v, "") || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") ||
           !strcmp(v, "NULL");
}

hsmca_code yaml_strict_check(const char *name, const char *what, const char *buf, size_t len,
                             hsmca_err *e)
{
    if (len > YAML_STRICT_MAX_BYTES)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "%s: larger than %d bytes (the limit of every hsmca YAML file)", name,
                          YAML_STRICT_MAX_BYTES);
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return hsmca_fail(e, HSMCA_ENOMEM, "%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    hsmca_code rc = HSMCA_OK;
    for (int depth = 0, done = 0; !done;) {
        yaml_event_t ev;
        rc = yaml_strict_next(&p, name, what, &ev, e);
        if (rc != HSMCA_OK)
            break;
        done = ev.type == YAML_STREAM_END_EVENT;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)
            depth++;
        else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT)
            depth--;
        size_t line = yaml_strict_line(&ev);
        yaml_event_delete(&ev);
        if (depth > YAML_STRICT_MAX_DEPTH) {
            rc = hsmca_fail(e, HSMCA_EINVAL,
                            "%s:%zu: nested deeper than %d levels (the limit of every hsmca "
                            "YAML file)",
                            name, line, YAML_STRICT_MAX_DEPTH);
            break;
        }
    }
    yaml_parser_delete(&p);
    return rc;
}
