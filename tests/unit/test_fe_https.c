/* test_fe_https.c - the TokenReview authenticator's HTTPS client
 * (frontend/fe_https.h) without a network: the answer parser (status line,
 * Content-Length, chunks, what is cut short or malformed) and the URL rules of
 * fe_https_new. The round trip over TLS is in tests/integration/test_tokenreview.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_https.h"
#include "testutil.h"
#include "util.h"

static hsmca_code parse(const char *text, int *status, char *body, size_t bodysz, hsmca_err *e)
{
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    assert_non_null(buf);
    memcpy(buf, text, len + 1);
    char *b;
    size_t bl;
    hsmca_err_clear(e);
    hsmca_code rc = fe_https_parse_response(buf, len, status, &b, &bl, e);
    if (rc == HSMCA_OK) {
        assert_true(bl < bodysz);
        memcpy(body, b, bl);
        body[bl] = 0;
    }
    free(buf);
    return rc;
}

static void test_answers(void **state)
{
    (void)state;
    int st;
    char body[256];
    hsmca_err e;
    assert_int_equal(parse("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                           "Content-Length: 7\r\n\r\n{\"a\":1}trailing",
                           &st, body, sizeof(body), &e),
                     HSMCA_OK);
    assert_int_equal(st, 201);
    assert_string_equal(body, "{\"a\":1}");
    /* Go's net/http chunks longer answers; header names in any case, extensions ignored. */
    assert_int_equal(parse("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
                           "4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n",
                           &st, body, sizeof(body), &e),
                     HSMCA_OK);
    assert_int_equal(st, 200);
    assert_string_equal(body, "{\"a\":1}");
    assert_int_equal(
        parse("HTTP/1.0 500\r\nContent-Length: 0\r\n\r\n", &st, body, sizeof(body), &e), HSMCA_OK);
    assert_int_equal(st, 500);
}

static void test_malformed_answers(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "no HTTP head"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "no HTTP head"},
        {"HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n", "status line"},
        {"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", "status line"},
        {"HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n", "status line"},
        {"ICY 200 OK\r\nContent-Length: 0\r\n\r\n", "status line"},
        {"HTTP/1.1 201 Created\r\n\r\n{}", "neither Content-Length nor chunks"},
        {"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}", "Content-Length"},
        {"HTTP/1.1 201 Created\r\nContent-Length: -1\r\n\r\n{}", "Content-Length"},
        {"HTTP/1.1 201 Created\r\nContent-Length: 1x\r\n\r\n{}", "Content-Length"},
        {"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip\r\n\r\n{}", "other than chunked"},
        {"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{}", "cut short"},
        {"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n", "cut short"},
        {"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
         "chunk size"},
        {"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
         "cut short"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int st;
        char body[256];
        hsmca_err e;
        hsmca_code rc = parse(bad[i].text, &st, body, sizeof(body), &e);
        if (rc != HSMCA_EUNAVAIL || !strstr(e.msg, bad[i].want))
            fail_msg("case %zu: want UNAVAILABLE \"%s\", got %s \"%s\"", i, bad[i].want,
                     hsmca_code_name(rc), e.msg);
    }
}

static void test_urls(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("https");
    assert_int_equal(tu_system("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
                               "-nodes -subj /CN=k8s-ca -days 1 -keyout '%s/ca.key' "
                               "-out '%s/ca.pem' 2>/dev/null",
                               dir, dir),
                     0);
    char path[512], *ca = NULL;
    size_t ca_len;
    snprintf(path, sizeof(path), "%s/ca.pem", dir);
    hsmca_err e;
    assert_int_equal(util_read_file(path, 1 << 20, &ca, &ca_len, &e), HSMCA_OK);
    static const char *const good[] = {"https://127.0.0.1", "https://127.0.0.1:6443",
                                       "https://[::1]:443/",
                                       "https://10.0.0.1:443/k8s/clusters/c-1"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        fe_https *h = NULL;
        if (fe_https_new(good[i], ca, ca_len, NULL, 0, NULL, 0, &h, &e) != HSMCA_OK)
            fail_msg("%s: %s", good[i], e.msg);
        fe_https_free(h);
    }
    static const char *const bad[] = {"http://127.0.0.1",    "https://",
                                      "https://:443",        "https://u@127.0.0.1",
                                      "https://127.0.0.1:0", "https://127.0.0.1:65536",
                                      "https://127.0.0.1:x", "https://[::1",
                                      "https://[::1]x",      "127.0.0.1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fe_https *h = (fe_https *)1;
        hsmca_err_clear(&e);
        if (fe_https_new(bad[i], ca, ca_len, NULL, 0, NULL, 0, &h, &e) != HSMCA_EINVAL)
            fail_msg("%s accepted", bad[i]);
        assert_null(h);
    }
    /* A CA bundle without a certificate; a client certificate without a usable key. */
    fe_https *h = NULL;
    assert_int_equal(fe_https_new("https://127.0.0.1", "junk", 4, NULL, 0, NULL, 0, &h, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "no certificate"));
    assert_int_equal(fe_https_new("https://127.0.0.1", ca, ca_len, ca, ca_len, "x", 1, &h, &e),
                     HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "client-key"));
    free(ca);
    tu_system("rm -rf '%s'", dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_malformed_answers),
        cmocka_unit_test(test_urls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
