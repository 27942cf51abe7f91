/* test_fe_auth.c - the authenticator chain (frontend/fe_auth.h): order, the first
 * success wins, every refusal named, UNAVAILABLE over UNAUTHENTICATED, and the
 * bearer-JWT authenticator's own refusals before any key is used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fe_app.h"

static int g_calls[3];

static hsmca_code fake(int i, hsmca_code rc, const char *msg, const char *id, fe_auth_result *out,
                       hsmca_err *e)
{
    g_calls[i]++;
    if (rc == HSMCA_OK) {
        snprintf(out->ids[0], sizeof(out->ids[0]), "%s", id);
        out->n_ids = 1;
        return HSMCA_OK;
    }
    return hsmca_fail(e, rc, "%s", msg);
}

static hsmca_code a_absent(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                           hsmca_err *e)
{
    return fake(0, HSMCA_ENOTFOUND, "no client certificate", NULL, out, e);
}
static hsmca_code a_refuse(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                           hsmca_err *e)
{
    return fake(1, HSMCA_EAUTH, "JWT expired", NULL, out, e);
}
static hsmca_code a_unavail(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                            hsmca_err *e)
{
    return fake(2, HSMCA_EUNAVAIL, "API server unreachable", NULL, out, e);
}
static hsmca_code a_ok(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                       hsmca_err *e)
{
    return fake(0, HSMCA_OK, NULL, "spiffe://cluster.local/ns/a/sa/b", out, e);
}
static hsmca_code a_ok_empty(const struct fe_app *app, const fe_auth_creds *c, fe_auth_result *out,
                             hsmca_err *e)
{
    return HSMCA_OK; /* a buggy authenticator: success without an identity */
}

static const fe_authenticator A_ABSENT = {"client_cert", a_absent};
static const fe_authenticator A_REFUSE = {"jwt", a_refuse};
static const fe_authenticator A_UNAVAIL = {"kubernetes", a_unavail};
static const fe_authenticator A_OK = {"good", a_ok};
static const fe_authenticator A_EMPTY = {"empty", a_ok_empty};

static hsmca_code run(const fe_authenticator *const *chain, int n, fe_auth_result *r, hsmca_err *e)
{
    static fe_app app;
    memset(&app, 0, sizeof(app));
    for (int i = 0; i < n; i++)
        app.chain[i] = chain[i];
    app.n_chain = n;
    memset(g_calls, 0, sizeof(g_calls));
    fe_auth_creds c = {.now = 1700000000};
    hsmca_err_clear(e);
    return fe_auth_run(&app, &c, r, e);
}

static void test_refusal_lists_each(void **state)
{
    const fe_authenticator *chain[] = {&A_ABSENT, &A_REFUSE};
    fe_auth_result r;
    hsmca_err e;
    assert_int_equal(run(chain, 2, &r, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg,
                        "authentication: client_cert: no client certificate; jwt: JWT expired");
    assert_string_equal(r.authenticator, "jwt"); /* the one that found credentials */
    assert_int_equal(r.n_ids, 0);
    /* nobody found credentials: still UNAUTHENTICATED, authenticator "none" */
    const fe_authenticator *absent[] = {&A_ABSENT};
    assert_int_equal(run(absent, 1, &r, &e), HSMCA_EAUTH);
    assert_string_equal(r.authenticator, "none");
    assert_int_equal(run(chain, 0, &r, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "authentication: no authenticator configured");
}

static void test_first_success_wins(void **state)
{
    const fe_authenticator *chain[] = {&A_REFUSE, &A_OK, &A_UNAVAIL};
    fe_auth_result r;
    hsmca_err e;
    assert_int_equal(run(chain, 3, &r, &e), HSMCA_OK);
    assert_string_equal(r.authenticator, "good");
    assert_int_equal(r.n_ids, 1);
    assert_string_equal(r.ids[0], "spiffe://cluster.local/ns/a/sa/b");
    assert_int_equal(g_calls[1], 1);
    assert_int_equal(g_calls[2], 0); /* never asked: the chain stopped */
}

static void test_unavailable_wins_over_refusal(void **state)
{
    const fe_authenticator *chain[] = {&A_UNAVAIL, &A_REFUSE};
    fe_auth_result r;
    hsmca_err e;
    assert_int_equal(run(chain, 2, &r, &e), HSMCA_EUNAVAIL);
    assert_string_equal(e.msg,
                        "authentication: kubernetes: API server unreachable; jwt: JWT expired");
    const fe_authenticator *rev[] = {&A_REFUSE, &A_UNAVAIL};
    assert_int_equal(run(rev, 2, &r, &e), HSMCA_EUNAVAIL);
}

static void test_success_without_identity_refused(void **state)
{
    const fe_authenticator *chain[] = {&A_EMPTY};
    fe_auth_result r;
    hsmca_err e;
    assert_int_equal(run(chain, 1, &r, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "authentication: empty: named no identity");
}

static void test_long_reasons_keep_names(void **state)
{
    const fe_authenticator *chain[16];
    for (int i = 0; i < 16; i++)
        chain[i] = &A_REFUSE;
    fe_auth_result r;
    hsmca_err e;
    assert_int_equal(run(chain, 16, &r, &e), HSMCA_EAUTH);
    assert_true(strlen(e.msg) < sizeof(e.msg));
    assert_non_null(strstr(e.msg, "..."));
}

static void test_jwt_refusals(void **state)
{
    static fe_app app;
    memset(&app, 0, sizeof(app));
    fe_auth_result r;
    memset(&r, 0, sizeof(r));
    hsmca_err e;
    fe_auth_creds c = {.now = 1700000000};
    assert_int_equal(fe_auth_jwt(&app, &c, &r, &e), HSMCA_ENOTFOUND);
    assert_string_equal(e.msg, "no 'authorization' metadata");
    c.authorization = "Basic dXNlcjpwYXNz";
    c.authorization_len = strlen(c.authorization);
    assert_int_equal(fe_auth_jwt(&app, &c, &r, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "'authorization' is not a Bearer token");
    /* keys not there yet: retry later, not a refusal */
    c.authorization = "Bearer a.b.c";
    c.authorization_len = strlen(c.authorization);
    assert_int_equal(fe_auth_jwt(&app, &c, &r, &e), HSMCA_EUNAVAIL);
    app.keys[0] = tok_keys_new();
    assert_int_equal(fe_auth_jwt(&app, &c, &r, &e), HSMCA_EUNAVAIL);
    assert_string_equal(e.msg, "JWT issuer keys not loaded yet");
    tok_keys_free(app.keys[0]);
    app.keys[0] = NULL;
    /* the stub until the client-certificate authenticator is merged */
    assert_int_equal(fe_auth_client_cert(&app, &c, &r, &e), HSMCA_ENOTFOUND);
    assert_non_null(fe_auth_find("jwt"));
    assert_non_null(fe_auth_find("client_cert"));
    assert_null(fe_auth_find("kerberos"));
}

/* Multicluster: the ClusterID metadata picks the cluster; unknown ones are refused by
 * name, malformed ones without being echoed, and a client certificate ignores it. */
static void test_cluster_choice(void **state)
{
    (void)state;
    static hsmca_config cfg;
    config_defaults(&cfg);
    snprintf(cfg.clusters[0].id, sizeof(cfg.clusters[0].id), "west");
    snprintf(cfg.clusters[1].id, sizeof(cfg.clusters[1].id), "east");
    cfg.n_clusters = 2;
    static fe_app app;
    memset(&app, 0, sizeof(app));
    app.cfg = &cfg;
    fe_auth_creds c = {.now = 1700000000};
    hsmca_err e;
    int idx = -7;
    assert_int_equal(fe_auth_cluster(&app, &c, &idx, &e), HSMCA_OK);
    assert_int_equal(idx, 0);
    static const struct {
        const char *id;
        int want;
    } ok[] = {{"Kubernetes", 0}, {"west", 1}, {"east", 2}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        c.cluster_id = ok[i].id;
        c.cluster_id_len = strlen(ok[i].id);
        assert_int_equal(fe_auth_cluster(&app, &c, &idx, &e), HSMCA_OK);
        assert_int_equal(idx, ok[i].want);
    }
    c.cluster_id = "eastern"; /* a prefix match is no match */
    c.cluster_id_len = 4;
    assert_int_equal(fe_auth_cluster(&app, &c, &idx, &e), HSMCA_OK);
    assert_int_equal(idx, 2);
    c.cluster_id_len = 7;
    assert_int_equal(fe_auth_cluster(&app, &c, &idx, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "client claims to be in cluster \"eastern\", but we only know about "
                               "local cluster \"Kubernetes\" and remote clusters [west east]");
    c.cluster_id = "a\"b<script>";
    c.cluster_id_len = strlen(c.cluster_id);
    assert_int_equal(fe_auth_cluster(&app, &c, &idx, &e), HSMCA_EAUTH);
    assert_null(strstr(e.msg, "script"));
    /* the token authenticators refuse with it; client_cert does not look */
    c.authorization = "Bearer a.b.c";
    c.authorization_len = strlen(c.authorization);
    fe_auth_result r;
    assert_int_equal(fe_auth_jwt(&app, &c, &r, &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "not a cluster name"));
    assert_int_equal(fe_auth_tokenreview(&app, &c, &r, &e), HSMCA_EAUTH);
    assert_int_equal(fe_auth_client_cert(&app, &c, &r, &e), HSMCA_ENOTFOUND);
    /* a known remote cluster without a jwt authenticator */
    c.cluster_id = "west";
    c.cluster_id_len = 4;
    assert_int_equal(fe_auth_jwt(&app, &c, &r, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "the caller's cluster has no jwt authenticator (auth.clusters)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusal_lists_each),
        cmocka_unit_test(test_first_success_wins),
        cmocka_unit_test(test_unavailable_wins_over_refusal),
        cmocka_unit_test(test_success_without_identity_refused),
        cmocka_unit_test(test_long_reasons_keep_names),
        cmocka_unit_test(test_jwt_refusals),
        cmocka_unit_test(test_cluster_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
