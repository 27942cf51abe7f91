/* test_audit_lock.c - one signer per audit directory (audit/audit_lock.h): the lock is
 * taken on a new directory with our pid in DIR/lock and a close-on-exec descriptor; a
 * second taker waits for it, bounded, and gets it when the holder lets go (or dies),
 * else is refused naming the file and the holder's pid; a stop ends the wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit_lock.h"
#include "testutil.h"
#include "util.h"

static char *lock_dir(const char *prefix, char *path, size_t n)
{
    char *base = tu_mkdtemp(prefix);
    char *dir = malloc(strlen(base) + 8);
    assert_non_null(dir);
    sprintf(dir, "%s/audit", base); /* not there yet: the lock makes it */
    free(base);
    snprintf(path, n, "%s/" AUDIT_LOCK_FILE, dir);
    return dir;
}

static void test_take_new_dir(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_new", path, sizeof(path));
    int fd;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 1.0, NULL, &fd, &e), HSMCA_OK);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC); /* no child of the signer inherits it */
    char buf[32] = {0}, want[32];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    snprintf(want, sizeof(want), "%ld\n", (long)getpid());
    assert_string_equal(buf, want);
    audit_lock_release(fd);
    /* Released: taken again at once, over the old pid. */
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_OK);
    audit_lock_release(fd);
    audit_lock_release(-1);
    free(dir);
}

/* A second taker (a descriptor of its own: flock does not tell processes apart from
 * descriptors) is refused after its wait, naming the file and the holder's pid. */
static void test_held_refused_after_wait(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_held", path, sizeof(path));
    int fd, fd2 = 123;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_OK);
    double t0 = util_mono_now();
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.3, NULL, &fd2, &e), HSMCA_EPERM);
    assert_true(util_mono_now() - t0 >= 0.25);
    assert_int_equal(fd2, -1);
    char want[8300];
    snprintf(want, sizeof(want), "audit log lock: %s is held by pid %ld, another signer on this "
             "audit.dir (still held after 0.3 s); refusing to start", path, (long)getpid());
    assert_string_equal(e.msg, want);
    /* The holder's pid is still in the file. */
    char buf[32] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_int_equal(atol(buf), (long)getpid());
    audit_lock_release(fd);
    free(dir);
}

/* A long audit.dir and a holder that has not written its pid: the refusal still ends
 * with its verdict (the message buffer is hsmca_err's, 256 bytes; the path is cut). */
static void test_long_path_keeps_verdict(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_long_path_of_an_audit_directory_deep_in_a_volume_mounted_for_"
                         "the_signer_by_an_operator_xxxxxxxxxxxxxxxxxxxxxx",
                         path, sizeof(path));
    assert_true(strlen(path) > 120);
    int fd, fd2 = 123;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_OK);
    assert_int_equal(truncate(path, 0), 0); /* as if the holder had not written its pid */
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd2, &e), HSMCA_EPERM);
    assert_non_null(strstr(e.msg, "by a process that has not written its pid yet"));
    size_t n = strlen(e.msg), v = strlen("; refusing to start");
    assert_true(n > v);
    assert_string_equal(e.msg + n - v, "; refusing to start");
    audit_lock_release(fd);
    free(dir);
}

typedef struct {
    int fd;
    useconds_t after_us;
} releaser;

static void *release_later(void *arg)
{
    releaser *r = arg;
    usleep(r->after_us);
    audit_lock_release(r->fd);
    return NULL;
}

/* The waiter gets the lock once the holder lets go, well before its bound. */
static void test_waits_for_holder(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_wait", path, sizeof(path));
    int fd;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_OK);
    releaser r = {fd, 200 * 1000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_later, &r), 0);
    double t0 = util_mono_now();
    int fd2;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 30.0, NULL, &fd2, &e), HSMCA_OK);
    assert_true(util_mono_now() - t0 < 20.0);
    assert_int_equal(pthread_join(th, NULL), 0);
    audit_lock_release(fd2);
    free(dir);
}

/* A holder that dies (SIGKILL: no clean-up) leaves its pid in the file but not its lock. */
static void test_dead_holder(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_dead", path, sizeof(path));
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd;
        hsmca_err e;
        if (audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e) != HSMCA_OK)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    int fd;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_EPERM);
    char want[64];
    snprintf(want, sizeof(want), "is held by pid %ld,", (long)pid);
    assert_non_null(strstr(e.msg, want));
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 5.0, NULL, &fd, &e), HSMCA_OK);
    audit_lock_release(fd);
    close(ready[0]);
    close(ready[1]);
    free(dir);
}

/* A stop (the signer's SIGTERM flag) ends the wait at once, with its own message. */
static void test_stop_ends_wait(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_stop", path, sizeof(path));
    int fd, fd2;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_OK);
    volatile sig_atomic_t stop = 1;
    double t0 = util_mono_now();
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 30.0, &stop, &fd2, &e),
                     HSMCA_EPERM);
    assert_true(util_mono_now() - t0 < 10.0);
    assert_non_null(strstr(e.msg, "stopped while waiting for"));
    assert_non_null(strstr(e.msg, path));
    audit_lock_release(fd);
    free(dir);
}

/* What is not a directory is refused as an I/O error naming it (the signer retries). */
static void test_unusable_dir(void **state)
{
    (void)state;
    char path[4096];
    char *dir = lock_dir("lock_file", path, sizeof(path));
    FILE *f = fopen(dir, "w"); /* a file where the directory should be */
    assert_non_null(f);
    fclose(f);
    int fd;
    hsmca_err e;
    assert_int_equal(audit_lock_take(dir, (uid_t)-1, (gid_t)-1, 0.0, NULL, &fd, &e), HSMCA_EIO);
    assert_non_null(strstr(e.msg, "audit log lock: open "));
    assert_non_null(strstr(e.msg, path));
    assert_int_equal(fd, -1);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_new_dir),    cmocka_unit_test(test_held_refused_after_wait),
        cmocka_unit_test(test_long_path_keeps_verdict),
        cmocka_unit_test(test_waits_for_holder), cmocka_unit_test(test_dead_holder),
        cmocka_unit_test(test_stop_ends_wait),  cmocka_unit_test(test_unusable_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
