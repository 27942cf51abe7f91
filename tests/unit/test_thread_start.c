/* test_thread_start.c - the one rule for a thread that cannot start (thread_start.h): at
 * start-up fatal (exit 1, the thread named), later HSMCA_EUNAVAIL naming it. A thread is
 * made unable to start by RLIMIT_AS in a forked child (no room for its stack). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "thread_start.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ran;

static void *mark(void *arg)
{
    pthread_mutex_lock(&mu);
    ran += *(int *)arg;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void wait_ran(int n)
{
    pthread_mutex_lock(&mu);
    while (ran < n)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void test_starts_joinable_and_detached(void **state)
{
    (void)state;
    static int one = 1;
    pthread_t th;
    ran = 0;
    thread_start(&th, mark, &one, "test thread");
    assert_int_equal(pthread_join(th, NULL), 0);
    thread_start(NULL, mark, &one, "detached test thread"); /* never joined */
    wait_ran(2);
    hsmca_err e;
    hsmca_err_clear(&e);
    assert_int_equal(thread_start_later(&th, mark, &one, "later test thread", &e), HSMCA_OK);
    assert_int_equal(pthread_join(th, NULL), 0);
    wait_ran(3);
}

#ifndef UNDER_ASAN
/* In a child: the address space capped at what it uses now, so no thread stack fits. */
static void no_room_for_a_stack(void)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1)
        _exit(3);
    fclose(f);
    rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    struct rlimit r = {now + (1 << 20), now + (1 << 20)};
    if (setrlimit(RLIMIT_AS, &r) != 0)
        _exit(3);
}

static int child_status(int later)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static int one = 1;
        pthread_t th;
        no_room_for_a_stack();
        if (!later) {
            thread_start(&th, mark, &one, "doomed thread");
            _exit(0); /* started after all: the rule was not applied */
        }
        hsmca_err e;
        hsmca_err_clear(&e);
        hsmca_code rc = thread_start_later(&th, mark, &one, "doomed thread", &e);
        _exit(rc == HSMCA_EUNAVAIL && strstr(e.msg, "cannot start the doomed thread") ? 0 : 2);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}
#endif

static void test_cannot_start(void **state)
{
    (void)state;
#ifdef UNDER_ASAN
    skip(); /* the sanitizer's own mappings do not live under RLIMIT_AS */
#else
    assert_int_equal(child_status(0), 1); /* start-up: fatal, exit 1 */
    assert_int_equal(child_status(1), 0); /* later: HSMCA_EUNAVAIL naming the thread */
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: glibc keeps the stacks of ended threads and gives them to new ones. */
        cmocka_unit_test(test_cannot_start),
        cmocka_unit_test(test_starts_joinable_and_detached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
