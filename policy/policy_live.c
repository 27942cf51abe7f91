/* policy_live.c - see policy_live.h. */
#include "policy_live.h"

#include <pthread.h>
#include <stdlib.h>

struct policy_version {
    policy_set *set;
    long refs; /* under the holder's lock: the holder's own reference and each user's */
    pthread_mutex_t *lock;
};

struct policy_live {
    pthread_mutex_t lock;
    policy_version *cur, *prev;
    double prev_until;
};

static policy_version *version_new(policy_live *l, policy_set *set)
{
    policy_version *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    v->set = set;
    v->refs = 1;
    v->lock = &l->lock;
    return v;
}

/* Under the lock: drops one reference; the version when it was the last (to free
 * outside the lock), else NULL. */
static policy_version *unref_locked(policy_version *v)
{
    return v && --v->refs == 0 ? v : NULL;
}

static void version_free(policy_version *v)
{
    if (!v)
        return;
    policy_set_free(v->set);
    free(v);
}

policy_live *policy_live_new(policy_set *initial)
{
    policy_live *l = calloc(1, sizeof(*l));
    if (!l) {
        policy_set_free(initial);
        return NULL;
    }
    pthread_mutex_init(&l->lock, NULL);
    if (!(l->cur = version_new(l, initial))) {
        policy_set_free(initial);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return NULL;
    }
    return l;
}

policy_version *policy_live_acquire(policy_live *l)
{
    pthread_mutex_lock(&l->lock);
    policy_version *v = l->cur;
    v->refs++;
    pthread_mutex_unlock(&l->lock);
    return v;
}

policy_version *policy_live_acquire_prev(policy_live *l, double now)
{
    pthread_mutex_lock(&l->lock);
    policy_version *v = l->prev && now < l->prev_until ? l->prev : NULL;
    if (v)
        v->refs++;
    pthread_mutex_unlock(&l->lock);
    return v;
}

const policy_set *policy_version_set(const policy_version *v)
{
    return v ? v->set : NULL;
}

void policy_live_release(policy_version *v)
{
    if (!v)
        return;
    pthread_mutex_t *lock = v->lock;
    pthread_mutex_lock(lock);
    policy_version *dead = unref_locked(v);
    pthread_mutex_unlock(lock);
    version_free(dead);
}

hsmca_code policy_live_replace(policy_live *l, policy_set *next, double grace_until, hsmca_err *e)
{
    policy_version *v = version_new(l, next);
    if (!v) {
        policy_set_free(next);
        return hsmca_fail(e, HSMCA_ENOMEM, "out of memory");
    }
    pthread_mutex_lock(&l->lock);
    policy_version *dead = unref_locked(l->prev);
    l->prev = l->cur;
    l->prev_until = grace_until;
    l->cur = v;
    pthread_mutex_unlock(&l->lock);
    version_free(dead);
    return HSMCA_OK;
}

void policy_live_free(policy_live *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    policy_version *a = unref_locked(l->cur), *b = unref_locked(l->prev);
    pthread_mutex_unlock(&l->lock);
    version_free(a);
    version_free(b);
    pthread_mutex_destroy(&l->lock);
    free(l);
}
