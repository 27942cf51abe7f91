/* fuzz_sigreq.c - libFuzzer target for signer_request_check (signer/
 * signer_request.h): the wire check the signer runs on a SignRequest payload
 * from a possibly compromised front end, before protobuf-c sees it.
 *
 * Oracles: an accepted payload unpacks with protobuf-c; its fields are exactly
 * the sizes the check reported, within the profile's bounds, with a 32-bit
 * profile; the requester is exactly as long as its wire length (no NUL cut it
 * short); and it packs again into no more bytes. A refusal names the
 * SignRequest rule.
 *
 * The same input goes through signer_deny_check (a FrontendDeny, same walker):
 * accepted, it unpacks, its code is a refusal, its strings are within their caps and
 * whole (no NUL); refused, the rule names FrontendDeny. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok_jwt.h"
#include "hsmca_err.h"
#include "profile.h"
#include "signer.pb-c.h"
#include "signer_request.h"

static void check_deny(const uint8_t *p, size_t size)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    if (signer_deny_check(p, size, &e) != HSMCA_OK) {
        if (e.code != HSMCA_EINVAL || strncmp(e.msg, "FrontendDeny: ", 14) != 0)
            abort();
        return;
    }
    Hsmca__Ipc__FrontendDeny *d = hsmca__ipc__frontend_deny__unpack(NULL, size, p);
    if (!d || d->code == HSMCA_OK || d->code > HSMCA_CODE_MAX ||
        strlen(d->requester) > PROFILE_REQUESTER_MAX ||
        strlen(d->authenticator) > IPC_AUTHENTICATOR_MAX ||
        strlen(d->reason) > IPC_DENY_REASON_MAX ||
        hsmca__ipc__frontend_deny__get_packed_size(d) > size)
        abort();
    hsmca__ipc__frontend_deny__free_unpacked(d, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1); /* exactly size bytes, for ASan */
    if (!p)
        return 0;
    memcpy(p, data, size);
    check_deny(p, size);
    signer_request_shape shape;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (signer_request_check(p, size, &shape, &e) != HSMCA_OK) {
        if (e.code != HSMCA_EINVAL || strncmp(e.msg, "SignRequest: ", 13) != 0)
            abort();
        free(p);
        return 0;
    }
    Hsmca__Ipc__SignRequest *req = hsmca__ipc__sign_request__unpack(NULL, size, p);
    if (!req || req->tbs.len != shape.tbs_len || req->tbs.len > PROFILE_TBS_MAX ||
        req->csr_sha256.len != shape.csr_sha256_len ||
        shape.requester_len > PROFILE_REQUESTER_MAX ||
        strlen(req->requester) != shape.requester_len ||
        strlen(req->authenticator) != shape.authenticator_len ||
        shape.authenticator_len > IPC_AUTHENTICATOR_MAX ||
        strlen(req->token) != shape.token_len || shape.token_len > IPC_TOKEN_MAX ||
        strlen(req->request_id) != shape.request_id_len ||
        (shape.request_id_len != 0 && shape.request_id_len != IPC_REQUEST_ID_LEN) ||
        strspn(req->request_id, "0123456789abcdef") != shape.request_id_len)
        abort();
    if (hsmca__ipc__sign_request__get_packed_size(req) > size)
        abort();
    hsmca__ipc__sign_request__free_unpacked(req, NULL);
    free(p);
    return 0;
}
