/* policy.c - see policy.h. Pure functions: no I/O, no clock, no allocation. */
#include "policy.h"
#include "policy_spiffe.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

#define POLICY_TD_MAX 255
#define POLICY_SPIFFE_MAX 2048 /* SPIFFE ID length limit (SPIFFE-ID spec 2.3) */

static int is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, length checked by the caller. */
static int is_dns_label(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return 0;
    for (size_t i = 1; i + 1 < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return 0;
    return 1;
}

int policy_is_k8s_name(const char *s, size_t len, size_t max, int allow_dots)
{
    if (!s || len == 0 || len > max)
        return 0;
    if (!allow_dots)
        return is_dns_label(s, len);
    /* A DNS-1123 subdomain: labels joined by single dots. */
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.')
            continue;
        if (!is_dns_label(s + start, i - start))
            return 0;
        start = i + 1;
    }
    return 1;
}

/* A SPIFFE trust domain: [a-z0-9._-]+ (lowercase only, so comparisons are exact). */
static int is_trust_domain(const char *s, size_t n)
{
    if (!s || n == 0 || n > POLICY_TD_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

hsmca_code policy_spiffe_id(const char *td, const char *ns, const char *sa, char *out, size_t outsz,
                            hsmca_err *e)
{
    if (out && outsz)
        out[0] = '\0';
    if (!is_trust_domain(td, td ? strlen(td) : 0))
        return hsmca_fail(e, HSMCA_EAUTH, "identity: trust domain is not [a-z0-9._-]+");
    if (!policy_is_k8s_name(ns, ns ? strlen(ns) : 0, POLICY_NS_MAX, 0))
        return hsmca_fail(e, HSMCA_EAUTH,
                          "identity: namespace is not a Kubernetes name of at most %d bytes",
                          POLICY_NS_MAX);
    if (!policy_is_k8s_name(sa, sa ? strlen(sa) : 0, POLICY_SA_MAX, 1))
        return hsmca_fail(e, HSMCA_EAUTH,
                          "identity: service account is not a Kubernetes name of at most %d bytes",
                          POLICY_SA_MAX);
    if (!out || outsz == 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "identity: no output buffer");
    int n = snprintf(out, outsz, "spiffe://%s/ns/%s/sa/%s", td, ns, sa);
    if (n < 0 || (size_t)n >= outsz) {
        out[0] = '\0';
        return hsmca_fail(e, HSMCA_EAUTH, "identity: SPIFFE ID longer than %zu bytes", outsz - 1);
    }
    /* The same validator the signer runs, so an identity the policy grants is
     * one the signer will sign. */
    hsmca_err why;
    if (policy_spiffe_id_check(out, (size_t)n, &td, 1, &why) != HSMCA_OK) {
        out[0] = '\0';
        return hsmca_fail(e, HSMCA_EAUTH, "identity: %s", why.msg);
    }
    return HSMCA_OK;
}

/* A CSR's or caller's identity for a message: never a control character or a quote. */
static const char *shown(const char *s, char *buf, size_t bufsz)
{
    return util_printable(s, s ? strlen(s) : 0, buf, bufsz);
}

hsmca_code policy_check_sans(const char *const *caller_ids, int n_ids, const char *const *csr_uris,
                             int n_uris, int n_other_sans, hsmca_err *e)
{
    if (n_other_sans > 0)
        return hsmca_fail(e, HSMCA_EPERM,
                          "SAN policy: CSR carries DNS/IP/email SANs, not allowed for workloads");
    if (n_uris <= 0 || !csr_uris)
        return hsmca_fail(e, HSMCA_EPERM, "SAN policy: CSR has no URI SAN");
    if (n_uris > 1)
        return hsmca_fail(e, HSMCA_EPERM,
                          "SAN policy: CSR carries %d URI SANs, Istio allows exactly one", n_uris);
    const char *want = csr_uris[0];
    for (int i = 0; want && caller_ids && i < n_ids; i++)
        if (caller_ids[i] && strcmp(caller_ids[i], want) == 0)
            return HSMCA_OK;

    char a[112], b[112];
    if (!caller_ids || n_ids <= 0)
        return hsmca_fail(e, HSMCA_EPERM,
                          "SAN policy: CSR asks for %s but the caller has no identity",
                          shown(want, a, sizeof(a)));
    if (n_ids == 1)
        return hsmca_fail(e, HSMCA_EPERM, "SAN policy: CSR asks for %s but the caller is %s",
                          shown(want, a, sizeof(a)), shown(caller_ids[0], b, sizeof(b)));
    return hsmca_fail(e, HSMCA_EPERM,
                      "SAN policy: CSR asks for %s but the caller is %s (and %d other identities)",
                      shown(want, a, sizeof(a)), shown(caller_ids[0], b, sizeof(b)),
                      n_ids - 1);
}

hsmca_code policy_ttl(const policy_rules *r, int64_t requested, uint32_t *ttl, hsmca_err *e)
{
    if (!r || !ttl)
        return hsmca_fail(e, HSMCA_EINTERNAL, "TTL policy: no rules");
    *ttl = 0;
    if (r->max_ttl == 0)
        return hsmca_fail(e, HSMCA_EINTERNAL, "TTL policy: maximum TTL is 0");
    if (requested <= 0) {
        /* A default above the maximum is a config slip; the maximum still holds. */
        *ttl = r->default_ttl == 0 || r->default_ttl > r->max_ttl ? r->max_ttl : r->default_ttl;
        return HSMCA_OK;
    }
    if (requested > (int64_t)r->max_ttl)
        return hsmca_fail(e, HSMCA_EPERM, "TTL policy: requested %llds exceeds the maximum %us",
                          (long long)requested, (unsigned)r->max_ttl);
    if (requested < POLICY_MIN_TTL)
        return hsmca_fail(e, HSMCA_EPERM,
                          "TTL policy: requested %llds is below the minimum %ds (certificates are "
                          "backdated 2 minutes)",
                          (long long)requested, POLICY_MIN_TTL);
    *ttl = (uint32_t)requested;
    return HSMCA_OK;
}
