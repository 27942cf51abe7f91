/* signer_request.c - see signer_request.h. */
#include "signer_request.h"

#include <string.h>

#include "profile.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

/* A base-128 varint at p[*off..len) in its shortest form (protobuf-c accepts
 * fewer redundant bytes than the format allows, so anything longer than
 * needed is refused here rather than handed to a parser that disagrees). */
static int wire_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
    *v = 0;
    for (int shift = 0, n = 0; shift < 70 && *off < len; shift += 7, n++) {
        uint8_t b = p[(*off)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return (n == 0 || b != 0) && (shift < 63 || b <= 1);
    }
    return 0;
}

hsmca_code signer_request_check(const uint8_t *payload, size_t len, signer_request_shape *shape,
                                hsmca_err *e)
{
    static const struct {
        int wire;
        size_t max;
        const char *name;
    } fields[5] = {
        [1] = {WIRE_VARINT, 0, "profile"},
        [2] = {WIRE_LEN, PROFILE_TBS_MAX, "tbs"},
        [3] = {WIRE_LEN, PROFILE_REQUESTER_MAX, "requester"},
        [4] = {WIRE_LEN, 32, "csr_sha256"},
    };
    unsigned seen = 0;
    size_t off = 0;
    memset(shape, 0, sizeof(*shape));
    while (off < len) {
        uint64_t key, v;
        HSMCA_ENSURE(wire_varint(payload, len, &off, &key), e, HSMCA_EINVAL,
                     "SignRequest: malformed or non-minimal field key at offset %zu", off);
        uint64_t num = key >> 3;
        HSMCA_ENSURE(num >= 1 && num <= 4, e, HSMCA_EINVAL,
                     "SignRequest: unknown field %llu", (unsigned long long)num);
        HSMCA_ENSURE((int)(key & 7) == fields[num].wire, e, HSMCA_EINVAL,
                     "SignRequest: field %s has the wrong wire type", fields[num].name);
        HSMCA_ENSURE(!(seen & (1u << num)), e, HSMCA_EINVAL, "SignRequest: field %s repeated",
                     fields[num].name);
        seen |= 1u << num;
        HSMCA_ENSURE(wire_varint(payload, len, &off, &v), e, HSMCA_EINVAL,
                     "SignRequest: field %s malformed or non-minimal", fields[num].name);
        if (fields[num].wire == WIRE_VARINT) {
            /* protobuf-c keeps a uint32's low 32 bits: 2^32 + 1 would pass for 1. */
            HSMCA_ENSURE(v <= UINT32_MAX, e, HSMCA_EINVAL,
                         "SignRequest: field %s of %llu exceeds 4294967295", fields[num].name,
                         (unsigned long long)v);
            continue;
        }
        HSMCA_ENSURE(v <= len - off, e, HSMCA_EINVAL,
                     "SignRequest: field %s runs past the frame", fields[num].name);
        HSMCA_ENSURE(v <= fields[num].max, e, HSMCA_EINVAL,
                     "SignRequest: field %s of %llu bytes exceeds %zu", fields[num].name,
                     (unsigned long long)v, fields[num].max);
        /* protobuf-c ends a string at its first NUL: a requester cut there would
         * be logged as someone else. */
        HSMCA_ENSURE(num != 3 || !memchr(payload + off, 0, (size_t)v), e, HSMCA_EINVAL,
                     "SignRequest: requester contains a NUL byte");
        off += (size_t)v;
        if (num == 2)
            shape->tbs_len = (size_t)v;
        else if (num == 3)
            shape->requester_len = (size_t)v;
        else
            shape->csr_sha256_len = (size_t)v;
    }
    HSMCA_ENSURE(shape->csr_sha256_len == 0 || shape->csr_sha256_len == 32, e, HSMCA_EINVAL,
                 "SignRequest: csr_sha256 of %zu bytes", shape->csr_sha256_len);
    return HSMCA_OK;
}
