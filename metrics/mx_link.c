/* mx_link.c - see mx_link.h. */
#include "mx_link.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc_frame.h"
#include "log.h"
#include "mx_contract.h"
#include "util.h"

static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static int link_fd = -1;
static uint64_t next_id;

void mx_link_set(int fd)
{
    pthread_mutex_lock(&link_lock);
    if (link_fd >= 0)
        close(link_fd);
    link_fd = fd;
    pthread_mutex_unlock(&link_lock);
}

static void put_id(uint8_t *p, uint64_t id)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(id >> (56 - 8 * i));
}

/* Drops what an earlier request left (an answer that came after its timeout, or one a
 * previous metrics process asked for). */
static void drain(int fd)
{
    static uint8_t junk[MX_HDR_LEN + MX_CHUNK];
    while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0) {
    }
}

/* Appends one packet's text to *buf; 1 when it was the last. -1 over MX_MAX_REPLY. */
static int append(char **buf, size_t *len, const uint8_t *pkt, size_t n, int *ok)
{
    size_t add = n - MX_HDR_LEN;
    if (*len + add > MX_MAX_REPLY)
        return -1;
    char *p = realloc(*buf, *len + add + 1);
    if (!p)
        return -1;
    memcpy(p + *len, pkt + MX_HDR_LEN, add);
    *len += add;
    p[*len] = '\0';
    *buf = p;
    *ok = (pkt[MX_REQ_LEN] & MX_OK) != 0;
    return (pkt[MX_REQ_LEN] & MX_LAST) != 0;
}

/* Reads the answer to req until its last packet or the deadline. */
static int read_answer(int fd, const uint8_t req[MX_REQ_LEN], char **text, size_t *len, int *ok)
{
    static uint8_t pkt[MX_HDR_LEN + MX_CHUNK + 1];
    double deadline = util_mono_now() + MX_TIMEOUT_MS / 1000.0;
    for (;;) {
        int left = (int)((deadline - util_mono_now()) * 1000);
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        ssize_t n = recv(fd, pkt, sizeof(pkt), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return -1;
        if (n < MX_HDR_LEN || (size_t)n > MX_HDR_LEN + MX_CHUNK || memcmp(pkt, req, MX_REQ_LEN))
            continue; /* not the answer to this request */
        int r = append(text, len, pkt, (size_t)n, ok);
        if (r != 0)
            return r > 0 ? 0 : -1;
    }
}

int mx_link_ask(char kind, char **text, size_t *len, int *ok)
{
    *text = NULL;
    *len = 0;
    *ok = 0;
    pthread_mutex_lock(&link_lock);
    int fd = link_fd, rc = -1;
    if (fd >= 0) {
        if (!next_id)
            util_random(&next_id, sizeof(next_id)); /* unlike any earlier process's ids */
        uint8_t req[MX_REQ_LEN];
        req[0] = (uint8_t)kind;
        put_id(req + 1, next_id++);
        drain(fd);
        if (send(fd, req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(req))
            rc = read_answer(fd, req, text, len, ok);
    }
    pthread_mutex_unlock(&link_lock);
    if (rc != 0) {
        free(*text);
        *text = NULL;
        *len = 0;
        *ok = 0;
    }
    return rc;
}

static pthread_t main_thread;

static void *ctl_thread(void *arg)
{
    int ctl = (int)(intptr_t)arg;
    for (;;) {
        char type;
        int fd, eof = 0;
        hsmca_err e;
        if (ipc_recv_ctl(ctl, &type, &fd, &eof, &e) != HSMCA_OK) {
            if (eof)
                break;
            LOG_EVENT(LOG_LVL_WARN, "control channel error", LOG_STR("error", e.msg));
            continue;
        }
        if (type == CTL_NEW_PEER && fd >= 0) {
            mx_link_set(fd);
            log_event(LOG_LVL_INFO, "linked to a new front end", NULL, 0);
        } else {
            char shown = type >= ' ' && type < 127 ? type : '?';
            LOG_EVENT(LOG_LVL_WARN, "control channel: unexpected message",
                      LOG_BYTES("type", &shown, 1));
            if (fd >= 0)
                close(fd);
        }
    }
    log_event(LOG_LVL_INFO, "supervisor went away: stopping", NULL, 0);
    pthread_kill(main_thread, SIGTERM);
    return NULL;
}

hsmca_code mx_link_watch_ctl(int ctl_fd, hsmca_err *e)
{
    main_thread = pthread_self();
    pthread_t th;
    int rc = pthread_create(&th, NULL, ctl_thread, (void *)(intptr_t)ctl_fd);
    HSMCA_ENSURE(rc == 0, e, HSMCA_EINTERNAL, "cannot start the control thread: %s", strerror(rc));
    pthread_detach(th);
    return HSMCA_OK;
}
