/* policy_rules.c - the rules of the SAN policy file (policy_file.h). Pure: no I/O,
 * no clock, no allocation. The front end runs them on a CSR, the signer on a
 * TBS, with the same code and each with its own copy of the file. */
#include "policy_int.h"

#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "util.h"

static const char SPIFFE[] = "spiffe://";
#define SPIFFE_LEN (sizeof(SPIFFE) - 1)

static int is_label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

int policy_is_dns_name(const char *s, size_t len)
{
    if (!s || len == 0 || len > POLICY_DNS_MAX)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') {
            if (!is_label_char(s[i]))
                return 0;
            continue;
        }
        size_t n = i - start;
        if (n == 0 || n > 63 || s[start] == '-' || s[i - 1] == '-')
            return 0;
        start = i + 1;
    }
    return 1;
}

int policy_is_td(const char *s, size_t len)
{
    if (!s || len == 0 || len > 255)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!is_label_char(s[i]) && s[i] != '.' && s[i] != '_')
            return 0;
    return 1;
}

/* td[0..len) is the trust domain or one of its aliases. */
static int td_allowed(const policy_set *p, const char *td, const char *s, size_t len)
{
    if (td && strlen(td) == len && !memcmp(td, s, len))
        return 1;
    for (int i = 0; p && i < p->n_aliases; i++)
        if (strlen(p->aliases[i]) == len && !memcmp(p->aliases[i], s, len))
            return 1;
    return 0;
}

/* Splits "spiffe://<td><path>" at the trust domain; 0 when it is not one. */
static int split_spiffe(const char *id, size_t len, size_t *td_len)
{
    if (!id || len <= SPIFFE_LEN || memcmp(id, SPIFFE, SPIFFE_LEN) != 0)
        return 0;
    const char *slash = memchr(id + SPIFFE_LEN, '/', len - SPIFFE_LEN);
    if (!slash)
        return 0;
    *td_len = (size_t)(slash - id) - SPIFFE_LEN;
    return *td_len > 0;
}

static const char *shown(const char *s, size_t len, char *buf, size_t bufsz)
{
    return util_printable(s, len, buf, bufsz);
}

hsmca_code policy_identity(const policy_set *p, const char *td, const char *uri, size_t len,
                           policy_who *who, hsmca_err *e)
{
    memset(who, 0, sizeof(*who));
    if (!p)
        return HSMCA_OK;
    size_t td_len = 0;
    char b[112];
    HSMCA_ENSURE(split_spiffe(uri, len, &td_len), e, HSMCA_EPERM,
                 "policy: URI SAN %s is not a SPIFFE ID", shown(uri, len, b, sizeof(b)));
    HSMCA_ENSURE(td_allowed(p, td, uri + SPIFFE_LEN, td_len), e, HSMCA_EPERM,
                 "policy rule trust_domain_aliases: trust domain of %s is neither "
                 "issuance.trust_domain nor an alias",
                 shown(uri, len, b, sizeof(b)));
    /* The rules are by namespace and service account: the one form hsmca issues. */
    const char *path = uri + SPIFFE_LEN + td_len, *end = uri + len;
    size_t plen = (size_t)(end - path);
    const char *sa_mark = plen > 4 ? memmem(path + 4, plen - 4, "/sa/", 4) : NULL;
    size_t ns_len = sa_mark ? (size_t)(sa_mark - path) - 4 : 0;
    size_t sa_len = sa_mark ? (size_t)(end - sa_mark) - 4 : 0;
    int ok = plen > 4 && !memcmp(path, "/ns/", 4) && sa_mark &&
             policy_is_k8s_name(path + 4, ns_len, POLICY_NS_MAX, 0) &&
             policy_is_k8s_name(sa_mark + 4, sa_len, POLICY_SA_MAX, 1);
    HSMCA_ENSURE(ok, e, HSMCA_EPERM,
                 "policy: URI SAN %s is not spiffe://<trust domain>/ns/<namespace>/sa/<service "
                 "account>, the form the policy's rules apply to",
                 shown(uri, len, b, sizeof(b)));
    memcpy(who->ns, path + 4, ns_len);
    memcpy(who->sa, sa_mark + 4, sa_len);
    for (int i = 0; i < p->n_denied; i++)
        HSMCA_ENSURE(strcmp(p->denied[i], who->ns) != 0, e, HSMCA_EPERM,
                     "policy rule denied_namespaces: namespace '%s' may not receive certificates",
                     who->ns);
    return HSMCA_OK;
}

hsmca_code policy_check_sans_aliased(const policy_set *p, const char *td,
                                     const char *const *caller_ids, int n_ids,
                                     const char *const *csr_uris, int n_uris, int n_other_sans,
                                     hsmca_err *e)
{
    hsmca_code rc = policy_check_sans(caller_ids, n_ids, csr_uris, n_uris, n_other_sans, e);
    if (rc != HSMCA_EPERM || !p || p->n_aliases == 0 || n_other_sans > 0 || n_uris != 1 ||
        !csr_uris || !csr_uris[0])
        return rc;
    /* Istio's ExpandWithTrustDomains: the caller's identities in every alias. */
    const char *want = csr_uris[0];
    size_t wlen = strlen(want), wtd = 0;
    if (!split_spiffe(want, wlen, &wtd) || !td_allowed(p, td, want + SPIFFE_LEN, wtd))
        return rc;
    const char *wpath = want + SPIFFE_LEN + wtd;
    for (int i = 0; caller_ids && i < n_ids; i++) {
        const char *id = caller_ids[i];
        size_t ilen = id ? strlen(id) : 0, itd = 0;
        if (split_spiffe(id, ilen, &itd) && td_allowed(p, td, id + SPIFFE_LEN, itd) &&
            !strcmp(id + SPIFFE_LEN + itd, wpath)) {
            hsmca_err_clear(e);
            return HSMCA_OK;
        }
    }
    return rc;
}

/* <label>.<ns>.svc or <label>.<ns>.svc.<cluster_domain>. */
static int is_service_name(const policy_set *p, const char *ns, const char *s, size_t len)
{
    const char *dot = memchr(s, '.', len);
    if (!dot || dot == s)
        return 0;
    const char *rest = dot + 1;
    size_t rlen = len - (size_t)(rest - s), nl = strlen(ns);
    if (rlen < nl + 4 || memcmp(rest, ns, nl) != 0 || memcmp(rest + nl, ".svc", 4) != 0)
        return 0;
    const char *tail = rest + nl + 4;
    size_t tlen = rlen - nl - 4, cl = strlen(p->cluster_domain);
    return tlen == 0 ||
           (tlen == cl + 1 && tail[0] == '.' && !memcmp(tail + 1, p->cluster_domain, cl));
}

hsmca_code policy_check_dns(const policy_set *p, const policy_who *who, const char *name,
                            size_t len, hsmca_err *e)
{
    char b[112];
    HSMCA_ENSURE(policy_is_dns_name(name, len), e, HSMCA_EPERM,
                 "policy rule dns_names: DNS SAN %s is not a lowercase DNS name",
                 shown(name, len, b, sizeof(b)));
    HSMCA_ENSURE(p, e, HSMCA_EPERM,
                 "policy rule dns_names: DNS SAN '%s' is not granted (no issuance.policy_file)",
                 shown(name, len, b, sizeof(b)));
    for (int i = 0; i < p->n_grants; i++) {
        const policy_grant *g = &p->grants[i];
        if (strcmp(g->ns, who->ns) != 0 || strcmp(g->sa, who->sa) != 0)
            continue;
        for (int j = 0; j < g->n_names; j++)
            if (strlen(g->names[j]) == len && !memcmp(g->names[j], name, len))
                return HSMCA_OK;
    }
    if (p->service_dns && who->ns[0] && is_service_name(p, who->ns, name, len))
        return HSMCA_OK;
    return hsmca_fail(e, HSMCA_EPERM,
                      "policy rule dns_names: DNS SAN '%s' is not granted to %.64s.%.64s%s",
                      shown(name, len, b, sizeof(b)), who->sa, who->ns,
                      p->service_dns ? " (nor a service of its namespace)" : "");
}

uint32_t policy_ns_max_ttl(const policy_set *p, const char *ns)
{
    for (int i = 0; p && ns && i < p->n_ttls; i++)
        if (!strcmp(p->ttls[i].ns, ns))
            return p->ttls[i].max_ttl;
    return 0;
}

const char *policy_key_name(policy_key key, char *buf, size_t bufsz)
{
    switch (key.type) {
    case POLICY_KEY_RSA: snprintf(buf, bufsz, "RSA-%u", key.rsa_bits); break;
    case POLICY_KEY_P256: snprintf(buf, bufsz, "EC P-256"); break;
    case POLICY_KEY_P384: snprintf(buf, bufsz, "EC P-384"); break;
    default: snprintf(buf, bufsz, "unknown"); break;
    }
    return buf;
}

hsmca_code policy_check_key(const policy_set *p, policy_key key, hsmca_err *e)
{
    if (!p || !p->keys_set)
        return HSMCA_OK;
    int ok =
        (key.type == POLICY_KEY_P256 && p->ec_p256) || (key.type == POLICY_KEY_P384 && p->ec_p384);
    for (int i = 0; key.type == POLICY_KEY_RSA && i < p->n_rsa_bits; i++)
        ok |= p->rsa_bits[i] == key.rsa_bits;
    char name[32];
    HSMCA_ENSURE(ok, e, HSMCA_EPERM, "policy rule key_types: %s keys are not allowed",
                 policy_key_name(key, name, sizeof(name)));
    return HSMCA_OK;
}
