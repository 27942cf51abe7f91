/* test_ca_rotate_cfg.c - rot_cfg_apply (ca/ca_rotate_cfg.h): a rotation step's keys set
 * in the config's text, everything else kept byte for byte, and nothing written unless
 * the result loads and validates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ca_rotate_cfg.h"
#include "testutil.h"
#include "util.h"

static const char base[] =
    "# a comment the edit keeps\n"
    "pkcs11:\n"
    "  module: /usr/lib/softhsm/libsofthsm2.so\n"
    "  pin_file: pin\n"
    "  ca_key: \"pkcs11:token=hsmca;object=ca-key;type=private\"  # the CA key\n"
    "ca:\n"
    "    cert: root-cert.pem\n"
    "    root_bundle: roots.pem\n"
    "issuance:\n"
    "  trust_domain: mesh.example\n"
    "auth:\n"
    "  jwt:\n"
    "    issuer: https://hsmca.dev.local\n"
    "    jwks_file: dev-jwks.json\n"
    "audit:\n"
    "  dir: audit\n";

static char *g_dir, g_path[4096];

static void write_config(const char *text)
{
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(g_path, 0640);
}

static char *read_config(void)
{
    char *text = NULL;
    size_t len;
    assert_int_equal(util_read_file(g_path, 1 << 20, &text, &len, NULL), HSMCA_OK);
    return text;
}

static int setup(void **state)
{
    g_dir = tu_mkdtemp("rotcfg");
    snprintf(g_path, sizeof(g_path), "%s/hsmca.yaml", g_dir);
    return 0;
}

static int teardown(void **state)
{
    tu_system("rm -rf '%s'", g_dir);
    free(g_dir);
    return 0;
}

static void test_replace_and_insert(void **state)
{
    write_config(base);
    rot_cfg_set sets[] = {{"pkcs11", "ca_key", "pkcs11:token=hsmca;object=ca-key-2"},
                          {"ca", "next_key", "pkcs11:token=hsmca;object=k3"},
                          {"ca", "cert", "/etc/new.pem"}};
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = rot_cfg_apply(g_path, sets, 3, &e);
    if (rc != HSMCA_OK)
        fail_msg("%s", e.msg);
    char *text = read_config();
    const char *want = "# a comment the edit keeps\n"
                       "pkcs11:\n"
                       "  module: /usr/lib/softhsm/libsofthsm2.so\n"
                       "  pin_file: pin\n"
                       "  ca_key: \"pkcs11:token=hsmca;object=ca-key-2\"  # the CA key\n"
                       "ca:\n"
                       "    next_key: \"pkcs11:token=hsmca;object=k3\"\n"
                       "    cert: \"/etc/new.pem\"\n"
                       "    root_bundle: roots.pem\n"
                       "issuance:\n";
    assert_memory_equal(text, want, strlen(want));
    struct stat st;
    assert_int_equal(stat(g_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    free(text);
}

/* An import-next then a switch under an offline root: ca.chain is set apart from
 * ca.next_chain and ca.previous_chain (names that end the same), "" clears a key. */
static void test_offline_switch(void **state)
{
    write_config(base);
    hsmca_err e;
    hsmca_err_clear(&e);
    rot_cfg_set imp[] = {{"ca", "next_root", "/etc/r.pem"}, {"ca", "next_chain", "/etc/c2.pem"}};
    if (rot_cfg_apply(g_path, imp, 2, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    rot_cfg_set sw[] = {{"ca", "chain", "/etc/c2.pem"},
                        {"ca", "previous_chain", ""},
                        {"ca", "next_chain", ""},
                        {"ca", "next_root", ""}};
    if (rot_cfg_apply(g_path, sw, 4, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    char *text = read_config();
    assert_non_null(strstr(text, "\n    chain: \"/etc/c2.pem\"\n"));
    assert_non_null(strstr(text, "\n    next_chain: \"\"\n"));
    assert_non_null(strstr(text, "\n    next_root: \"\"\n"));
    assert_non_null(strstr(text, "\n    previous_chain: \"\"\n"));
    assert_null(strstr(text, "/etc/r.pem"));
    free(text);
}

/* Refused, the file left as it was and no temporary file behind. */
static void refused(const char *text, rot_cfg_set set, const char *why)
{
    write_config(text);
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_not_equal(rot_cfg_apply(g_path, &set, 1, &e), HSMCA_OK);
    assert_non_null(strstr(e.msg, why));
    char *now = read_config();
    assert_string_equal(now, text);
    free(now);
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.rotate", g_path);
    assert_int_not_equal(access(tmp, F_OK), 0);
}

static void test_refused(void **state)
{
    static char flow[sizeof(base) + 64];
    const char *at = strstr(base, "ca:\n");
    snprintf(flow, sizeof(flow), "%.*sca: {cert: root-cert.pem, root_bundle: roots.pem}\n%s",
             (int)(at - base), base, strstr(base, "issuance:"));
    refused(flow, (rot_cfg_set){"ca", "next_key", "x"}, "block mapping");
    refused(base, (rot_cfg_set){"ca", "cert", ""}, "ca.cert");
    refused(base, (rot_cfg_set){"ca", "next_cert", "a\"b"}, "quote");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_and_insert),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_offline_switch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
