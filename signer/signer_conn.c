/* signer_conn.c - see signer_conn.h. */
#include "signer_conn.h"
#include "signer_ctx.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc_frame.h"
#include "log.h"

void signer_conn_unref_locked(signer_conn *c)
{
    if (c && --c->refs == 0) {
        close(c->fd);
        free(c);
    }
}

int signer_conn_fd(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    int fd = s->conn ? s->conn->fd : -1;
    pthread_mutex_unlock(&s->lock);
    return fd;
}

void signer_set_ctl_fd(signer_ctx *s, int ctl_fd)
{
    s->ctl_fd = ctl_fd;
}

void signer_ask_new_frontend(signer_ctx *s)
{
    char b = CTL_RESTART_PEER;
    if (s->ctl_fd >= 0 && write(s->ctl_fd, &b, 1) != 1)
        LOG_EVENT(LOG_LVL_WARN, "cannot ask the supervisor to restart the front end",
                  LOG_STR("error", strerror(errno)));
}

void signer_conn_set(signer_ctx *s, int fd)
{
    signer_conn *c = calloc(1, sizeof(*c));
    if (!c)
        fatal("out of memory");
    c->fd = fd;
    c->refs = 1;
    pthread_mutex_lock(&s->lock);
    /* The old front end is gone or replaced: a worker waiting to send to it is
     * released now, not after the send timeout, and its queued jobs are dropped
     * unchecked as the checker reaches them; until it has taken one, the new front
     * end's first request may still be answered "queue full" (hostile_queue.c). */
    if (s->conn)
        shutdown(s->conn->fd, SHUT_RDWR);
    signer_conn_unref_locked(s->conn);
    s->conn = c;
    pthread_mutex_unlock(&s->lock);
}

void signer_conn_close(signer_ctx *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->conn)
        shutdown(s->conn->fd, SHUT_RDWR);
    signer_conn_unref_locked(s->conn);
    s->conn = NULL;
    pthread_mutex_unlock(&s->lock);
}
