/* config_env.c - see config_env.h, and config.h for config_env_name_problem.
 *
 * pkcs11.env reaches only the signer, the one process that loads the PKCS#11 module:
 * what a module reads from its environment (a TPM's TCTI, p11-kit's server address, a
 * vendor's configuration file) is written in the config, not inherited from whatever
 * started the supervisor. A name that would change which code the signer runs, or
 * what hsmca itself sets, is refused at load, with its line. */
#include "config_env.h"

#include "yaml_strict.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Prefixes refused as a whole: the dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH,
 * LD_AUDIT...), glibc's allocator switches (MALLOC_CHECK_, MALLOC_TRACE writes a file),
 * OpenSSL's configuration (it loads providers and engines into the signer's own
 * crypto), and hsmca's own variables. */
static const char *const refused_prefixes[] = {"LD_", "MALLOC_", "OPENSSL_", "HSMCA_"};

/* glibc's unsecvars.h (the variables it clears for a setuid program: they load code or
 * redirect the files its functions open), and the ones the supervisor passes on
 * itself (supervisor/sup_env.c), which have one source so they cannot disagree. */
static const char *const refused_names[] = {
    "GCONV_PATH",   "GETCONF_DIR",  "GLIBC_TUNABLES",
    "HOSTALIASES",  "LOCALDOMAIN",  "LOCPATH",
    "NIS_PATH",     "NLSPATH",      "RESOLV_HOST_CONF",
    "RES_OPTIONS",  "TMPDIR",       "TZDIR",
    "TZ",           "ASAN_OPTIONS", "UBSAN_OPTIONS",
    "LSAN_OPTIONS", "MSAN_OPTIONS", "TSAN_OPTIONS",
};

const char *config_env_name_problem(const char *name, size_t len)
{
    if (len == 0 || len >= CONFIG_MAX_ENV_NAME)
        return "must be 1-63 characters";
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        int alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
        if (!alpha && !(i > 0 && ch >= '0' && ch <= '9'))
            return "must be of A-Z a-z 0-9 _ and not start with a digit";
    }
    for (size_t i = 0; i < sizeof(refused_prefixes) / sizeof(refused_prefixes[0]); i++) {
        size_t pl = strlen(refused_prefixes[i]);
        if (len >= pl && !memcmp(name, refused_prefixes[i], pl))
            return "is refused: LD_*, MALLOC_*, OPENSSL_* and HSMCA_* would change the code "
                   "the signer runs or what hsmca sets itself";
    }
    for (size_t i = 0; i < sizeof(refused_names) / sizeof(refused_names[0]); i++)
        if (strlen(refused_names[i]) == len && !memcmp(name, refused_names[i], len))
            return "is refused: glibc's variables unsafe for a privileged process and the "
                   "ones hsmca passes on itself (TZ, *SAN_OPTIONS) cannot be set here";
    return NULL;
}

const char *config_env_get(const config_env *env, const char *name)
{
    for (int i = 0; i < env->n; i++)
        if (!strcmp(env->vars[i].name, name))
            return env->vars[i].value;
    return NULL;
}

typedef struct {
    yaml_parser_t *p;
    const char *file; /* for messages */
    const char *key;  /* "env" */
    config_env *env;
    hsmca_err *e;
} env_parser;

static HSMCA_MUSTCHECK hsmca_code env_err(env_parser *ep, const yaml_event_t *ev, const char *fmt,
                                          ...) __attribute__((format(printf, 3, 4)));
static HSMCA_MUSTCHECK hsmca_code env_err(env_parser *ep, const yaml_event_t *ev, const char *fmt,
                                          ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return hsmca_fail(ep->e, HSMCA_EINVAL, "%s:%zu: %s", ep->file, yaml_strict_line(ev), msg);
}

/* One NAME: value; name is the event just read. */
static HSMCA_MUSTCHECK hsmca_code env_entry(env_parser *ep, const yaml_event_t *name)
{
    if (name->type != YAML_SCALAR_EVENT)
        return env_err(ep, name, "the names in 'pkcs11.%s' must be plain strings", ep->key);
    const char *n = (const char *)name->data.scalar.value;
    size_t len = name->data.scalar.length;
    const char *why =
        memchr(n, '\0', len) ? "contains a NUL byte" : config_env_name_problem(n, len);
    if (why)
        return env_err(ep, name, "'pkcs11.%s' variable '%.64s' %s", ep->key, n, why);
    if (config_env_get(ep->env, n))
        return env_err(ep, name, "'pkcs11.%s' names '%s' twice", ep->key, n);
    if (ep->env->n >= CONFIG_MAX_ENV)
        return env_err(ep, name, "'pkcs11.%s' has more than %d variables", ep->key, CONFIG_MAX_ENV);
    yaml_event_t v;
    HSMCA_GUARD(yaml_strict_next(ep->p, ep->file, "config", &v, ep->e));
    hsmca_code rc = HSMCA_OK;
    size_t vlen = v.type == YAML_SCALAR_EVENT ? v.data.scalar.length : 0;
    if (v.type != YAML_SCALAR_EVENT || yaml_strict_is_null(&v))
        rc = env_err(ep, &v, "'pkcs11.%s' %s must be a string (\"\" for an empty one)", ep->key, n);
    else if (memchr(v.data.scalar.value, '\0', vlen))
        rc = env_err(ep, &v, "'pkcs11.%s' %s contains a NUL byte", ep->key, n);
    else if (vlen >= CONFIG_MAX_STR)
        rc = env_err(ep, &v, "'pkcs11.%s' %s is longer than %d bytes", ep->key, n,
                     CONFIG_MAX_STR - 1);
    if (rc == HSMCA_OK) {
        config_env_var *var = &ep->env->vars[ep->env->n++];
        memcpy(var->name, n, len + 1);
        memcpy(var->value, v.data.scalar.value, vlen + 1);
    }
    yaml_event_delete(&v);
    return rc;
}

hsmca_code config_env_parse(yaml_parser_t *p, const char *name, const char *key,
                            const yaml_event_t *start, config_env *env, hsmca_err *e)
{
    env_parser ep = {p, name, key, env, e};
    env->n = 0;
    if (yaml_strict_is_null(start))
        return HSMCA_OK;
    if (start->type != YAML_MAPPING_START_EVENT)
        return env_err(&ep, start, "'pkcs11.%s' must be a mapping of NAME: value", key);
    for (;;) {
        yaml_event_t ev;
        HSMCA_GUARD(yaml_strict_next(p, name, "config", &ev, e));
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return HSMCA_OK;
        }
        hsmca_code rc = env_entry(&ep, &ev);
        yaml_event_delete(&ev);
        if (rc != HSMCA_OK)
            return rc;
    }
}
