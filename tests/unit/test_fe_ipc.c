/* test_fe_ipc.c - the front end's IPC client against a fake signer on a real
 * SOCK_SEQPACKET socketpair: thousands of requests in flight answered by id,
 * no deadlock when both socket buffers are full, every callback exactly once,
 * UNAVAILABLE on a lost connection, and a new connection taken over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after the headers it needs */

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fe_ipc.h"
#include "ipc_frame.h"
#include "signer.pb-c.h"
#include "util.h"

#define TBS_BYTES 3000 /* big frames fill the tiny socket buffers quickly */

typedef struct {
    int fd;          /* the signer's end */
    hsmca_code code; /* what to answer */
    int answer;      /* 0: read and drop (a hung signer) */
} fake_signer;

/* Reads requests one at a time and answers each at once, echoing the TBS as the
 * "certificate": single-threaded on purpose, so it blocks in send whenever the
 * front end stops reading, exactly the situation that must not deadlock. */
static void *fake_signer_run(void *arg)
{
    fake_signer *f = arg;
    static __thread uint8_t buf[IPC_MAX_FRAME];
    for (;;) {
        ipc_msg m;
        hsmca_err e;
        if (ipc_recv(f->fd, buf, &m, &e) != HSMCA_OK)
            return NULL;
        if (!f->answer)
            continue;
        Hsmca__Ipc__SignRequest *req = hsmca__ipc__sign_request__unpack(NULL, m.len, m.payload);
        if (!req)
            return NULL;
        Hsmca__Ipc__SignReply r = HSMCA__IPC__SIGN_REPLY__INIT;
        r.code = (uint32_t)f->code;
        r.reason = f->code ? (char *)"invariant 3: refused by the fake signer" : (char *)"";
        if (!f->code)
            r.certificate = req->tbs;
        static __thread uint8_t out[IPC_MAX_PAYLOAD];
        size_t n = hsmca__ipc__sign_reply__pack(&r, out);
        hsmca__ipc__sign_request__free_unpacked(req, NULL);
        if (ipc_send(f->fd, IPC_SIGN_REPLY, m.id, out, n, &e) != HSMCA_OK)
            return NULL;
    }
}

static void shrink_buffers(int fd)
{
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
}

typedef struct {
    atomic_int done, ok, unavailable, refused, mismatched;
} tally;

typedef struct {
    tally *t;
    uint8_t tbs[TBS_BYTES];
} request_ctx;

static void on_reply(void *arg, hsmca_code code, const char *reason, const uint8_t *cert,
                     size_t cert_len)
{
    request_ctx *r = arg;
    if (code == HSMCA_OK) {
        if (cert_len != TBS_BYTES || memcmp(cert, r->tbs, TBS_BYTES) != 0)
            atomic_fetch_add(&r->t->mismatched, 1); /* answered with another request's reply */
        atomic_fetch_add(&r->t->ok, 1);
    } else if (code == HSMCA_EUNAVAIL && strstr(reason, "signer unavailable")) {
        atomic_fetch_add(&r->t->unavailable, 1);
    } else if (code == HSMCA_EPERM && strstr(reason, "invariant 3")) {
        atomic_fetch_add(&r->t->refused, 1);
    }
    atomic_fetch_add(&r->t->done, 1);
}

static int wait_done(tally *t, int want, double seconds)
{
    double end = util_mono_now() + seconds;
    while (atomic_load(&t->done) < want && util_mono_now() < end)
        usleep(1000);
    return atomic_load(&t->done);
}

typedef struct {
    fe_ipc *ipc;
    request_ctx *reqs;
    int from, to;
} submitter;

static void *submit_range(void *arg)
{
    submitter *s = arg;
    for (int i = s->from; i < s->to; i++) {
        hsmca_err e;
        hsmca_code rc;
        /* Back off while FE_IPC_MAX_INFLIGHT requests wait, as a busy server would. */
        while ((rc = fe_ipc_submit(s->ipc, 1, s->reqs[i].tbs, TBS_BYTES, "test", NULL, on_reply,
                                   &s->reqs[i], &e)) == HSMCA_ERATE)
            usleep(100);
        if (rc != HSMCA_OK)
            fail_msg("submit %d: %s", i, e.msg);
    }
    return NULL;
}

static volatile int stop_flag; /* the front end's stop flag, set by fe_ipc */

/* Starts an fe_ipc on a fresh pair; the caller keeps the signer end and the
 * supervisor's end of the control channel. */
static fe_ipc *start(int *signer_end, int *ctl_sup)
{
    int ipc[2], ctl[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ipc), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ctl), 0);
    shrink_buffers(ipc[0]);
    shrink_buffers(ipc[1]);
    hsmca_err e;
    fe_ipc *c = fe_ipc_start(ipc[0], ctl[0], &stop_flag, &e);
    assert_non_null(c);
    *signer_end = ipc[1];
    *ctl_sup = ctl[1];
    return c;
}

static void test_many_in_flight_no_deadlock(void **state)
{
    enum { N = 8000, THREADS = 4 };
    int sfd, ctl;
    fe_ipc *c = start(&sfd, &ctl);
    fake_signer f = {sfd, HSMCA_OK, 1};
    pthread_t sig;
    pthread_create(&sig, NULL, fake_signer_run, &f);

    static tally t;
    request_ctx *reqs = calloc(N, sizeof(*reqs));
    for (int i = 0; i < N; i++) {
        reqs[i].t = &t;
        util_random(reqs[i].tbs, TBS_BYTES);
    }
    submitter subs[THREADS];
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) {
        subs[k] = (submitter){c, reqs, k * N / THREADS, (k + 1) * N / THREADS};
        pthread_create(&th[k], NULL, submit_range, &subs[k]);
    }
    /* Bounded: with the deadlock this guards against, the submitters never return. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    for (int k = 0; k < THREADS; k++)
        if (pthread_timedjoin_np(th[k], NULL, &until) != 0)
            fail_msg("deadlock: submitters still blocked after 30 s, %d of %d answered",
                     atomic_load(&t.done), N);
    int done = wait_done(&t, N, 30);
    assert_int_equal(done, N); /* a deadlock stops well short of N */
    assert_int_equal(atomic_load(&t.ok), N);
    assert_int_equal(atomic_load(&t.mismatched), 0);
    usleep(50 * 1000);
    assert_int_equal(atomic_load(&t.done), N); /* exactly once each */
    shutdown(sfd, SHUT_RDWR);                  /* close() alone would not wake its recvmsg */
    pthread_join(sig, NULL);
    close(sfd);
    free(reqs);
}

/* The supervisor's death sets the stop flag (the graceful stop) and does not
 * exit under the other threads: a request in flight is still answered. */
static void test_supervisor_gone_stops_but_answers(void **state)
{
    int sfd, ctl;
    stop_flag = 0;
    fe_ipc *c = start(&sfd, &ctl);
    static tally t;
    static request_ctx r;
    r.t = &t;
    hsmca_err e;
    assert_int_equal(fe_ipc_submit(c, 1, r.tbs, TBS_BYTES, "test", NULL, on_reply, &r, &e),
                     HSMCA_OK);
    close(ctl); /* the supervisor went away */
    for (int i = 0; i < 200 && !stop_flag; i++)
        usleep(10 * 1000);
    assert_int_equal(stop_flag, 1);
    fake_signer f = {sfd, HSMCA_OK, 1};
    pthread_t sig;
    pthread_create(&sig, NULL, fake_signer_run, &f);
    assert_int_equal(wait_done(&t, 1, 10), 1);
    assert_int_equal(atomic_load(&t.ok), 1);
    shutdown(sfd, SHUT_RDWR);
    pthread_join(sig, NULL);
    close(sfd);
}

static void test_refusal_reaches_the_caller(void **state)
{
    int sfd, ctl;
    fe_ipc *c = start(&sfd, &ctl);
    fake_signer f = {sfd, HSMCA_EPERM, 1};
    pthread_t sig;
    pthread_create(&sig, NULL, fake_signer_run, &f);
    static tally t;
    static request_ctx r;
    r.t = &t;
    hsmca_err e;
    assert_int_equal(fe_ipc_submit(c, 1, r.tbs, TBS_BYTES, "test", NULL, on_reply, &r, &e),
                     HSMCA_OK);
    assert_int_equal(wait_done(&t, 1, 10), 1);
    assert_int_equal(atomic_load(&t.refused), 1);
    shutdown(sfd, SHUT_RDWR);
    pthread_join(sig, NULL);
    close(sfd);
}

static void test_lost_connection_then_new_signer(void **state)
{
    enum { N = 20 };
    int sfd, ctl;
    fe_ipc *c = start(&sfd, &ctl);
    fake_signer hung = {sfd, HSMCA_OK, 0}; /* reads, never answers */
    pthread_t sig;
    pthread_create(&sig, NULL, fake_signer_run, &hung);
    static tally t;
    static request_ctx reqs[N];
    hsmca_err e;
    for (int i = 0; i < N; i++) {
        reqs[i].t = &t;
        assert_int_equal(
            fe_ipc_submit(c, 1, reqs[i].tbs, TBS_BYTES, "t", NULL, on_reply, &reqs[i], &e),
            HSMCA_OK);
    }
    usleep(100 * 1000);
    assert_int_equal(atomic_load(&t.done), 0);
    /* The signer dies: every waiting request fails UNAVAILABLE, once. */
    shutdown(sfd, SHUT_RDWR);
    pthread_join(sig, NULL);
    close(sfd);
    assert_int_equal(wait_done(&t, N, 10), N);
    assert_int_equal(atomic_load(&t.unavailable), N);
    for (int i = 0; i < 100 && fe_ipc_connected(c); i++)
        usleep(10 * 1000);
    assert_int_equal(fe_ipc_connected(c), 0);
    /* While no signer is connected, submit refuses at once and calls nobody back. */
    assert_int_equal(fe_ipc_submit(c, 1, reqs[0].tbs, TBS_BYTES, "t", NULL, on_reply, &reqs[0], &e),
                     HSMCA_EUNAVAIL);
    assert_non_null(strstr(e.msg, "signer unavailable"));

    /* The supervisor hands over a new signer's connection. */
    int pair[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
    assert_int_equal(ipc_send_fd(ctl, pair[0], &e), HSMCA_OK);
    close(pair[0]);
    for (int i = 0; i < 200 && !fe_ipc_connected(c); i++)
        usleep(10 * 1000);
    assert_int_equal(fe_ipc_connected(c), 1);
    fake_signer fresh = {pair[1], HSMCA_OK, 1};
    pthread_create(&sig, NULL, fake_signer_run, &fresh);
    assert_int_equal(fe_ipc_submit(c, 1, reqs[1].tbs, TBS_BYTES, "t", NULL, on_reply, &reqs[1], &e),
                     HSMCA_OK);
    assert_int_equal(wait_done(&t, N + 1, 10), N + 1);
    assert_int_equal(atomic_load(&t.ok), 1);
    shutdown(pair[1], SHUT_RDWR);
    pthread_join(sig, NULL);
    close(pair[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_in_flight_no_deadlock),
        cmocka_unit_test(test_supervisor_gone_stops_but_answers),
        cmocka_unit_test(test_refusal_reaches_the_caller),
        cmocka_unit_test(test_lost_connection_then_new_signer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
