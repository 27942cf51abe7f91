/* signer_request.c - see signer_request.h. */
#include "signer_request.h"

#include <string.h>

#include "ipc_contract.h"
#include "pbwire.h"

enum { WIRE_VARINT = PBWIRE_VARINT, WIRE_LEN = PBWIRE_LEN };

typedef struct {
    int wire;
    size_t max; /* WIRE_LEN: bytes; WIRE_VARINT: value */
    const char *name;
    int text; /* a string: no NUL byte (protobuf-c would end it there); WIRE_HEX:
                 lowercase hex digits only */
} wire_field;

#define WIRE_HEX 2

static int all_hex(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

/* Walks payload[0..len) admitting only fields[1..n_fields), each at most once and
 * within its bound; vals[num] gets a length field's size or a varint's value, *seen_out
 * a bit per field present. msg names the message. */
static HSMCA_MUSTCHECK hsmca_code wire_walk(const char *msg, const wire_field *fields,
                                            unsigned n_fields, const uint8_t *payload, size_t len,
                                            size_t *vals, unsigned *seen_out, hsmca_err *e)
{
    unsigned seen = 0;
    size_t off = 0;
    while (off < len) {
        uint64_t key, v;
        HSMCA_ENSURE(pbwire_varint(payload, len, &off, &key), e, HSMCA_EINVAL,
                     "%s: malformed or non-minimal field key at offset %zu", msg, off);
        uint64_t num = key >> 3;
        HSMCA_ENSURE(num >= 1 && num < n_fields, e, HSMCA_EINVAL, "%s: unknown field %llu", msg,
                     (unsigned long long)num);
        const wire_field *f = &fields[num];
        HSMCA_ENSURE((int)(key & 7) == f->wire, e, HSMCA_EINVAL,
                     "%s: field %s has the wrong wire type", msg, f->name);
        HSMCA_ENSURE(!(seen & (1u << num)), e, HSMCA_EINVAL, "%s: field %s repeated", msg, f->name);
        seen |= 1u << num;
        HSMCA_ENSURE(pbwire_varint(payload, len, &off, &v), e, HSMCA_EINVAL,
                     "%s: field %s malformed or non-minimal", msg, f->name);
        if (f->wire == WIRE_VARINT) {
            /* protobuf-c keeps a uint32's low 32 bits: 2^32 + 1 would pass for 1. */
            HSMCA_ENSURE(v <= f->max, e, HSMCA_EINVAL, "%s: field %s of %llu exceeds %zu", msg,
                         f->name, (unsigned long long)v, f->max);
            vals[num] = (size_t)v;
            continue;
        }
        HSMCA_ENSURE(v <= len - off, e, HSMCA_EINVAL, "%s: field %s runs past the frame", msg,
                     f->name);
        HSMCA_ENSURE(v <= f->max, e, HSMCA_EINVAL, "%s: field %s of %llu bytes exceeds %zu", msg,
                     f->name, (unsigned long long)v, f->max);
        /* protobuf-c ends a string at its first NUL: a requester cut there would
         * be logged as someone else. */
        HSMCA_ENSURE(!f->text || !memchr(payload + off, 0, (size_t)v), e, HSMCA_EINVAL,
                     "%s: %s contains a NUL byte", msg, f->name);
        /* It goes into our log lines as the key to join them on: digits only. */
        HSMCA_ENSURE(f->text != WIRE_HEX || all_hex(payload + off, (size_t)v), e, HSMCA_EINVAL,
                     "%s: %s is not lowercase hex", msg, f->name);
        off += (size_t)v;
        vals[num] = (size_t)v;
    }
    *seen_out = seen;
    return HSMCA_OK;
}

hsmca_code signer_request_check(const uint8_t *payload, size_t len, signer_request_shape *shape,
                                hsmca_err *e)
{
    static const wire_field fields[11] = {
        [1] = {WIRE_VARINT, UINT32_MAX, "profile", 0},
        [2] = {WIRE_LEN, IPC_TBS_MAX, "tbs", 0},
        [3] = {WIRE_LEN, IPC_REQUESTER_MAX, "requester", 1},
        [4] = {WIRE_LEN, IPC_CSR_SHA256_LEN, "csr_sha256", 0},
        [5] = {WIRE_LEN, IPC_AUTHENTICATOR_MAX, "authenticator", 1},
        [6] = {WIRE_LEN, IPC_TOKEN_MAX, "token", 1},
        [7] = {WIRE_LEN, IPC_CLUSTER_MAX, "cluster", 1},
        [8] = {WIRE_LEN, IPC_REQUEST_ID_LEN, "request_id", WIRE_HEX},
        [9] = {WIRE_LEN, IPC_CLIENT_SERIAL_MAX, "client_serial", 0},
        [10] = {WIRE_LEN, IPC_CLIENT_ISSUER_LEN, "client_issuer", 0},
    };
    size_t vals[11] = {0};
    unsigned seen;
    memset(shape, 0, sizeof(*shape));
    HSMCA_GUARD(wire_walk("SignRequest", fields, 11, payload, len, vals, &seen, e));
    shape->tbs_len = vals[2];
    shape->requester_len = vals[3];
    shape->csr_sha256_len = vals[4];
    shape->authenticator_len = vals[5];
    shape->token_len = vals[6];
    shape->cluster_len = vals[7];
    shape->request_id_len = vals[8];
    shape->client_serial_len = vals[9];
    shape->client_issuer_len = vals[10];
    HSMCA_ENSURE((vals[9] == 0 && vals[10] == 0) || (vals[9] > 0 && vals[10] == IPC_CLIENT_ISSUER_LEN),
                 e, HSMCA_EINVAL,
                 "SignRequest: client_serial (%zu bytes) and client_issuer (%zu bytes, %d "
                 "needed) come together or not at all",
                 vals[9], vals[10], IPC_CLIENT_ISSUER_LEN);
    HSMCA_ENSURE(vals[8] == 0 || vals[8] == IPC_REQUEST_ID_LEN, e, HSMCA_EINVAL,
                 "SignRequest: request_id of %zu hex digits, not %d", vals[8], IPC_REQUEST_ID_LEN);
    HSMCA_ENSURE(shape->csr_sha256_len == 0 || shape->csr_sha256_len == IPC_CSR_SHA256_LEN, e, HSMCA_EINVAL,
                 "SignRequest: csr_sha256 of %zu bytes", shape->csr_sha256_len);
    return HSMCA_OK;
}

hsmca_code signer_deny_check(const uint8_t *payload, size_t len, hsmca_err *e)
{
    static const wire_field fields[6] = {
        [1] = {WIRE_LEN, IPC_REQUESTER_MAX, "requester", 1},
        [2] = {WIRE_LEN, IPC_AUTHENTICATOR_MAX, "authenticator", 1},
        [3] = {WIRE_VARINT, HSMCA_CODE_MAX, "code", 0},
        [4] = {WIRE_LEN, IPC_DENY_REASON_MAX, "reason", 1},
        [5] = {WIRE_VARINT, UINT32_MAX, "suppressed", 0},
    };
    size_t vals[6] = {0};
    unsigned seen;
    HSMCA_GUARD(wire_walk("FrontendDeny", fields, 6, payload, len, vals, &seen, e));
    HSMCA_ENSURE((seen & (1u << 3)) && vals[3] != HSMCA_OK, e, HSMCA_EINVAL,
                 "FrontendDeny: code must name a refusal (1..%d)", HSMCA_CODE_MAX);
    return HSMCA_OK;
}

hsmca_code signer_status_check(size_t len, hsmca_err *e)
{
    HSMCA_ENSURE(len == 0, e, HSMCA_EINVAL, "StatusRequest: %zu bytes of payload (it has none)",
                 len);
    return HSMCA_OK;
}
