/* module_env.c - see module_env.h. */
#include "module_env.h"

#include <stdlib.h>

int module_env_vars(const hsmca_config *cfg, const char *name[MODULE_ENV_MAX],
                    const char *value[MODULE_ENV_MAX])
{
    int n = 0;
    if (cfg->softhsm2_conf[0]) {
        name[n] = "SOFTHSM2_CONF";
        value[n++] = cfg->softhsm2_conf;
    }
    for (int i = 0; i < cfg->pkcs11_env.n && i < CONFIG_MAX_ENV; i++) {
        name[n] = cfg->pkcs11_env.vars[i].name;
        value[n++] = cfg->pkcs11_env.vars[i].value;
    }
    return n;
}

void module_env_apply(const hsmca_config *cfg)
{
    const char *name[MODULE_ENV_MAX], *value[MODULE_ENV_MAX];
    int n = module_env_vars(cfg, name, value);
    for (int i = 0; i < n; i++)
        setenv(name[i], value[i], 1);
}
