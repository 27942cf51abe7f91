/* test_tok_keys.c - the front end's key holder (token/tok_keys.h): a pushed memfd is
 * read only when sealed and within size, parsed again, and swapped in while
 * verifications run on other threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/evp.h>

#include "tok_keys.h"
#include "sigfmt.h"
#include "testutil.h"

static int memfd_with(const char *doc, size_t len, int seal)
{
    int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, doc, len), (ssize_t)len);
    if (seal)
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW), 0);
    return fd;
}

static char *ec_jwks(const char *kid)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    char *doc = tu_jwks_doc(tu_jwk_ec(k, k, kid, "P-256"), NULL);
    EVP_PKEY_free(k);
    return doc;
}

static void test_load_checks(void **state)
{
    tok_keys *k = tok_keys_new();
    hsmca_err e;
    char *doc = ec_jwks("k1");
    int fd = memfd_with(doc, strlen(doc), 0);
    assert_int_equal(tok_keys_load_fd(k, fd, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "keys push: the memfd is not sealed");
    close(fd);
    fd = memfd_with("", 0, 1);
    assert_int_equal(tok_keys_load_fd(k, fd, &e), HSMCA_EINVAL);
    close(fd);
    fd = memfd_with("{\"keys\":[]}", 11, 1);
    assert_int_equal(tok_keys_load_fd(k, fd, &e), HSMCA_EINVAL);
    assert_string_equal(e.msg, "JWKS holds no usable RSA or EC P-256 signing key");
    close(fd);
    assert_int_equal(tok_keys_generation(k), 0);
    fd = memfd_with(doc, strlen(doc), 1);
    assert_int_equal(tok_keys_load_fd(k, fd, &e), HSMCA_OK);
    close(fd);
    assert_int_equal(tok_keys_generation(k), 1);
    /* an unknown kid is reported, so the caller can ask for a refresh */
    static const char *const auds[] = {"istio-ca"};
    tok_jwt_rules r = {"https://i.example", auds, 1, 60};
    const char *tok = "eyJhbGciOiJFUzI1NiIsImtpZCI6Im90aGVyIn0.e30.AAAA"; /* kid "other" */
    tok_jwt_identity id;
    int unknown = 0;
    assert_int_equal(tok_keys_verify(k, &r, tok, strlen(tok), 1700000000, &id, &unknown, &e),
                     HSMCA_EAUTH);
    assert_int_equal(unknown, 1);
    /* kid "k1" is known: a bad signature is not a rotation */
    tok = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.e30.AAAA";
    assert_int_equal(tok_keys_verify(k, &r, tok, strlen(tok), 1700000000, &id, &unknown, &e),
                     HSMCA_EAUTH);
    assert_int_equal(unknown, 0);
    free(doc);
    tok_keys_free(k);
}

/* A token that verified is kept (tok_cache.h), but only against the set it verified
 * with: after a swap to a set where its kid names another key it is refused. */
static void test_swap_forgets_verified_tokens(void **state)
{
    static const char hdr[] = "{\"alg\":\"ES256\",\"kid\":\"k1\"}";
    static const char claims[] =
        "{\"iss\":\"https://i.example\",\"aud\":\"istio-ca\",\"exp\":1700000600,"
        "\"iat\":1699999990,\"sub\":\"system:serviceaccount:foo:bar\","
        "\"kubernetes.io\":{\"namespace\":\"foo\",\"serviceaccount\":{\"name\":\"bar\"}}}";
    static const char *const auds[] = {"istio-ca"};
    tok_jwt_rules r = {"https://i.example", auds, 1, 60};
    EVP_PKEY *signer = EVP_EC_gen("P-256"), *other = EVP_EC_gen("P-256");
    assert_non_null(signer);
    assert_non_null(other);
    char *tok = sigfmt_jws_compact(signer, hdr, strlen(hdr), claims, strlen(claims));
    assert_non_null(tok);
    tok_keys *k = tok_keys_new();
    tok_jwks *ks = NULL;
    hsmca_err e;
    tok_jwt_identity id;
    int unknown;
    for (int round = 0; round < 2; round++) {
        char *doc = tu_jwks_doc(
            tu_jwk_ec(round ? other : signer, round ? other : signer, "k1", "P-256"), NULL);
        assert_int_equal(tok_jwks_parse(doc, strlen(doc), &ks, &e), HSMCA_OK);
        free(doc);
        tok_keys_set(k, ks);
        for (int i = 0; i < 2; i++) /* the second from the cache in round 0 */
            assert_int_equal(tok_keys_verify(k, &r, tok, strlen(tok), 1700000000, &id, &unknown, &e),
                             round ? HSMCA_EAUTH : HSMCA_OK);
    }
    free(tok);
    EVP_PKEY_free(signer);
    EVP_PKEY_free(other);
    tok_keys_free(k);
}

typedef struct {
    tok_keys *k;
    volatile int stop;
    long runs;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *a = p;
    static const char *const auds[] = {"istio-ca"};
    tok_jwt_rules r = {"https://i.example", auds, 1, 60};
    const char *tok = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.e30.AAAA";
    while (!a->stop) {
        tok_jwt_identity id;
        int unknown;
        hsmca_err e;
        hsmca_code rc = tok_keys_verify(a->k, &r, tok, strlen(tok), 1700000000, &id, &unknown, &e);
        if (rc != HSMCA_EAUTH)
            abort();
        a->runs++;
    }
    return NULL;
}

/* Swaps under verifications in flight: under ASan a freed key in use would show. */
static void test_swap_under_readers(void **state)
{
    tok_keys *k = tok_keys_new();
    reader_arg a = {k, 0, 0};
    char *doc = ec_jwks("k1");
    tok_jwks *ks = NULL;
    hsmca_err e;
    assert_int_equal(tok_jwks_parse(doc, strlen(doc), &ks, &e), HSMCA_OK);
    tok_keys_set(k, ks);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, reader, &a);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(tok_jwks_parse(doc, strlen(doc), &ks, &e), HSMCA_OK);
        tok_keys_set(k, ks);
    }
    a.stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(tok_keys_generation(k), 201);
    assert_true(a.runs > 0);
    free(doc);
    tok_keys_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_checks),
        cmocka_unit_test(test_swap_under_readers),
        cmocka_unit_test(test_swap_forgets_verified_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
