/* sup_env.h - the environment a child program runs with.
 *
 * A child inherits nothing from whatever started the supervisor (a shell, systemd, a
 * container runtime): it gets the few variables it reads, copied from the
 * supervisor's environment when set there, and the signer (the one process that loads
 * the PKCS#11 module) also gets what the config gives it.
 *
 *   both:     HSMCA_LOG_LEVEL, TZ, and the sanitizer runtimes' ASAN_OPTIONS,
 *             UBSAN_OPTIONS, LSAN_OPTIONS, MSAN_OPTIONS, TSAN_OPTIONS,
 *             ASAN_SYMBOLIZER_PATH (a sanitizer build keeps its settings)
 *   frontend: KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT (the in-cluster config of
 *             auth.tokenreview)
 *   publish:  KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, POD_NAME (publish-roots'
 *             in-cluster config and its Lease identity, publish.enabled)
 *   keyfetch: https_proxy, HTTPS_PROXY, no_proxy, NO_PROXY, all_proxy, ALL_PROXY (libcurl's
 *             proxy settings, for the issuer's discovery document and JWKS)
 *   signer:   SOFTHSM2_CONF=pkcs11.softhsm2_conf when set, then pkcs11.env in its order
 *             (common/module_env.h)
 *
 * Whatever runs the signer's program (the supervisor, a token check) builds its
 * environment here, so the module sees the same variables everywhere. */
#ifndef HSMCA_SUP_ENV_H
#define HSMCA_SUP_ENV_H

#include "config.h"
#include "hsmca_err.h"

typedef enum { SUP_ENV_SIGNER, SUP_ENV_FRONTEND, SUP_ENV_PUBLISH, SUP_ENV_KEYFETCH } sup_env_role;

/* The most variables one environment holds: the passed-on ones and the config's. */
#define SUP_ENV_MAX (16 + 1 + CONFIG_MAX_ENV)

typedef struct {
    char *envp[SUP_ENV_MAX + 1]; /* "NAME=value" strings, NULL-terminated: execve's envp */
    int n;
} sup_env;

/* Builds into *env the environment of role's program from cfg (pkcs11.env and
 * pkcs11.softhsm2_conf, for the signer) and the calling process's environment (getenv).
 * The strings are the caller's, released with sup_env_free, also after an error (only
 * HSMCA_ENOMEM). Build before fork: the child then only passes env->envp to execve. */
HSMCA_MUSTCHECK hsmca_code sup_env_build(const hsmca_config *cfg, sup_env_role role, sup_env *env,
                                         hsmca_err *e);

/* Frees what sup_env_build allocated and empties *env; harmless on an empty one. */
void sup_env_free(sup_env *env);

/* Logs the names (never the values: a value may hold a secret) of the variables the
 * signer gets from the config: those of pkcs11.env, and SOFTHSM2_CONF when
 * pkcs11.softhsm2_conf sets it. */
void sup_env_log_signer(const hsmca_config *cfg);

#endif
