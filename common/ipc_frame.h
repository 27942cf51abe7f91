/* ipc_frame.h - framing of signer IPC messages over a SOCK_SEQPACKET socketpair.
 *
 * One message per packet: u8 type | u64 id (big-endian) | protobuf-c payload.
 * The whole packet is at most IPC_MAX_FRAME bytes (ipc_contract.h); the size is checked
 * before anything is allocated, and a truncated or oversized packet, a packet with
 * ancillary data or an id above IPC_ID_MAX is an error. */
#ifndef HSMCA_IPC_FRAME_H
#define HSMCA_IPC_FRAME_H

#include "hsmca_err.h"
#include "ipc_contract.h" /* IPC_MAX_FRAME, IPC_ID_MAX, CTL_KEYS and the other bounds */
#include <stddef.h>
#include <stdint.h>

/* Message types. Each has exactly one handler in the receiver's allow-table. */
enum ipc_type {
    IPC_SIGN_REQ = 1,      /* front end -> signer: hsmca.ipc.SignRequest */
    IPC_SIGN_REPLY = 2,    /* signer -> front end: hsmca.ipc.SignReply   */
    IPC_FRONTEND_DENY = 3, /* front end -> signer: hsmca.ipc.FrontendDeny, no reply */
    IPC_STATUS_REQ = 4,    /* front end -> signer: hsmca.ipc.StatusRequest (empty) */
    IPC_STATUS_REPLY = 5,  /* signer -> front end: hsmca.ipc.StatusReply, same id */
};

/* One received frame. payload points into the packet buffer it was read from:
 * borrowed, valid until that buffer is reused. */
typedef struct {
    uint8_t type;           /* enum ipc_type, or anything the peer sent */
    uint64_t id;            /* request id, echoed in the reply */
    const uint8_t *payload; /* len bytes of protobuf-c payload */
    size_t len;
    int eof;   /* ipc_recv only: 1 when the peer closed the connection */
    int empty; /* ipc_try_recv only: 1 when no frame was waiting (HSMCA_OK, no message) */
} ipc_msg;

/* Encodes header + payload into out (at least IPC_HEADER_LEN + plen bytes). */
HSMCA_MUSTCHECK hsmca_code ipc_frame_encode(uint8_t type, uint64_t id, const uint8_t *payload,
                                            size_t plen, uint8_t *out, size_t outsz, size_t *outlen,
                                            hsmca_err *e);

/* Splits a received packet of len bytes into *m (m->payload points into pkt; *m zeroed on
 * failure). Fails on a packet shorter than the header or longer than IPC_MAX_FRAME. */
HSMCA_MUSTCHECK hsmca_code ipc_frame_decode(const uint8_t *pkt, size_t len, ipc_msg *m,
                                            hsmca_err *e);

/* Sends one frame on a SEQPACKET fd (one sendmsg, MSG_NOSIGNAL). Thread-safe:
 * a SEQPACKET send is atomic, so concurrent senders never interleave. */
HSMCA_MUSTCHECK hsmca_code ipc_send(int fd, uint8_t type, uint64_t id, const uint8_t *payload,
                                    size_t plen, hsmca_err *e);

/* As ipc_send, but waits at most timeout_ms for room in the peer's buffer
 * (timeout_ms < 0: forever); HSMCA_EUNAVAIL when the peer has not read by then,
 * so a stalled peer cannot hold the sender. */
HSMCA_MUSTCHECK hsmca_code ipc_send_within(int fd, uint8_t type, uint64_t id,
                                           const uint8_t *payload, size_t plen, int timeout_ms,
                                           hsmca_err *e);

/* Receives one frame into buf (IPC_MAX_FRAME bytes) and decodes it into *m (payload in buf).
 * HSMCA_EIO with m->eof = 1 on orderly close; HSMCA_EINVAL on a truncated or short packet. */
HSMCA_MUSTCHECK hsmca_code ipc_recv(int fd, uint8_t *buf, ipc_msg *m, hsmca_err *e);
/* As ipc_recv, but does not wait: HSMCA_OK with m->empty = 1 when no frame is waiting
 * (a reader that drains what a burst queued, without a poll per frame). */
HSMCA_MUSTCHECK hsmca_code ipc_try_recv(int fd, uint8_t *buf, ipc_msg *m, hsmca_err *e);

/* The control channel's type bytes (CTL_*) are one enum, ctl_byte, in ipc_contract.h. */

/* Control channel between supervisor and a child: passes a new peer IPC fd
 * (SCM_RIGHTS) when the other child was restarted. */
HSMCA_MUSTCHECK hsmca_code ipc_send_fd(int ctl, int fd, hsmca_err *e);
/* Receives an fd sent by ipc_send_fd; *fd = -1 and *eof = 1 on close. */
HSMCA_MUSTCHECK hsmca_code ipc_recv_fd(int ctl, int *fd, int *eof, hsmca_err *e);

/* ipc_send_fd with another type byte (CTL_KEYS). */
HSMCA_MUSTCHECK hsmca_code ipc_send_ctl_fd(int ctl, char type, int fd, hsmca_err *e);

/* Receives one control message: *type is its byte, *fd the fd it carried (-1 when
 * none: a message may be a bare byte). *eof = 1 on close. More than one fd is refused
 * (and all are closed). */
HSMCA_MUSTCHECK hsmca_code ipc_recv_ctl(int ctl, char *type, int *fd, int *eof, hsmca_err *e);

#endif
