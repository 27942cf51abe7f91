/* test_sup_keys.c - the supervisor's issuer keys (supervisor/sup_keys.h) from a JWKS file: a
 * bad file stops the start, a good one is pushed to a child as a sealed memfd the
 * front end's holder loads, an edit is picked up by the poll, a broken edit keeps the
 * last good keys. (Discovery over HTTPS: integration/test_oidc.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/evp.h>

#include "tok_keys.h"
#include "ipc_frame.h"
#include "sup_keys.h"
#include "testutil.h"
#include "util.h"

static char g_path[512];

static void write_file(const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", g_path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, g_path), 0);
}

static char *ec_jwks(const char *kid)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    char *doc = tu_jwks_doc(tu_jwk_ec(k, k, kid, "P-256"), NULL);
    EVP_PKEY_free(k);
    return doc;
}

static hsmca_config *file_cfg(void)
{
    hsmca_config *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    config_defaults(c);
    snprintf(c->jwt_issuer, sizeof(c->jwt_issuer), "https://i.example");
    snprintf(c->jwks_file, sizeof(c->jwks_file), "%s", g_path);
    return c;
}

/* Pushes k's document over a socketpair and loads it into a fresh holder. */
static uint64_t push_and_load(sup_keys *k, tok_keys *fk)
{
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    uint64_t sent = 0;
    hsmca_err e;
    assert_int_equal(sup_keys_push(k, sp[0], &sent, &e), HSMCA_OK);
    if (sent) {
        char type;
        int fd, eof;
        assert_int_equal(ipc_recv_ctl(sp[1], &type, &fd, &eof, &e), HSMCA_OK);
        assert_int_equal(type, CTL_KEYS);
        assert_true(fd >= 0);
        if (tok_keys_load_fd(fk, fd, &e) != HSMCA_OK)
            fail_msg("load: %s", e.msg);
        close(fd);
    }
    close(sp[0]);
    close(sp[1]);
    return sent;
}

/* Multicluster: a remote cluster's fetcher pushes with its own type byte, which
 * ctl_keys_cluster maps back to the cluster; other bytes are no key push. */
static void test_push_cluster_type(void **state)
{
    char *d = ec_jwks("west");
    write_file(d);
    hsmca_config *c = file_cfg();
    hsmca_err e;
    sup_keys *k = sup_keys_start(c, NULL, &e);
    if (!k)
        fail_msg("start: %s", e.msg);
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    uint64_t sent = 0;
    assert_int_equal(sup_keys_push_type(k, sp[0], CTL_KEYS_CLUSTER(3), &sent, &e), HSMCA_OK);
    assert_int_equal(sent, 1);
    char type;
    int fd, eof;
    assert_int_equal(ipc_recv_ctl(sp[1], &type, &fd, &eof, &e), HSMCA_OK);
    assert_int_equal(type, '3');
    assert_int_equal(ctl_keys_cluster(type), 3);
    tok_keys *fk = tok_keys_new();
    assert_int_equal(tok_keys_load_fd(fk, fd, &e), HSMCA_OK);
    close(fd);
    assert_int_equal(ctl_keys_cluster(CTL_KEYS), 0);
    assert_int_equal(CTL_KEYS_CLUSTER(0), CTL_KEYS);
    assert_int_equal(CTL_KEYS_CLUSTER(8), '8');
    assert_int_equal(ctl_keys_cluster('0'), -1);
    assert_int_equal(ctl_keys_cluster('9'), -1);
    assert_int_equal(ctl_keys_cluster(CTL_NEW_PEER), -1);
    assert_int_equal(ctl_keys_cluster(CTL_KEYS_REFRESH), -1);
    assert_int_equal(ctl_keys_cluster(CTL_RESTART_PEER), -1);
    tok_keys_free(fk);
    close(sp[0]);
    close(sp[1]);
    sup_keys_stop(k);
    free(c);
    free(d);
}

static void test_bad_file_stops_start(void **state)
{
    hsmca_config *c = file_cfg();
    hsmca_err e;
    unlink(g_path);
    assert_null(sup_keys_start(c, NULL, &e));
    assert_non_null(strstr(e.msg, "auth.jwt.jwks_file"));
    write_file("{\"keys\":[]}");
    assert_null(sup_keys_start(c, NULL, &e));
    assert_non_null(strstr(e.msg, "no usable"));
    /* without jwt in the chain nothing is read */
    c->auth_chain.n = 1;
    snprintf(c->auth_chain.items[0], sizeof(c->auth_chain.items[0]), "client_cert");
    sup_keys *k = sup_keys_start(c, NULL, &e);
    assert_non_null(k);
    assert_int_equal(sup_keys_generation(k), 0);
    tok_keys *fk = tok_keys_new();
    assert_int_equal(push_and_load(k, fk), 0); /* nothing to push */
    tok_keys_free(fk);
    sup_keys_stop(k);
    free(c);
}

static void test_push_and_reload(void **state)
{
    char *d1 = ec_jwks("one"), *d2 = ec_jwks("two");
    write_file(d1);
    hsmca_config *c = file_cfg();
    hsmca_err e;
    sup_keys *k = sup_keys_start(c, NULL, &e);
    if (!k)
        fail_msg("start: %s", e.msg);
    assert_int_equal(sup_keys_generation(k), 1);
    tok_keys *fk = tok_keys_new();
    assert_int_equal(push_and_load(k, fk), 1);
    assert_int_equal(tok_keys_generation(fk), 1);

    /* an edit: picked up by the next poll (every SUP_KEYS_FILE_POLL_S) */
    write_file(d2);
    sup_keys_refresh(k); /* or sooner, when a child asks */
    for (int i = 0; i < 100 && sup_keys_generation(k) < 2; i++)
        usleep(50 * 1000);
    assert_int_equal(sup_keys_generation(k), 2);
    assert_int_equal(push_and_load(k, fk), 2);

    /* a broken edit: the last good keys stay */
    write_file("{not json");
    sup_keys_refresh(k);
    usleep(300 * 1000);
    assert_int_equal(sup_keys_generation(k), 2);
    /* the same bytes again are no news */
    write_file(d2);
    sup_keys_refresh(k);
    usleep(300 * 1000);
    assert_int_equal(sup_keys_generation(k), 2);

    tok_keys_free(fk);
    sup_keys_stop(k);
    free(c);
    free(d1);
    free(d2);
}

static int setup(void **state)
{
    char *dir = tu_mkdtemp("sup_keys");
    snprintf(g_path, sizeof(g_path), "%s/jwks.json", dir);
    free(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_file_stops_start),
        cmocka_unit_test(test_push_and_reload),
        cmocka_unit_test(test_push_cluster_type),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
