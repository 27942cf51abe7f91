/* ipc_frame.c - see ipc_frame.h. */
#include "ipc_frame.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

hsmca_code ipc_frame_encode(uint8_t type, uint64_t id, const uint8_t *payload, size_t plen,
                            uint8_t *out, size_t outsz, size_t *outlen, hsmca_err *e)
{
    if (plen > IPC_MAX_PAYLOAD || outsz < IPC_HEADER_LEN + plen)
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: payload of %zu bytes too large", plen);
    if (id > IPC_ID_MAX)
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: request id %" PRIu64 " above 2^63-1", id);
    out[0] = type;
    put_u64(out + 1, id);
    if (plen)
        memcpy(out + IPC_HEADER_LEN, payload, plen);
    *outlen = IPC_HEADER_LEN + plen;
    return HSMCA_OK;
}

hsmca_code ipc_frame_decode(const uint8_t *pkt, size_t len, ipc_msg *m, hsmca_err *e)
{
    *m = (ipc_msg){0};
    if (len < IPC_HEADER_LEN)
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: %zu bytes is shorter than the header", len);
    if (len > IPC_MAX_FRAME)
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: %zu bytes exceeds the maximum", len);
    uint64_t id = get_u64(pkt + 1);
    /* The signing log's readers hold an id as an int64 (IPC_ID_MAX): a larger one is
     * refused here, naming why, rather than when its audit entry cannot be written. */
    if (id > IPC_ID_MAX)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "IPC frame: request id %" PRIu64 " above 2^63-1 (the signing log "
                          "holds ids as int64)",
                          id);
    m->type = pkt[0];
    m->id = id;
    m->payload = pkt + IPC_HEADER_LEN;
    m->len = len - IPC_HEADER_LEN;
    return HSMCA_OK;
}

hsmca_code ipc_send(int fd, uint8_t type, uint64_t id, const uint8_t *payload, size_t plen,
                    hsmca_err *e)
{
    return ipc_send_within(fd, type, id, payload, plen, -1, e);
}

hsmca_code ipc_send_within(int fd, uint8_t type, uint64_t id, const uint8_t *payload, size_t plen,
                           int timeout_ms, hsmca_err *e)
{
    if (plen > IPC_MAX_PAYLOAD)
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: payload of %zu bytes too large", plen);
    uint8_t hdr[IPC_HEADER_LEN];
    hdr[0] = type;
    put_u64(hdr + 1, id);
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, plen}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = plen ? 2 : 1};
    double deadline = util_mono_now() + timeout_ms / 1000.0;
    int flags = MSG_NOSIGNAL | (timeout_ms >= 0 ? MSG_DONTWAIT : 0);
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, flags);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && timeout_ms >= 0) {
            /* The peer is not reading: wait for room, but never past the bound. */
            int left_ms = (int)((deadline - util_mono_now()) * 1000);
            struct pollfd p = {fd, POLLOUT, 0};
            if (left_ms <= 0 || poll(&p, 1, left_ms) == 0)
                return hsmca_fail(e, HSMCA_EUNAVAIL, "IPC send: peer has not read for %d ms",
                                  timeout_ms);
            continue;
        }
        if (w < 0)
            return hsmca_fail(e, HSMCA_EIO, "IPC send: %s", strerror(errno));
        if ((size_t)w != sizeof(hdr) + plen)
            return hsmca_fail(e, HSMCA_EIO, "IPC send: short write");
        return HSMCA_OK;
    }
}

/* ipc_recv, or ipc_try_recv with MSG_DONTWAIT in flags. */
static hsmca_code recv_frame(int fd, uint8_t *buf, int flags, ipc_msg *m, hsmca_err *e)
{
    *m = (ipc_msg){0};
    struct iovec iov = {buf, IPC_MAX_FRAME};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t r;
    do
        r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (flags & MSG_DONTWAIT) && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        m->empty = 1;
        return HSMCA_OK;
    }
    if (r < 0)
        return hsmca_fail(e, HSMCA_EIO, "IPC recv: %s", strerror(errno));
    if (r == 0) {
        /* On SOCK_SEQPACKET, 0 is either the peer's close or an empty packet; only
         * the former leaves the socket hung up. An empty packet is a malformed frame. */
        struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
        if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP))) {
            m->eof = 1;
            return hsmca_fail(e, HSMCA_EIO, "IPC recv: peer closed the connection");
        }
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: empty packet");
    }
    /* A packet longer than the buffer is cut by the kernel and flagged: refuse it
     * rather than parse a prefix. */
    if (mh.msg_flags & MSG_TRUNC)
        return hsmca_fail(e, HSMCA_EINVAL, "IPC frame: packet larger than %d bytes", IPC_MAX_FRAME);
    /* The IPC carries no ancillary data: with no room for it the kernel flags it and
     * closes any descriptor that came with it (SCM_RIGHTS); the sender broke the protocol. */
    if (mh.msg_flags & MSG_CTRUNC)
        return hsmca_fail(e, HSMCA_EINVAL,
                          "IPC frame: ancillary data attached (a file descriptor, SCM_RIGHTS); "
                          "the IPC carries none");
    return ipc_frame_decode(buf, (size_t)r, m, e);
}

hsmca_code ipc_recv(int fd, uint8_t *buf, ipc_msg *m, hsmca_err *e)
{
    return recv_frame(fd, buf, 0, m, e);
}

hsmca_code ipc_try_recv(int fd, uint8_t *buf, ipc_msg *m, hsmca_err *e)
{
    return recv_frame(fd, buf, MSG_DONTWAIT, m, e);
}

hsmca_code ipc_send_fd(int ctl, int fd, hsmca_err *e)
{
    return ipc_send_ctl_fd(ctl, CTL_NEW_PEER, fd, e);
}

hsmca_code ipc_send_ctl_fd(int ctl, char type, int fd, hsmca_err *e)
{
    char byte = type;
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof(cm));
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t w;
    do
        w = sendmsg(ctl, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w != 1)
        return hsmca_fail(e, HSMCA_EIO, "control send: %s", strerror(errno));
    return HSMCA_OK;
}

hsmca_code ipc_recv_fd(int ctl, int *fd, int *eof, hsmca_err *e)
{
    char type;
    HSMCA_GUARD(ipc_recv_ctl(ctl, &type, fd, eof, e));
    if (*fd < 0)
        return hsmca_fail(e, HSMCA_EINVAL, "control message carries no single fd");
    return HSMCA_OK;
}

hsmca_code ipc_recv_ctl(int ctl, char *type, int *fd, int *eof, hsmca_err *e)
{
    char byte = 0;
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } cm;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    *fd = -1;
    *eof = 0;
    *type = 0;
    ssize_t r;
    do
        r = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        *eof = 1;
        return hsmca_fail(e, HSMCA_EIO, "control channel closed");
    }
    if (r < 0)
        return hsmca_fail(e, HSMCA_EIO, "control recv: %s", strerror(errno));
    *type = byte;
    int n = 0, got[4];
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && n < 4; i++)
            memcpy(&got[n++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    if (n > 1 || (mh.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < n; i++)
            close(got[i]);
        return hsmca_fail(e, HSMCA_EINVAL, "control message carries more than one fd");
    }
    if (n == 1)
        *fd = got[0];
    return HSMCA_OK;
}
