/* test_config_admin.c - the admin.*, approval.* and intermediate.* keys (common/config.h):
 * defaults, parsing (a relative admin.socket is resolved like every path) and the rules
 * config_validate applies to them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "config.h"

static const char base_yaml[] = "pkcs11:\n  module: /m.so\n  pin_file: pin\n"
                                "  ca_key: \"pkcs11:token=t;object=ca\"\n"
                                "ca:\n  cert: ca.pem\n"
                                "auth:\n  jwt:\n    issuer: https://i\n    jwks_file: j.json\n"
                                "audit:\n  dir: audit\n";

/* base_yaml and extra, parsed (base dir /etc/hsmca); the config or NULL with e. */
static hsmca_config *parse(const char *extra, hsmca_err *e)
{
    static char buf[4096];
    hsmca_config *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    strcpy(buf, base_yaml);
    strcat(buf, extra);
    hsmca_err_clear(e);
    if (config_parse("t.yaml", buf, strlen(buf), "/etc/hsmca", c, e) != HSMCA_OK) {
        free(c);
        return NULL;
    }
    return c;
}

static void test_defaults_and_keys(void **state)
{
    hsmca_err e;
    hsmca_config *c = parse("", &e);
    assert_non_null(c);
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    assert_string_equal(c->admin_socket, "");
    assert_int_equal(c->approval_required, 2);
    assert_int_equal(c->approval_pending_ttl, 86400);
    assert_int_equal(c->approval_max_pending_per_user, 4);
    assert_int_equal(c->approval_max_pending, 64);
    assert_int_equal(c->ica_max_ttl, 365 * 86400);
    assert_int_equal(c->ica_dns_suffixes.n, 0);
    /* istiod's own serving names permitted, no IP range, no e-mail host. */
    assert_int_equal(c->ica_istiod_names.n, 3);
    assert_string_equal(c->ica_istiod_names.items[0], "istiod.istio-system.svc");
    assert_string_equal(c->ica_istiod_names.items[1], "istiod-remote.istio-system.svc");
    assert_string_equal(c->ica_istiod_names.items[2], "istio-pilot.istio-system.svc");
    assert_int_equal(c->ica_ip_ranges.n, 0);
    assert_int_equal(c->ica_email_domains.n, 0);
    free(c);
    c = parse("admin:\n  socket: admin.sock\n  group: hsmca-admin\n"
              "approval:\n  required: 3\n  pending_ttl: 2h\n"
              "intermediate:\n  subject_prefix: \"O=Example,OU=Mesh\"\n"
              "  dns_suffixes: [istio-system.svc, .mesh.example]\n  max_ttl: 90d\n"
              "  istiod_names: [istiod-canary.mesh.svc]\n"
              "  ip_ranges: [10.1.0.0/16, 192.0.2.7/32, \"fd00::/8\", 0.0.0.0/0]\n"
              "  email_domains: [mesh.example]\n",
              &e);
    assert_non_null(c);
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    assert_string_equal(c->admin_socket, "/etc/hsmca/admin.sock");
    assert_string_equal(c->admin_group, "hsmca-admin");
    assert_int_equal(c->approval_required, 3);
    assert_int_equal(c->approval_pending_ttl, 7200);
    assert_string_equal(c->ica_subject_prefix, "O=Example,OU=Mesh");
    assert_int_equal(c->ica_dns_suffixes.n, 2);
    assert_int_equal(c->ica_istiod_names.n, 1);
    assert_int_equal(c->ica_ip_ranges.n, 4);
    assert_int_equal(c->ica_email_domains.n, 1);
    assert_int_equal(c->ica_max_ttl, 90 * 86400);
    free(c);
}

static void test_refusals(void **state)
{
    static const struct {
        const char *yaml, *msg; /* msg: the start of config_validate's message; NULL: parse */
    } bad[] = {
        {"approval:\n  required: 17\n", NULL},
        {"approval:\n  required: 0\n", NULL},
        {"approval:\n  max_pending_per_user: 0\n", NULL},
        {"approval:\n  max_pending: 70000\n", NULL},
        {"approval:\n  max_pending_per_user: 10\n  max_pending: 5\n",
         "config: approval.max_pending_per_user must not exceed approval.max_pending"},
        {"admin:\n  sockt: x\n", NULL},
        {"admin:\n  group: g\n", "config: admin.group needs admin.socket"},
        {"intermediate:\n  max_ttl: 10m\n", "config: intermediate.max_ttl must be at least 1h"},
        {"intermediate:\n  subject_prefix: \"CN=x\"\n", "config: intermediate.subject_prefix"},
        {"intermediate:\n  subject_prefix: \"O=a,\"\n", "config: intermediate.subject_prefix"},
        {"intermediate:\n  subject_prefix: \"O=\"\n", "config: intermediate.subject_prefix"},
        {"intermediate:\n  dns_suffixes: [\"Evil,DNS:x\"]\n",
         "config: intermediate.dns_suffixes item"},
        {"intermediate:\n  istiod_names: [\"Istiod.x\"]\n", "config: intermediate.istiod_names item"},
        {"intermediate:\n  email_domains: [\"a@b.example\"]\n",
         "config: intermediate.email_domains item"},
        {"intermediate:\n  istiod_names: []\n",
         "config: intermediate.istiod_names and intermediate.dns_suffixes are both empty"},
        {"intermediate:\n  ip_ranges: [10.0.0.1/8]\n", "config: intermediate.ip_ranges item"},
        {"intermediate:\n  ip_ranges: [10.0.0.0]\n", "config: intermediate.ip_ranges item"},
        {"intermediate:\n  ip_ranges: [10.0.0.0/33]\n", "config: intermediate.ip_ranges item"},
        {"intermediate:\n  ip_ranges: [10.0.0.0/08]\n", "config: intermediate.ip_ranges item"},
        {"intermediate:\n  ip_ranges: [\"fd00::/129\"]\n", "config: intermediate.ip_ranges item"},
        {"intermediate:\n  ip_ranges: [\"fd00::1/8\"]\n", "config: intermediate.ip_ranges item"},
        {"intermediate:\n  ip_ranges: [any]\n", "config: intermediate.ip_ranges item"},
        {"admin:\n  socket: /a/very/long/path/that/does/not/fit/in/a/unix/socket/address/"
         "because/those/are/one/hundred/and/eight/bytes.sock\n",
         "config: admin.socket must be a path of fewer than 100 bytes"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hsmca_err e;
        hsmca_config *c = parse(bad[i].yaml, &e);
        if (!bad[i].msg) {
            assert_null(c);
            continue;
        }
        assert_non_null(c);
        assert_int_equal(config_validate(c, &e), HSMCA_EINVAL);
        if (strncmp(e.msg, bad[i].msg, strlen(bad[i].msg)) != 0)
            fail_msg("%s: got \"%s\"", bad[i].yaml, e.msg);
        free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_keys),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
