/* policy_file.c - the SAN policy file's parser (policy_file.h has the format).
 *
 * libyaml's event API, as common/config.c: a fixed schema, nothing but what it
 * names; anchors, aliases and tags are refused (one meaning per value, no
 * billion laughs), and every refusal names the file, the line and the key. Our
 * recursion is bounded by the schema (top -> key_types -> a list). */
#include "policy_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/sha.h>
#include <yaml.h>

#include "config.h"
#include "policy.h"
#include "profile.h"
#include "util.h"
#include "yaml_strict.h"

typedef struct {
    yaml_parser_t p;
    const char *name;
    policy_set *s;
    hsmca_err *e;
    int seen_rsa, seen_ec; /* key_types' keys, for duplicates */
} pf_parser;

static const char *const TOP_KEYS[] = {
    "trust_domain_aliases", "denied_namespaces", "namespace_max_ttl", "dns_names",
    "service_dns",          "cluster_domain",    "key_types"};
#define N_TOP (sizeof(TOP_KEYS) / sizeof(TOP_KEYS[0]))

/* "NAME:LINE: key 'K': message" with EINVAL. */
static HSMCA_MUSTCHECK hsmca_code perr(pf_parser *pp, size_t line, const char *key, const char *fmt,
                                       ...) __attribute__((format(printf, 4, 5)));
static HSMCA_MUSTCHECK hsmca_code perr(pf_parser *pp, size_t line, const char *key, const char *fmt,
                                       ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (key)
        return hsmca_fail(pp->e, HSMCA_EINVAL, "%s:%zu: key '%s': %s", pp->name, line, key, msg);
    return hsmca_fail(pp->e, HSMCA_EINVAL, "%s:%zu: %s", pp->name, line, msg);
}

/* The next event, with the refusals every YAML file of ours makes (yaml_strict.h). */
static HSMCA_MUSTCHECK hsmca_code next_event(pf_parser *pp, yaml_event_t *ev)
{
    return yaml_strict_next(&pp->p, pp->name, "policy file", ev, pp->e);
}

/* A scalar without NUL bytes, or a refusal naming key. */
static HSMCA_MUSTCHECK hsmca_code scalar(pf_parser *pp, const yaml_event_t *ev, const char *key,
                                         const char *what, const char **s, size_t *len)
{
    if (ev->type != YAML_SCALAR_EVENT || yaml_strict_is_null(ev))
        return perr(pp, yaml_strict_line(ev), key, "must be %s", what);
    *s = (const char *)ev->data.scalar.value;
    *len = ev->data.scalar.length;
    if (memchr(*s, '\0', *len))
        return perr(pp, yaml_strict_line(ev), key, "contains a NUL byte");
    return HSMCA_OK;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Grows *arr (of *n items of size sz) by one zeroed item; NULL when full or out of memory. */
static void *grow(void *arrp, int *n, int cap, size_t sz)
{
    void **arr = arrp;
    if (*n >= cap)
        return NULL;
    void *a = realloc(*arr, (size_t)(*n + 1) * sz);
    if (!a)
        return NULL;
    *arr = a;
    void *item = (char *)a + (size_t)*n * sz;
    memset(item, 0, sz);
    (*n)++;
    return item;
}

/* ---- one item of each list or map --------------------------------------------------- */

typedef HSMCA_MUSTCHECK hsmca_code (*item_fn)(pf_parser *pp, const char *key, const char *v,
                                              size_t len, size_t line);
typedef HSMCA_MUSTCHECK hsmca_code (*entry_fn)(pf_parser *pp, const char *key, const char *k,
                                               size_t klen, const yaml_event_t *val);

static HSMCA_MUSTCHECK hsmca_code add_alias(pf_parser *pp, const char *key, const char *v,
                                            size_t len, size_t line)
{
    policy_set *s = pp->s;
    if (!policy_is_td(v, len))
        return perr(pp, line, key, "'%.64s' is not a trust domain ([a-z0-9._-], at most 255)", v);
    if (s->n_aliases >= POLICY_MAX_ALIASES)
        return perr(pp, line, key, "more than %d aliases", POLICY_MAX_ALIASES);
    for (int i = 0; i < s->n_aliases; i++)
        if (!strcmp(s->aliases[i], v))
            return perr(pp, line, key, "'%.64s' is listed twice", v);
    if (!(s->aliases[s->n_aliases] = dup_n(v, len)))
        return hsmca_fail(pp->e, HSMCA_ENOMEM, "%s: out of memory", pp->name);
    s->n_aliases++;
    return HSMCA_OK;
}

static int is_namespace(const char *v, size_t len)
{
    return policy_is_k8s_name(v, len, POLICY_NS_MAX, 0);
}

static HSMCA_MUSTCHECK hsmca_code add_denied(pf_parser *pp, const char *key, const char *v,
                                             size_t len, size_t line)
{
    policy_set *s = pp->s;
    if (!is_namespace(v, len))
        return perr(pp, line, key, "'%.64s' is not a namespace (a DNS-1123 label)", v);
    for (int i = 0; i < s->n_denied; i++)
        if (!strcmp(s->denied[i], v))
            return perr(pp, line, key, "'%.64s' is listed twice", v);
    char **slot = grow(&s->denied, &s->n_denied, POLICY_MAX_NAMESPACES, sizeof(char *));
    if (!slot)
        return perr(pp, line, key, "more than %d namespaces (or out of memory)",
                    POLICY_MAX_NAMESPACES);
    if (!(*slot = dup_n(v, len))) {
        s->n_denied--;
        return hsmca_fail(pp->e, HSMCA_ENOMEM, "%s: out of memory", pp->name);
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_ns_ttl(pf_parser *pp, const char *key, const char *k,
                                             size_t klen, const yaml_event_t *val)
{
    policy_set *s = pp->s;
    size_t line = yaml_strict_line(val);
    if (!is_namespace(k, klen))
        return perr(pp, line, key, "'%.64s' is not a namespace (a DNS-1123 label)", k);
    for (int i = 0; i < s->n_ttls; i++)
        if (!strcmp(s->ttls[i].ns, k))
            return perr(pp, line, key, "namespace '%.64s' is listed twice", k);
    const char *v;
    size_t len;
    uint32_t ttl = 0;
    HSMCA_GUARD(scalar(pp, val, key, "a duration", &v, &len));
    if (config_parse_u32(v, len, 1, &ttl) != 0 || ttl < PROFILE_MIN_TTL_S)
        return perr(pp, line, key,
                    "'%.64s' for '%.64s' must be a duration (N, Ns, Nm, Nh or Nd) "
                    "of at least %ds",
                    v, k, PROFILE_MIN_TTL_S);
    policy_ns_ttl *t = grow(&s->ttls, &s->n_ttls, POLICY_MAX_NAMESPACES, sizeof(*t));
    if (!t)
        return perr(pp, line, key, "more than %d namespaces (or out of memory)",
                    POLICY_MAX_NAMESPACES);
    t->max_ttl = ttl;
    if (!(t->ns = dup_n(k, klen))) {
        s->n_ttls--;
        return hsmca_fail(pp->e, HSMCA_ENOMEM, "%s: out of memory", pp->name);
    }
    return HSMCA_OK;
}

/* The list of names of one dns_names entry, into g. */
static HSMCA_MUSTCHECK hsmca_code read_names(pf_parser *pp, const char *key, policy_grant *g,
                                             const yaml_event_t *start)
{
    if (start->type != YAML_SEQUENCE_START_EVENT)
        return perr(pp, yaml_strict_line(start), key, "'%s.%s' must be a list of DNS names", g->sa,
                    g->ns);
    for (;;) {
        yaml_event_t ev;
        HSMCA_GUARD(next_event(pp, &ev));
        hsmca_code rc = HSMCA_OK;
        const char *v;
        size_t len;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return HSMCA_OK;
        }
        rc = scalar(pp, &ev, key, "a DNS name", &v, &len);
        if (rc == HSMCA_OK && !policy_is_dns_name(v, len))
            rc = perr(pp, yaml_strict_line(&ev), key,
                      "'%.64s' is not a lowercase DNS name of at most %d bytes (no wildcard)", v,
                      POLICY_DNS_MAX);
        for (int i = 0; rc == HSMCA_OK && i < g->n_names; i++)
            if (!strcmp(g->names[i], v))
                rc = perr(pp, yaml_strict_line(&ev), key, "'%.64s' is listed twice", v);
        if (rc == HSMCA_OK && g->n_names >= POLICY_MAX_DNS)
            rc = perr(pp, yaml_strict_line(&ev), key, "more than %d names for one account",
                      POLICY_MAX_DNS);
        if (rc == HSMCA_OK && !(g->names[g->n_names] = dup_n(v, len)))
            rc = hsmca_fail(pp->e, HSMCA_ENOMEM, "%s: out of memory", pp->name);
        if (rc == HSMCA_OK)
            g->n_names++;
        yaml_event_delete(&ev);
        if (rc != HSMCA_OK)
            return rc;
    }
}

/* "<sa>.<ns>": Citadel's account.namespace. A namespace has no dot, so it is
 * what follows the last one. */
static HSMCA_MUSTCHECK hsmca_code add_grant(pf_parser *pp, const char *key, const char *k,
                                            size_t klen, const yaml_event_t *val)
{
    policy_set *s = pp->s;
    size_t line = yaml_strict_line(val);
    const char *dot = memrchr(k, '.', klen);
    size_t sa_len = dot ? (size_t)(dot - k) : 0, ns_len = dot ? klen - sa_len - 1 : 0;
    if (!dot || !policy_is_k8s_name(k, sa_len, POLICY_SA_MAX, 1) || !is_namespace(dot + 1, ns_len))
        return perr(pp, line, key, "'%.64s' must be <serviceaccount>.<namespace>", k);
    for (int i = 0; i < s->n_grants; i++)
        if (strlen(s->grants[i].sa) == sa_len && !memcmp(s->grants[i].sa, k, sa_len) &&
            !strcmp(s->grants[i].ns, dot + 1))
            return perr(pp, line, key, "'%.64s' is listed twice", k);
    policy_grant *g = grow(&s->grants, &s->n_grants, POLICY_MAX_ACCOUNTS, sizeof(*g));
    if (!g)
        return perr(pp, line, key, "more than %d accounts (or out of memory)", POLICY_MAX_ACCOUNTS);
    g->sa = dup_n(k, sa_len);
    g->ns = dup_n(dot + 1, ns_len);
    if (!g->sa || !g->ns)
        return hsmca_fail(pp->e, HSMCA_ENOMEM, "%s: out of memory", pp->name);
    return read_names(pp, key, g, val);
}

/* key_types.rsa_bits and key_types.ec_curves. */
static HSMCA_MUSTCHECK hsmca_code add_rsa(pf_parser *pp, const char *key, const char *v, size_t len,
                                          size_t line)
{
    policy_set *s = pp->s;
    unsigned bits = 0;
    for (size_t i = 0; i < len && i < 5 && v[i] >= '0' && v[i] <= '9'; i++)
        bits = bits * 10 + (unsigned)(v[i] - '0');
    int digits = len > 0 && len <= 4 && strspn(v, "0123456789") == len && v[0] != '0';
    if (!digits || bits < PROFILE_RSA_BITS_MIN || bits > PROFILE_RSA_BITS_MAX)
        return perr(pp, line, key, "'%.16s' must be a modulus size in bits, %d-%d", v,
                    PROFILE_RSA_BITS_MIN, PROFILE_RSA_BITS_MAX);
    for (int i = 0; i < s->n_rsa_bits; i++)
        if (s->rsa_bits[i] == bits)
            return perr(pp, line, key, "%u is listed twice", bits);
    if (s->n_rsa_bits >= POLICY_MAX_RSA_SIZES)
        return perr(pp, line, key, "more than %d sizes", POLICY_MAX_RSA_SIZES);
    s->rsa_bits[s->n_rsa_bits++] = bits;
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code add_curve(pf_parser *pp, const char *key, const char *v,
                                            size_t len, size_t line)
{
    int *flag = !strcmp(v, "P-256")   ? &pp->s->ec_p256
                : !strcmp(v, "P-384") ? &pp->s->ec_p384
                                      : NULL;
    if (!flag)
        return perr(pp, line, key, "'%.16s' must be P-256 or P-384", v);
    if (*flag)
        return perr(pp, line, key, "%s is listed twice", v);
    *flag = 1;
    return HSMCA_OK;
}

/* ---- lists and maps ----------------------------------------------------------------- */

/* A sequence of scalars, each handed to fn; null is the empty list. */
static HSMCA_MUSTCHECK hsmca_code read_list(pf_parser *pp, const char *key,
                                            const yaml_event_t *start, item_fn fn)
{
    if (yaml_strict_is_null(start))
        return HSMCA_OK;
    if (start->type != YAML_SEQUENCE_START_EVENT)
        return perr(pp, yaml_strict_line(start), key, "must be a list");
    for (;;) {
        yaml_event_t ev;
        HSMCA_GUARD(next_event(pp, &ev));
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return HSMCA_OK;
        }
        const char *v;
        size_t len;
        hsmca_code rc = scalar(pp, &ev, key, "a list of strings", &v, &len);
        if (rc == HSMCA_OK)
            rc = fn(pp, key, v, len, yaml_strict_line(&ev));
        yaml_event_delete(&ev);
        if (rc != HSMCA_OK)
            return rc;
    }
}

/* A mapping of scalar keys, each key and the first event of its value handed to
 * fn (which consumes the rest of the value); null is the empty map. */
static HSMCA_MUSTCHECK hsmca_code read_map(pf_parser *pp, const char *key,
                                           const yaml_event_t *start, entry_fn fn)
{
    if (yaml_strict_is_null(start))
        return HSMCA_OK;
    if (start->type != YAML_MAPPING_START_EVENT)
        return perr(pp, yaml_strict_line(start), key, "must be a mapping");
    for (;;) {
        yaml_event_t k, v;
        HSMCA_GUARD(next_event(pp, &k));
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return HSMCA_OK;
        }
        const char *ks;
        size_t klen;
        hsmca_code rc = scalar(pp, &k, key, "a mapping with string keys", &ks, &klen);
        if (rc == HSMCA_OK && (rc = next_event(pp, &v)) == HSMCA_OK) {
            rc = fn(pp, key, ks, klen, &v);
            yaml_event_delete(&v);
        }
        yaml_event_delete(&k);
        if (rc != HSMCA_OK)
            return rc;
    }
}

static HSMCA_MUSTCHECK hsmca_code key_types_entry(pf_parser *pp, const char *key, const char *k,
                                                  size_t klen, const yaml_event_t *val)
{
    int *seen = !strcmp(k, "rsa_bits")    ? &pp->seen_rsa
                : !strcmp(k, "ec_curves") ? &pp->seen_ec
                                          : NULL;
    if (seen && *seen)
        return perr(pp, yaml_strict_line(val), key, "'%s' given twice", k);
    if (seen)
        *seen = 1;
    if (!strcmp(k, "rsa_bits"))
        return read_list(pp, "key_types.rsa_bits", val, add_rsa);
    if (!strcmp(k, "ec_curves"))
        return read_list(pp, "key_types.ec_curves", val, add_curve);
    return perr(pp, yaml_strict_line(val), key, "unknown key '%.64s' (rsa_bits, ec_curves)", k);
}

static HSMCA_MUSTCHECK hsmca_code read_bool(pf_parser *pp, const char *key, const yaml_event_t *ev,
                                            int *out)
{
    const char *v =
        ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE
            ? (const char *)ev->data.scalar.value
            : "";
    if (!strcmp(v, "true"))
        *out = 1;
    else if (!strcmp(v, "false"))
        *out = 0;
    else
        return perr(pp, yaml_strict_line(ev), key, "must be true or false");
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code read_top_value(pf_parser *pp, size_t k, size_t key_line,
                                                 const yaml_event_t *ev)
{
    policy_set *s = pp->s;
    const char *key = TOP_KEYS[k];
    switch (k) {
    case 0: return read_list(pp, key, ev, add_alias);
    case 1: return read_list(pp, key, ev, add_denied);
    case 2: return read_map(pp, key, ev, add_ns_ttl);
    case 3: return read_map(pp, key, ev, add_grant);
    case 4: return read_bool(pp, key, ev, &s->service_dns);
    case 5: {
        const char *v;
        size_t len;
        HSMCA_GUARD(scalar(pp, ev, key, "a DNS name", &v, &len));
        if (!policy_is_dns_name(v, len))
            return perr(pp, yaml_strict_line(ev), key, "'%.64s' is not a lowercase DNS name", v);
        memcpy(s->cluster_domain, v, len + 1);
        return HSMCA_OK;
    }
    case 6: {
        /* Given at all: only what it lists is allowed; an empty one allows nothing. */
        s->keys_set = 1;
        HSMCA_GUARD(read_map(pp, key, ev, key_types_entry));
        if (!s->ec_p256 && !s->ec_p384 && s->n_rsa_bits == 0)
            return perr(pp, key_line, key, "allows no key at all");
        return HSMCA_OK;
    }
    }
    return hsmca_fail(pp->e, HSMCA_EINTERNAL, "policy: bad key index");
}

static HSMCA_MUSTCHECK hsmca_code parse_top(pf_parser *pp)
{
    int seen[N_TOP] = {0};
    for (;;) {
        yaml_event_t k, v;
        HSMCA_GUARD(next_event(pp, &k));
        if (k.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&k);
            return HSMCA_OK;
        }
        hsmca_code rc = HSMCA_OK;
        size_t idx = N_TOP;
        if (k.type != YAML_SCALAR_EVENT) {
            rc = perr(pp, yaml_strict_line(&k), NULL, "keys must be plain strings");
        } else {
            for (size_t i = 0; i < N_TOP; i++)
                if (strlen(TOP_KEYS[i]) == k.data.scalar.length &&
                    !memcmp(TOP_KEYS[i], k.data.scalar.value, k.data.scalar.length))
                    idx = i;
            if (idx == N_TOP)
                rc = perr(pp, yaml_strict_line(&k), NULL, "unknown key '%.64s'",
                          (const char *)k.data.scalar.value);
            else if (seen[idx])
                rc = perr(pp, yaml_strict_line(&k), TOP_KEYS[idx], "given twice");
        }
        if (rc == HSMCA_OK && (rc = next_event(pp, &v)) == HSMCA_OK) {
            seen[idx] = 1;
            rc = read_top_value(pp, idx, yaml_strict_line(&k), &v);
            yaml_event_delete(&v);
        }
        yaml_event_delete(&k);
        if (rc != HSMCA_OK)
            return rc;
    }
}

static HSMCA_MUSTCHECK hsmca_code expect(pf_parser *pp, yaml_event_type_t type, const char *what)
{
    yaml_event_t ev;
    HSMCA_GUARD(next_event(pp, &ev));
    hsmca_code rc = ev.type == type ? HSMCA_OK : perr(pp, yaml_strict_line(&ev), NULL, "%s", what);
    yaml_event_delete(&ev);
    return rc;
}

/* stream: (document: mapping)?; an empty file is the empty policy. */
static HSMCA_MUSTCHECK hsmca_code parse_stream(pf_parser *pp)
{
    HSMCA_GUARD(expect(pp, YAML_STREAM_START_EVENT, "expected the start of a YAML stream"));
    yaml_event_t ev;
    HSMCA_GUARD(next_event(pp, &ev));
    yaml_event_type_t t = ev.type;
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT)
        return HSMCA_OK;
    HSMCA_GUARD(expect(pp, YAML_MAPPING_START_EVENT, "the policy must be a mapping"));
    HSMCA_GUARD(parse_top(pp));
    HSMCA_GUARD(expect(pp, YAML_DOCUMENT_END_EVENT, "expected the end of the document"));
    return expect(pp, YAML_STREAM_END_EVENT, "only one YAML document is allowed");
}

hsmca_code policy_file_parse(const char *name, const char *buf, size_t len, policy_set **out,
                             hsmca_err *e)
{
    if (!out)
        return hsmca_fail(e, HSMCA_EINTERNAL, "policy_file_parse: no output");
    *out = NULL;
    if (len > POLICY_FILE_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "%s: policy file larger than %d bytes", name,
                          POLICY_FILE_MAX);
    HSMCA_GUARD(yaml_strict_check(name, "policy file", buf, len, e));
    pf_parser pp;
    memset(&pp, 0, sizeof(pp));
    pp.name = name;
    pp.e = e;
    if (!(pp.s = calloc(1, sizeof(*pp.s))))
        return hsmca_fail(e, HSMCA_ENOMEM, "%s: out of memory", name);
    snprintf(pp.s->cluster_domain, sizeof(pp.s->cluster_domain), "cluster.local");
    if (!yaml_parser_initialize(&pp.p)) {
        policy_set_free(pp.s);
        return hsmca_fail(e, HSMCA_ENOMEM, "%s: cannot initialise the YAML parser", name);
    }
    yaml_parser_set_input_string(&pp.p, (const unsigned char *)buf, len);
    hsmca_code rc = parse_stream(&pp);
    yaml_parser_delete(&pp.p);
    if (rc != HSMCA_OK) {
        policy_set_free(pp.s);
        return rc;
    }
    *out = pp.s;
    return HSMCA_OK;
}

hsmca_code policy_file_load_buf(const char *name, const char *buf, size_t len, policy_set **out,
                                hsmca_err *e)
{
    hsmca_code rc = policy_file_parse(name, buf, len, out, e);
    if (rc == HSMCA_OK)
        SHA256((const unsigned char *)buf, len, (*out)->sha256);
    return rc;
}

hsmca_code policy_file_load(const char *path, policy_set **out, hsmca_err *e)
{
    char *buf = NULL;
    size_t len = 0;
    if (out)
        *out = NULL;
    hsmca_code rc = util_read_file(path, POLICY_FILE_MAX, &buf, &len, e);
    if (rc != HSMCA_OK)
        return rc;
    rc = policy_file_load_buf(path, buf, len, out, e);
    free(buf);
    return rc;
}

hsmca_code policy_file_load_fd(const char *name, int fd, policy_set **out, hsmca_err *e)
{
    struct stat st;
    if (out)
        *out = NULL;
    HSMCA_ENSURE(fstat(fd, &st) == 0, e, HSMCA_EIO, "%s: fstat: %s", name, strerror(errno));
    HSMCA_ENSURE(st.st_size >= 0 && st.st_size <= POLICY_FILE_MAX, e, HSMCA_EINVAL,
                 "%s: %lld bytes exceeds the limit of %d", name, (long long)st.st_size,
                 POLICY_FILE_MAX);
    size_t len = (size_t)st.st_size, off = 0;
    char *buf = malloc(len + 1);
    if (!buf)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    while (off < len) {
        ssize_t r = pread(fd, buf + off, len - off, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return hsmca_fail(e, HSMCA_EIO, "%s: read: %s", name, r < 0 ? strerror(errno) : "short");
        }
        off += (size_t)r;
    }
    buf[len] = 0;
    hsmca_code rc = policy_file_load_buf(name, buf, len, out, e);
    free(buf);
    return rc;
}

void policy_set_free(policy_set *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_aliases; i++)
        free(p->aliases[i]);
    for (int i = 0; i < p->n_denied; i++)
        free(p->denied[i]);
    free(p->denied);
    for (int i = 0; i < p->n_ttls; i++)
        free(p->ttls[i].ns);
    free(p->ttls);
    for (int i = 0; i < p->n_grants; i++) {
        free(p->grants[i].ns);
        free(p->grants[i].sa);
        for (int j = 0; j < p->grants[i].n_names; j++)
            free(p->grants[i].names[j]);
    }
    free(p->grants);
    free(p);
}

const uint8_t *policy_set_sha256(const policy_set *p)
{
    return p ? p->sha256 : NULL;
}

int policy_set_n_aliases(const policy_set *p)
{
    return p ? p->n_aliases : 0;
}

const char *policy_set_alias(const policy_set *p, int i)
{
    return p && i >= 0 && i < p->n_aliases ? p->aliases[i] : NULL;
}

int policy_set_grants_dns(const policy_set *p)
{
    return p && (p->service_dns || p->n_grants > 0);
}
