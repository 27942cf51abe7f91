/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/core_names.h>

#include <openssl/rand.h>

#include "sigalg.h"
#include "sigfmt.h"

/* 1 when every parent directory of path lets other users through. */
static int parents_searchable(const char *path)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s", path);
    for (char *slash = strrchr(p, '/'); slash && slash != p; slash = strrchr(p, '/')) {
        *slash = '\0';
        struct stat st;
        if (stat(p, &st) != 0 || !(st.st_mode & S_IXOTH))
            return 0;
    }
    return 1;
}

char *tu_mkdtemp(const char *prefix)
{
    const char *base = getenv("HSMCA_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    /* A signer started as root drops to hsmca-signer and must still reach the
     * token under this directory (as hsmca_harness.scratch_base does). */
    if (base[0] != '/' || !parents_searchable(base))
        base = "/tmp/hsmca-test";
    mkdir(base, 0711);
    if (geteuid() == 0 && strcmp(base, "/tmp") != 0)
        chmod(base, 0711);
    size_t n = strlen(base) + strlen(prefix) + 16;
    char *path = malloc(n);
    if (!path)
        abort();
    snprintf(path, n, "%s/%s.XXXXXX", base, prefix);
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

const char *tu_hsmca_bin(void)
{
    const char *b = getenv("HSMCA_BIN");
    return (b && *b) ? b : "hsmca";
}

const char *tu_signer_bin(void)
{
    static char path[4096];
    const char *bin = tu_hsmca_bin();
    const char *slash = strrchr(bin, '/');
    if (!slash)
        return "hsmca-signer";
    snprintf(path, sizeof(path), "%.*s/hsmca-signer", (int)(slash - bin), bin);
    return path;
}

int tu_system(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(cmd))
        return -1;
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int tu_dev_init(const char *dir, const char *keytype)
{
    int rc = tu_system("'%s' dev init --dir '%s' --ca-key %s >'%s/init.log' 2>&1",
                       tu_hsmca_bin(), dir, keytype, dir);
    if (rc != 0) {
        fprintf(stderr, "tu_dev_init: hsmca dev init failed (%d), see %s/init.log\n", rc, dir);
        return -1;
    }
    char conf[1024];
    snprintf(conf, sizeof(conf), "%s/softhsm2.conf", dir);
    setenv("SOFTHSM2_CONF", conf, 1);
    return 0;
}

/* A JWK parameter; aborts when the key has none. */
static char *tu_param(EVP_PKEY *k, const char *param, size_t width)
{
    char *s = sigfmt_jwk_param(k, param, width);
    if (!s)
        abort();
    return s;
}

/* printf into a new string of at most cap bytes; aborts on failure or truncation. */
static char *tu_format(size_t cap, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *tu_format(size_t cap, const char *fmt, ...)
{
    char *out = malloc(cap);
    va_list ap;
    va_start(ap, fmt);
    int n = out ? vsnprintf(out, cap, fmt, ap) : -1;
    va_end(ap);
    if (n < 0 || (size_t)n >= cap)
        abort();
    return out;
}

char *tu_jwk_rsa(EVP_PKEY *k, const char *kid)
{
    char *n = tu_param(k, OSSL_PKEY_PARAM_RSA_N, 0), *e = tu_param(k, OSSL_PKEY_PARAM_RSA_E, 0);
    char *out = tu_format(strlen(n) + strlen(e) + strlen(kid) + 64,
                          "{\"kty\":\"RSA\",\"kid\":\"%s\",\"use\":\"sig\",\"n\":\"%s\",\"e\":\"%s\"}",
                          kid, n, e);
    free(n);
    free(e);
    return out;
}

char *tu_jwk_ec(EVP_PKEY *kx, EVP_PKEY *ky, const char *kid, const char *crv)
{
    char *x = tu_param(kx, OSSL_PKEY_PARAM_EC_PUB_X, 32);
    char *y = tu_param(ky, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
    char *out = tu_format(strlen(x) + strlen(y) + strlen(kid) + strlen(crv) + 64,
                          "{\"kty\":\"EC\",\"crv\":\"%s\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"}",
                          crv, kid, x, y);
    free(x);
    free(y);
    return out;
}

char *tu_jwks_doc(char *a, char *b)
{
    char *out = tu_format(strlen(a) + (b ? strlen(b) : 0) + 16, "{\"keys\":[%s%s%s]}", a,
                          b ? "," : "", b ? b : "");
    free(a);
    free(b);
    return out;
}

hsmca_code tu_pool_sign_check(p11_pool *p, hsmca_err *e)
{
    const sigalg *alg = p11_pool_sigalg(p);
    uint8_t d[64], sig[IPC_SIG_MAX];
    size_t len = sizeof(sig);
    if (!alg || RAND_bytes(d, (int)alg->digest_len) != 1)
        abort();
    hsmca_err_clear(e);
    hsmca_code c = p11_pool_sign_digest(p, d, alg->digest_len, sig, &len, e);
    if (c != HSMCA_OK)
        return c;
    EVP_PKEY *pk = p11_pool_public_key(p);
    int good = pk && sigalg_verify_digest(alg, pk, d, sig, len) == 1;
    d[0] ^= 1; /* and the check can fail */
    int tampered = pk && sigalg_verify_digest(alg, pk, d, sig, len) == 1;
    EVP_PKEY_free(pk);
    if (!good || tampered)
        return hsmca_fail(e, HSMCA_EINTERNAL, "tu_pool_sign_check: the signature %s",
                          good ? "verifies over another digest" : "does not verify");
    return HSMCA_OK;
}
