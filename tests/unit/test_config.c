/* test_config.c - config_parse / config_load / config_validate. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "testutil.h"

static const char full_yaml[] =
    "# the example from the issue\n"
    "server:\n"
    "  listen: \"0.0.0.0:15012\"\n"
    "  dns_names: [hsmca.istio-system.svc, hsmca.example]\n"
    "  ip_addresses: [\"10.0.0.1\", \"::1\"]\n"
    "  serving_cert_ttl: 7200\n"
    "  max_request_bytes: 32768\n"
    "  max_connections: 500\n"
    "  memory_limit_mib: 64\n"
    "  max_queued_requests: 256\n"
    "pkcs11:\n"
    "  module: /usr/lib/softhsm/libsofthsm2.so\n"
    "  pin_file: pin\n"
    "  ca_key: \"pkcs11:token=hsmca;object=ca-key;type=private\"\n"
    "  audit_key: \"pkcs11:token=hsmca;object=audit-key;type=private\"\n"
    "  softhsm2_conf: softhsm2.conf\n"
    "  sessions: 8\n"
    "ca:\n"
    "  cert: root-cert.pem\n"
    "  root_bundle: roots.pem\n"
    "  chain: \"\"\n"
    "issuance:\n"
    "  trust_domain: mesh.example\n"
    "  default_ttl: 12h\n"
    "  max_ttl: 2d\n"
    "  rate_per_second: 500\n"
    "  rate_burst: 900\n"
    "auth:\n"
    "  jwt:\n"
    "    issuer: https://hsmca.dev.local\n"
    "    audiences: [istio-ca, other]\n"
    "    jwks_file: dev-jwks.json\n"
    "    skew: 90s\n"
    "frontend:\n"
    "  user: hsmca-fe\n"
    "  chroot: /var/lib/hsmca/empty\n"
    "signer:\n"
    "  user: hsmca-hsm\n"
    "  seccomp_allow_network: true\n"
    "audit:\n"
    "  dir: audit\n";

static hsmca_config *new_cfg(void)
{
    hsmca_config *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    return c;
}

static hsmca_code parse(const char *yaml, const char *base, hsmca_config *c, hsmca_err *e)
{
    hsmca_err_clear(e);
    return config_parse("t.yaml", yaml, strlen(yaml), base, c, e);
}

static void test_full_example(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse(full_yaml, "/etc/hsmca", c, &e), HSMCA_OK);
    assert_string_equal(c->listen, "0.0.0.0:15012");
    assert_int_equal(c->dns_names.n, 2);
    assert_string_equal(c->dns_names.items[0], "hsmca.istio-system.svc");
    assert_string_equal(c->dns_names.items[1], "hsmca.example");
    assert_int_equal(c->ip_addresses.n, 2);
    assert_string_equal(c->ip_addresses.items[0], "10.0.0.1");
    assert_string_equal(c->ip_addresses.items[1], "::1");
    assert_int_equal(c->serving_cert_ttl, 7200);
    assert_int_equal(c->max_request_bytes, 32768);
    assert_int_equal(c->max_connections, 500);
    assert_int_equal(c->memory_limit_mib, 64);
    assert_int_equal(c->max_queued_requests, 256);
    assert_string_equal(c->module_path, "/usr/lib/softhsm/libsofthsm2.so");
    assert_string_equal(c->pin_file, "/etc/hsmca/pin");
    assert_string_equal(c->ca_key_uri, "pkcs11:token=hsmca;object=ca-key;type=private");
    assert_string_equal(c->audit_key_uri, "pkcs11:token=hsmca;object=audit-key;type=private");
    assert_string_equal(c->softhsm2_conf, "/etc/hsmca/softhsm2.conf");
    assert_int_equal(c->sessions, 8);
    assert_string_equal(c->ca_cert, "/etc/hsmca/root-cert.pem");
    assert_string_equal(c->root_bundle, "/etc/hsmca/roots.pem");
    assert_string_equal(c->chain, "");
    assert_string_equal(c->trust_domain, "mesh.example");
    assert_int_equal(c->default_ttl, 12 * 3600);
    assert_int_equal(c->max_ttl, 2 * 86400);
    assert_int_equal(c->rate_per_second, 500);
    assert_int_equal(c->rate_burst, 900);
    assert_string_equal(c->jwt_issuer, "https://hsmca.dev.local");
    assert_int_equal(c->jwt_audiences.n, 2);
    assert_string_equal(c->jwt_audiences.items[0], "istio-ca");
    assert_string_equal(c->jwt_audiences.items[1], "other");
    assert_string_equal(c->jwks_file, "/etc/hsmca/dev-jwks.json");
    assert_int_equal(c->jwt_skew, 90);
    assert_string_equal(c->fe_user, "hsmca-fe");
    assert_string_equal(c->fe_chroot, "/var/lib/hsmca/empty");
    assert_string_equal(c->signer_user, "hsmca-hsm");
    assert_int_equal(c->signer_allow_network, 1);
    assert_string_equal(c->audit_dir, "/etc/hsmca/audit"); /* relative to the config */
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    free(c);
}

static void test_defaults(void **state)
{
    hsmca_config *d = new_cfg(), *c = new_cfg();
    hsmca_err e;
    config_defaults(d);
    assert_string_equal(d->listen, "127.0.0.1:15012");
    assert_int_equal(d->dns_names.n, 0);
    assert_int_equal(d->ip_addresses.n, 0);
    assert_int_equal(d->serving_cert_ttl, 86400);
    assert_int_equal(d->handshake_timeout, 10);
    assert_int_equal(d->idle_timeout, 600);
    assert_int_equal(d->max_connections, 2048);
    assert_int_equal(d->memory_limit_mib, 160);
    assert_int_equal(d->max_queued_requests, 1024);
    assert_int_equal(d->max_request_bytes, 65536);
    assert_string_equal(d->module_path, "");
    assert_string_equal(d->pin_file, "");
    assert_string_equal(d->ca_key_uri, "");
    assert_string_equal(d->audit_key_uri, ""); /* no audit key: older configs keep working */
    assert_int_equal(d->sessions, 4);
    assert_string_equal(d->ca_cert, "");
    assert_string_equal(d->root_bundle, "");
    assert_string_equal(d->trust_domain, "cluster.local");
    assert_int_equal(d->default_ttl, 86400);
    assert_int_equal(d->max_ttl, 86400);
    assert_int_equal(d->rate_per_second, 1000);
    assert_int_equal(d->rate_burst, 2000);
    assert_int_equal(d->jwt_audiences.n, 1);
    assert_string_equal(d->jwt_audiences.items[0], "istio-ca");
    assert_int_equal(d->jwt_skew, 60);
    assert_string_equal(d->fe_user, "nobody");
    assert_string_equal(d->fe_chroot, "/var/empty");
    assert_string_equal(d->signer_user, "hsmca-signer");
    assert_int_equal(d->signer_allow_network, 0);
    assert_string_equal(d->audit_dir, "");    /* required by config_validate ... */
    assert_int_equal(d->audit_disabled, 0);   /* ... unless the config turns the log off */
    assert_string_equal(d->audit_origin, ""); /* this host's: config_default_origin */
    char origin[CONFIG_MAX_STR], host[256] = "";
    config_default_origin("td.example", origin, sizeof(origin));
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    char want[600];
    snprintf(want, sizeof(want), "%s/hsmca/td.example", host[0] ? host : "localhost");
    assert_string_equal(origin, want);
    assert_int_equal(parse("audit:\n  origin: ca1.example/hsmca\n", NULL, c, &e), HSMCA_OK);
    assert_string_equal(c->audit_origin, "ca1.example/hsmca");

    /* An empty file, an empty mapping, comments and null sections: all defaults. */
    const char *empties[] = {
        "",         "# nothing\n", "{}\n", "---\n{}\n...\n", "server:\npkcs11: ~\nauth:\n  jwt:\n",
        "signer:\n"};
    for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
        memset(c, 0x5a, sizeof(*c));
        assert_int_equal(parse(empties[i], "/base", c, &e), HSMCA_OK);
        assert_memory_equal(c, d, sizeof(*c));
    }

    /* A list replaces the default; null empties it. */
    assert_int_equal(parse("auth:\n  jwt:\n    audiences: [a]\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->jwt_audiences.n, 1);
    assert_string_equal(c->jwt_audiences.items[0], "a");
    assert_int_equal(parse("auth:\n  jwt:\n    audiences:\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->jwt_audiences.n, 0);
    /* One key changes one field only. */
    assert_int_equal(parse("pkcs11:\n  sessions: 9\n", NULL, c, &e), HSMCA_OK);
    d->sessions = 9;
    assert_memory_equal(c, d, sizeof(*c));
    free(d);
    free(c);
}

struct refusal {
    const char *yaml;
    const char *msg; /* exact, or a prefix when prefix is set */
    int prefix;
};

static const struct refusal refusals[] = {
    /* unknown keys */
    {"pkcs11:\n  module: x\n  x: 1\n", "t.yaml:3: unknown key 'x' in 'pkcs11'", 0},
    {"server: {}\nbogus: 1\n", "t.yaml:2: unknown section 'bogus'", 0},
    {"auth:\n  jwt:\n    issuer: a\n    foo: b\n", "t.yaml:4: unknown key 'foo' in 'auth.jwt'", 0},
    {"auth:\n  issuer: a\n", "t.yaml:2: unknown key 'issuer' in 'auth'", 0},
    {"Server: {}\n", "t.yaml:1: unknown section 'Server'", 0},
    /* wrong types for integers */
    {"pkcs11:\n  sessions: {a: 1}\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  module: m\n  sessions:\n    - 1\n",
     "t.yaml:4: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: four\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: -1\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 0\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 4294967296\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 99999999999999999999999\n",
     "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 1.5\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 0x10\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 010\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: +4\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions:\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"pkcs11:\n  sessions: 4s\n", "t.yaml:2: 'sessions' must be a positive integer", 0},
    {"issuance:\n\n  rate_burst: 1_000\n", "t.yaml:3: 'rate_burst' must be a positive integer", 0},
    /* durations */
    {"issuance:\n  max_ttl: 5w\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"issuance:\n  max_ttl: 10ms\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"issuance:\n  max_ttl: d\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"issuance:\n  max_ttl: 0s\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"issuance:\n  max_ttl: 49711d\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"issuance:\n  max_ttl: 4294967296s\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"issuance:\n  max_ttl: 1 h\n",
     "t.yaml:2: 'max_ttl' must be a positive duration (N, Ns, Nm, Nh or Nd)", 0},
    {"auth:\n  jwt:\n    skew: -1\n",
     "t.yaml:3: 'skew' must be a non-negative duration (N, Ns, Nm, Nh or Nd)", 0},
    /* wrong types for strings, lists, sections */
    {"pkcs11:\n  module: [a]\n", "t.yaml:2: 'module' must be a string", 0},
    {"ca:\n  cert:\n    a: b\n", "t.yaml:3: 'cert' must be a string", 0},
    {"server:\n  dns_names: a.example\n", "t.yaml:2: 'dns_names' must be a list of strings", 0},
    {"server:\n  dns_names: {a: b}\n", "t.yaml:2: 'dns_names' must be a list of strings", 0},
    {"server:\n  dns_names:\n    - a\n    - [b]\n",
     "t.yaml:4: items of 'dns_names' must be non-empty strings", 0},
    {"server:\n  dns_names:\n    - a\n    -\n",
     "t.yaml:4: items of 'dns_names' must be non-empty strings", 0},
    {"server:\n  dns_names: [a, \"\"]\n",
     "t.yaml:2: items of 'dns_names' must be non-empty strings", 0},
    {"pkcs11: 3\n", "t.yaml:1: 'pkcs11' must be a mapping", 0},
    {"auth:\n  jwt: [a]\n", "t.yaml:2: 'auth.jwt' must be a mapping", 0},
    {"? [a]\n: b\n", "t.yaml:1: keys must be plain strings", 0},
    {"ca:\n  cert: \"a\\0b\"\n", "t.yaml:2: 'cert' contains a NUL byte", 0},
    /* duplicates */
    {"pkcs11:\n  sessions: 1\n  sessions: 2\n", "t.yaml:3: duplicate key 'sessions' in 'pkcs11'",
     0},
    {"ca:\n  cert: a\nserver: {}\nca:\n  chain: b\n", "t.yaml:4: duplicate section 'ca'", 0},
    {"auth: {jwt: {skew: 1, skew: 2}}\n", "t.yaml:1: duplicate key 'skew' in 'auth.jwt'", 0},
    /* anchors, aliases, tags */
    {"ca:\n  cert: &a x\n  chain: *a\n",
     "t.yaml:2: anchors and aliases are not allowed in the "
     "config",
     0},
    {"ca:\n  chain: *a\n", "t.yaml:2: anchors and aliases are not allowed in the config", 0},
    {"server: &s\n  listen: a:1\n", "t.yaml:1: anchors and aliases are not allowed in the config",
     0},
    {"server:\n  dns_names: &l [a, b]\n",
     "t.yaml:2: anchors and aliases are not allowed in the config", 0},
    {"server:\n  dns_names: [lol]\n  ip_addresses: &a [\"lol\",\"lol\",\"lol\"]\n"
     "  listen: &b [*a,*a,*a,*a]\n",
     "t.yaml:3: anchors and aliases are not allowed in the config", 0},
    {"pkcs11:\n  sessions: !!int 4\n", "t.yaml:2: YAML tags are not allowed in the config", 0},
    /* booleans: YAML 1.2 true/false only; 1.1's yes/no/on/off are not guessed */
    {"signer:\n  seccomp_allow_network: yes\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network: off\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network: 1\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network: \"true\"\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network: tRUE\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network:\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network: [true]\n",
     "t.yaml:2: 'seccomp_allow_network' must be true or false", 0},
    {"signer:\n  seccomp_allow_network: true\n  seccomp_allow_network: false\n",
     "t.yaml:3: duplicate key 'seccomp_allow_network' in 'signer'", 0},
    {"signer:\n  users: a\n", "t.yaml:2: unknown key 'users' in 'signer'", 0},
    /* the resource limits (issue 8 item 4): range, with the line and the key */
    {"server:\n  listen: \"127.0.0.1:1\"\n  max_connections: 0\n",
     "t.yaml:3: 'max_connections' must be a positive integer", 0},
    {"server:\n  max_connections: 1000001\n", "t.yaml:2: 'max_connections' must be 1-1000000", 0},
    {"server:\n  max_connections: many\n", "t.yaml:2: 'max_connections' must be a positive integer",
     0},
    {"server:\n\n  memory_limit_mib: 15\n", "t.yaml:3: 'memory_limit_mib' must be 16-65536", 0},
    {"server:\n  memory_limit_mib: 64Mi\n",
     "t.yaml:2: 'memory_limit_mib' must be a positive integer", 0},
    {"server:\n  max_queued_requests: 4097\n", "t.yaml:2: 'max_queued_requests' must be 1-4096", 0},
    {"server:\n  max_queued_requests: -1\n",
     "t.yaml:2: 'max_queued_requests' must be a positive integer", 0},
    {"server:\n  max_connections: 10\n  max_connections: 20\n",
     "t.yaml:3: duplicate key 'max_connections' in 'server'", 0},
    {"signer:\n  user: [a]\n", "t.yaml:2: 'user' must be a string", 0},
    /* document shape */
    {"- a\n- b\n", "t.yaml:1: the document must be a mapping", 0},
    {"\n\nhello\n", "t.yaml:3: the document must be a mapping", 0},
    {"server: {}\n---\nca: {}\n", "t.yaml:2: only one YAML document is allowed", 0},
    {"server: {}\n...\n---\n", "t.yaml:3: only one YAML document is allowed", 0},
    /* syntax errors, at libyaml's line */
    {"server:\n\tlisten: x\n", "t.yaml:2: YAML syntax error: ", 1},
    {"server:\n  listen: x\n  - a\n", "t.yaml:3: YAML syntax error: ", 1},
    {"ca:\n  cert: a\xff\n", "t.yaml: byte 13: not valid UTF-8: ", 1},
    {"ca:\n  cert: \"abc\n", "t.yaml:3: YAML syntax error: ", 1},
    {"ca:\n  cert: a\n   chain: b\n", "t.yaml:3: YAML syntax error: ", 1},
};

static void test_refusals(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        const struct refusal *r = &refusals[i];
        memset(c, 0x5a, sizeof(*c));
        hsmca_code rc = parse(r->yaml, "/base", c, &e);
        if (rc != HSMCA_EINVAL ||
            (r->prefix ? strncmp(e.msg, r->msg, strlen(r->msg)) != 0 : strcmp(e.msg, r->msg) != 0))
            fail_msg("case %zu: %s\n  rc=%d msg='%s'\n  want '%s'", i, r->yaml, rc, e.msg, r->msg);
        /* *c is untouched on error. */
        for (size_t b = 0; b < sizeof(*c); b++)
            if (((unsigned char *)c)[b] != 0x5a)
                fail_msg("case %zu: config modified at byte %zu", i, b);
    }
    free(c);
}

/* Build "server:\n  dns_names:\n    - a0\n ..." with n block items. */
static char *list_yaml(int n, int flow)
{
    size_t cap = 64 + (size_t)n * 16;
    char *y = malloc(cap);
    assert_non_null(y);
    size_t o = (size_t)snprintf(y, cap, "server:\n  dns_names:%s", flow ? " [" : "\n");
    for (int i = 0; i < n; i++)
        if (flow)
            o += (size_t)snprintf(y + o, cap - o, "%sa%d", i ? ", " : "", i);
        else
            o += (size_t)snprintf(y + o, cap - o, "    - a%d\n", i);
    if (flow)
        snprintf(y + o, cap - o, "]\n");
    return y;
}

static void test_limits(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    char *y = list_yaml(CONFIG_MAX_LIST, 0);
    assert_int_equal(parse(y, NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->dns_names.n, CONFIG_MAX_LIST);
    assert_string_equal(c->dns_names.items[CONFIG_MAX_LIST - 1], "a15");
    free(y);
    /* The 17th item is on line 3 + 16. */
    y = list_yaml(CONFIG_MAX_LIST + 1, 0);
    assert_int_equal(parse(y, NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:19: 'dns_names' has more than 16 items");
    free(y);
    y = list_yaml(CONFIG_MAX_LIST + 1, 1);
    assert_int_equal(parse(y, NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:2: 'dns_names' has more than 16 items");
    free(y);

    /* Strings: CONFIG_MAX_STR-1 bytes fit, one more is refused. */
    char yaml[CONFIG_MAX_STR + 64];
    char val[CONFIG_MAX_STR + 1];
    memset(val, 'x', sizeof(val));
    val[CONFIG_MAX_STR - 1] = '\0';
    snprintf(yaml, sizeof(yaml), "issuance:\n  trust_domain: %s\n", val);
    assert_int_equal(parse(yaml, NULL, c, &e), HSMCA_OK);
    assert_int_equal(strlen(c->trust_domain), CONFIG_MAX_STR - 1);
    val[CONFIG_MAX_STR - 1] = 'x';
    val[CONFIG_MAX_STR] = '\0';
    snprintf(yaml, sizeof(yaml), "issuance:\n  trust_domain: %s\n", val);
    assert_int_equal(parse(yaml, NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:2: 'trust_domain' is longer than 511 bytes");
    snprintf(yaml, sizeof(yaml), "server:\n  dns_names:\n    - a\n    - %s\n", val);
    assert_int_equal(parse(yaml, NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:4: 'dns_names' is longer than 511 bytes");

    /* Integer boundary. */
    assert_int_equal(parse("issuance:\n  rate_burst: 4294967295\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->rate_burst, UINT32_MAX);

    /* Size cap: 1 MiB of comments parses, one byte more is refused unread. */
    size_t big = 1024 * 1024;
    char *buf = malloc(big + 1);
    assert_non_null(buf);
    memset(buf, '#', big + 1);
    for (size_t i = 79; i < big + 1; i += 80)
        buf[i] = '\n';
    hsmca_err_clear(&e);
    assert_int_equal(config_parse("t.yaml", buf, big, NULL, c, &e), HSMCA_OK);
    assert_int_equal(config_parse("t.yaml", buf, big + 1, NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml: config is larger than 1048576 bytes");
    free(buf);
    free(c);
}

static void test_durations(void **state)
{
    static const struct {
        const char *v;
        uint32_t want;
    } ok[] = {
        {"1", 1},
        {"3600", 3600},
        {"90s", 90},
        {"15m", 900},
        {"24h", 86400},
        {"7d", 604800},
        {"\"2h\"", 7200},
        {"'30'", 30},
        {"49710d", 49710u * 86400u},
        {"4294967295", UINT32_MAX},
        {"4294967295s", UINT32_MAX},
    };
    hsmca_config *c = new_cfg();
    hsmca_err e;
    char yaml[128];
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        snprintf(yaml, sizeof(yaml), "issuance:\n  max_ttl: %s\n", ok[i].v);
        if (parse(yaml, NULL, c, &e) != HSMCA_OK)
            fail_msg("%s: %s", ok[i].v, e.msg);
        assert_int_equal(c->max_ttl, ok[i].want);
    }
    /* Every duration field takes suffixes; skew alone may be zero. */
    assert_int_equal(parse("server:\n  serving_cert_ttl: 2h\nissuance:\n  default_ttl: 30m\n"
                           "auth:\n  jwt:\n    skew: 0\n",
                           NULL, c, &e),
                     HSMCA_OK);
    assert_int_equal(c->serving_cert_ttl, 7200);
    assert_int_equal(c->default_ttl, 1800);
    assert_int_equal(c->jwt_skew, 0);
    assert_int_equal(parse("auth:\n  jwt:\n    skew: 2m\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->jwt_skew, 120);
    free(c);
}

static void test_paths(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    const char *y = "pkcs11:\n  module: libsofthsm2.so\n  pin_file: pin\n"
                    "  softhsm2_conf: sub/softhsm2.conf\n"
                    "ca:\n  cert: /abs/ca.pem\n  chain: \"\"\n"
                    "auth:\n  jwt:\n    jwks_file: ../jwks.json\n"
                    "frontend:\n  chroot: empty\n";
    assert_int_equal(parse(y, "/etc/hsmca", c, &e), HSMCA_OK);
    assert_string_equal(c->module_path, "libsofthsm2.so"); /* dlopen's search, not ours */
    assert_string_equal(c->pin_file, "/etc/hsmca/pin");
    assert_string_equal(c->softhsm2_conf, "/etc/hsmca/sub/softhsm2.conf");
    assert_string_equal(c->ca_cert, "/abs/ca.pem");
    assert_string_equal(c->root_bundle, "/abs/ca.pem"); /* defaults to ca.cert */
    assert_string_equal(c->chain, "");                  /* empty means none */
    assert_string_equal(c->jwks_file, "/etc/hsmca/../jwks.json");
    assert_string_equal(c->fe_chroot, "empty"); /* not a path relative to the config */

    assert_int_equal(parse("ca:\n  cert: c.pem\n  root_bundle: r.pem\n", "/", c, &e), HSMCA_OK);
    assert_string_equal(c->ca_cert, "/c.pem");
    assert_string_equal(c->root_bundle, "/r.pem");
    assert_int_equal(parse("ca:\n  cert: c.pem\n", "/d/", c, &e), HSMCA_OK);
    assert_string_equal(c->ca_cert, "/d/c.pem");
    assert_string_equal(c->root_bundle, "/d/c.pem");
    assert_int_equal(parse("ca:\n  cert: c.pem\n", NULL, c, &e), HSMCA_OK);
    assert_string_equal(c->ca_cert, "c.pem");

    /* A relative path that only overflows once joined is refused. */
    char base[CONFIG_MAX_STR];
    memset(base, 'b', sizeof(base));
    base[0] = '/';
    base[CONFIG_MAX_STR - 8] = '\0';
    assert_int_equal(parse("pkcs11:\n  pin_file: pinpin\n", base, c, &e), HSMCA_OK);
    assert_int_equal(strlen(c->pin_file), CONFIG_MAX_STR - 1);
    assert_int_equal(parse("pkcs11:\n  pin_file: pinpin7\n", base, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:2: 'pin_file' is longer than 511 bytes once made absolute");
    free(c);
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_load(void **state)
{
    char *dir = tu_mkdtemp("cfg");
    char real[PATH_MAX], path[PATH_MAX], want[2 * PATH_MAX];
    assert_non_null(realpath(dir, real));
    hsmca_config *c = new_cfg();
    hsmca_err e;

    snprintf(path, sizeof(path), "%s/hsmca.yaml", dir);
    write_file(path, full_yaml, strlen(full_yaml));
    hsmca_err_clear(&e);
    assert_int_equal(config_load(path, c, &e), HSMCA_OK);
    snprintf(want, sizeof(want), "%s/pin", real);
    assert_string_equal(c->pin_file, want);
    snprintf(want, sizeof(want), "%s/dev-jwks.json", real);
    assert_string_equal(c->jwks_file, want);
    assert_int_equal(c->sessions, 8);

    /* A relative config path still yields absolute file paths. */
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(dir), 0);
    memset(c, 0, sizeof(*c));
    hsmca_code rc = config_load("hsmca.yaml", c, &e);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, HSMCA_OK);
    snprintf(want, sizeof(want), "%s/pin", real);
    assert_string_equal(c->pin_file, want);

    /* Errors carry the file name and line. */
    {
        const char *y = "pkcs11:\n  pin_file: p\n  pin: 1\n";
        write_file(path, y, strlen(y));
    }
    assert_int_equal(config_load(path, c, &e), HSMCA_EINVAL);
    snprintf(want, sizeof(want), "%s:3: unknown key 'pin' in 'pkcs11'", path);
    assert_string_equal(e.msg, want);

    /* A missing file is named. */
    snprintf(path, sizeof(path), "%s/missing.yaml", dir);
    assert_int_not_equal(config_load(path, c, &e), HSMCA_OK);
    assert_non_null(strstr(e.msg, path));

    /* A file over 1 MiB is refused before it is parsed. */
    size_t big = 1024 * 1024 + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, '#', big);
    snprintf(path, sizeof(path), "%s/big.yaml", dir);
    write_file(path, buf, big);
    free(buf);
    assert_int_equal(config_load(path, c, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, path));

    tu_system("rm -rf '%s'", dir);
    free(dir);
    free(c);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The shipped example must load and validate as it is. */
static void test_example_file(void **state)
{
    const char *src = __FILE__;
    const char *tail = strstr(src, "tests/unit/test_config.c");
    if (src[0] != '/' || !tail)
        skip(); /* built from a relative path: cannot find the source tree */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%.*shsm-config/softhsm-dev.yaml", (int)(tail - src), src);
    hsmca_config *c = new_cfg();
    hsmca_err e;
    hsmca_err_clear(&e);
    if (config_load(path, c, &e) != HSMCA_OK || config_validate(c, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(c->handshake_timeout, 10);
    assert_int_equal(c->idle_timeout, 600);
    assert_string_equal(c->module_path, "/usr/lib/softhsm/libsofthsm2.so");
    assert_string_equal(c->ca_key_uri, "pkcs11:token=hsmca;object=ca-key;type=private");
    assert_string_equal(c->audit_key_uri, "pkcs11:token=hsmca;object=audit-key;type=private");
    assert_true(ends_with(c->pin_file, "/hsm-config/dev/pin"));
    assert_true(ends_with(c->softhsm2_conf, "/hsm-config/dev/softhsm2.conf"));
    assert_true(ends_with(c->ca_cert, "/hsm-config/dev/root-cert.pem"));
    assert_true(ends_with(c->jwks_file, "/hsm-config/dev/dev-jwks.json"));
    assert_int_equal(c->serving_cert_ttl, 86400);
    assert_int_equal(c->jwt_skew, 60);
    assert_string_equal(c->signer_user, "hsmca-signer");
    assert_int_equal(c->signer_allow_network, 0);
    assert_true(ends_with(c->audit_dir, "/hsm-config/dev/audit"));
    assert_string_equal(c->audit_origin, "ca-1.example.com/hsmca/cluster.local");
    free(c);
}

/* A valid config for config_validate tests to break one field at a time. */
static hsmca_config *valid_cfg(void)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse(full_yaml, "/etc/hsmca", c, &e), HSMCA_OK);
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    return c;
}

static void expect_invalid(const hsmca_config *c, const char *msg)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    if (config_validate(c, &e) != HSMCA_EINVAL)
        fail_msg("validated, wanted \"%s\"", msg);
    assert_string_equal(e.msg, msg);
}

static void test_validate_required(void **state)
{
    static const struct {
        size_t off;
        const char *msg;
    } req[] = {
        {offsetof(hsmca_config, module_path), "config: pkcs11.module is required"},
        {offsetof(hsmca_config, pin_file), "config: pkcs11.pin_file is required"},
        {offsetof(hsmca_config, ca_key_uri), "config: pkcs11.ca_key is required"},
        {offsetof(hsmca_config, ca_cert), "config: ca.cert is required"},
        {offsetof(hsmca_config, jwt_issuer), "config: auth.jwt.issuer is required"},
        {offsetof(hsmca_config, jwks_file),
         "config: auth.jwt.jwks_file is required (or auth.jwt.discovery: true)"},
        {offsetof(hsmca_config, trust_domain), "config: issuance.trust_domain is required"},
        {offsetof(hsmca_config, fe_user), "config: frontend.user is required"},
        {offsetof(hsmca_config, signer_user), "config: signer.user is required"},
    };
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
        hsmca_config *c = valid_cfg();
        ((char *)c + req[i].off)[0] = '\0';
        expect_invalid(c, req[i].msg);
        free(c);
    }
    /* Defaults alone lack every required file: all named at once, not one per try. */
    hsmca_config *c = new_cfg();
    config_defaults(c);
    expect_invalid(c, "config: 7 required keys are missing: pkcs11.module, pkcs11.pin_file, "
                      "pkcs11.ca_key, ca.cert, auth.jwt.issuer, auth.jwt.jwks_file (or "
                      "auth.jwt.discovery: true), audit.dir (or audit.disabled: true)");
    free(c);
    /* Two of them: both named; every required key at once fits the message. */
    c = valid_cfg();
    c->pin_file[0] = c->audit_dir[0] = '\0';
    expect_invalid(c, "config: 2 required keys are missing: pkcs11.pin_file, audit.dir (or "
                      "audit.disabled: true)");
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        ((char *)c + req[i].off)[0] = '\0';
    hsmca_err e;
    assert_int_equal(config_validate(c, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "config: 10 required keys are missing: pkcs11.module, "));
    assert_non_null(strstr(e.msg, ", audit.dir (or audit.disabled: true)"));
    free(c);
}

/* auth.chain and the key source of auth.jwt (issue 7 items 1 and 4). */
static void test_auth_section(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    /* defaults: Istio's order, a JWKS file, refresh 1 h, min_refresh 30 s */
    assert_int_equal(parse("", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->auth_chain.n, 2);
    assert_string_equal(c->auth_chain.items[0], "client_cert");
    assert_string_equal(c->auth_chain.items[1], "jwt");
    assert_int_equal(c->jwt_discovery, 0);
    assert_int_equal(c->jwt_refresh, 3600);
    assert_int_equal(c->jwt_min_refresh, 30);
    assert_int_equal(c->jwt_fetch_timeout, 10);
    assert_int_equal(c->jwt_bind, 1); /* identity binding on unless turned off */
    assert_int_equal(c->jwt_bind_required, 0);
    assert_int_equal(
        parse("auth:\n  jwt:\n    bind: false\n    bind_required: false\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->jwt_bind, 0);
    assert_int_equal(parse("auth:\n  chain: [jwt]\n  jwt:\n    issuer: https://i.example\n"
                           "    discovery: true\n    ca_bundle: ca.pem\n    refresh: 2h\n"
                           "    min_refresh: 5s\n    fetch_timeout: 3s\n",
                           "/etc/hsmca", c, &e),
                     HSMCA_OK);
    assert_int_equal(c->auth_chain.n, 1);
    assert_int_equal(c->jwt_discovery, 1);
    assert_string_equal(c->jwt_ca_bundle, "/etc/hsmca/ca.pem");
    assert_int_equal(c->jwt_refresh, 7200);
    assert_int_equal(c->jwt_min_refresh, 5);
    assert_int_equal(c->jwt_fetch_timeout, 3);
    /* refusals name the line and the key */
    assert_int_equal(parse("auth:\n  chain:\n    - jwt\n    - kerberos\n", NULL, c, &e),
                     HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:4: 'chain' item 'kerberos' is not an authenticator "
                               "(client_cert, jwt, tokenreview)");
    assert_int_equal(parse("auth:\n  chain: [jwt, client_cert, jwt]\n", NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:2: 'chain' item 'jwt' is named twice");
    assert_int_equal(parse("auth:\n  jwt:\n    discovery: yes\n", NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:3: 'discovery' must be true or false");
    assert_int_equal(parse("auth:\n  jwt:\n    min_refresh: 0\n", NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(
        e.msg, "t.yaml:3: 'min_refresh' must be a positive duration (N, Ns, Nm, Nh or Nd)");
    free(c);

    /* cross-field rules */
    c = valid_cfg();
    c->jwt_discovery = 1;
    expect_invalid(c, "config: auth.jwt.jwks_file and auth.jwt.discovery: true exclude each other "
                      "(one source of keys)");
    c->jwks_file[0] = '\0';
    snprintf(c->jwt_issuer, sizeof(c->jwt_issuer), "http://issuer.example");
    expect_invalid(c, "config: auth.jwt.issuer must be an https:// URL with auth.jwt.discovery: "
                      "true");
    snprintf(c->jwt_issuer, sizeof(c->jwt_issuer), "https://issuer.example");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->jwt_min_refresh = c->jwt_refresh + 1;
    expect_invalid(c, "config: auth.jwt.min_refresh must not exceed auth.jwt.refresh");
    c->jwt_min_refresh = 1;
    c->jwt_fetch_timeout = 301;
    expect_invalid(c, "config: auth.jwt.fetch_timeout must be 1s-300s");
    c->jwt_fetch_timeout = 10;
    snprintf(c->jwt_fetch_token_file, sizeof(c->jwt_fetch_token_file), "/run/token");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->jwt_discovery = 0;
    snprintf(c->jwks_file, sizeof(c->jwks_file), "/etc/jwks.json");
    expect_invalid(c, "config: auth.jwt.fetch_token_file needs auth.jwt.discovery: true");
    c->jwt_fetch_token_file[0] = '\0';
    c->jwks_file[0] = '\0';
    c->jwt_discovery = 1;
    c->auth_chain.n = 0;
    expect_invalid(c, "config: auth.chain must name an authenticator");
    /* without jwt in the chain, auth.jwt needs nothing */
    snprintf(c->auth_chain.items[0], sizeof(c->auth_chain.items[0]), "client_cert");
    c->auth_chain.n = 1;
    c->jwt_issuer[0] = '\0';
    c->jwt_discovery = 0;
    c->jwt_audiences.n = 0;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    assert_int_equal(config_chain_has(c, "jwt"), 0);
    assert_int_equal(config_chain_has(c, "client_cert"), 1);
    /* bind_required binds nobody without jwt in the chain, or with binding off */
    c->jwt_bind_required = 1;
    expect_invalid(c, "config: auth.jwt.bind_required needs auth.jwt.bind: true and jwt in "
                      "auth.chain");
    free(c);
    c = valid_cfg();
    c->jwt_bind_required = 1;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->jwt_bind = 0;
    expect_invalid(c, "config: auth.jwt.bind_required needs auth.jwt.bind: true and jwt in "
                      "auth.chain");
    free(c);
}

static void test_validate_ranges(void **state)
{
    hsmca_config *c = valid_cfg();
    hsmca_err e;

    c->default_ttl = c->max_ttl + 1;
    expect_invalid(c, "config: issuance.default_ttl must be 600..issuance.max_ttl");
    c->default_ttl = 599;
    expect_invalid(c, "config: issuance.default_ttl must be 600..issuance.max_ttl");
    c->default_ttl = c->max_ttl;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);

    c->sessions = 0;
    expect_invalid(c, "config: pkcs11.sessions must be 1-64");
    c->sessions = 65;
    expect_invalid(c, "config: pkcs11.sessions must be 1-64");
    c->sessions = 64;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->sessions = 1;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);

    c->serving_cert_ttl = 299;
    expect_invalid(c, "config: server.serving_cert_ttl must be >= 300");
    c->serving_cert_ttl = 300;
    c->handshake_timeout = 301;
    expect_invalid(c, "config: server.handshake_timeout must be 1s-300s");
    c->handshake_timeout = 10;
    c->serving_cert_ttl = 300;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);

    c->max_connections = 0;
    expect_invalid(c, "config: server.max_connections must be 1-1000000");
    c->max_connections = 1000000;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->memory_limit_mib = 15;
    expect_invalid(c, "config: server.memory_limit_mib must be 16-65536");
    c->memory_limit_mib = 16;
    c->max_queued_requests = 4097;
    expect_invalid(c, "config: server.max_queued_requests must be 1-4096");
    c->max_queued_requests = 1;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);

    c->rate_per_second = 0;
    expect_invalid(c, "config: issuance.rate_per_second must be >= 1");
    c->rate_per_second = 1;
    c->rate_burst = 0;
    expect_invalid(c, "config: issuance.rate_burst must be >= 1");
    c->rate_burst = 1;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);

    strcpy(c->ca_key_uri, "token=hsmca;object=ca-key");
    expect_invalid(c, "config: pkcs11.ca_key must be a pkcs11: URI");
    strcpy(c->ca_key_uri, "pkcs11:object=ca-key");

    strcpy(c->audit_key_uri, "token=hsmca;object=audit-key");
    expect_invalid(c, "config: pkcs11.audit_key must be a pkcs11: URI");
    strcpy(c->audit_key_uri, c->ca_key_uri);
    expect_invalid(c, "config: pkcs11.audit_key must name another key than pkcs11.ca_key");
    c->audit_key_uri[0] = '\0';
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    strcpy(c->audit_key_uri, "pkcs11:object=audit-key");

    strcpy(c->ip_addresses.items[1], "10.0.0.256");
    expect_invalid(c, "config: server.ip_addresses[1] '10.0.0.256' is not an IP address");
    strcpy(c->ip_addresses.items[1], "fe80::1");

    c->jwt_audiences.n = 0;
    expect_invalid(c, "config: auth.jwt.audiences must name an audience");
    c->jwt_audiences.n = 1;

    strcpy(c->fe_chroot, "var/empty");
    expect_invalid(c, "config: frontend.chroot must be an absolute path");
    strcpy(c->fe_chroot, "/");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    free(c);
}

/* The signing log is on unless the config turns it off in so many words: a config
 * without audit.dir is refused naming the key and the way out, audit.disabled: true
 * passes, and both together are refused. */
static void test_audit_disabled(void **state)
{
    hsmca_config *c = valid_cfg();
    hsmca_err e;
    c->audit_dir[0] = '\0';
    expect_invalid(c, "config: audit.dir is required (the signing log's directory); to sign "
                      "without a log, say audit.disabled: true");
    c->audit_disabled = 1;
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    strcpy(c->audit_dir, "/var/lib/hsmca/audit");
    expect_invalid(c, "config: audit.dir and audit.disabled: true together: remove one");
    free(c);

    c = new_cfg();
    assert_int_equal(parse("audit:\n  disabled: true\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->audit_disabled, 1);
    assert_int_equal(parse("audit:\n  disabled: false\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->audit_disabled, 0);
    assert_int_equal(parse("audit:\n  disabled: yes\n", NULL, c, &e), HSMCA_EINVAL);
    free(c);
}

static void test_signer_section(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    static const struct {
        const char *yaml;
        int allow;
    } bools[] = {
        {"signer:\n  seccomp_allow_network: true\n", 1},
        {"signer:\n  seccomp_allow_network: True\n", 1},
        {"signer:\n  seccomp_allow_network: TRUE\n", 1},
        {"signer:\n  seccomp_allow_network: false\n", 0},
        {"signer:\n  seccomp_allow_network: False\n", 0},
        {"signer: {seccomp_allow_network: FALSE}\n", 0},
        {"signer:\n  user: hsmca-hsm\n", 0}, /* the default */
    };
    for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
        memset(c, 0x5a, sizeof(*c));
        if (parse(bools[i].yaml, NULL, c, &e) != HSMCA_OK)
            fail_msg("%s: %s", bools[i].yaml, e.msg);
        assert_int_equal(c->signer_allow_network, bools[i].allow);
    }
    assert_string_equal(c->signer_user, "hsmca-hsm");
    /* The key changes that field only. */
    hsmca_config *d = new_cfg();
    config_defaults(d);
    assert_int_equal(parse("signer:\n  seccomp_allow_network: true\n", NULL, c, &e), HSMCA_OK);
    d->signer_allow_network = 1;
    assert_memory_equal(c, d, sizeof(*c));
    free(d);
    free(c);

    /* The signer and the front end never share a user; the message names both keys. */
    c = valid_cfg();
    strcpy(c->signer_user, c->fe_user);
    expect_invalid(c, "config: signer.user and frontend.user must be different users "
                      "(both are 'hsmca-fe')");
    strcpy(c->signer_user, "nobody");
    strcpy(c->fe_user, "nobody");
    expect_invalid(c, "config: signer.user and frontend.user must be different users "
                      "(both are 'nobody')");
    /* The defaults differ. */
    config_defaults(c);
    assert_string_not_equal(c->signer_user, c->fe_user);
    free(c);
}

/* signer.sandbox: the network mode and SysV IPC; the deprecated seccomp_allow_network as
 * a synonym of inet (true) or none (false), which must agree with network when both are
 * written. */
static void test_signer_sandbox_section(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    static const struct {
        const char *yaml;
        config_net net;
        int sysv, old_false;
    } ok[] = {
        {"signer:\n  user: x\n", CONFIG_NET_NONE, 0, 0}, /* the defaults */
        {"signer:\n  sandbox:\n    network: none\n", CONFIG_NET_NONE, 0, 0},
        {"signer:\n  sandbox:\n    network: unix\n", CONFIG_NET_UNIX, 0, 0},
        {"signer:\n  sandbox:\n    network: inet\n    sysv_ipc: true\n", CONFIG_NET_INET, 1, 0},
        {"signer:\n  sandbox: {sysv_ipc: true}\n", CONFIG_NET_NONE, 1, 0},
        {"signer:\n  sandbox:\n", CONFIG_NET_NONE, 0, 0},
        {"signer:\n  seccomp_allow_network: true\n", CONFIG_NET_INET, 0, 0},
        {"signer:\n  seccomp_allow_network: false\n", CONFIG_NET_NONE, 0, 1},
        {"signer:\n  seccomp_allow_network: true\n  sandbox:\n    network: inet\n",
         CONFIG_NET_INET, 0, 0},
        {"signer:\n  sandbox:\n    network: none\n  seccomp_allow_network: false\n",
         CONFIG_NET_NONE, 0, 1},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        memset(c, 0x5a, sizeof(*c));
        if (parse(ok[i].yaml, NULL, c, &e) != HSMCA_OK)
            fail_msg("%s: %s", ok[i].yaml, e.msg);
        assert_int_equal(config_signer_network(c), ok[i].net);
        assert_int_equal(c->signer_sysv_ipc, ok[i].sysv);
        assert_int_equal(c->signer_allow_network_false, ok[i].old_false);
    }
    assert_string_equal(config_net_name(CONFIG_NET_NONE), "none");
    assert_string_equal(config_net_name(CONFIG_NET_UNIX), "unix");
    assert_string_equal(config_net_name(CONFIG_NET_INET), "inet");
    assert_int_equal(config_net_parse("INET"), -1);
    static const struct {
        const char *yaml, *msg;
    } bad[] = {
        {"signer:\n  sandbox:\n    network: tcp\n",
         "t.yaml:3: 'network' must be none, unix or inet"},
        {"signer:\n  sandbox:\n    network: true\n",
         "t.yaml:3: 'network' must be none, unix or inet"},
        {"signer:\n  sandbox:\n    network: [unix]\n", "t.yaml:3: 'network' must be a string"},
        {"signer:\n  sandbox:\n    sysv_ipc: yes\n",
         "t.yaml:3: 'sysv_ipc' must be true or false"},
        {"signer:\n  sandbox:\n    network: unix\n    network: inet\n",
         "t.yaml:4: duplicate key 'network' in 'signer.sandbox'"},
        {"signer:\n  sandbox:\n    ipc: true\n", "t.yaml:3: unknown key 'ipc' in 'signer.sandbox'"},
        {"signer:\n  sandbox: none\n", "t.yaml:2: 'signer.sandbox' must be a mapping"},
        {"signer:\n  seccomp_allow_network: true\n  sandbox:\n    network: unix\n",
         "t.yaml: signer.seccomp_allow_network: true (deprecated: it means "
         "signer.sandbox.network: inet) disagrees with signer.sandbox.network: unix; keep "
         "signer.sandbox.network only"},
        {"signer:\n  sandbox:\n    network: none\n  seccomp_allow_network: true\n",
         "t.yaml: signer.seccomp_allow_network: true (deprecated: it means "
         "signer.sandbox.network: inet) disagrees with signer.sandbox.network: none; keep "
         "signer.sandbox.network only"},
        {"signer:\n  seccomp_allow_network: false\n  sandbox:\n    network: inet\n",
         "t.yaml: signer.seccomp_allow_network: false (deprecated: it means "
         "signer.sandbox.network: none) disagrees with signer.sandbox.network: inet; keep "
         "signer.sandbox.network only"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(c, 0x5a, sizeof(*c));
        if (parse(bad[i].yaml, NULL, c, &e) != HSMCA_EINVAL || strcmp(e.msg, bad[i].msg) != 0)
            fail_msg("case %zu: %s\n  msg='%s'\n  want '%s'", i, bad[i].yaml, e.msg, bad[i].msg);
        for (size_t b = 0; b < sizeof(*c); b++) /* untouched on error */
            if (((unsigned char *)c)[b] != 0x5a)
                fail_msg("case %zu: config modified at byte %zu", i, b);
    }
    free(c);
    /* A config made in code is checked too, and an unknown mode never opens anything. */
    c = valid_cfg();
    strcpy(c->signer_sandbox_network, "tcp");
    assert_int_equal(config_signer_network(c), CONFIG_NET_NONE);
    expect_invalid(c, "config: signer.sandbox.network must be none, unix or inet, not 'tcp'");
    strcpy(c->signer_sandbox_network, "unix");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    free(c);
}

/* auth.trusted_node_accounts: ztunnel impersonation (frontend/fe_impersonate.h). */
static void test_trusted_node_accounts(void **state)
{
    (void)state;
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse("auth:\n  jwt:\n    issuer: x\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->trusted_node_accounts.n, 0); /* off by default */
    assert_int_equal(
        parse("auth:\n  trusted_node_accounts: [istio-system/ztunnel, a/b]\n", NULL, c, &e),
        HSMCA_OK);
    assert_int_equal(c->trusted_node_accounts.n, 2);
    assert_string_equal(c->trusted_node_accounts.items[0], "istio-system/ztunnel");
    free(c);
    c = valid_cfg();
    strcpy(c->trusted_node_accounts.items[c->trusted_node_accounts.n++], "istio-system/ztunnel");
    expect_invalid(c, "config: auth.trusted_node_accounts needs tokenreview in auth.chain (its API "
                      "server is asked where the pods run)");
    strcpy(c->auth_chain.items[c->auth_chain.n++], "tokenreview");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->jwt_bind_required = 1; /* impersonated requests cannot be bound */
    expect_invalid(c, "config: auth.trusted_node_accounts and auth.jwt.bind_required exclude "
                      "each other (impersonated requests cannot be bound)");
    c->jwt_bind_required = 0;
    static const char *const bad[] = {"ztunnel", "/ztunnel", "istio-system/", "a/b/c"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[160];
        strcpy(c->trusted_node_accounts.items[0], bad[i]);
        snprintf(want, sizeof(want),
                 "config: auth.trusted_node_accounts entry '%s' must be namespace/serviceaccount",
                 bad[i]);
        expect_invalid(c, want);
    }
    free(c);
}

static void test_tokenreview_section(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    /* Off by default, with its defaults. */
    assert_int_equal(parse("auth:\n  jwt:\n    issuer: x\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(config_tokenreview_on(c), 0);
    assert_int_equal(c->tr_audiences.n, 1);
    assert_string_equal(c->tr_audiences.items[0], "istio-ca");
    assert_int_equal(c->tr_timeout, 5);
    assert_int_equal(c->tr_cache_ttl, 300);
    assert_int_equal(c->tr_cache_entries, 4096);
    assert_int_equal(c->tr_max_concurrent, 8);
    if (parse("auth:\n  chain: [tokenreview]\n  tokenreview:\n    kubeconfig: kc.yaml\n"
              "    audiences: [a, b]\n"
              "    timeout: 2s\n    cache_ttl: 0\n    cache_entries: 0\n    max_concurrent: 3\n",
              "/etc/hsmca", c, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(config_tokenreview_on(c), 1); /* the chain names it */
    assert_string_equal(c->tr_kubeconfig, "/etc/hsmca/kc.yaml");
    assert_int_equal(c->tr_audiences.n, 2);
    assert_int_equal(c->tr_timeout, 2);
    assert_int_equal(c->tr_cache_ttl, 0);
    assert_int_equal(c->tr_cache_entries, 0);
    assert_int_equal(c->tr_max_concurrent, 3);
    assert_int_equal(parse("auth:\n  tokenreview:\n    kubeconfig: kc.yaml\n", NULL, c, &e),
                     HSMCA_OK);
    assert_int_equal(config_tokenreview_on(c), 0); /* a kubeconfig alone does not */
    assert_int_equal(parse("auth:\n  chain: [client_cert, jwt, tokenreview]\n", NULL, c, &e),
                     HSMCA_OK);
    assert_int_equal(config_tokenreview_on(c), 1);
    assert_int_equal(parse("auth:\n  tokenreview:\n    enabled: true\n", NULL, c, &e),
                     HSMCA_EINVAL);
    assert_int_equal(parse("auth:\n  tokenreview:\n    timeout: 0\n", NULL, c, &e), HSMCA_EINVAL);
    assert_int_equal(parse("auth:\n  tokenreview:\n    max_concurrent: 0\n", NULL, c, &e),
                     HSMCA_EINVAL);
    assert_int_equal(parse("auth:\n  tokenreview:\n    server: x\n", NULL, c, &e), HSMCA_EINVAL);
    free(c);

    /* Ranges, when on; the JWT authenticator is needed only when the chain names it. */
    c = valid_cfg();
    strcpy(c->auth_chain.items[c->auth_chain.n++], "tokenreview");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->tr_timeout = 61;
    expect_invalid(c, "config: auth.tokenreview.timeout must be 1s-60s");
    c->tr_timeout = 60;
    c->tr_max_concurrent = 65;
    expect_invalid(c, "config: auth.tokenreview.max_concurrent must be 1-64");
    c->tr_max_concurrent = 64;
    c->tr_cache_entries = 1000001;
    expect_invalid(c, "config: auth.tokenreview.cache_entries must be at most 1000000");
    c->tr_cache_entries = 1000000;
    c->tr_audiences.n = 0;
    expect_invalid(c, "config: auth.tokenreview.audiences must name an audience");
    c->tr_audiences.n = 1;
    c->jwt_issuer[0] = c->jwks_file[0] = '\0';
    expect_invalid(c, "config: 2 required keys are missing: auth.jwt.issuer, auth.jwt.jwks_file "
                      "(or auth.jwt.discovery: true)"); /* chain: ..., jwt, tokenreview */
    c->auth_chain.n = 1;
    strcpy(c->auth_chain.items[0], "tokenreview");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    c->auth_chain.n = 0;
    expect_invalid(c, "config: auth.chain must name an authenticator");
    strcpy(c->auth_chain.items[c->auth_chain.n++], "client_cert");
    strcpy(c->auth_chain.items[c->auth_chain.n++], "jwt");
    c->tr_timeout = 0; /* not checked while off */
    strcpy(c->jwt_issuer, "x");
    strcpy(c->jwks_file, "y");
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    free(c);
}

static void test_validate_listen(void **state)
{
    static const char *good[] = {"127.0.0.1:15012", "0.0.0.0:1",  "localhost:65535",
                                 "[::1]:15012",     "[::]:15012", "hsmca.example:443"};
    static const char *bad[] = {
        "15012",    ":15012",    "host:",   "host:0",     "host:65536",
        "host:015", "::1:15012", "[]:1",    "[::1]15012", "[::1]:",
        "a:b",      "",          "host:-1", "[::1:15012", "host:99999999999"};
    hsmca_config *c = valid_cfg();
    hsmca_err e;
    char want[256];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        strcpy(c->listen, good[i]);
        if (config_validate(c, &e) != HSMCA_OK)
            fail_msg("%s: %s", good[i], e.msg);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        strcpy(c->listen, bad[i]);
        snprintf(want, sizeof(want), "config: server.listen '%s' must be host:port (port 1-65535)",
                 bad[i]);
        expect_invalid(c, want);
    }
    free(c);
}

static void test_serving_names(void **state)
{
    hsmca_config *c = valid_cfg();
    const char *dns[CONFIG_MAX_SERVING_NAMES], *ips[CONFIG_MAX_SERVING_NAMES];
    int n_dns = -1, n_ips = -1;
    /* Loopback first, then the configured names, in order. */
    c->dns_names.n = 1;
    snprintf(c->dns_names.items[0], CONFIG_MAX_STR, "ca.example");
    c->ip_addresses.n = 0;
    config_serving_names(c, dns, &n_dns, ips, &n_ips);
    assert_int_equal(n_dns, 2);
    assert_string_equal(dns[0], "localhost");
    assert_string_equal(dns[1], "ca.example");
    assert_int_equal(n_ips, 1);
    assert_string_equal(ips[0], "127.0.0.1");
    /* The largest list the config accepts still fits, with nothing dropped. */
    c->dns_names.n = CONFIG_MAX_LIST;
    c->ip_addresses.n = CONFIG_MAX_LIST;
    for (int i = 0; i < CONFIG_MAX_LIST; i++) {
        snprintf(c->dns_names.items[i], CONFIG_MAX_STR, "n%d.example", i);
        snprintf(c->ip_addresses.items[i], CONFIG_MAX_STR, "10.0.0.%d", i);
    }
    config_serving_names(c, dns, &n_dns, ips, &n_ips);
    assert_int_equal(n_dns, CONFIG_MAX_SERVING_NAMES);
    assert_int_equal(n_ips, CONFIG_MAX_SERVING_NAMES);
    assert_string_equal(dns[CONFIG_MAX_LIST], "n15.example");
    assert_string_equal(ips[CONFIG_MAX_LIST], "10.0.0.15");
    free(c);
}

/* issuance.policy_file: a path, resolved against the config's directory. */
static void test_policy_file_key(void **state)
{
    (void)state;
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse("issuance:\n  policy_file: policy.yaml\n", "/etc/hsmca", c, &e),
                     HSMCA_OK);
    assert_string_equal(c->policy_file, "/etc/hsmca/policy.yaml");
    assert_int_equal(parse("issuance:\n  trust_domain: a\n", "/etc/hsmca", c, &e), HSMCA_OK);
    assert_string_equal(c->policy_file, ""); /* default: none */
    assert_int_equal(parse("issuance:\n  policy_file: [a]\n", NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:2: 'policy_file' must be a string");
    free(c);
}

/* auth.cluster_id and auth.clusters (multicluster): a list of mappings. */
static const char clusters_yaml[] = "auth:\n"                                  /* 1 */
                                    "  chain: [jwt, tokenreview]\n"            /* 2 */
                                    "  cluster_id: east\n"                     /* 3 */
                                    "  clusters:\n"                            /* 4 */
                                    "    - id: west\n"                         /* 5 */
                                    "      jwt:\n"                             /* 6 */
                                    "        issuer: https://west.example\n"   /* 7 */
                                    "        jwks_file: west.jwks\n"           /* 8 */
                                    "      tokenreview:\n"                     /* 9 */
                                    "        kubeconfig: west.kubeconfig\n"    /* 10 */
                                    "    - id: north.1_x-y\n"                  /* 11 */
                                    "      jwt: {issuer: https://n.example,\n" /* 12 */
                                    "            discovery: true, ca_bundle: n.pem,\n"
                                    "            fetch_token_file: /t}\n"
                                    "  jwt:\n"
                                    "    issuer: https://east.example\n"
                                    "    jwks_file: east.jwks\n";

static void test_clusters(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    if (parse(clusters_yaml, "/etc/hsmca", c, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    assert_string_equal(c->cluster_id, "east");
    assert_int_equal(c->n_clusters, 2);
    assert_string_equal(c->clusters[0].id, "west");
    assert_string_equal(c->clusters[0].jwt_issuer, "https://west.example");
    assert_string_equal(c->clusters[0].jwks_file, "/etc/hsmca/west.jwks");
    assert_string_equal(c->clusters[0].tr_kubeconfig, "/etc/hsmca/west.kubeconfig");
    assert_int_equal(c->clusters[0].jwt_discovery, 0);
    assert_string_equal(c->clusters[1].id, "north.1_x-y");
    assert_int_equal(c->clusters[1].jwt_discovery, 1);
    assert_string_equal(c->clusters[1].jwt_ca_bundle, "/etc/hsmca/n.pem");
    assert_string_equal(c->clusters[1].jwt_fetch_token_file, "/t");
    assert_string_equal(c->clusters[1].tr_kubeconfig, "");
    /* the indexes and views */
    assert_int_equal(config_cluster_index(c, NULL, 0), 0);
    assert_int_equal(config_cluster_index(c, "east", 4), 0);
    assert_int_equal(config_cluster_index(c, "west", 4), 1);
    assert_int_equal(config_cluster_index(c, "north.1_x-y", 11), 2);
    assert_int_equal(config_cluster_index(c, "Kubernetes", 10), -1);
    assert_int_equal(config_cluster_index(c, "wes", 3), -1);
    assert_string_equal(config_cluster_name(c, 0), "east");
    assert_string_equal(config_cluster_name(c, 2), "north.1_x-y");
    assert_int_equal(config_cluster_has_jwt(c, 1), 1);
    assert_int_equal(config_cluster_has_tokenreview(c, 1), 1);
    assert_int_equal(config_cluster_has_tokenreview(c, 2), 0);
    assert_int_equal(config_cluster_has_tokenreview(c, 0), 1);
    static hsmca_config v;
    config_cluster_view(c, 1, &v);
    assert_string_equal(v.jwt_issuer, "https://west.example");
    assert_string_equal(v.jwks_file, "/etc/hsmca/west.jwks");
    assert_string_equal(v.tr_kubeconfig, "/etc/hsmca/west.kubeconfig");
    assert_string_equal(v.jwt_audiences.items[0], "istio-ca"); /* shared */
    config_cluster_view(c, 0, &v);
    assert_string_equal(v.jwt_issuer, "https://east.example");
    if (config_validate(c, &e) != HSMCA_EINVAL) /* the rest of a config is missing */
        fail_msg("validated");
    /* defaults: Istio's CLUSTER_ID, no remote clusters; null empties the list */
    assert_int_equal(parse("auth:\n  clusters:\n", NULL, c, &e), HSMCA_OK);
    assert_string_equal(c->cluster_id, "Kubernetes");
    assert_int_equal(c->n_clusters, 0);
    assert_int_equal(parse("auth:\n  clusters: []\n", NULL, c, &e), HSMCA_OK);
    assert_int_equal(c->n_clusters, 0);
    /* at most CONFIG_MAX_CLUSTERS items */
    char many[2048] = "auth:\n  clusters:\n";
    for (int i = 0; i <= CONFIG_MAX_CLUSTERS; i++) {
        size_t off = strlen(many);
        snprintf(many + off, sizeof(many) - off, "    - id: c%d\n", i);
    }
    assert_int_equal(parse(many, NULL, c, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "t.yaml:11: 'clusters' has more than 8 items");
    free(c);
}

static const struct refusal cluster_refusals[] = {
    {"auth:\n  clusters: west\n", "t.yaml:2: 'clusters' must be a list of mappings", 0},
    {"auth:\n  clusters: {id: west}\n", "t.yaml:2: 'clusters' must be a list of mappings", 0},
    {"auth:\n  clusters:\n    - west\n", "t.yaml:3: items of 'clusters' must be mappings", 0},
    {"auth:\n  clusters:\n    - [a]\n", "t.yaml:3: items of 'clusters' must be mappings", 0},
    {"auth:\n  clusters:\n    - jwt: {issuer: x}\n",
     "t.yaml:3: an 'auth.clusters' item needs an 'id'", 0},
    {"auth:\n  clusters:\n    - {}\n", "t.yaml:3: an 'auth.clusters' item needs an 'id'", 0},
    {"auth:\n  clusters:\n    - id: a\n    - id: b\n    - id: a\n",
     "t.yaml:5: cluster 'a' is named twice in 'clusters'", 0},
    {"auth:\n  clusters:\n    - id: a\n      id: b\n",
     "t.yaml:4: duplicate key 'id' in 'auth.clusters[]'", 0},
    {"auth:\n  clusters:\n    - id: a\n      jwt: {issuer: x}\n      jwt: {issuer: y}\n",
     "t.yaml:5: duplicate key 'jwt' in 'auth.clusters[]'", 0},
    {"auth:\n  clusters:\n    - id: a\n      server: x\n",
     "t.yaml:4: unknown key 'server' in 'auth.clusters[]'", 0},
    {"auth:\n  clusters:\n    - id: a\n      jwt:\n        skew: 5\n",
     "t.yaml:5: unknown key 'skew' in 'auth.clusters[].jwt'", 0},
    {"auth:\n  clusters:\n    - id: a\n      tokenreview:\n        audiences: [x]\n",
     "t.yaml:5: unknown key 'audiences' in 'auth.clusters[].tokenreview'", 0},
    {"auth:\n  clusters:\n    - id: a\n      jwt: x\n",
     "t.yaml:4: 'auth.clusters[].jwt' must be a mapping", 0},
    {"auth:\n  clusters:\n    - id: a\n      jwt: {discovery: yes}\n",
     "t.yaml:4: 'discovery' must be true or false", 0},
    {"auth:\n  clusters:\n    - id: \"a b\"\n",
     "t.yaml:3: 'id' must be 1-63 characters of A-Z a-z 0-9 . _ -", 0},
    {"auth:\n  clusters:\n    - id: \"\"\n",
     "t.yaml:3: 'id' must be 1-63 characters of A-Z a-z 0-9 . _ -", 0},
    {"auth:\n  clusters:\n    - id:\n", "t.yaml:3: an 'auth.clusters' item needs an 'id'", 0},
    {"auth:\n  clusters:\n    - id: [a]\n", "t.yaml:3: 'id' must be a string", 0},
    {"auth:\n  clusters:\n    - id: "
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
     "t.yaml:3: 'id' is longer than 63 bytes", 0},
    {"auth:\n  cluster_id: \"k/8\"\n",
     "t.yaml:2: 'cluster_id' must be 1-63 characters of A-Z a-z 0-9 . _ -", 0},
    {"auth:\n  clusters:\n    - &x {id: a}\n",
     "t.yaml:3: anchors and aliases are not allowed in the config", 0},
    {"auth:\n  clusters: []\n  clusters: []\n", "t.yaml:3: duplicate key 'clusters' in 'auth'", 0},
};

static void test_cluster_refusals(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    for (size_t i = 0; i < sizeof(cluster_refusals) / sizeof(cluster_refusals[0]); i++) {
        const struct refusal *r = &cluster_refusals[i];
        memset(c, 0x5a, sizeof(*c));
        hsmca_code rc = parse(r->yaml, "/base", c, &e);
        if (rc != HSMCA_EINVAL || strcmp(e.msg, r->msg) != 0)
            fail_msg("case %zu: %s\n  rc=%d msg='%s'\n  want '%s'", i, r->yaml, rc, e.msg, r->msg);
        for (size_t b = 0; b < sizeof(*c); b++)
            if (((unsigned char *)c)[b] != 0x5a)
                fail_msg("case %zu: config modified at byte %zu", i, b);
    }
    free(c);
}

/* config_validate's cluster rules, one broken at a time. */
static void test_validate_clusters(void **state)
{
    hsmca_config *c = valid_cfg();
    hsmca_err e;
    static hsmca_config base;
    snprintf(c->auth_chain.items[c->auth_chain.n++], CONFIG_MAX_STR, "tokenreview");
    c->n_clusters = 1;
    config_cluster *cl = &c->clusters[0];
    snprintf(cl->id, sizeof(cl->id), "west");
    snprintf(cl->jwt_issuer, sizeof(cl->jwt_issuer), "https://west.example");
    snprintf(cl->jwks_file, sizeof(cl->jwks_file), "/w.jwks");
    snprintf(cl->tr_kubeconfig, sizeof(cl->tr_kubeconfig), "/w.kubeconfig");
    if (config_validate(c, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    memcpy(&base, c, sizeof(base));

    snprintf(cl->id, sizeof(cl->id), "Kubernetes");
    expect_invalid(c, "config: auth.clusters: 'Kubernetes' is auth.cluster_id, this cluster");
    memcpy(c, &base, sizeof(*c));
    c->cluster_id[0] = '\0';
    expect_invalid(c, "config: auth.cluster_id must be 1-63 characters of A-Z a-z 0-9 . _ -");
    memcpy(c, &base, sizeof(*c));
    cl->jwt_issuer[0] = cl->jwks_file[0] = cl->tr_kubeconfig[0] = '\0';
    expect_invalid(c, "config: auth.clusters 'west' needs jwt.issuer or tokenreview.kubeconfig");
    memcpy(c, &base, sizeof(*c));
    c->auth_chain.n = 1; /* client_cert only */
    expect_invalid(c, "config: auth.clusters 'west' has a jwt section but auth.chain has no jwt");
    memcpy(c, &base, sizeof(*c));
    c->auth_chain.n--; /* no tokenreview */
    expect_invalid(c, "config: auth.clusters 'west' has a tokenreview section but auth.chain has "
                      "no tokenreview");
    memcpy(c, &base, sizeof(*c));
    cl->jwt_issuer[0] = '\0';
    expect_invalid(c, "config: auth.clusters 'west': jwt.issuer is required");
    memcpy(c, &base, sizeof(*c));
    cl->jwt_discovery = 1;
    expect_invalid(c, "config: auth.clusters 'west': jwt.jwks_file and jwt.discovery: true exclude "
                      "each other");
    memcpy(c, &base, sizeof(*c));
    cl->jwks_file[0] = '\0';
    expect_invalid(c, "config: auth.clusters 'west': jwt.jwks_file is required (or jwt.discovery: "
                      "true)");
    memcpy(c, &base, sizeof(*c));
    cl->jwks_file[0] = '\0';
    cl->jwt_discovery = 1;
    snprintf(cl->jwt_issuer, sizeof(cl->jwt_issuer), "http://west.example");
    expect_invalid(c, "config: auth.clusters 'west': jwt.issuer must be an https:// URL with "
                      "jwt.discovery: true");
    memcpy(c, &base, sizeof(*c));
    snprintf(cl->jwt_fetch_token_file, sizeof(cl->jwt_fetch_token_file), "/t");
    expect_invalid(c, "config: auth.clusters 'west': jwt.fetch_token_file needs jwt.discovery: "
                      "true");
    /* tokenreview only is a cluster too */
    memcpy(c, &base, sizeof(*c));
    cl->jwt_issuer[0] = cl->jwks_file[0] = '\0';
    assert_int_equal(config_validate(c, &e), HSMCA_OK);
    assert_int_equal(config_cluster_has_jwt(c, 1), 0);
    free(c);
}

/* audit.replica: the origin "<name>/<replica>" at load; a bad id refused naming the key. */
static void test_audit_replica(void **state)
{
    hsmca_config *c = new_cfg();
    hsmca_err e;
    assert_int_equal(parse("issuance:\n  trust_domain: td.example\naudit:\n  replica: hsmca-1\n",
                           NULL, c, &e),
                     HSMCA_OK);
    assert_string_equal(c->audit_origin, "hsmca/td.example/hsmca-1");
    assert_int_equal(parse("audit:\n  origin: ca1.example/hsmca\n  replica: b\n", NULL, c, &e),
                     HSMCA_OK);
    assert_string_equal(c->audit_origin, "ca1.example/hsmca/b");
    char host[256] = "", want[600];
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    snprintf(want, sizeof(want), "ca1.example/hsmca/%s", host);
    assert_int_equal(parse("audit:\n  origin: ca1.example/hsmca\n  replica: hostname\n", NULL, c,
                           &e),
                     HSMCA_OK);
    assert_string_equal(c->audit_origin, want);
    assert_int_equal(parse("audit:\n  replica: a/b\n", NULL, c, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "audit.replica 'a/b' must be 1-63 characters"));
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_example),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_example_file),
        cmocka_unit_test(test_validate_required),
        cmocka_unit_test(test_validate_ranges),
        cmocka_unit_test(test_audit_disabled),
        cmocka_unit_test(test_auth_section),
        cmocka_unit_test(test_serving_names),
        cmocka_unit_test(test_validate_listen),
        cmocka_unit_test(test_signer_section),
        cmocka_unit_test(test_signer_sandbox_section),
        cmocka_unit_test(test_policy_file_key),
        cmocka_unit_test(test_tokenreview_section),
        cmocka_unit_test(test_trusted_node_accounts),
        cmocka_unit_test(test_clusters),
        cmocka_unit_test(test_cluster_refusals),
        cmocka_unit_test(test_validate_clusters),
        cmocka_unit_test(test_audit_replica),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
