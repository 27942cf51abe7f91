/* test_signer_bind.c - identity binding's decision (signer/signer_bind.h): which
 * requests are bound, which refused and why, against the dev issuer's keys pushed
 * as a sealed memfd. The hostile front end (tests/hostile/hostile_bind.c) runs the
 * same through a real signer. */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off */
#include <cmocka.h>
/* clang-format on */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "dev_jwt.h"
#include "signer_bind.h"
#include "testutil.h"
#include "util.h"

#define SANS_SLEEP "uri:spiffe://cluster.local/ns/default/sa/sleep"

static char *g_dir;
static hsmca_config g_cfg;
static tbs_policy g_pol;

static int setup(void **state)
{
    g_dir = tu_mkdtemp("signer-bind");
    hsmca_err e;
    if (!g_dir || dev_jwt_setup(g_dir, &e) != HSMCA_OK)
        return -1;
    config_defaults(&g_cfg);
    snprintf(g_cfg.jwt_issuer, sizeof(g_cfg.jwt_issuer), "%s", DEV_JWT_ISSUER);
    memset(&g_pol, 0, sizeof(g_pol));
    g_pol.trust_domains[0] = "cluster.local";
    g_pol.trust_domains[1] = "old.example"; /* an alias of the policy file */
    g_pol.n_trust_domains = 2;
    return 0;
}

static int teardown(void **state)
{
    free(g_dir);
    return 0;
}

/* The dev JWKS as the supervisor pushes it: a sealed memfd. */
static void push(signer_bind *b)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", g_dir, DEV_JWKS_FILE);
    size_t n;
    char *doc = NULL;
    hsmca_err e;
    assert_int_equal(util_read_file(path, 65536, &doc, &n, &e), HSMCA_OK);
    int fd = memfd_create("t-jwks", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, doc, n), (ssize_t)n);
    /* unsealed first: refused, the holder stays empty */
    assert_int_equal(signer_bind_load_fd(b, 0, fd, &e), HSMCA_EINVAL);
    assert_int_equal(
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), 0);
    assert_int_equal(signer_bind_load_fd(b, 0, fd, &e), HSMCA_OK);
    close(fd);
    free(doc);
}

static char *token(const char *ns, const char *sa)
{
    hsmca_err e;
    char *t = dev_jwt_mint(g_dir, NULL, "istio-ca", ns, sa, 600, &e);
    if (!t)
        fail_msg("dev_jwt_mint: %s", e.msg);
    return t;
}

static void expect(signer_bind *b, const char *auth, const char *tok, const char *sans,
                   hsmca_code code, int want_bound, const char *prefix)
{
    int bound = -1;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = signer_bind_check(b, &g_pol, auth, tok ? tok : "", tok ? strlen(tok) : 0, NULL,
                                      sans, (int64_t)util_wall_now(), &bound, &e);
    if (rc != code || (prefix && strncmp(e.msg, prefix, strlen(prefix)) != 0))
        fail_msg("%s/%s: expected %s \"%s\", got %s \"%s\"", auth, sans, hsmca_code_name(code),
                 prefix ? prefix : "", hsmca_code_name(rc), e.msg);
    assert_int_equal(bound, want_bound);
}

static void test_off(void **state)
{
    hsmca_config c = g_cfg;
    signer_bind *b = (signer_bind *)1;
    hsmca_err e;
    c.jwt_bind = 0;
    assert_int_equal(signer_bind_new(&c, &b, &e), HSMCA_OK);
    assert_null(b);
    expect(b, "jwt", NULL, SANS_SLEEP, HSMCA_OK, 0, NULL); /* nothing to check */
    c.jwt_bind = 1;
    snprintf(c.auth_chain.items[0], sizeof(c.auth_chain.items[0]), "client_cert");
    c.auth_chain.n = 1; /* no jwt in the chain: nothing to bind */
    assert_int_equal(signer_bind_new(&c, &b, &e), HSMCA_OK);
    assert_null(b);
    assert_int_equal(signer_bind_load_fd(b, 0, -1, &e), HSMCA_OK); /* a push is ignored */
}

static void test_binds_the_token_identity(void **state)
{
    signer_bind *b = NULL;
    hsmca_err e;
    assert_int_equal(signer_bind_new(&g_cfg, &b, &e), HSMCA_OK);
    assert_non_null(b);
    char *t = token("default", "sleep");
    expect(b, "jwt", t, SANS_SLEEP, HSMCA_EUNAVAIL, 0,
           "identity binding: JWT issuer keys not loaded yet");
    push(b);
    expect(b, "jwt", t, SANS_SLEEP, HSMCA_OK, 1, NULL);
    expect(b, "jwt", t, SANS_SLEEP ",dns:sleep.example.com", HSMCA_OK, 1, NULL);
    expect(b, "jwt", t, "uri:spiffe://old.example/ns/default/sa/sleep", HSMCA_OK, 1, NULL);
    /* names that only begin like the token's, or another trust domain */
    const char *mismatch = "identity binding: the URI SAN is not the token's identity";
    expect(b, "jwt", t, SANS_SLEEP "y", HSMCA_EPERM, 0, mismatch);
    expect(b, "jwt", t, "uri:spiffe://cluster.local/ns/default/sa/slee", HSMCA_EPERM, 0, mismatch);
    expect(b, "jwt", t, "uri:spiffe://cluster.local/ns/default/sa/sleep/x", HSMCA_EPERM, 0,
           mismatch);
    expect(b, "jwt", t, "uri:spiffe://evil.example/ns/default/sa/sleep", HSMCA_EPERM, 0, mismatch);
    expect(b, "jwt", t, "uri:spiffe://cluster.local/ns/sleep/sa/default", HSMCA_EPERM, 0, mismatch);
    expect(b, "jwt", t, "dns:sleep.example.com", HSMCA_EPERM, 0, mismatch);
    expect(b, "jwt", t, "", HSMCA_EPERM, 0, mismatch);
    /* the token is needed and must verify */
    expect(b, "jwt", NULL, SANS_SLEEP, HSMCA_EAUTH, 0,
           "identity binding: a jwt caller's request came without its token");
    t[strlen(t) - 5] ^= 1; /* a signature byte */
    expect(b, "jwt", t, SANS_SLEEP, HSMCA_EAUTH, 0, "identity binding: the forwarded token: JWT");
    free(t);
    /* callers the signer cannot re-check: the front end's word, unbound */
    expect(b, "client_cert", NULL, SANS_SLEEP, HSMCA_OK, 0, NULL);
    expect(b, "tokenreview", NULL, SANS_SLEEP, HSMCA_OK, 0, NULL);
    expect(b, "", NULL, SANS_SLEEP, HSMCA_OK, 0, NULL);
    signer_bind_free(b);
}

static void test_required(void **state)
{
    hsmca_config c = g_cfg;
    c.jwt_bind_required = 1;
    signer_bind *b = NULL;
    hsmca_err e;
    assert_int_equal(signer_bind_new(&c, &b, &e), HSMCA_OK);
    push(b);
    const char *unbound = "identity binding: a request from authenticator";
    expect(b, "client_cert", NULL, SANS_SLEEP, HSMCA_EPERM, 0, unbound);
    expect(b, "tokenreview", NULL, SANS_SLEEP, HSMCA_EPERM, 0, unbound);
    expect(b, "", NULL, SANS_SLEEP, HSMCA_EPERM, 0, unbound);
    char *t = token("default", "sleep");
    expect(b, "jwt", t, SANS_SLEEP, HSMCA_OK, 1, NULL);
    free(t);
    signer_bind_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_binds_the_token_identity),
        cmocka_unit_test(test_required),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
