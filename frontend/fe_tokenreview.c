/* fe_tokenreview.c - see fe_tokenreview.h.
 *
 * The shapes are those of the Kubernetes API reference, TokenReview v1
 * (https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-review-v1/):
 *   request  {"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
 *             "spec":{"token":"...","audiences":["istio-ca"]}}
 *   response {"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
 *             "metadata":{...},"spec":{...},
 *             "status":{"authenticated":true,
 *                       "user":{"username":"system:serviceaccount:NS:SA","uid":"...",
 *                               "groups":["system:serviceaccounts",
 *                                         "system:serviceaccounts:NS","system:authenticated"],
 *                               "extra":{"authentication.kubernetes.io/pod-name":["..."],
 *                                        "authentication.kubernetes.io/pod-uid":["..."]}},
 *                       "audiences":["istio-ca"],"error":"..."}}
 * status.authenticated is omitempty in the API's Go types: absent means false. */
#include "fe_tokenreview.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "config.h"
#include "fe_https.h"
#include "fe_metrics.h"
#include "kubeconfig.h"
#include "policy.h"
#include "util.h"

#define TR_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define TR_API_VERSION "authentication.k8s.io/v1"
#define SA_PREFIX "system:serviceaccount:"

struct fe_tokenreview {
    k8s_target t;
    fe_https *https; /* the API server, resolved and its CA loaded before the sandbox */
    char *auds[CONFIG_MAX_LIST];
    int n_auds;
    uint32_t timeout_ms, cache_ttl;
    fe_trcache *cache;
    atomic_uint_fast64_t calls;
};

/* ---- the response ---- */

static int json_array_has(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i,
                       v) if (json_is_string(v) && !strcmp(json_string_value(v), s)) return 1;
    return 0;
}

/* extra[key]: a list of strings; its only element (printable, fits) into out. */
static void copy_extra(json_t *extra, const char *key, char *out, size_t outsz)
{
    json_t *v = json_object_get(extra, key);
    if (!json_is_array(v) || json_array_size(v) != 1 || !json_is_string(json_array_get(v, 0)))
        return;
    const char *s = json_string_value(json_array_get(v, 0));
    size_t n = json_string_length(json_array_get(v, 0));
    if (n == 0 || n >= outsz)
        return;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return;
    memcpy(out, s, n);
    out[n] = 0;
}

static HSMCA_MUSTCHECK hsmca_code parse_username(const char *u, fe_tr_identity *id, hsmca_err *e)
{
    static const char bad[] =
        "tokenreview: username is not system:serviceaccount:<namespace>:<name>";
    if (strncmp(u, SA_PREFIX, strlen(SA_PREFIX)) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "%s", bad);
    const char *ns = u + strlen(SA_PREFIX);
    const char *colon = strchr(ns, ':');
    if (!colon)
        return hsmca_fail(e, HSMCA_EAUTH, "%s", bad);
    size_t ns_len = (size_t)(colon - ns), sa_len = strlen(colon + 1);
    if (!policy_is_k8s_name(ns, ns_len, POLICY_NS_MAX, 0) ||
        !policy_is_k8s_name(colon + 1, sa_len, POLICY_SA_MAX, 1) || ns_len >= sizeof(id->ns) ||
        sa_len >= sizeof(id->sa))
        return hsmca_fail(e, HSMCA_EAUTH, "%s", bad);
    memcpy(id->ns, ns, ns_len);
    id->ns[ns_len] = 0;
    memcpy(id->sa, colon + 1, sa_len + 1);
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code parse_status(json_t *st, const char *const *audiences,
                                               int n_audiences, fe_tr_identity *id, hsmca_err *e)
{
    json_t *auth = json_object_get(st, "authenticated");
    if (auth && !json_is_boolean(auth))
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: status.authenticated is not a boolean");
    if (!json_is_true(auth)) {
        json_t *err = json_object_get(st, "error");
        char shown[120];
        if (json_is_string(err) && json_string_length(err) > 0)
            return hsmca_fail(e, HSMCA_EAUTH, "tokenreview: not authenticated: %s",
                              util_printable(json_string_value(err), json_string_length(err), shown,
                                             sizeof(shown)));
        return hsmca_fail(e, HSMCA_EAUTH, "tokenreview: not authenticated");
    }
    json_t *user = json_object_get(st, "user");
    json_t *name = json_object_get(user, "username");
    if (!json_is_object(user) || !json_is_string(name) ||
        strlen(json_string_value(name)) != json_string_length(name))
        return hsmca_fail(e, HSMCA_EAUTH, "tokenreview: authenticated without a username");
    HSMCA_GUARD(parse_username(json_string_value(name), id, e));
    if (!json_array_has(json_object_get(user, "groups"), FE_TR_GROUP))
        return hsmca_fail(e, HSMCA_EAUTH, "tokenreview: user is not in group " FE_TR_GROUP);
    /* The API reference: a client that sets spec.audiences should check that
     * status.audiences names one, "to ensure that the TokenReview server is
     * audience aware". */
    if (n_audiences > 0) {
        json_t *got = json_object_get(st, "audiences");
        int ok = 0;
        for (int i = 0; i < n_audiences && !ok; i++)
            ok = json_array_has(got, audiences[i]);
        if (!ok)
            return hsmca_fail(
                e, HSMCA_EAUTH,
                "tokenreview: status.audiences names none of auth.tokenreview.audiences");
    }
    json_t *extra = json_object_get(user, "extra");
    copy_extra(extra, FE_TR_POD_NAME, id->pod_name, sizeof(id->pod_name));
    copy_extra(extra, FE_TR_POD_UID, id->pod_uid, sizeof(id->pod_uid));
    return HSMCA_OK;
}

hsmca_code fe_tokenreview_parse(const char *body, size_t len, const char *const *audiences,
                                int n_audiences, fe_tr_identity *id, hsmca_err *e)
{
    memset(id, 0, sizeof(*id));
    if (len > FE_TR_MAX_RESPONSE)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: answer over %d bytes",
                          FE_TR_MAX_RESPONSE);
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    hsmca_code rc;
    json_t *kind = json_object_get(root, "kind"), *ver = json_object_get(root, "apiVersion");
    if (!json_is_object(root))
        rc = hsmca_fail(e, HSMCA_EUNAVAIL,
                        "tokenreview: the API server's answer is not a JSON object");
    else if (!json_is_string(kind) || strcmp(json_string_value(kind), "TokenReview") != 0 ||
             !json_is_string(ver) || strcmp(json_string_value(ver), TR_API_VERSION) != 0)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL,
                        "tokenreview: the API server's answer is not a " TR_API_VERSION
                        " TokenReview");
    else if (!json_is_object(json_object_get(root, "status")))
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: the answer has no status");
    else
        rc = parse_status(json_object_get(root, "status"), audiences, n_audiences, id, e);
    json_decref(root);
    if (rc != HSMCA_OK)
        memset(id, 0, sizeof(*id));
    return rc;
}

char *fe_tokenreview_request_body(const char *token, size_t len, const char *const *audiences,
                                  int n_audiences)
{
    json_t *auds = json_array();
    for (int i = 0; auds && i < n_audiences; i++)
        json_array_append_new(auds, json_string(audiences[i]));
    json_t *req = json_pack("{s:s, s:s, s:{s:s%, s:o}}", "apiVersion", TR_API_VERSION, "kind",
                            "TokenReview", "spec", "token", token, len, "audiences", auds);
    if (!req)
        return NULL;
    char *out = json_dumps(req, JSON_COMPACT);
    json_t *tok = json_object_get(json_object_get(req, "spec"), "token");
    if (json_is_string(tok)) /* jansson's copy of the token: wiped before it is freed */
        OPENSSL_cleanse((char *)json_string_value(tok), json_string_length(tok));
    json_decref(req);
    return out;
}

int64_t fe_tokenreview_token_exp(const char *token, size_t len)
{
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot2)
        return 0;
    size_t n;
    uint8_t *payload = util_b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &n);
    if (!payload)
        return 0;
    json_error_t je;
    json_t *claims = json_loadb((const char *)payload, n, 0, &je);
    free(payload);
    json_t *exp = json_object_get(claims, "exp");
    int64_t v = json_is_integer(exp) ? (int64_t)json_integer_value(exp) : 0;
    json_decref(claims);
    return v > 0 ? v : 0;
}

/* ---- the set-up, before the sandbox ---- */

hsmca_code fe_tokenreview_new(const fe_tokenreview_options *o, fe_tokenreview **out, hsmca_err *e)
{
    *out = NULL;
    HSMCA_ENSURE(o->n_audiences >= 1 && o->n_audiences <= CONFIG_MAX_LIST, e, HSMCA_EINVAL,
                 "auth.tokenreview.audiences must name 1-%d audiences", CONFIG_MAX_LIST);
    fe_tokenreview *tr = calloc(1, sizeof(*tr));
    if (!tr)
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    hsmca_code rc = o->kubeconfig && o->kubeconfig[0] ? kubeconfig_load(o->kubeconfig, &tr->t, e)
                                                      : k8s_incluster(o->sa_dir, &tr->t, e);
    /* The address is resolved and the CA loaded now: once confined, the front
     * end has no /etc/resolv.conf (chroot) and cannot open files. */
    if (rc == HSMCA_OK)
        rc = fe_https_new(tr->t.server, tr->t.ca_pem, tr->t.ca_len, tr->t.cert_pem, tr->t.cert_len,
                          tr->t.key_pem, tr->t.key_len, &tr->https, e);
    tr->n_auds = o->n_audiences;
    for (int i = 0; rc == HSMCA_OK && i < o->n_audiences; i++)
        if (!(tr->auds[i] = strdup(o->audiences[i])))
            rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    tr->timeout_ms = o->timeout_ms ? o->timeout_ms : 5000;
    tr->cache_ttl = o->cache_ttl;
    if (rc == HSMCA_OK && !(tr->cache = fe_trcache_new(o->cache_ttl ? o->cache_entries : 0)))
        rc = hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    if (rc != HSMCA_OK) {
        fe_tokenreview_free(tr);
        return rc;
    }
    *out = tr;
    return HSMCA_OK;
}

void fe_tokenreview_free(fe_tokenreview *tr)
{
    if (!tr)
        return;
    k8s_target_clear(&tr->t);
    fe_https_free(tr->https);
    for (int i = 0; i < tr->n_auds; i++)
        free(tr->auds[i]);
    fe_trcache_free(tr->cache);
    free(tr);
}

/* ---- one review ---- */

static HSMCA_MUSTCHECK hsmca_code review(fe_tokenreview *tr, const char *token, size_t len,
                                         fe_tr_identity *id, hsmca_err *e)
{
    char *body = fe_tokenreview_request_body(token, len, (const char *const *)tr->auds, tr->n_auds);
    if (!body)
        return hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: out of memory");
    char authz[16384]; /* a longer own token is not sent: the API server then answers 401 */
    const char *hdrs[3] = {"Content-Type: application/json", "Accept: application/json", authz};
    int n_hdrs = 2;
    if (tr->t.token && snprintf(authz, sizeof(authz), "Authorization: Bearer %s", tr->t.token) <
                           (int)sizeof(authz))
        n_hdrs = 3;
    int status = 0;
    char *resp = NULL;
    size_t resp_len = 0;
    atomic_fetch_add(&tr->calls, 1);
    hsmca_code rc = fe_https_post(tr->https, TR_PATH, hdrs, n_hdrs, body, strlen(body),
                                  tr->timeout_ms, FE_TR_MAX_RESPONSE, &status, &resp, &resp_len, e);
    OPENSSL_cleanse(authz, sizeof(authz));
    OPENSSL_cleanse(body, strlen(body));
    free(body);
    if (rc != HSMCA_OK)
        return rc;
    if (status == 401 || status == 403)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL,
                        "tokenreview: the API server refused hsmca's own credentials (HTTP %d): "
                        "they need create on tokenreviews (system:auth-delegator)",
                        status);
    else if (status != 200 && status != 201)
        rc = hsmca_fail(e, HSMCA_EUNAVAIL, "tokenreview: the API server answered HTTP %d", status);
    else
        rc = fe_tokenreview_parse(resp, resp_len, (const char *const *)tr->auds, tr->n_auds, id, e);
    free(resp);
    return rc;
}

hsmca_code fe_tokenreview_api_get(fe_tokenreview *tr, const char *path, size_t max_body,
                                  int *status, char **resp, size_t *resp_len, hsmca_err *e)
{
    char authz[16384];
    const char *hdrs[2] = {"Accept: application/json", authz};
    int n_hdrs = 1;
    if (tr->t.token && snprintf(authz, sizeof(authz), "Authorization: Bearer %s", tr->t.token) <
                           (int)sizeof(authz))
        n_hdrs = 2;
    hsmca_code rc = fe_https_get(tr->https, path, hdrs, n_hdrs, tr->timeout_ms, max_body, status,
                                 resp, resp_len, e);
    OPENSSL_cleanse(authz, sizeof(authz));
    return rc;
}

static void token_key(const char *token, size_t len, uint8_t key[32])
{
    SHA256((const unsigned char *)token, len, key);
}

int fe_tokenreview_cached(fe_tokenreview *tr, const char *token, size_t len, int64_t now,
                          fe_tr_identity *id)
{
    uint8_t key[32];
    token_key(token, len, key);
    return fe_trcache_get(tr->cache, key, now, id);
}

hsmca_code fe_tokenreview_identity(fe_tokenreview *tr, const char *token, size_t len, int64_t now,
                                   fe_tr_identity *id, hsmca_err *e)
{
    memset(id, 0, sizeof(*id));
    HSMCA_ENSURE(len > 0 && len <= FE_TR_MAX_TOKEN, e, HSMCA_EAUTH,
                 "tokenreview: token empty or over %d bytes", FE_TR_MAX_TOKEN);
    for (size_t i = 0; i < len; i++)
        HSMCA_ENSURE(token[i] >= 0x21 && token[i] <= 0x7e, e, HSMCA_EAUTH,
                     "tokenreview: token has bytes outside printable ASCII");
    uint8_t key[32];
    token_key(token, len, key);
    if (fe_trcache_get(tr->cache, key, now, id))
        return HSMCA_OK;
    hsmca_code rc = review(tr, token, len, id, e);
    if (rc != HSMCA_OK) {
        fe_metrics_count(rc == HSMCA_EAUTH ? FE_CTR_TR_REFUSED : FE_CTR_TR_FAILURES);
        return rc;
    }
    int64_t until = now + (int64_t)tr->cache_ttl, exp = fe_tokenreview_token_exp(token, len);
    if (exp && exp < until)
        until = exp;
    fe_trcache_put(tr->cache, key, now, until, id);
    return HSMCA_OK;
}

uint64_t fe_tokenreview_calls(fe_tokenreview *tr)
{
    return atomic_load(&tr->calls);
}
