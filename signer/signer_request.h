/* signer_request.h - the wire check of a SignRequest before protobuf-c sees it.
 *
 * protobuf-c keeps unknown fields (so 64 KiB of padding costs ~1.75 MiB once
 * unpacked), accepts a field repeated any number of times, truncates a string
 * at an embedded NUL, and keeps a uint32's low 32 bits. The signer therefore
 * walks the wire format first and admits only the fields of
 * proto/signer.proto, each at most once, each within its bound, before
 * anything is allocated. */
#ifndef HSMCA_SIGNER_REQUEST_H
#define HSMCA_SIGNER_REQUEST_H

#include "hsmca_err.h"
#include "ipc_contract.h" /* the caps this check enforces */
#include <stddef.h>
#include <stdint.h>

/* What the wire check learnt, for the queue's byte accounting and the checks
 * after unpacking. */
typedef struct {
    size_t tbs_len;
    size_t requester_len;
    size_t csr_sha256_len;
    size_t authenticator_len;
    size_t token_len;
    size_t cluster_len;
    size_t request_id_len;
    size_t client_serial_len;
    size_t client_issuer_len;
} signer_request_shape;

/* Walks payload[0..len): fields 1 (varint profile, at most 2^32-1), 2 (tbs, at most
 * IPC_TBS_MAX bytes), 3 (requester, at most IPC_REQUESTER_MAX), 4 (csr_sha256, 0 or
 * IPC_CSR_SHA256_LEN bytes), 5 (authenticator, at most IPC_AUTHENTICATOR_MAX), 6 (token,
 * at most IPC_TOKEN_MAX), 7 (cluster, at most IPC_CLUSTER_MAX), 8 (request_id: empty or
 * IPC_REQUEST_ID_LEN lowercase hex digits), 9 (client_serial, 1..IPC_CLIENT_SERIAL_MAX
 * bytes) with 10 (client_issuer, IPC_CLIENT_ISSUER_LEN bytes) or neither, each at most
 * once, varints
 * in their shortest form (common/pbwire.h), strings without NUL bytes; nothing else.
 * HSMCA_EINVAL naming the rule when the front end broke the protocol. */
HSMCA_MUSTCHECK hsmca_code signer_request_check(const uint8_t *payload, size_t len,
                                                signer_request_shape *shape, hsmca_err *e);

/* Walks a FrontendDeny payload[0..len): fields 1 (requester, at most
 * IPC_REQUESTER_MAX), 2 (authenticator, at most IPC_AUTHENTICATOR_MAX), 3
 * (varint code, 1..HSMCA_CODE_MAX: a refusal), 4 (reason, at most
 * IPC_DENY_REASON_MAX), 5 (varint suppressed, at most 2^32-1), each at most once,
 * strings without NUL bytes, the code present; nothing else. HSMCA_EINVAL naming the
 * rule when the front end broke the protocol. */
HSMCA_MUSTCHECK hsmca_code signer_deny_check(const uint8_t *payload, size_t len, hsmca_err *e);

/* A StatusRequest has no field: an empty payload, or HSMCA_EINVAL (a protocol violation,
 * as any other malformed frame). */
HSMCA_MUSTCHECK hsmca_code signer_status_check(size_t len, hsmca_err *e);

#endif
