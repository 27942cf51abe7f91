/* fuzz_ipc.c - libFuzzer target for the signer IPC: ipc_frame_decode
 * (common/ipc_frame.h) and the protobuf-c unpack of its payload.
 *
 * The input is one SEQPACKET packet. A SIGN_REQ frame is unpacked as the signer
 * does with what a (possibly compromised) front end sends; a SIGN_REPLY frame
 * as the front end does with the signer's answer, reading the fields its reply
 * handler reads. Oracle: an accepted frame re-encodes to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_frame.h"
#include "signer.pb-c.h"

static uint8_t g_sink; /* keeps the reads below from being optimized away */

static void touch(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g_sink ^= p[i];
}

static void signer_side(const uint8_t *p, size_t n)
{
    Hsmca__Ipc__SignRequest *req = hsmca__ipc__sign_request__unpack(NULL, n, p);
    if (!req)
        return;
    touch(req->tbs.data, req->tbs.len);
    touch(req->csr_sha256.data, req->csr_sha256.len);
    if (req->requester)
        touch((const uint8_t *)req->requester, strlen(req->requester));
    g_sink ^= (uint8_t)req->profile;
    hsmca__ipc__sign_request__free_unpacked(req, NULL);
}

static void frontend_side(const uint8_t *p, size_t n)
{
    Hsmca__Ipc__SignReply *r = hsmca__ipc__sign_reply__unpack(NULL, n, p);
    if (!r)
        return;
    g_sink ^= (uint8_t)r->code;
    if (r->reason)
        touch((const uint8_t *)r->reason, strlen(r->reason));
    touch(r->certificate.data, r->certificate.len);
    hsmca__ipc__sign_reply__free_unpacked(r, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > IPC_MAX_FRAME + 16)
        return 0;
    uint8_t *pkt = malloc(size ? size : 1); /* exactly size bytes, so ASan sees any overread */
    if (!pkt)
        return 0;
    memcpy(pkt, data, size);
    ipc_msg m;
    hsmca_err e;
    hsmca_err_clear(&e);
    if (ipc_frame_decode(pkt, size, &m, &e) == HSMCA_OK) {
        if (size < IPC_HEADER_LEN || size > IPC_MAX_FRAME || m.len != size - IPC_HEADER_LEN ||
            (m.len && m.payload != pkt + IPC_HEADER_LEN) || m.eof)
            abort();
        static uint8_t again[IPC_MAX_FRAME];
        size_t alen = 0;
        if (ipc_frame_encode(m.type, m.id, m.payload, m.len, again, sizeof(again), &alen, &e) !=
                HSMCA_OK ||
            alen != size || memcmp(again, pkt, size) != 0)
            abort();
        if (m.type == IPC_SIGN_REQ)
            signer_side(m.payload, m.len);
        else if (m.type == IPC_SIGN_REPLY)
            frontend_side(m.payload, m.len);
    } else if (e.code == HSMCA_OK || e.msg[0] == '\0') {
        abort(); /* a refusal names its check */
    }
    free(pkt);
    return 0;
}
