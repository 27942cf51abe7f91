/* audit_ica_req.c - see audit_ica_req.h. */
#include "audit_ica_req.h"

audit_ica_state audit_ica_state_of(const audit_ica_req *r, int64_t now)
{
    if (r->denied)
        return ICA_DENIED;
    if (r->cert_b64)
        return ICA_ISSUED;
    if (r->n_approvers >= r->required || r->auto_renews)
        return ICA_APPROVED;
    return now > r->expires ? ICA_EXPIRED : ICA_PENDING;
}

const char *audit_ica_state_name(audit_ica_state s)
{
    static const char *const names[] = {"pending", "approved", "issued", "denied", "expired"};
    return s <= ICA_EXPIRED ? names[s] : "unknown";
}
