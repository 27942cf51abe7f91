/* fe_policy.c - see fe_policy.h. */
#include "fe_policy.h"

#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>

#include "policy.h"
#include "policy_file.h"

policy_key fe_policy_key_of(EVP_PKEY *k)
{
    policy_key key = {0, 0};
    if (EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA) {
        key.type = POLICY_KEY_RSA;
        key.rsa_bits = (unsigned)EVP_PKEY_get_bits(k);
        return key;
    }
    char group[64] = "";
    size_t gl = 0;
    if (EVP_PKEY_get_base_id(k) == EVP_PKEY_EC &&
        EVP_PKEY_get_group_name(k, group, sizeof(group), &gl)) {
        if (!strcmp(group, SN_X9_62_prime256v1))
            key.type = POLICY_KEY_P256;
        else if (!strcmp(group, SN_secp384r1))
            key.type = POLICY_KEY_P384;
    }
    return key;
}

/* The workload profile's TTL, capped by the namespace's namespace_max_ttl. */
static HSMCA_MUSTCHECK hsmca_code policy_ttl_for(const fe_app *app, const policy_set *pf,
                                                 const policy_who *who, int64_t requested,
                                                 uint32_t *ttl, hsmca_err *e)
{
    policy_rules rules = app->policy;
    uint32_t cap = policy_ns_max_ttl(pf, who->ns);
    if (cap && cap < rules.max_ttl) {
        HSMCA_ENSURE(requested <= (int64_t)cap, e, HSMCA_EPERM,
                     "policy rule namespace_max_ttl: requested %llds exceeds %us for namespace "
                     "'%s'",
                     (long long)requested, (unsigned)cap, who->ns);
        rules.max_ttl = cap;
    }
    return policy_ttl(&rules, requested, ttl, e);
}

static HSMCA_MUSTCHECK hsmca_code apply_under(const fe_app *app, const policy_set *pf,
                                              const char *const *ids, int n_ids,
                                              const leaf_csr *csr, int64_t requested_ttl,
                                              fe_policy_grant *out, hsmca_err *e)
{
    memset(out, 0, sizeof(*out));
    const char *td = app->policy.trust_domain;
    /* DNS SANs are left to the dns_names rule only when the policy can grant one. */
    int dns_by_rule = policy_set_grants_dns(pf);
    int n_other = csr->n_other_sans - (dns_by_rule ? csr->n_dns : 0);
    HSMCA_GUARD(policy_check_sans_aliased(pf, td, ids, n_ids, (const char *const *)csr->uris,
                                          csr->n_uris, n_other, e));
    policy_who who;
    const char *id = n_ids > 0 && ids[0] ? ids[0] : "";
    HSMCA_GUARD(policy_identity(pf, td, id, strlen(id), &who, e));
    for (int i = 0; dns_by_rule && i < csr->n_dns; i++) {
        HSMCA_GUARD(policy_check_dns(pf, &who, csr->dns[i], strlen(csr->dns[i]), e));
        out->dns[out->n_dns++] = csr->dns[i];
    }
    HSMCA_GUARD(policy_check_key(pf, fe_policy_key_of(csr->pubkey), e));
    return policy_ttl_for(app, pf, &who, requested_ttl, &out->ttl, e);
}

hsmca_code fe_apply_policy(const fe_app *app, const char *const *ids, int n_ids, const leaf_csr *csr,
                           int64_t requested_ttl, fe_policy_grant *out, hsmca_err *e)
{
    /* One version for the whole check: a reload meanwhile applies from the next request. */
    policy_version *v = policy_live_acquire(app->policies);
    hsmca_code rc =
        apply_under(app, policy_version_set(v), ids, n_ids, csr, requested_ttl, out, e);
    policy_live_release(v);
    return rc;
}
