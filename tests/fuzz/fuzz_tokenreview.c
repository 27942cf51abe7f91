/* fuzz_tokenreview.c - libFuzzer target for fe_tokenreview_parse
 * (frontend/fe_tokenreview.h): the input is the body of the Kubernetes API
 * server's answer to a TokenReview create. Also the token's exp reader
 * (fe_tokenreview_token_exp) on the same bytes as a token. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fe_tokenreview.h"
#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FE_TR_MAX_RESPONSE + 1)
        return 0;
    char *doc = malloc(size ? size : 1); /* exactly size bytes: no NUL for the parser to lean on */
    if (!doc)
        return 0;
    memcpy(doc, data, size);
    static const char *const auds[] = {"istio-ca", "api"};
    fe_tr_identity id;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = fe_tokenreview_parse(doc, size, auds, 2, &id, &e);
    if (rc == HSMCA_OK) {
        /* Accepted: a namespace and service account the SPIFFE ID can carry. */
        if (!policy_is_k8s_name(id.ns, strlen(id.ns), POLICY_NS_MAX, 0) ||
            !policy_is_k8s_name(id.sa, strlen(id.sa), POLICY_SA_MAX, 1))
            abort();
        char spiffe[POLICY_MAX_ID];
        if (policy_spiffe_id("cluster.local", id.ns, id.sa, spiffe, sizeof(spiffe), &e) != HSMCA_OK)
            abort();
    } else if ((rc != HSMCA_EAUTH && rc != HSMCA_EUNAVAIL) || e.msg[0] == '\0' || id.ns[0]) {
        abort(); /* a refusal names its check, is one of the two codes, fills nothing */
    }
    (void)fe_tokenreview_token_exp(doc, size);
    free(doc);
    return 0;
}
