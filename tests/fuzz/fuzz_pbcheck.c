/* fuzz_pbcheck.c - libFuzzer target for fe_pb_check_struct (frontend/fe_pbcheck.h)
 * and the request decode in front of it (frontend/fe_request.c).
 *
 * The first input byte picks a mode:
 *   bit 0 clear: the rest is a google.protobuf.Struct in wire format, checked
 *                with max_depth = 1 + (byte >> 1) % FE_PB_MAX_DEPTH;
 *   bit 0 set:   the rest is a gRPC request body: IstioCertificateRequest is
 *                unpacked by protobuf-c and its metadata checked, as the front
 *                end does with every CreateCertificate.
 * Oracle: the depth cap is monotonic: a Struct accepted at depth d is accepted
 * at FE_PB_MAX_DEPTH, and one refused at FE_PB_MAX_DEPTH is refused at d. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ca.pb-c.h"
#include "fe_request.h"
#include "fe_pbcheck.h"

static void check_struct(const uint8_t *buf, size_t len, int depth)
{
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = fe_pb_check_struct(buf, len, depth, &e);
    if (rc != HSMCA_OK && (rc != HSMCA_EINVAL || e.msg[0] == '\0'))
        abort(); /* a refusal is INVALID_ARGUMENT and names its check */
    hsmca_code max = fe_pb_check_struct(buf, len, FE_PB_MAX_DEPTH, &e);
    if (rc == HSMCA_OK && max != HSMCA_OK)
        abort(); /* accepted at a lower cap, refused at the highest */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536 + 1)
        return 0;
    size_t n = size - 1;
    uint8_t *buf = malloc(n ? n : 1); /* exactly n bytes, so ASan sees any overread */
    if (!buf)
        return 0;
    memcpy(buf, data + 1, n);
    if (!(data[0] & 1)) {
        check_struct(buf, n, 1 + (data[0] >> 1) % FE_PB_MAX_DEPTH);
    } else {
        Istio__V1__Auth__IstioCertificateRequest *req =
            istio__v1__auth__istio_certificate_request__unpack(NULL, n, buf);
        if (req) {
            check_struct(req->metadata.data, req->metadata.len, FE_METADATA_MAX_DEPTH);
            istio__v1__auth__istio_certificate_request__free_unpacked(req, NULL);
        }
    }
    free(buf);
    return 0;
}
