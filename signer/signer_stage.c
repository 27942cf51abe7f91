/* signer_stage.c - the signer's staged requests (see signer_stage.h): with the
 * audit log, the checker parks a request once its intent is appended; the syncer thread
 * makes every parked intent durable with one sync and hands them back, ready, to the
 * signing workers; the pool of stages the requests in progress hold. */
#include "signer_ctx.h"
#include "signer_stage.h"
#include "signer_work.h"

#include <pthread.h>
#include <stdlib.h>

#include "audit_log.h"
#include "util.h"

/* Invariant 8: one sync makes every parked intent durable, or none of them signs
 * (UNAVAILABLE; an intent, which reaches the disk when the log recovers, gets that
 * result). */
static void sync_intents(signer_ctx *s, signer_job *batch)
{
    uint64_t last = SIGNER_NO_INTENT;
    for (signer_job *j = batch; j; j = j->next)
        if (j->current && j->st->rc == HSMCA_OK && j->st->intent_seq != SIGNER_NO_INTENT &&
            (last == SIGNER_NO_INTENT || j->st->intent_seq > last))
            last = j->st->intent_seq;
    hsmca_err e;
    if (last == SIGNER_NO_INTENT || audit_log_sync_through(s->audit, last, &e) == HSMCA_OK)
        return;
    for (signer_job *j = batch; j; j = j->next)
        if (j->current && j->st->rc == HSMCA_OK && j->st->intent_seq != SIGNER_NO_INTENT) {
            j->st->rc = HSMCA_EUNAVAIL;
            j->st->err = e;
            j->st->err.code = HSMCA_EUNAVAIL;
        }
}

/* Appends list (linked by next, at least one job) to the list *head..*tail. */
static void list_append(signer_job **head, signer_job **tail, signer_job *list)
{
    signer_job *last = list;
    while (last->next)
        last = last->next;
    if (*tail)
        (*tail)->next = list;
    else
        *head = list;
    *tail = last;
}

/* Under lock, something parked: waits while the workers have enough to sign (see
 * SIGNER_READY_LOW), at most until the oldest parked intent has waited
 * SIGNER_SYNC_HOLD_S, or a stop. */
static void hold_sync(signer_ctx *s)
{
    double until = s->parked_since + SIGNER_SYNC_HOLD_S;
    while (s->n_ready >= SIGNER_READY_LOW && !s->stopping && !s->syncer_stop) {
        double left = until - util_mono_now();
        if (left <= 0)
            return;
        struct timespec ts = util_mono_deadline(left);
        pthread_cond_timedwait(&s->park, &s->lock, &ts);
    }
}

void *signer_syncer(void *arg)
{
    signer_ctx *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->parked && !s->syncer_stop)
            pthread_cond_wait(&s->park, &s->lock);
        if (!s->parked)
            break;
        hold_sync(s);
        /* Every intent parked so far shares this sync; those parked meanwhile, the
         * next. */
        signer_job *list = s->parked;
        s->parked = s->parked_tail = NULL;
        pthread_mutex_unlock(&s->lock);
        sync_intents(s, list);
        pthread_mutex_lock(&s->lock);
        int n = 0;
        for (signer_job *j = list; j; j = j->next)
            n++;
        list_append(&s->ready, &s->ready_tail, list);
        s->n_ready += n;
        /* a signing worker each (n_workers counts the checker too), not a stampede */
        for (int i = 0; i < n && i < s->n_workers - 1; i++)
            pthread_cond_signal(&s->more);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void signer_stages_init(signer_ctx *s)
{
    int n = s->max_staged + s->n_workers;
    s->stages = calloc((size_t)n, sizeof(*s->stages));
    s->free_stages = calloc((size_t)n, sizeof(*s->free_stages));
    if (!s->stages || !s->free_stages)
        fatal("out of memory");
    for (int i = 0; i < n; i++)
        s->free_stages[i] = &s->stages[i];
    s->n_free_stages = n;
}

void signer_stages_free(signer_ctx *s)
{
    free(s->stages);
    free(s->free_stages);
}

void signer_stage_checked(signer_ctx *s, signer_job *j)
{
    pthread_mutex_lock(&s->lock);
    s->busy[0] = NULL;
    s->checking = 0;
    j->next = NULL;
    s->staged++;
    if (s->audit) {
        if (!s->parked)
            s->parked_since = util_mono_now();
        list_append(&s->parked, &s->parked_tail, j);
        pthread_cond_signal(&s->park);
    } else {
        list_append(&s->ready, &s->ready_tail, j);
        s->n_ready++;
        pthread_cond_signal(&s->more);
    }
    pthread_mutex_unlock(&s->lock);
}

signer_job *signer_next_to_check(signer_ctx *s)
{
    for (;;) {
        if (s->stopping)
            return NULL;
        if (s->head && s->staged < s->max_staged) {
            signer_job *j = s->head;
            s->head = j->next;
            if (!s->head)
                s->tail = NULL;
            s->queued--;
            j->next = NULL;
            j->current = j->conn == s->conn;
            j->started = util_mono_now();
            /* Jobs with a stage are staged or held by a thread, and one is taken only
             * below max_staged: the pool (signer_stages_init) never runs dry. */
            if (s->n_free_stages == 0)
                fatal("signer: no free stage (more jobs in progress than staged + workers)");
            j->st = s->free_stages[--s->n_free_stages];
            s->checking = 1;
            return j;
        }
        pthread_cond_wait(&s->check, &s->lock);
    }
}

signer_job *signer_next_to_sign(signer_ctx *s)
{
    for (;;) {
        if (s->ready) {
            signer_job *j = s->ready;
            s->ready = j->next;
            if (!s->ready)
                s->ready_tail = NULL;
            j->next = NULL;
            j->current = j->conn == s->conn; /* its front end may be gone since */
            s->staged--;
            if (--s->n_ready < SIGNER_READY_LOW && s->parked) /* time for the next sync */
                pthread_cond_signal(&s->park);
            if (s->head) /* room to stage one more */
                pthread_cond_signal(&s->check);
            return j;
        }
        if (s->stopping && s->staged == 0 && !s->checking) {
            /* The syncer wakes one worker per job: the others, waiting here for the
             * last staged job, learn that there is none left only from this. */
            pthread_cond_broadcast(&s->more);
            return NULL;
        }
        pthread_cond_wait(&s->more, &s->lock);
    }
}
