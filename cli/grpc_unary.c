/* grpc_unary.c - see grpc_unary.h. */
#include "grpc_unary.h"

#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

const char *grpc_unary_status_name(grpc_status_code s)
{
    static const char *names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                  "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                  "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                                  "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

/* The status, its details and the message of a finished call: 0 with *resp on OK. */
static int outcome(const grpc_unary *u, grpc_status_code status, grpc_slice details,
                   grpc_byte_buffer *recv, grpc_slice *resp)
{
    if (status == GRPC_STATUS_OK && recv) {
        grpc_byte_buffer_reader r;
        grpc_byte_buffer_reader_init(&r, recv);
        *resp = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        return 0;
    }
    char *d = grpc_slice_to_c_string(details);
    fprintf(stderr, "%s: %s: %s\n", u->who, grpc_unary_status_name(status),
            status == GRPC_STATUS_OK ? "no message in the answer" : d);
    gpr_free(d);
    return 1;
}

/* Whether pem holds a certificate: gRPC itself says only "empty address list" when the
 * roots do not load. */
static int has_certificate(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    int ok = x != NULL;
    X509_free(x);
    BIO_free(b);
    return ok;
}

int grpc_unary_call(const grpc_unary *u, const uint8_t *body, size_t len, grpc_slice *resp)
{
    if (!has_certificate(u->root_pem)) {
        fprintf(stderr, "%s: the roots to trust hold no PEM certificate\n", u->who);
        return 1;
    }
    grpc_channel_credentials *creds = grpc_ssl_credentials_create(u->root_pem, u->pair, NULL, NULL);
    grpc_channel *ch = grpc_channel_create(u->addr, creds, NULL);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                         gpr_time_from_seconds(u->timeout_s, GPR_TIMESPAN));
    grpc_slice method = grpc_slice_from_copied_string(u->method);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
                                               deadline, NULL);
    char auth[8192];
    snprintf(auth, sizeof(auth), "Bearer %s", u->bearer ? u->bearer : "");
    grpc_metadata md = {grpc_slice_from_static_string("authorization"),
                        grpc_slice_from_copied_string(auth), {{NULL, NULL, NULL, NULL}}};
    grpc_slice req_slice = grpc_slice_from_copied_buffer((const char *)body, len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&req_slice, 1), *recv = NULL;
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = u->bearer ? 1 : 0;
    ops[0].data.send_initial_metadata.metadata = &md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    int rc = 1;
    if (grpc_call_start_batch(call, ops, 6, call, NULL) == GRPC_CALL_OK &&
        grpc_completion_queue_pluck(cq, call, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).success)
        rc = outcome(u, status, details, recv, resp);
    else
        fprintf(stderr, "%s: the call did not complete\n", u->who);
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_byte_buffer_destroy(send);
    grpc_slice_unref(req_slice);
    grpc_slice_unref(method);
    grpc_slice_unref(md.value);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(ch);
    grpc_channel_credentials_release(creds);
    return rc;
}
