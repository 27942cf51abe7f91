/* thread_start.c - see thread_start.h. */
#include "thread_start.h"

#include <errno.h>
#include <string.h>

#include "log.h"

/* pthread_create's result: a detached thread when th is NULL. */
static int create(pthread_t *th, void *(*fn)(void *), void *arg)
{
    if (th)
        return pthread_create(th, NULL, fn, arg);
    pthread_t own;
    pthread_attr_t a;
    if (pthread_attr_init(&a) != 0)
        return ENOMEM;
    int rc = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (rc == 0)
        rc = pthread_create(&own, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc;
}

void thread_start(pthread_t *th, void *(*fn)(void *), void *arg, const char *what)
{
    int rc = create(th, fn, arg);
    if (rc != 0)
        fatal("cannot start the %s: %s", what, strerror(rc));
}

hsmca_code thread_start_later(pthread_t *th, void *(*fn)(void *), void *arg, const char *what,
                              hsmca_err *e)
{
    int rc = create(th, fn, arg);
    HSMCA_ENSURE(rc == 0, e, HSMCA_EUNAVAIL, "cannot start the %s: %s", what, strerror(rc));
    return HSMCA_OK;
}
