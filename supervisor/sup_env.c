/* sup_env.c - see sup_env.h. */
#include "sup_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "module_env.h"

/* What both children read: log.c's level, the time zone glibc's localtime reads, and
 * the sanitizer runtimes' settings (an ASan build's CI sets them for the whole server). */
static const char *const passed_both[] = {
    "HSMCA_LOG_LEVEL", "TZ",           "ASAN_OPTIONS", "UBSAN_OPTIONS",
    "LSAN_OPTIONS",    "MSAN_OPTIONS", "TSAN_OPTIONS", "ASAN_SYMBOLIZER_PATH",
};

/* What only the front end reads (k8s/kubeconfig.c: the in-cluster config). */
static const char *const passed_frontend[] = {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"};

/* What only hsmca-publish reads (publish/k8s_publish.c): the in-cluster config, and the
 * Lease's holderIdentity from the pod's name. */
static const char *const passed_publish[] = {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
                                             "POD_NAME"};

/* What only the key fetcher reads (keyfetch/): libcurl's proxy settings. */
static const char *const passed_keyfetch[] = {"https_proxy", "HTTPS_PROXY", "no_proxy",
                                              "NO_PROXY",    "all_proxy",   "ALL_PROXY"};

_Static_assert(sizeof(passed_both) / sizeof(passed_both[0]) +
                       sizeof(passed_publish) / sizeof(passed_publish[0]) <=
                   16,
               "SUP_ENV_MAX counts 16 passed-on variables");
_Static_assert(sizeof(passed_both) / sizeof(passed_both[0]) +
                       sizeof(passed_keyfetch) / sizeof(passed_keyfetch[0]) <=
                   16,
               "SUP_ENV_MAX counts 16 passed-on variables");

/* Appends "name=value" to env. */
static HSMCA_MUSTCHECK hsmca_code env_add(sup_env *env, const char *name, const char *value,
                                          hsmca_err *e)
{
    if (env->n >= SUP_ENV_MAX)
        return hsmca_fail(e, HSMCA_EINTERNAL, "environment: more than %d variables", SUP_ENV_MAX);
    size_t len = strlen(name) + 1 + strlen(value) + 1;
    char *s = malloc(len);
    if (!s)
        return hsmca_fail(e, HSMCA_ENOMEM, "environment: out of memory");
    snprintf(s, len, "%s=%s", name, value);
    env->envp[env->n++] = s;
    env->envp[env->n] = NULL;
    return HSMCA_OK;
}

/* Copies the variables names[0..n) that are set in our own environment. */
static HSMCA_MUSTCHECK hsmca_code env_pass(sup_env *env, const char *const *names, size_t n,
                                           hsmca_err *e)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v)
            HSMCA_GUARD(env_add(env, names[i], v, e));
    }
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code env_fill(const hsmca_config *cfg, sup_env_role role, sup_env *env,
                                           hsmca_err *e)
{
    HSMCA_GUARD(env_pass(env, passed_both, sizeof(passed_both) / sizeof(passed_both[0]), e));
    if (role == SUP_ENV_FRONTEND)
        return env_pass(env, passed_frontend, sizeof(passed_frontend) / sizeof(passed_frontend[0]),
                        e);
    if (role == SUP_ENV_PUBLISH)
        return env_pass(env, passed_publish, sizeof(passed_publish) / sizeof(passed_publish[0]), e);
    if (role == SUP_ENV_KEYFETCH)
        return env_pass(env, passed_keyfetch,
                        sizeof(passed_keyfetch) / sizeof(passed_keyfetch[0]), e);
    const char *name[MODULE_ENV_MAX], *value[MODULE_ENV_MAX];
    int n = module_env_vars(cfg, name, value);
    for (int i = 0; i < n; i++)
        HSMCA_GUARD(env_add(env, name[i], value[i], e));
    return HSMCA_OK;
}

hsmca_code sup_env_build(const hsmca_config *cfg, sup_env_role role, sup_env *env, hsmca_err *e)
{
    memset(env, 0, sizeof(*env));
    hsmca_code rc = env_fill(cfg, role, env, e);
    if (rc != HSMCA_OK)
        sup_env_free(env);
    return rc;
}

void sup_env_free(sup_env *env)
{
    for (int i = 0; i < env->n && i < SUP_ENV_MAX; i++)
        free(env->envp[i]);
    memset(env, 0, sizeof(*env));
}

void sup_env_log_signer(const hsmca_config *cfg)
{
    char names[CONFIG_MAX_ENV * (CONFIG_MAX_ENV_NAME + 2) + 64];
    size_t used = 0;
    names[0] = '\0';
    for (int i = 0; i < cfg->pkcs11_env.n && i < CONFIG_MAX_ENV && used < sizeof(names); i++) {
        int n = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
                         cfg->pkcs11_env.vars[i].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    LOG_EVENT(LOG_LVL_INFO, "signer environment",
              LOG_STR("pkcs11_env", cfg->pkcs11_env.n ? names : "nothing"),
              LOG_STR("pkcs11_softhsm2_conf", cfg->softhsm2_conf[0] ? "SOFTHSM2_CONF" : "nothing"));
}
