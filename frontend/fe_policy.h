/* fe_policy.h - the SAN policy on a parsed CSR: Istio's exact match (widened by
 * trust-domain aliases), then the policy file's rules (policy/policy_file.h), then
 * the TTL. The signer runs the same rules again on the TBS with its own copy of
 * the policy file. */
#ifndef HSMCA_FE_POLICY_H
#define HSMCA_FE_POLICY_H

#include <stdint.h>

#include "fe_app.h"
#include "leaf_csr.h"
#include "hsmca_err.h"

/* What the policy grants a request: the TTL and the DNS SANs to put in the TBS
 * (pointers into the CSR: valid until leaf_csr_free). */
typedef struct {
    uint32_t ttl;
    const char *dns[LEAF_CSR_MAX_SANS];
    int n_dns;
} fe_policy_grant;

/* ids[0] is the identity the certificate will carry. HSMCA_EPERM names the rule
 * ("policy rule dns_names: ..."); without a policy file, every DNS SAN is refused as
 * before ("SAN policy: CSR carries DNS/IP/email SANs ..."). */
HSMCA_MUSTCHECK hsmca_code fe_apply_policy(const fe_app *app, const char *const *ids, int n_ids,
                                           const leaf_csr *csr, int64_t requested_ttl,
                                           fe_policy_grant *out, hsmca_err *e);

/* The policy's view of a CSR key that leaf_csr_parse accepted. */
policy_key fe_policy_key_of(EVP_PKEY *k);

#endif
