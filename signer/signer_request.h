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
} signer_request_shape;

/* Walks payload[0..len): fields 1 (varint profile, at most 2^32-1), 2 (tbs, at most
 * PROFILE_TBS_MAX bytes), 3 (requester, at most PROFILE_REQUESTER_MAX), 4
 * (csr_sha256, 0 or 32 bytes), 5 (authenticator, at most
 * SIGNER_DENY_AUTHENTICATOR_MAX), 6 (token, at most TOK_JWT_MAX_LEN), 7 (cluster, at most
 * CONFIG_MAX_CLUSTER_ID), each at most once,
 * strings without NUL bytes; nothing else. HSMCA_EINVAL
 * naming the rule when the front end broke the protocol. */
HSMCA_MUSTCHECK hsmca_code signer_request_check(const uint8_t *payload, size_t len,
                                                signer_request_shape *shape, hsmca_err *e);

/* The caps of a FrontendDeny's strings (proto/signer.proto). */
#define SIGNER_DENY_AUTHENTICATOR_MAX 64
#define SIGNER_DENY_REASON_MAX 1024

/* Walks a FrontendDeny payload[0..len): fields 1 (requester, at most
 * PROFILE_REQUESTER_MAX), 2 (authenticator, at most SIGNER_DENY_AUTHENTICATOR_MAX), 3
 * (varint code, 1..HSMCA_CODE_MAX: a refusal), 4 (reason, at most
 * SIGNER_DENY_REASON_MAX), 5 (varint suppressed, at most 2^32-1), each at most once,
 * strings without NUL bytes, the code present; nothing else. HSMCA_EINVAL naming the
 * rule when the front end broke the protocol. */
HSMCA_MUSTCHECK hsmca_code signer_deny_check(const uint8_t *payload, size_t len, hsmca_err *e);

#endif
