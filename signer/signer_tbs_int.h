/* signer_tbs_int.h - what the TBS validator's two halves (the fields in
 * signer_tbs.c, the extensions in signer_tbs_ext.c) share. Private to signer/. */
#ifndef HSMCA_SIGNER_TBS_INT_H
#define HSMCA_SIGNER_TBS_INT_H

#include "policy_file.h"
#include "signer_der.h"
#include "signer_tbs.h"

/* One validation: the policy, the clock, and what was seen so far. */
typedef struct {
    const tbs_policy *pol;
    profile_id profile;
    int64_t now;
    tbs_facts *facts;
    der_cur subject_key; /* the subjectPublicKey BIT STRING's key bytes (SKI input) */
    policy_key key;      /* its type and size, for the policy file's key_types */
    der_cur uri;         /* the workload's URI SAN (len 0: none yet) */
    der_cur dns[PROFILE_MAX_NAMES]; /* its DNS SANs, checked against the policy file at the end */
    int n_dns;
} tbs_ctx;

/* A refusal for malformed DER (HSMCA_EINVAL) naming the invariant and field. */
#define TBS_DER(cond, e, inv, what)                                                                \
    HSMCA_ENSURE(cond, e, HSMCA_EINVAL, "invariant %d: %s: not DER", inv, what)

/* The extensions [3] with the allowlist and the per-extension rules (inv. 1, 3, 4). */
HSMCA_MUSTCHECK hsmca_code tbs_check_extensions(tbs_ctx *c, der_cur *in, hsmca_err *e);

/* The policy file's rules on a workload TBS, once every field was seen: the
 * namespace (inv. 4), the DNS SANs granted to the URI SAN's identity (inv. 4), the
 * key type (inv. 5), the namespace's TTL cap (inv. 2). No policy file: nothing. */
HSMCA_MUSTCHECK hsmca_code tbs_check_policy_file(tbs_ctx *c, hsmca_err *e);

#endif
