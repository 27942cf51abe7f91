/* test_config_env.c - pkcs11.env and signer.groups (config_env.c, config_validate.c)
 * and the children's environments built from them (supervisor/sup_env.h, common/module_env.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "module_env.h"
#include "sup_env.h"

static hsmca_config *new_cfg(void)
{
    hsmca_config *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    return c;
}

static hsmca_code parse(const char *yaml, hsmca_config *c, hsmca_err *e)
{
    hsmca_err_clear(e);
    return config_parse("t.yaml", yaml, strlen(yaml), "/etc/hsmca", c, e);
}

/* yaml is refused with a message containing want. */
static void refused(const char *yaml, const char *want)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse(yaml, c, &e), HSMCA_EINVAL);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not contain '%s'", e.msg, want);
    free(c);
}

static void test_env_parsed_in_order(void **state)
{
    (void)state;
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse("pkcs11:\n  env:\n    TPM2_PKCS11_TCTI: \"tabrmd:bus_type=session\"\n"
                           "    P11_KIT_SERVER_ADDRESS: unix:path=/run/p11-kit/pkcs11\n"
                           "    EMPTY: \"\"\n    NUM: 12\n    _x1: 'a b'\n",
                           c, &e),
                     HSMCA_OK);
    assert_int_equal(c->pkcs11_env.n, 5);
    assert_string_equal(c->pkcs11_env.vars[0].name, "TPM2_PKCS11_TCTI");
    assert_string_equal(c->pkcs11_env.vars[0].value, "tabrmd:bus_type=session");
    assert_string_equal(c->pkcs11_env.vars[1].value, "unix:path=/run/p11-kit/pkcs11");
    assert_string_equal(config_env_get(&c->pkcs11_env, "EMPTY"), "");
    assert_string_equal(config_env_get(&c->pkcs11_env, "NUM"), "12");
    assert_string_equal(config_env_get(&c->pkcs11_env, "_x1"), "a b");
    assert_null(config_env_get(&c->pkcs11_env, "OTHER"));
    /* A value is a string as written, never a path resolved against the config. */
    assert_int_equal(parse("pkcs11:\n  env:\n    F: rel/file\n", c, &e), HSMCA_OK);
    assert_string_equal(c->pkcs11_env.vars[0].value, "rel/file");
    /* Default and null: none. */
    assert_int_equal(parse("pkcs11:\n  env:\n", c, &e), HSMCA_OK);
    assert_int_equal(c->pkcs11_env.n, 0);
    assert_int_equal(parse("pkcs11:\n  env: {}\n", c, &e), HSMCA_OK);
    assert_int_equal(c->pkcs11_env.n, 0);
    free(c);
}

static void test_env_refusals(void **state)
{
    (void)state;
    static const char *const bad[] = {"LD_PRELOAD",
                                      "LD_LIBRARY_PATH",
                                      "LD_AUDIT",
                                      "LD_X",
                                      "MALLOC_ARENA_MAX",
                                      "GCONV_PATH",
                                      "GLIBC_TUNABLES",
                                      "OPENSSL_CONF",
                                      "OPENSSL_MODULES",
                                      "HSMCA_LOG_LEVEL",
                                      "TZ",
                                      "ASAN_OPTIONS",
                                      "TMPDIR",
                                      "NLSPATH",
                                      "RES_OPTIONS"};
    char yaml[256], want[128];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(yaml, sizeof(yaml), "pkcs11:\n  env:\n    %s: x\n", bad[i]);
        snprintf(want, sizeof(want), "t.yaml:3: 'pkcs11.env' variable '%s' is refused", bad[i]);
        refused(yaml, want);
    }
    assert_null(config_env_name_problem("LD", 2)); /* a prefix needs its underscore */
    assert_null(config_env_name_problem("TZX", 3));
    refused("pkcs11:\n  env:\n    9A: x\n", "variable '9A' must be of A-Z a-z 0-9 _");
    refused("pkcs11:\n  env:\n    A=B: x\n", "variable 'A=B' must be of");
    refused("pkcs11:\n  env:\n    \"\": x\n", "must be 1-63 characters");
    refused("pkcs11:\n  env:\n    "
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA: x\n",
            "must be 1-63 characters");
    refused("pkcs11:\n  env:\n    A: x\n    A: y\n", "t.yaml:4: 'pkcs11.env' names 'A' twice");
    refused("pkcs11:\n  env:\n    A:\n", "'pkcs11.env' A must be a string");
    refused("pkcs11:\n  env:\n    A: {b: c}\n", "'pkcs11.env' A must be a string");
    refused("pkcs11:\n  env:\n    [A]: x\n", "must be plain strings");
    refused("pkcs11:\n  env: x\n", "'pkcs11.env' must be a mapping");
    refused("pkcs11:\n  env:\n    A: \"a\\0b\"\n", "A contains a NUL byte");
    refused("pkcs11:\n  env: {}\n  env: {}\n", "duplicate key 'env'");
    char many[2048] = "pkcs11:\n  env:\n";
    for (int i = 0; i <= CONFIG_MAX_ENV; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "    V%d: x\n", i);
    refused(many, "t.yaml:35: 'pkcs11.env' has more than 32 variables");
    char *longv = malloc(CONFIG_MAX_STR + 64);
    assert_non_null(longv);
    snprintf(longv, CONFIG_MAX_STR + 64, "pkcs11:\n  env:\n    A: %0*d\n", CONFIG_MAX_STR, 0);
    refused(longv, "A is longer than 511 bytes");
    free(longv);
}

static void test_validate_env_and_groups(void **state)
{
    (void)state;
    hsmca_config *c = new_cfg();
    hsmca_err e;
    const char *base =
        "pkcs11:\n  module: /m.so\n  pin_file: pin\n  ca_key: \"pkcs11:token=t\"\n"
        "ca:\n  cert: ca.pem\nauth:\n  chain: [client_cert]\naudit:\n  disabled: true\n";
    char yaml[1024];
    snprintf(yaml, sizeof(yaml), "%ssigner:\n  groups: [tss, \"998\"]\n", base);
    assert_int_equal(parse(yaml, c, &e), HSMCA_OK);
    if (config_validate(c, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(c->signer_groups.n, 2);
    assert_string_equal(c->signer_groups.items[1], "998");
    snprintf(yaml, sizeof(yaml), "%ssigner:\n  groups: [tss, tss]\n", base);
    assert_int_equal(parse(yaml, c, &e), HSMCA_OK);
    assert_int_equal(config_validate(c, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "signer.groups names 'tss' twice"));
    snprintf(yaml, sizeof(yaml), "%ssigner:\n  groups: [\"a:b\"]\n", base);
    assert_int_equal(parse(yaml, c, &e), HSMCA_OK);
    assert_int_equal(config_validate(c, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "signer.groups item 'a:b' is not a group name or gid"));
    /* SOFTHSM2_CONF has one source. */
    assert_int_equal(parse("pkcs11:\n  module: /m.so\n  pin_file: pin\n  ca_key: \"pkcs11:t\"\n"
                           "  softhsm2_conf: s.conf\n  env:\n    SOFTHSM2_CONF: /x\n"
                           "ca:\n  cert: ca.pem\nauth:\n  chain: [client_cert]\n"
                           "audit:\n  disabled: true\n",
                           c, &e),
                     HSMCA_OK);
    assert_int_equal(config_validate(c, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "pkcs11.env names SOFTHSM2_CONF and pkcs11.softhsm2_conf"));
    free(c);
}

/* The value of name in env, or NULL. */
static const char *env_value(const sup_env *env, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < env->n; i++)
        if (!strncmp(env->envp[i], name, len) && env->envp[i][len] == '=')
            return env->envp[i] + len + 1;
    return NULL;
}

static void test_sup_env(void **state)
{
    (void)state;
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse("pkcs11:\n  softhsm2_conf: /etc/hsmca/softhsm2.conf\n  env:\n"
                           "    TPM2_PKCS11_TCTI: tabrmd\n    EMPTY: \"\"\n",
                           c, &e),
                     HSMCA_OK);
    setenv("ENVTEST_MARKER", "leak", 1);
    setenv("HSMCA_LOG_LEVEL", "info", 1);
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    sup_env fe, sg;
    assert_int_equal(sup_env_build(c, SUP_ENV_FRONTEND, &fe, &e), HSMCA_OK);
    assert_int_equal(sup_env_build(c, SUP_ENV_SIGNER, &sg, &e), HSMCA_OK);
    assert_null(fe.envp[fe.n]);
    assert_null(sg.envp[sg.n]);
    assert_null(env_value(&fe, "ENVTEST_MARKER"));
    assert_null(env_value(&sg, "ENVTEST_MARKER"));
    assert_string_equal(env_value(&fe, "HSMCA_LOG_LEVEL"), "info");
    assert_string_equal(env_value(&sg, "HSMCA_LOG_LEVEL"), "info");
    assert_string_equal(env_value(&fe, "KUBERNETES_SERVICE_HOST"), "10.0.0.1");
    assert_null(env_value(&sg, "KUBERNETES_SERVICE_HOST"));
    assert_null(env_value(&fe, "TPM2_PKCS11_TCTI"));
    assert_null(env_value(&fe, "SOFTHSM2_CONF"));
    assert_string_equal(env_value(&sg, "TPM2_PKCS11_TCTI"), "tabrmd");
    assert_string_equal(env_value(&sg, "EMPTY"), "");
    assert_string_equal(env_value(&sg, "SOFTHSM2_CONF"), "/etc/hsmca/softhsm2.conf");
    sup_env_free(&fe);
    sup_env_free(&sg);
    assert_int_equal(sg.n, 0);
    sup_env_free(&sg); /* harmless twice */
    unsetenv("ENVTEST_MARKER");
    unsetenv("KUBERNETES_SERVICE_HOST");
    free(c);
}

/* The module's variables: SOFTHSM2_CONF first, then pkcs11.env in its order; applied,
 * they are this process's (what the ceremony's module reads). */
static void test_module_env(void **state)
{
    (void)state;
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse("pkcs11:\n  softhsm2_conf: /etc/hsmca/softhsm2.conf\n  env:\n"
                           "    MODENV_B: two\n    MODENV_A: one\n",
                           c, &e),
                     HSMCA_OK);
    const char *name[MODULE_ENV_MAX], *value[MODULE_ENV_MAX];
    assert_int_equal(module_env_vars(c, name, value), 3);
    assert_string_equal(name[0], "SOFTHSM2_CONF");
    assert_string_equal(value[0], "/etc/hsmca/softhsm2.conf");
    assert_string_equal(name[1], "MODENV_B");
    assert_string_equal(value[1], "two");
    assert_string_equal(name[2], "MODENV_A");
    assert_string_equal(value[2], "one");
    const char *had = getenv("SOFTHSM2_CONF");
    char *softhsm2_conf = had ? strdup(had) : NULL;
    unsetenv("MODENV_A");
    setenv("MODENV_B", "old", 1);
    module_env_apply(c);
    assert_string_equal(getenv("SOFTHSM2_CONF"), "/etc/hsmca/softhsm2.conf");
    assert_string_equal(getenv("MODENV_A"), "one");
    assert_string_equal(getenv("MODENV_B"), "two");
    unsetenv("MODENV_A");
    unsetenv("MODENV_B");
    if (softhsm2_conf)
        setenv("SOFTHSM2_CONF", softhsm2_conf, 1);
    else
        unsetenv("SOFTHSM2_CONF");
    free(softhsm2_conf);
    memset(c, 0, sizeof(*c));
    assert_int_equal(module_env_vars(c, name, value), 0);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_parsed_in_order),
        cmocka_unit_test(test_env_refusals),
        cmocka_unit_test(test_validate_env_and_groups),
        cmocka_unit_test(test_sup_env),
        cmocka_unit_test(test_module_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
