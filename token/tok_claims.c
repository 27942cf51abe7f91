/* tok_claims.c - see tok_claims.h.
 *
 * Runs only on a payload whose signature held. Messages name the claim that
 * failed and our configuration (issuer, audiences), never the token's values. */
#include "tok_claims.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "policy.h"

/* A NumericDate as whole seconds. Fractions round toward the strict side:
 * down for exp, up for nbf/iat. */
static HSMCA_MUSTCHECK hsmca_code jwt_time_claim(json_t *claims, const char *name, int round_up,
                                                 int *present, int64_t *out, hsmca_err *e)
{
    json_t *v = json_object_get(claims, name);
    *present = v != NULL;
    if (!v)
        return HSMCA_OK;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return HSMCA_OK;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d > -1e15 && d < 1e15) {
            int64_t t = (int64_t)d; /* truncates toward zero */
            if (round_up && (double)t < d)
                t++;
            else if (!round_up && (double)t > d)
                t--;
            *out = t;
            return HSMCA_OK;
        }
    }
    return hsmca_fail(e, HSMCA_EAUTH, "JWT %s must be a number of seconds", name);
}

static HSMCA_MUSTCHECK hsmca_code jwt_check_times(json_t *claims, int64_t now, uint32_t skew,
                                                  hsmca_err *e)
{
    int present;
    int64_t t = 0;
    hsmca_code rc = jwt_time_claim(claims, "exp", 0, &present, &t, e);
    if (rc != HSMCA_OK)
        return rc;
    if (!present)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT exp is required");
    /* now > exp + skew, written so that no operand can overflow. */
    if (now - (int64_t)skew > t)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT expired");
    static const char *const not_before[] = {"nbf", "iat"};
    for (size_t i = 0; i < 2; i++) {
        if ((rc = jwt_time_claim(claims, not_before[i], 1, &present, &t, e)) != HSMCA_OK)
            return rc;
        if (present && now + (int64_t)skew < t)
            return hsmca_fail(e, HSMCA_EAUTH, "JWT not yet valid (%s in the future)",
                              not_before[i]);
    }
    return HSMCA_OK;
}

static int aud_wanted(const tok_jwt_rules *r, const char *aud)
{
    for (int i = 0; i < r->n_audiences; i++)
        if (r->audiences[i] && strcmp(r->audiences[i], aud) == 0)
            return 1;
    return 0;
}

static HSMCA_MUSTCHECK hsmca_code jwt_check_aud(json_t *claims, const tok_jwt_rules *r, hsmca_err *e)
{
    json_t *aud = json_object_get(claims, "aud");
    int hit = 0;
    if (json_is_string(aud)) {
        hit = aud_wanted(r, json_string_value(aud));
    } else if (json_is_array(aud)) {
        size_t i;
        json_t *a;
        json_array_foreach(aud, i, a)
        {
            if (!json_is_string(a))
                return hsmca_fail(e, HSMCA_EAUTH, "JWT aud array must hold strings only");
            hit |= aud_wanted(r, json_string_value(a));
        }
    } else {
        return hsmca_fail(e, HSMCA_EAUTH, "JWT aud must be a string or an array of strings");
    }
    if (hit)
        return HSMCA_OK;
    /* Name what we expected (our configuration, not token content). */
    char want[160] = "";
    size_t off = 0;
    for (int i = 0; i < r->n_audiences && off < sizeof(want); i++) {
        int n = snprintf(want + off, sizeof(want) - off, "%s%s", i ? ", " : "",
                         r->audiences[i] ? r->audiences[i] : "");
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return hsmca_fail(e, HSMCA_EAUTH, "JWT aud does not include %s", want);
}

/* Kubernetes names end up inside SPIFFE IDs (.../ns/NS/sa/SA): a DNS-1123 label
 * for a namespace, a DNS-1123 subdomain for a service account (policy owns the
 * rule), so no '/', ':' or anything else that could change the ID's structure. */
static HSMCA_MUSTCHECK hsmca_code id_set(tok_jwt_identity *id, const char *ns, size_t nslen,
                                         const char *sa, size_t salen, hsmca_err *e)
{
    if (!policy_is_k8s_name(ns, nslen, POLICY_NS_MAX, 0))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT namespace is not a valid Kubernetes name");
    if (!policy_is_k8s_name(sa, salen, POLICY_SA_MAX, 1))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT service account is not a valid Kubernetes name");
    memcpy(id->ns, ns, nslen);
    id->ns[nslen] = '\0';
    memcpy(id->sa, sa, salen);
    id->sa[salen] = '\0';
    return HSMCA_OK;
}

/* A Kubernetes object UID (a UUID in practice): [A-Za-z0-9-], 1..63 bytes. It is
 * kept for later checks (the pod a token is bound to), never put in a certificate. */
static int k8s_uid_ok(const char *s, size_t len)
{
    if (len == 0 || len >= TOK_K8S_UID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* An optional UID member v into out (TOK_K8S_UID_MAX); what names it in messages. */
static HSMCA_MUSTCHECK hsmca_code uid_set(json_t *v, char *out, const char *what, hsmca_err *e)
{
    out[0] = '\0';
    if (!v)
        return HSMCA_OK;
    if (!json_is_string(v) || !k8s_uid_ok(json_string_value(v), json_string_length(v)))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT %s is not a Kubernetes UID", what);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return HSMCA_OK;
}

/* "sub": "system:serviceaccount:NS:SA", required: both token shapes carry it, and a
 * token whose subject is not a service account names no workload. */
static HSMCA_MUSTCHECK hsmca_code sub_identity(json_t *claims, tok_jwt_identity *out, hsmca_err *e)
{
    static const char pre[] = "system:serviceaccount:";
    json_t *sub = json_object_get(claims, "sub");
    if (!json_is_string(sub) || strncmp(json_string_value(sub), pre, sizeof(pre) - 1) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT sub is not system:serviceaccount:NS:SA");
    const char *ns = json_string_value(sub) + sizeof(pre) - 1;
    const char *colon = strchr(ns, ':');
    if (!colon)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT sub is not system:serviceaccount:NS:SA");
    size_t salen = json_string_length(sub) - (size_t)(colon + 1 - json_string_value(sub));
    return id_set(out, ns, (size_t)(colon - ns), colon + 1, salen, e);
}

/* Projected token (TokenRequest API, Kubernetes >= 1.20): "kubernetes.io":
 * {"namespace": NS, "serviceaccount": {"name": SA, "uid": U}, "pod": {"name": P, "uid": U}}.
 * Returns 1 and sets *rc when the claim is there, 0 when absent. */
static int projected_identity(json_t *claims, tok_jwt_identity *out, hsmca_err *e, hsmca_code *rc)
{
    json_t *k = json_object_get(claims, "kubernetes.io");
    if (!k)
        return 0;
    json_t *svc = json_object_get(k, "serviceaccount");
    json_t *ns = json_object_get(k, "namespace");
    json_t *sa = json_object_get(svc, "name");
    if (!json_is_object(k) || !json_is_string(ns) || !json_is_string(sa)) {
        *rc = hsmca_fail(e, HSMCA_EAUTH,
                         "JWT kubernetes.io claim lacks namespace or serviceaccount.name");
        return 1;
    }
    *rc = id_set(out, json_string_value(ns), json_string_length(ns), json_string_value(sa),
                 json_string_length(sa), e);
    if (*rc == HSMCA_OK)
        *rc = uid_set(json_object_get(svc, "uid"), out->sa_uid, "serviceaccount.uid", e);
    json_t *pod = json_object_get(k, "pod");
    if (*rc != HSMCA_OK || !pod)
        return 1;
    json_t *pn = json_object_get(pod, "name");
    if (!json_is_object(pod) || !json_is_string(pn) || !json_object_get(pod, "uid") ||
        !policy_is_k8s_name(json_string_value(pn), json_string_length(pn), TOK_K8S_NAME_MAX - 1,
                            1)) {
        *rc = hsmca_fail(e, HSMCA_EAUTH, "JWT kubernetes.io pod needs a valid name and uid");
        return 1;
    }
    memcpy(out->pod_name, json_string_value(pn), json_string_length(pn) + 1);
    *rc = uid_set(json_object_get(pod, "uid"), out->pod_uid, "pod.uid", e);
    return 1;
}

/* Legacy secret-based token: flat claims "kubernetes.io/serviceaccount/namespace",
 * ".../service-account.name" and ".../service-account.uid". */
static int legacy_identity(json_t *claims, tok_jwt_identity *out, hsmca_err *e, hsmca_code *rc)
{
    json_t *ns = json_object_get(claims, "kubernetes.io/serviceaccount/namespace");
    json_t *sa = json_object_get(claims, "kubernetes.io/serviceaccount/service-account.name");
    if (!ns && !sa)
        return 0;
    if (!json_is_string(ns) || !json_is_string(sa)) {
        *rc = hsmca_fail(e, HSMCA_EAUTH,
                         "JWT legacy claims need both kubernetes.io/serviceaccount/namespace "
                         "and .../service-account.name");
        return 1;
    }
    *rc = id_set(out, json_string_value(ns), json_string_length(ns), json_string_value(sa),
                 json_string_length(sa), e);
    if (*rc == HSMCA_OK)
        *rc = uid_set(json_object_get(claims, "kubernetes.io/serviceaccount/service-account.uid"),
                      out->sa_uid, "service-account.uid", e);
    return 1;
}

static int same_account(const tok_jwt_identity *a, const tok_jwt_identity *b)
{
    return strcmp(a->ns, b->ns) == 0 && strcmp(a->sa, b->sa) == 0;
}

/* sub, and every Kubernetes claim shape present, must name one account. */
static HSMCA_MUSTCHECK hsmca_code jwt_identity(json_t *claims, tok_jwt_identity *id, hsmca_err *e)
{
    tok_jwt_identity s, p, l;
    memset(&s, 0, sizeof(s));
    memset(&p, 0, sizeof(p));
    memset(&l, 0, sizeof(l));
    hsmca_code rcp = HSMCA_OK, rcl = HSMCA_OK;
    int has_p = projected_identity(claims, &p, e, &rcp);
    if (rcp != HSMCA_OK)
        return rcp;
    int has_l = legacy_identity(claims, &l, e, &rcl);
    if (rcl != HSMCA_OK)
        return rcl;
    if (!has_p && !has_l)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT carries no Kubernetes service account claims");
    hsmca_code rc = sub_identity(claims, &s, e);
    if (rc != HSMCA_OK)
        return rc;
    if (has_p && !same_account(&p, &s))
        return hsmca_fail(e, HSMCA_EAUTH, "JWT sub and kubernetes.io name different accounts");
    if (has_l && !same_account(&l, &s))
        return hsmca_fail(e, HSMCA_EAUTH,
                          "JWT sub and kubernetes.io/serviceaccount name different accounts");
    if (has_p && has_l && p.sa_uid[0] && l.sa_uid[0] && strcmp(p.sa_uid, l.sa_uid) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT kubernetes.io claims name two service account UIDs");
    *id = has_p ? p : l;
    if (!id->sa_uid[0] && has_l)
        memcpy(id->sa_uid, l.sa_uid, sizeof(id->sa_uid));
    return HSMCA_OK;
}

static HSMCA_MUSTCHECK hsmca_code jwt_check_claims(json_t *claims, const tok_jwt_rules *r,
                                                   int64_t now, tok_jwt_identity *id, hsmca_err *e)
{
    json_t *iss = json_object_get(claims, "iss");
    if (!json_is_string(iss) || strcmp(json_string_value(iss), r->issuer) != 0)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT iss is not the configured issuer %s", r->issuer);
    hsmca_code rc = jwt_check_aud(claims, r, e);
    if (rc == HSMCA_OK)
        rc = jwt_check_times(claims, now, r->skew, e);
    if (rc == HSMCA_OK)
        rc = jwt_identity(claims, id, e);
    return rc;
}

hsmca_code tok_claims_check(const char *json, size_t len, const tok_jwt_rules *r, int64_t now,
                               tok_jwt_identity *id, hsmca_err *e)
{
    if (!json || !r || !r->issuer || !id)
        return hsmca_fail(e, HSMCA_EAUTH, "JWT claims: no payload, rules or output");
    json_error_t jerr; /* its text may quote the input: never copied into e */
    json_t *claims = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    hsmca_code rc;
    tok_jwt_identity got;
    if (!json_is_object(claims))
        rc = hsmca_fail(e, HSMCA_EAUTH, "JWT payload is not a JSON object without duplicate keys");
    else if ((rc = jwt_check_claims(claims, r, now, &got, e)) == HSMCA_OK)
        *id = got;
    json_decref(claims);
    return rc;
}
