/* fuzz_tokenreview.c - libFuzzer target for what the Kubernetes API server
 * sends the TokenReview authenticator: fe_https_parse_response
 * (frontend/fe_https.h) on the input as a whole HTTP answer, then
 * fe_tokenreview_parse (frontend/fe_tokenreview.h) on the input as the
 * TokenReview body; also fe_tokenreview_token_exp on it as a token. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fe_https.h"
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

    /* The same bytes as an HTTP answer (parsed in place: a fresh copy). */
    memcpy(doc, data, size);
    int status;
    char *body;
    size_t body_len;
    hsmca_err_clear(&e);
    rc = fe_https_parse_response(doc, size, &status, &body, &body_len, &e);
    if (rc == HSMCA_OK) {
        if (status < 100 || status > 599 || body < doc || body + body_len > doc + size)
            abort(); /* a status code, and a body inside the answer */
    } else if (rc != HSMCA_EUNAVAIL || e.msg[0] == '\0') {
        abort();
    }
    free(doc);
    return 0;
}
