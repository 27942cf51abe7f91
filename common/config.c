/* config.c - see config.h: the parser (config_defaults.c has the defaults,
 * config_validate.c the rules across fields).
 *
 * libyaml's event API drives a small schema: a table of {section, key, type,
 * offset, size}. Anything the table does not name, any value of the wrong
 * shape, any anchor/alias/tag, and any second document is refused with the
 * line it is on. Our recursion depth is bounded by the schema (top -> auth ->
 * jwt): we never descend into a node we do not expect, we refuse it. */
#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>
#include <yaml.h>

#include "config_env.h"
#include "util.h"
#include "yaml_strict.h"

#define CONFIG_MAX_FILE (1024 * 1024) /* a config is a few hundred bytes */
#define CONFIG_PATH_MAX 32            /* "auth.jwt" and the like */

#include "config_fields.h"


static const char *const config_authenticators[] = CONFIG_AUTHENTICATORS;

/* An auth.chain item: a known authenticator, named once. */
static const char *authn_item_problem(const config_list *l, const char *v)
{
    int known = 0;
    for (size_t i = 0; i < sizeof(config_authenticators) / sizeof(config_authenticators[0]); i++)
        known |= !strcmp(v, config_authenticators[i]);
    if (!known)
        return "is not an authenticator (client_cert, jwt, tokenreview)";
    for (int i = 0; i < l->n - 1; i++)
        if (!strcmp(l->items[i], v))
            return "is named twice";
    return NULL;
}

typedef struct {
    yaml_parser_t p;
    const char *name;     /* file name for messages */
    const char *base_dir; /* NULL: leave relative paths alone */
    hsmca_config *c;
    char *base; /* what field offsets are into: c, or the auth.clusters item being read */
    hsmca_err *e;
    unsigned char seen[NFIELDS]; /* duplicate keys */
} cfg_parser;

/* "NAME:LINE: message" with EINVAL. */
static HSMCA_MUSTCHECK hsmca_code perr(cfg_parser *cp, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static HSMCA_MUSTCHECK hsmca_code perr(cfg_parser *cp, size_t line, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return hsmca_fail(cp->e, HSMCA_EINVAL, "%s:%zu: %s", cp->name, line, msg);
}

/* The next event, with the refusals every YAML file of ours makes (yaml_strict.h). */
static HSMCA_MUSTCHECK hsmca_code next_event(cfg_parser *cp, yaml_event_t *ev)
{
    return yaml_strict_next(&cp->p, cp->name, "config", ev, cp->e);
}

static int scalar_has_nul(const yaml_event_t *ev)
{
    return memchr(ev->data.scalar.value, '\0', ev->data.scalar.length) != NULL;
}

static HSMCA_MUSTCHECK hsmca_code set_integer(cfg_parser *cp, const config_field *f,
                                              const yaml_event_t *ev)
{
    uint32_t v = 0;
    int ok = ev->type == YAML_SCALAR_EVENT && !scalar_has_nul(ev) &&
             config_parse_u32((const char *)ev->data.scalar.value, ev->data.scalar.length,
                              f->type == CT_DUR, &v) == 0 &&
             (v > 0 || (f->flags & CF_ZERO_OK));
    if (!ok) {
        const char *what = f->type == CT_DUR ? "duration (N, Ns, Nm, Nh or Nd)" : "integer";
        return perr(cp, yaml_strict_line(ev), "'%s' must be a %s %s", f->key,
                    (f->flags & CF_ZERO_OK) ? "non-negative" : "positive", what);
    }
    if (f->max && (v < f->min || v > f->max))
        return perr(cp, yaml_strict_line(ev), "'%s' must be %u-%u", f->key, f->min, f->max);
    memcpy(cp->base + f->off, &v, sizeof(v));
    return HSMCA_OK;
}

/* YAML 1.2 core schema booleans only: "yes", "on" and the like mean true in
 * YAML 1.1 and a string in 1.2, so they are refused rather than guessed. */
static HSMCA_MUSTCHECK hsmca_code set_bool(cfg_parser *cp, const config_field *f,
                                           const yaml_event_t *ev)
{
    static const char *const truths[] = {"true", "True", "TRUE"};
    static const char *const falsehoods[] = {"false", "False", "FALSE"};
    int v = -1;
    if (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        !scalar_has_nul(ev)) {
        const char *s = (const char *)ev->data.scalar.value;
        for (size_t i = 0; i < 3; i++) {
            if (!strcmp(s, truths[i]))
                v = 1;
            if (!strcmp(s, falsehoods[i]))
                v = 0;
        }
    }
    if (v < 0)
        return perr(cp, yaml_strict_line(ev), "'%s' must be true or false", f->key);
    memcpy(cp->base + f->off, &v, sizeof(v));
    return HSMCA_OK;
}

/* Copies a scalar into dst (dstsz bytes, at most CONFIG_MAX_STR), prefixing base_dir
 * for a relative path. what names the value in messages. */
static HSMCA_MUSTCHECK hsmca_code copy_scalar(cfg_parser *cp, const yaml_event_t *ev,
                                              const char *what, int is_path, char *dst,
                                              size_t dstsz)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (scalar_has_nul(ev))
        return perr(cp, yaml_strict_line(ev), "'%s' contains a NUL byte", what);
    if (len >= dstsz)
        return perr(cp, yaml_strict_line(ev), "'%s' is longer than %zu bytes", what, dstsz - 1);
    if (is_path && cp->base_dir && len > 0 && v[0] != '/') {
        size_t bl = strlen(cp->base_dir);
        const char *sep = (bl > 0 && cp->base_dir[bl - 1] == '/') ? "" : "/";
        int n = snprintf(dst, CONFIG_MAX_STR, "%s%s%s", cp->base_dir, sep, v);
        if (n < 0 || n >= CONFIG_MAX_STR)
            return perr(cp, yaml_strict_line(ev), "'%s' is longer than %d bytes once made absolute",
                        what, CONFIG_MAX_STR - 1);
        return HSMCA_OK;
    }
    memcpy(dst, v, len + 1);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code set_string(cfg_parser *cp, const config_field *f,
                                             const yaml_event_t *ev)
{
    char *dst = cp->base + f->off;
    if (ev->type != YAML_SCALAR_EVENT)
        return perr(cp, yaml_strict_line(ev), "'%s' must be a string", f->key);
    if (yaml_strict_is_null(ev)) {
        dst[0] = '\0';
        return HSMCA_OK;
    }
    HSMCA_GUARD(copy_scalar(cp, ev, f->key, f->type == CT_PATH, dst, f->size));
    if ((f->flags & CF_ID) && !config_cluster_id_ok(dst, strlen(dst)))
        return perr(cp, yaml_strict_line(ev), "'%s' must be 1-%d characters of A-Z a-z 0-9 . _ -",
                    f->key, CONFIG_MAX_CLUSTER_ID);
    if ((f->flags & CF_NET) && dst[0] && config_net_parse(dst) < 0)
        return perr(cp, yaml_strict_line(ev), "'%s' must be none, unix or inet", f->key);
    return HSMCA_OK;
}

/* A sequence of non-empty scalars replaces the default list; null empties it. */
static HSMCA_MUSTCHECK hsmca_code set_list(cfg_parser *cp, const config_field *f,
                                           const yaml_event_t *start)
{
    config_list *l = (config_list *)(cp->base + f->off);
    l->n = 0;
    if (yaml_strict_is_null(start))
        return HSMCA_OK;
    if (start->type != YAML_SEQUENCE_START_EVENT)
        return perr(cp, yaml_strict_line(start), "'%s' must be a list of strings", f->key);
    for (;;) {
        yaml_event_t ev;
        hsmca_code rc = next_event(cp, &ev);
        if (rc != HSMCA_OK)
            return rc;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return HSMCA_OK;
        }
        if (ev.type != YAML_SCALAR_EVENT || yaml_strict_is_null(&ev) || ev.data.scalar.length == 0)
            rc = perr(cp, yaml_strict_line(&ev), "items of '%s' must be non-empty strings", f->key);
        else if (l->n >= CONFIG_MAX_LIST)
            rc = perr(cp, yaml_strict_line(&ev), "'%s' has more than %d items", f->key,
                      CONFIG_MAX_LIST);
        else
            rc = copy_scalar(cp, &ev, f->key, 0, l->items[l->n++], CONFIG_MAX_STR);
        const char *why = NULL;
        if (rc == HSMCA_OK && (f->flags & CF_AUTHN) &&
            (why = authn_item_problem(l, l->items[l->n - 1])) != NULL)
            rc = perr(cp, yaml_strict_line(&ev), "'%s' item '%.64s' %s", f->key, l->items[l->n - 1],
                      why);
        yaml_event_delete(&ev);
        if (rc != HSMCA_OK)
            return rc;
    }
}

static const config_field *find_field(const char *section, const char *key, size_t klen)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (!strcmp(fields[i].section, section) && strlen(fields[i].key) == klen &&
            !memcmp(fields[i].key, key, klen))
            return &fields[i];
    return NULL;
}

static HSMCA_MUSTCHECK hsmca_code parse_mapping(cfg_parser *cp, const char *section);

/* One auth.clusters item, after its MAPPING_START (ev): its keys go into cl, with their
 * duplicate marks reset (each item may name each key once). */
static HSMCA_MUSTCHECK hsmca_code parse_cluster(cfg_parser *cp, const yaml_event_t *start,
                                                config_cluster *cl)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (!strncmp(fields[i].section, CLUSTER_SEC, strlen(CLUSTER_SEC)))
            cp->seen[i] = 0;
    memset(cl, 0, sizeof(*cl));
    cp->base = (char *)cl;
    hsmca_code rc = parse_mapping(cp, CLUSTER_SEC);
    cp->base = (char *)cp->c;
    if (rc != HSMCA_OK)
        return rc;
    if (!cl->id[0])
        return perr(cp, yaml_strict_line(start), "an 'auth.clusters' item needs an 'id'");
    for (int i = 0; i < cp->c->n_clusters; i++)
        if (!strcmp(cp->c->clusters[i].id, cl->id))
            return perr(cp, yaml_strict_line(start), "cluster '%s' is named twice in 'clusters'",
                        cl->id);
    return HSMCA_OK;
}

/* auth.clusters: a sequence of at most CONFIG_MAX_CLUSTERS mappings; null: none. */
static HSMCA_MUSTCHECK hsmca_code set_clusters(cfg_parser *cp, const config_field *f,
                                               const yaml_event_t *start)
{
    cp->c->n_clusters = 0;
    if (yaml_strict_is_null(start))
        return HSMCA_OK;
    if (start->type != YAML_SEQUENCE_START_EVENT)
        return perr(cp, yaml_strict_line(start), "'%s' must be a list of mappings", f->key);
    for (;;) {
        yaml_event_t ev;
        HSMCA_GUARD(next_event(cp, &ev));
        hsmca_code rc = HSMCA_OK;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return HSMCA_OK;
        }
        if (ev.type != YAML_MAPPING_START_EVENT)
            rc = perr(cp, yaml_strict_line(&ev), "items of '%s' must be mappings", f->key);
        else if (cp->c->n_clusters >= CONFIG_MAX_CLUSTERS)
            rc = perr(cp, yaml_strict_line(&ev), "'%s' has more than %d items", f->key,
                      CONFIG_MAX_CLUSTERS);
        else if ((rc = parse_cluster(cp, &ev, &cp->c->clusters[cp->c->n_clusters])) == HSMCA_OK)
            cp->c->n_clusters++;
        yaml_event_delete(&ev);
        if (rc != HSMCA_OK)
            return rc;
    }
}

/* The value of field f, whose first event is ev. */
static HSMCA_MUSTCHECK hsmca_code parse_value(cfg_parser *cp, const config_field *f,
                                              const yaml_event_t *ev)
{
    switch (f->type) {
    case CT_SECTION: {
        char sub[CONFIG_PATH_MAX];
        snprintf(sub, sizeof(sub), "%s%s%s", f->section, *f->section ? "." : "", f->key);
        if (yaml_strict_is_null(ev))
            return HSMCA_OK; /* a section whose keys are all commented out */
        if (ev->type != YAML_MAPPING_START_EVENT)
            return perr(cp, yaml_strict_line(ev), "'%s' must be a mapping", sub);
        return parse_mapping(cp, sub);
    }
    case CT_STR:
    case CT_PATH: return set_string(cp, f, ev);
    case CT_U32:
    case CT_DUR: return set_integer(cp, f, ev);
    case CT_LIST: return set_list(cp, f, ev);
    case CT_BOOL: return set_bool(cp, f, ev);
    case CT_CLUSTERS: return set_clusters(cp, f, ev);
    case CT_ENV: return config_env_parse(&cp->p, cp->name, f->key, ev, &cp->c->pkcs11_env, cp->e);
    }
    return hsmca_fail(cp->e, HSMCA_EINTERNAL, "config: bad field type");
}

/* One "key: value" of section; key is the event just read. */
static HSMCA_MUSTCHECK hsmca_code parse_entry(cfg_parser *cp, const char *section,
                                              const yaml_event_t *key)
{
    if (key->type != YAML_SCALAR_EVENT)
        return perr(cp, yaml_strict_line(key), "keys must be plain strings");
    const char *k = (const char *)key->data.scalar.value;
    const config_field *f = find_field(section, k, key->data.scalar.length);
    if (!f) {
        if (!*section)
            return perr(cp, yaml_strict_line(key), "unknown section '%.64s'", k);
        return perr(cp, yaml_strict_line(key), "unknown key '%.64s' in '%s'", k, section);
    }
    size_t idx = (size_t)(f - fields);
    if (cp->seen[idx]) {
        if (!*section)
            return perr(cp, yaml_strict_line(key), "duplicate section '%s'", f->key);
        return perr(cp, yaml_strict_line(key), "duplicate key '%s' in '%s'", f->key, section);
    }
    cp->seen[idx] = 1;
    yaml_event_t ev;
    HSMCA_GUARD(next_event(cp, &ev));
    hsmca_code rc = parse_value(cp, f, &ev);
    yaml_event_delete(&ev);
    return rc;
}

/* Called after the MAPPING_START of section; consumes up to its MAPPING_END. */
static HSMCA_MUSTCHECK hsmca_code parse_mapping(cfg_parser *cp, const char *section)
{
    for (;;) {
        yaml_event_t ev;
        HSMCA_GUARD(next_event(cp, &ev));
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return HSMCA_OK;
        }
        hsmca_code rc = parse_entry(cp, section, &ev);
        yaml_event_delete(&ev);
        if (rc != HSMCA_OK)
            return rc;
    }
}

/* signer.seccomp_allow_network is the deprecated synonym of signer.sandbox.network (true:
 * inet, false: none): a file that writes both must make them agree. A written false is
 * kept apart from the default (a true shows in the value itself), so the signer can name
 * the key in force. */
static HSMCA_MUSTCHECK hsmca_code check_network_synonym(cfg_parser *cp)
{
    static const char old_key[] = "seccomp_allow_network", new_key[] = "network";
    const config_field *old = find_field("signer", old_key, sizeof(old_key) - 1);
    const config_field *net = find_field("signer.sandbox", new_key, sizeof(new_key) - 1);
    hsmca_config *c = cp->c;
    if (!old || !net || !cp->seen[old - fields])
        return HSMCA_OK;
    c->signer_allow_network_false = !c->signer_allow_network;
    const char *same = c->signer_allow_network ? "inet" : "none";
    if (cp->seen[net - fields] && strcmp(c->signer_sandbox_network, same) != 0)
        return hsmca_fail(cp->e, HSMCA_EINVAL,
                          "%s: signer.seccomp_allow_network: %s (deprecated: it means "
                          "signer.sandbox.network: %s) disagrees with signer.sandbox.network: "
                          "%s; keep signer.sandbox.network only",
                          cp->name, c->signer_allow_network ? "true" : "false", same,
                          c->signer_sandbox_network[0] ? c->signer_sandbox_network : "\"\"");
    return HSMCA_OK;
}

/* Reads one event and checks its type; what says what was expected. */
static HSMCA_MUSTCHECK hsmca_code expect(cfg_parser *cp, yaml_event_type_t type, const char *what)
{
    yaml_event_t ev;
    HSMCA_GUARD(next_event(cp, &ev));
    hsmca_code rc = HSMCA_OK;
    if (ev.type != type)
        rc = perr(cp, yaml_strict_line(&ev), "%s", what);
    yaml_event_delete(&ev);
    return rc;
}

/* stream: (document: mapping)? ; an empty stream leaves the defaults. */
static HSMCA_MUSTCHECK hsmca_code parse_stream(cfg_parser *cp)
{
    hsmca_code rc = expect(cp, YAML_STREAM_START_EVENT, "expected the start of a YAML stream");
    if (rc != HSMCA_OK)
        return rc;
    yaml_event_t ev;
    if ((rc = next_event(cp, &ev)) != HSMCA_OK)
        return rc;
    yaml_event_type_t t = ev.type;
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT)
        return HSMCA_OK;
    /* Only DOCUMENT_START can follow STREAM_START besides STREAM_END. */
    if ((rc = expect(cp, YAML_MAPPING_START_EVENT, "the document must be a mapping")) != HSMCA_OK)
        return rc;
    if ((rc = parse_mapping(cp, "")) != HSMCA_OK)
        return rc;
    if ((rc = expect(cp, YAML_DOCUMENT_END_EVENT, "expected the end of the document")) != HSMCA_OK)
        return rc;
    return expect(cp, YAML_STREAM_END_EVENT, "only one YAML document is allowed");
}

hsmca_code config_parse(const char *name, const char *buf, size_t len, const char *base_dir,
                        hsmca_config *c, hsmca_err *e)
{
    if (len > CONFIG_MAX_FILE)
        return hsmca_fail(e, HSMCA_EINVAL, "%s: config is larger than %d bytes", name,
                          CONFIG_MAX_FILE);
    HSMCA_GUARD(yaml_strict_check(name, "config", buf, len, e));
    /* Parse into a scratch copy so that *c is untouched on error; ~31 KiB,
     * which we keep off the stack of whatever thread calls us. */
    hsmca_config *tmp = malloc(sizeof(*tmp));
    if (!tmp)
        return hsmca_fail(e, HSMCA_ENOMEM, "%s: out of memory", name);
    config_defaults(tmp);
    cfg_parser cp;
    memset(&cp, 0, sizeof(cp));
    cp.name = name;
    cp.base_dir = base_dir;
    cp.c = tmp;
    cp.base = (char *)tmp;
    cp.e = e;
    if (!yaml_parser_initialize(&cp.p)) {
        free(tmp);
        return hsmca_fail(e, HSMCA_ENOMEM, "%s: cannot initialise the YAML parser", name);
    }
    yaml_parser_set_input_string(&cp.p, (const unsigned char *)buf, len);
    hsmca_code rc = parse_stream(&cp);
    yaml_parser_delete(&cp.p);
    if (rc == HSMCA_OK)
        rc = check_network_synonym(&cp);
    if (rc == HSMCA_OK) {
        /* The roots sent to workloads default to the CA certificate itself. */
        if (!tmp->root_bundle[0])
            memcpy(tmp->root_bundle, tmp->ca_cert, sizeof(tmp->root_bundle));
        if (tmp->audit_replica[0])
            rc = config_replica_origin(tmp, e);
    }
    if (rc == HSMCA_OK)
        memcpy(c, tmp, sizeof(*c));
    free(tmp);
    return rc;
}

hsmca_code config_load(const char *path, hsmca_config *c, hsmca_err *e)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
        return hsmca_fail(e, HSMCA_EINVAL, "config: path too long: %.64s...", path);
    char *buf = NULL;
    size_t len = 0;
    hsmca_code rc = util_read_file(path, CONFIG_MAX_FILE, &buf, &len, e);
    if (rc != HSMCA_OK)
        return rc;
    char abs_dir[PATH_MAX];
    if (!realpath(dirname(dir), abs_dir)) {
        rc = hsmca_fail(e, HSMCA_EIO, "config: cannot resolve the directory of %s: %s", path,
                        strerror(errno));
    } else {
        rc = config_parse(path, buf, len, abs_dir, c, e);
        if (rc == HSMCA_OK)
            SHA256((const unsigned char *)buf, len, c->source_sha256);
    }
    free(buf);
    return rc;
}
