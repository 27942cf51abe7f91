/* test_dev_jwt.c - the development JWT issuer (cli/dev_jwt.h): the key and JWKS
 * it writes, and that the front end's verifier (tok_jwt) accepts what it mints,
 * and only that. */
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

#include "dev_jwt.h"
#include "tok_jwt.h"
#include "testutil.h"
#include "util.h"

#define SKEW 60

static tok_jwks *jwks_ok(const char *doc)
{
    tok_jwks *ks = NULL;
    hsmca_err e;
    if (tok_jwks_parse(doc, strlen(doc), &ks, &e) != HSMCA_OK)
        fail_msg("JWKS refused: %s", e.msg);
    return ks;
}

static hsmca_code verify_at(const tok_jwks *ks, const tok_jwt_rules *r, const char *tok,
                            int64_t now, tok_jwt_identity *id, hsmca_err *e)
{
    hsmca_err_clear(e);
    return tok_jwt_verify(ks, r, tok, strlen(tok), now, id, e);
}

static char *read_all(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    char *buf = NULL;
    hsmca_err e;
    if (util_read_file(path, 1 << 20, &buf, NULL, &e) != HSMCA_OK)
        fail_msg("%s", e.msg);
    return buf;
}

static void test_dev_jwt_roundtrip(void **state)
{
    char *dir = tu_mkdtemp("jwt");
    hsmca_err e;
    if (dev_jwt_setup(dir, &e) != HSMCA_OK)
        fail_msg("dev_jwt_setup: %s", e.msg);

    char path[1024];
    struct stat st;
    snprintf(path, sizeof(path), "%s/dev-jwt-key.pem", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char *key1 = read_all(dir, "dev-jwt-key.pem");
    assert_non_null(strstr(key1, "-----BEGIN PRIVATE KEY-----")); /* PKCS#8 */
    char *jwks1 = read_all(dir, "dev-jwks.json");

    tok_jwks *ks = jwks_ok(jwks1);
    char *tok = dev_jwt_mint(dir, DEV_JWT_ISSUER, "istio-ca", "default", "sleep", 600, &e);
    if (!tok)
        fail_msg("dev_jwt_mint: %s", e.msg);
    static const char *const auds[] = {"istio-ca"};
    tok_jwt_rules r = {DEV_JWT_ISSUER, auds, 1, SKEW};
    tok_jwt_identity id;
    int64_t now = util_wall_now();
    if (verify_at(ks, &r, tok, now, &id, &e) != HSMCA_OK)
        fail_msg("minted token refused: %s", e.msg);
    assert_string_equal(id.ns, "default");
    assert_string_equal(id.sa, "sleep");
    /* exp = now + ttl: refused once ttl + skew has passed */
    assert_int_equal(verify_at(ks, &r, tok, now + 600 + SKEW + 5, &id, &e), HSMCA_EAUTH);
    assert_string_equal(e.msg, "JWT expired");

    /* the header's kid is the JWKS kid */
    size_t hl;
    uint8_t *hdr = util_b64url_decode(tok, (size_t)(strchr(tok, '.') - tok), &hl);
    assert_non_null(hdr);
    const char *kidp = strstr(jwks1, "\"kid\": \"");
    assert_non_null(kidp);
    char kid[64];
    assert_int_equal(sscanf(kidp + 8, "%63[^\"]", kid), 1);
    assert_int_equal(strlen(kid), 11); /* base64url of 8 bytes */
    char want[128];
    snprintf(want, sizeof(want), "\"kid\":\"%s\"", kid);
    assert_non_null(memmem(hdr, hl, want, strlen(want)));
    free(hdr);

    /* a second setup reuses the key; a lost JWKS is rebuilt identically */
    assert_int_equal(dev_jwt_setup(dir, &e), HSMCA_OK);
    char *key2 = read_all(dir, "dev-jwt-key.pem");
    char *jwks2 = read_all(dir, "dev-jwks.json");
    assert_string_equal(key1, key2);
    assert_string_equal(jwks1, jwks2);
    snprintf(path, sizeof(path), "%s/dev-jwks.json", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dev_jwt_setup(dir, &e), HSMCA_OK);
    char *jwks3 = read_all(dir, "dev-jwks.json");
    assert_string_equal(jwks1, jwks3);

    /* another dev dir's key is not trusted by this JWKS */
    char *dir2 = tu_mkdtemp("jwt");
    char *tok2 = dev_jwt_mint(dir2, DEV_JWT_ISSUER, "istio-ca", "default", "sleep", 600, &e);
    assert_null(tok2); /* no key yet: mint does not create one */
    assert_int_equal(dev_jwt_setup(dir2, &e), HSMCA_OK);
    tok2 = dev_jwt_mint(dir2, DEV_JWT_ISSUER, "istio-ca", "default", "sleep", 600, &e);
    assert_non_null(tok2);
    assert_int_equal(verify_at(ks, &r, tok2, now, &id, &e), HSMCA_EAUTH);
    assert_non_null(strstr(e.msg, "not in JWKS"));

    /* names the front end would refuse are refused at mint time, by the same
     * rule (the old dev copy let "a.b" through as a namespace) */
    static const char *const bad_mint[][2] = {{"a/b", "sleep"}, {"a.b", "sleep"},
                                             {"default", "a..b"}, {"-a", "sleep"}};
    for (size_t i = 0; i < sizeof(bad_mint) / sizeof(bad_mint[0]); i++) {
        hsmca_err_clear(&e);
        char *t = dev_jwt_mint(dir, NULL, "istio-ca", bad_mint[i][0], bad_mint[i][1], 600, &e);
        if (t)
            fail_msg("minted a token for %s/%s", bad_mint[i][0], bad_mint[i][1]);
        assert_int_equal(e.code, HSMCA_EINVAL);
    }

    free(tok2);
    free(tok);
    tok_jwks_free(ks);
    free(key1);
    free(key2);
    free(jwks1);
    free(jwks2);
    free(jwks3);
    tu_system("rm -rf '%s' '%s'", dir, dir2);
    free(dir);
    free(dir2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dev_jwt_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
