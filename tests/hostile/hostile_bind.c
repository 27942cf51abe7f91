/* hostile_bind.c - identity binding (docs/ARCHITECTURE.md §3.2, signer/signer_bind.h), with its own
 * signer on a dev CA whose chain has jwt (auth.jwt.bind defaults to true). The front end
 * here is the attacker: it holds tokens a caller sent it, or none, and asks for a
 * certificate of another identity. The signer verifies the forwarded token with the
 * keys we push it as the supervisor would (a sealed memfd, CTL_KEYS), so it must
 * refuse a TBS for another identity than the token's, an expired, forged, foreign-
 * audience or foreign-issuer token, and a jwt caller without a token, each naming the
 * check, and sign the request whose URI SAN is the token's identity, recording in the
 * audit log's issue-intent that it was bound.
 *
 * Multicluster: the config has a second cluster, "west", whose issuer has the same URL
 * as the local one (Kubernetes' default issuer is the same in every cluster) and keys of
 * its own (dev_jwt_setup in DIR/west), pushed as CTL_KEYS_CLUSTER(1). A front end that
 * names a cluster (SignRequest.cluster) only picks whose keys verify the token: a token
 * of one cluster claimed as the other's is refused, and an unknown cluster too. */
#include "hostile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/pem.h>

#include "dev_jwt.h"
#include "tok_jwt.h"
#include "ipc_frame.h"
#include "profile.h"
#include "sigfmt.h"
#include "signer_tbs.h"
#include "util.h"

#define BIND "identity binding: "
#define BAD_TOKEN BIND "the forwarded token: "
#define TD "spiffe://cluster.local"

#define WEST "west"

/* Before the signer starts: the west cluster's issuer key and JWKS (DIR/west), and the
 * cluster in the config's auth.clusters. */
static int add_west_cluster(void)
{
    char dir[1100], path[1200];
    snprintf(dir, sizeof(dir), "%s/" WEST, hf.dir);
    hsmca_err e;
    if (mkdir(dir, 0700) != 0 || dev_jwt_setup(dir, &e) != HSMCA_OK)
        return -1;
    char *yaml = hf_read_text(hf.conf, 1 << 20);
    const char *at = yaml ? strstr(yaml, "\nauth:\n") : NULL;
    if (!at)
        return -1;
    FILE *f = fopen(hf.conf, "w");
    if (!f)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, DEV_JWKS_FILE);
    fprintf(f,
            "%.*s\nauth:\n  clusters:\n    - id: " WEST "\n      jwt:\n        issuer: %s\n"
            "        jwks_file: %s\n%s",
            (int)(at - yaml), yaml, DEV_JWT_ISSUER, path, at + strlen("\nauth:\n"));
    free(yaml);
    return fclose(f) == 0 ? 0 : -1;
}

int hf_bind_group_setup(void **state)
{
    hf_group_teardown(state);
    return hf_start_signer("hostile-bind", add_west_cluster);
}

/* A SignRequest for tbs with the authenticator and token a front end forwards
 * (either NULL: absent); the signer's reply. */
static const char *g_cluster; /* SignRequest.cluster of sign_as (NULL: absent) */

static Hsmca__Ipc__SignReply *sign_as(const uint8_t *tbs, size_t len, const char *authenticator,
                                      const char *token)
{
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = PROFILE_WORKLOAD;
    req.tbs.data = (uint8_t *)tbs;
    req.tbs.len = len;
    req.requester = (char *)HF_SPIFFE_ID;
    if (authenticator)
        req.authenticator = (char *)authenticator;
    if (token)
        req.token = (char *)token;
    if (g_cluster)
        req.cluster = (char *)g_cluster;
    uint64_t id = hf_send_sign_request(hf.ipc, &req);
    return hf_await_reply(hf.ipc, id, HF_REPLY_MS);
}

/* A TBS for uri (NULL: HF_SPIFFE_ID). */
static uint8_t *tbs_for(const char *uri, size_t *len)
{
    tbs_spec s = {.uri = uri};
    return hf_build_tbs(&s, len);
}

/* The dev issuer's token for ns/sa, audience aud, as `hsmca dev token` mints it. */
static char *dev_token(const char *aud, const char *ns, const char *sa)
{
    hsmca_err e;
    char *t = dev_jwt_mint(hf.dir, NULL, aud, ns, sa, 3600, &e);
    if (!t)
        fail_msg("dev_jwt_mint: %s", e.msg);
    return t;
}

/* A token with the dev token's header (its kid) and claims for default/sleep, issued at
 * now + iat_off and expiring at now + exp_off, signed by key (NULL: the dev issuer's). */
static char *crafted_token(EVP_PKEY *key, const char *iss, long iat_off, long exp_off)
{
    char *dev = dev_token("istio-ca", "default", "sleep");
    const char *dot = strchr(dev, '.');
    assert_non_null(dot);
    size_t hlen;
    uint8_t *hdr = util_b64url_decode(dev, (size_t)(dot - dev), &hlen);
    assert_non_null(hdr);
    EVP_PKEY *own = NULL;
    if (!key) {
        char path[1100];
        snprintf(path, sizeof(path), "%s/%s", hf.dir, DEV_JWT_KEY_FILE);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        own = key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        assert_non_null(key);
    }
    json_int_t now = (json_int_t)util_wall_now();
    json_t *claims = json_pack(
        "{s:s,s:[s],s:s,s:{s:s,s:{s:s,s:s}},s:I,s:I,s:I}", "iss", iss ? iss : DEV_JWT_ISSUER, "aud",
        "istio-ca", "sub", "system:serviceaccount:default:sleep", "kubernetes.io", "namespace",
        "default", "serviceaccount", "name", "sleep", "uid", "0b5e7a52-1c1e-4d4e-9f5a-2d0c6f1f9a11",
        "iat", now + iat_off, "nbf", now + iat_off, "exp", now + exp_off);
    char *cj = json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *tok = sigfmt_jws_compact(key, hdr, hlen, cj, strlen(cj));
    assert_non_null(tok);
    free(cj);
    json_decref(claims);
    free(hdr);
    free(dev);
    EVP_PKEY_free(own);
    return tok;
}

/* The refusal a front end gets for tbs with this authenticator and token, then a
 * fresh valid request still signed. */
static void assert_refused_as(const uint8_t *tbs, size_t len, const char *authenticator,
                              const char *token, hsmca_code code, const char *prefix,
                              const char *says)
{
    Hsmca__Ipc__SignReply *rep = sign_as(tbs, len, authenticator, token);
    fprintf(stderr, "  refused: code %u (%s), reason \"%s\"\n", rep->code,
            hsmca_code_name((hsmca_code)rep->code), rep->reason);
    if (rep->code == HSMCA_OK)
        fail_msg("signed a TBS that identity binding should refuse with \"%s\"", prefix);
    if (rep->code != (uint32_t)code || strncmp(rep->reason, prefix, strlen(prefix)) != 0)
        fail_msg("refused with %s \"%s\", expected %s \"%s...\"",
                 hsmca_code_name((hsmca_code)rep->code), rep->reason, hsmca_code_name(code),
                 prefix);
    if (says && !strstr(rep->reason, says))
        fail_msg("reason \"%s\" does not say \"%s\"", rep->reason, says);
    assert_int_equal(rep->certificate.len, 0);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    hf_assert_signs_fresh();
}

/* The last issue-intent line of the signer's audit log (malloc'd). */
static char *last_intent(void)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/audit/log", hf.dir);
    char *text = hf_read_text(path, 64 << 20);
    assert_non_null(text);
    char *last = NULL;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (strstr(line, "\"kind\":\"issue-intent\""))
            last = line;
        line = nl ? nl + 1 : NULL;
    }
    char *out = last ? strdup(last) : NULL;
    free(text);
    assert_non_null(out);
    return out;
}

/* Pushes DIR/SUB/dev-jwks.json as the supervisor does (supervisor/sup_keys.c): a sealed memfd,
 * with the type byte of its cluster. */
static void push_keys_of(const char *sub, char type)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s%s", hf.dir, sub, DEV_JWKS_FILE);
    char *doc = hf_read_text(path, TOK_JWKS_MAX_LEN);
    assert_non_null(doc);
    int fd = memfd_create("hf-jwks", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    size_t n = strlen(doc);
    assert_int_equal(write(fd, doc, n), (ssize_t)n);
    assert_int_equal(
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), 0);
    hsmca_err e;
    if (ipc_send_ctl_fd(hf.ctl, type, fd, &e) != HSMCA_OK)
        fail_msg("ipc_send_ctl_fd: %s", e.msg);
    close(fd);
    free(doc);
}

static void push_keys(void)
{
    push_keys_of("", CTL_KEYS);
    push_keys_of(WEST "/", CTL_KEYS_CLUSTER(1));
}

/* Before the supervisor's push the signer holds no keys: a jwt request waits
 * (UNAVAILABLE, istio-agent retries); an unbound one is signed. */
static void test_bind_before_keys(void **state)
{
    hf_assert_signs_within(HF_READY_MS);
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    char *tok = dev_token("istio-ca", "default", "sleep");
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EUNAVAIL, BIND "JWT issuer keys not loaded yet",
                      NULL);
    free(tok);
    OPENSSL_free(tbs);
    /* The control channel delivers before the next request (the signer's loop serves
     * it first), so the keys are in for the next test. */
    push_keys();
}

/* The token's own identity: signed, and the intent records the binding. */
static void test_bind_signs_own_identity(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    char *tok = dev_token("istio-ca", "default", "sleep");
    Hsmca__Ipc__SignReply *rep = sign_as(tbs, len, "jwt", tok);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    char *intent = last_intent();
    if (!strstr(intent, "\"bound\":\"jwt\""))
        fail_msg("the intent does not record the binding: %s", intent);
    free(intent);
    /* The cache by token hash: the same token again is still bound to the same
     * identity, and to no other. */
    OPENSSL_free(tbs);
    tbs = tbs_for(NULL, &len);
    rep = sign_as(tbs, len, "jwt", tok);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    tbs = tbs_for(TD "/ns/default/sa/other", &len);
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EPERM,
                      BIND "the URI SAN is not the token's identity", "sa sleep");
    free(tok);
    OPENSSL_free(tbs);
}

/* A front end that holds sleep's token and asks for admin's certificate. */
static void test_bind_other_identity(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(TD "/ns/kube-system/sa/admin", &len);
    char *tok = dev_token("istio-ca", "default", "sleep");
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EPERM,
                      BIND "the URI SAN is not the token's identity", "ns default");
    free(tok);
    OPENSSL_free(tbs);
    /* sleep's certificate with a neighbour's token */
    tbs = tbs_for(NULL, &len);
    tok = dev_token("istio-ca", "default", "notsleep");
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EPERM,
                      BIND "the URI SAN is not the token's identity", NULL);
    free(tok);
    OPENSSL_free(tbs);
}

static void test_bind_expired(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    char *tok = crafted_token(NULL, NULL, -7200, -3600); /* well past the 60 s skew */
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EAUTH, BAD_TOKEN "JWT expired", NULL);
    free(tok);
    /* The same claims unexpired do verify: the refusal was the expiry, not the crafting. */
    tok = crafted_token(NULL, NULL, 0, 3600);
    Hsmca__Ipc__SignReply *rep = sign_as(tbs, len, "jwt", tok);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    free(tok);
    OPENSSL_free(tbs);
}

/* Signed by a key of the attacker's with the issuer's kid. */
static void test_bind_forged(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    EVP_PKEY *evil = EVP_EC_gen("P-256");
    assert_non_null(evil);
    char *tok = crafted_token(evil, NULL, 0, 3600);
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EAUTH, BAD_TOKEN "JWT signature does not verify",
                      NULL);
    free(tok);
    EVP_PKEY_free(evil);
    /* A valid token with its payload swapped for another account's: the signature
     * no longer covers it. */
    char *a = dev_token("istio-ca", "default", "sleep");
    char *b = dev_token("istio-ca", "kube-system", "admin");
    char *a1 = strchr(a, '.'), *a2 = strrchr(a, '.'), *b1 = strchr(b, '.'), *b2 = strrchr(b, '.');
    size_t n = (size_t)(a1 - a) + (size_t)(b2 - b1) + strlen(a2) + 1;
    char *spliced = malloc(n);
    assert_non_null(spliced);
    snprintf(spliced, n, "%.*s%.*s%s", (int)(a1 - a), a, (int)(b2 - b1), b1, a2);
    OPENSSL_free(tbs);
    tbs = tbs_for(TD "/ns/kube-system/sa/admin", &len);
    assert_refused_as(tbs, len, "jwt", spliced, HSMCA_EAUTH,
                      BAD_TOKEN "JWT signature does not verify", NULL);
    free(spliced);
    free(a);
    free(b);
    OPENSSL_free(tbs);
}

static void test_bind_other_audience(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    char *tok = dev_token("some-other-service", "default", "sleep");
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EAUTH, BAD_TOKEN "JWT aud does not include",
                      NULL);
    free(tok);
    tok = crafted_token(NULL, "https://evil.example", 0, 3600);
    assert_refused_as(tbs, len, "jwt", tok, HSMCA_EAUTH,
                      BAD_TOKEN "JWT iss is not the configured issuer", NULL);
    free(tok);
    OPENSSL_free(tbs);
}

/* "jwt" without the token, or with garbage: nothing to verify. */
static void test_bind_no_token(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    assert_refused_as(tbs, len, "jwt", NULL, HSMCA_EAUTH,
                      BIND "a jwt caller's request came without its token", NULL);
    assert_refused_as(tbs, len, "jwt", "not.a.jwt", HSMCA_EAUTH, BAD_TOKEN "JWT", NULL);
    OPENSSL_free(tbs);
}

/* The residual (signer_bind.h): a front end that says client_cert (or tokenreview)
 * cannot be re-checked; the request is signed unbound, and the intent says so by
 * having no "bound". auth.jwt.bind_required closes this for JWT-only deployments. */
static void test_bind_unbindable_residual(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    Hsmca__Ipc__SignReply *rep = sign_as(tbs, len, "client_cert", NULL);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    char *intent = last_intent();
    if (strstr(intent, "\"bound\""))
        fail_msg("an unbound request's intent claims a binding: %s", intent);
    free(intent);
    OPENSSL_free(tbs);
}

/* A token past IPC_TOKEN_MAX breaks the protocol (checked on the wire). */
static void test_bind_token_too_long(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    char *big = malloc(IPC_TOKEN_MAX + 2);
    assert_non_null(big);
    memset(big, 'a', IPC_TOKEN_MAX + 1);
    big[IPC_TOKEN_MAX + 1] = 0;
    Hsmca__Ipc__SignRequest req = HSMCA__IPC__SIGN_REQUEST__INIT;
    req.profile = PROFILE_WORKLOAD;
    req.tbs.data = tbs;
    req.tbs.len = len;
    req.requester = (char *)HF_SPIFFE_ID;
    req.authenticator = (char *)"jwt";
    req.token = big;
    size_t n = hsmca__ipc__sign_request__get_packed_size(&req);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    hsmca__ipc__sign_request__pack(&req, buf);
    hsmca_err e;
    if (ipc_send(hf.ipc, IPC_SIGN_REQ, hf.next_id++, buf, n, &e) != HSMCA_OK)
        fail_msg("ipc_send: %s", e.msg);
    free(buf);
    free(big);
    OPENSSL_free(tbs);
    hf_assert_dropped_then_reconnect();
}

/* The west cluster's issuer signs a token for default/sleep (same issuer URL as local). */
static char *west_token(void)
{
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/" WEST, hf.dir);
    hsmca_err e;
    char *t = dev_jwt_mint(dir, NULL, "istio-ca", "default", "sleep", 3600, &e);
    if (!t)
        fail_msg("dev_jwt_mint: %s", e.msg);
    return t;
}

/* A token is verified with the keys of the cluster the front end names, and only those:
 * west's token is signed as west's and refused as the local cluster's, the local token
 * claimed as west's is refused, and a cluster the config does not have is refused. */
static void test_bind_cluster(void **state)
{
    size_t len;
    uint8_t *tbs = tbs_for(NULL, &len);
    char *west = west_token(), *local = dev_token("istio-ca", "default", "sleep");
    g_cluster = WEST;
    Hsmca__Ipc__SignReply *rep = sign_as(tbs, len, "jwt", west);
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    OPENSSL_free(tbs);
    tbs = tbs_for(NULL, &len);
    /* the local cluster's token, claimed as west's: west's keys do not verify it */
    assert_refused_as(tbs, len, "jwt", local, HSMCA_EAUTH, BAD_TOKEN "JWT", NULL);
    g_cluster = "nope";
    assert_refused_as(tbs, len, "jwt", local, HSMCA_EAUTH,
                      BIND "the token's cluster \"nope\" has no jwt authenticator here", NULL);
    /* west's token as the local cluster's (no cluster, or its id named) */
    g_cluster = NULL;
    assert_refused_as(tbs, len, "jwt", west, HSMCA_EAUTH, BAD_TOKEN "JWT", NULL);
    g_cluster = "Kubernetes";
    assert_refused_as(tbs, len, "jwt", west, HSMCA_EAUTH, BAD_TOKEN "JWT", NULL);
    rep = sign_as(tbs, len, "jwt", local); /* the local token as the local cluster's */
    hf_assert_signed(rep, tbs, len);
    hsmca__ipc__sign_reply__free_unpacked(rep, NULL);
    g_cluster = NULL;
    free(west);
    free(local);
    OPENSSL_free(tbs);
}

static const struct CMUnitTest bind_tests[] = {
    cmocka_unit_test(test_bind_before_keys),    cmocka_unit_test(test_bind_signs_own_identity),
    cmocka_unit_test(test_bind_other_identity), cmocka_unit_test(test_bind_expired),
    cmocka_unit_test(test_bind_forged),         cmocka_unit_test(test_bind_other_audience),
    cmocka_unit_test(test_bind_no_token),       cmocka_unit_test(test_bind_unbindable_residual),
    cmocka_unit_test(test_bind_token_too_long), cmocka_unit_test(test_bind_cluster),
};

const struct CMUnitTest *hf_bind_tests(size_t *n)
{
    *n = sizeof(bind_tests) / sizeof(bind_tests[0]);
    return bind_tests;
}
