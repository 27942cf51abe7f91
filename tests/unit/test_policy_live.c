/* test_policy_live.c - the policy in force and its replacement (policy/policy_live.h): a
 * version held by a user outlives its replacement and is freed with its last user (ASan
 * sees a use after free or a leak otherwise); the replaced version is offered only
 * during its grace; policy_file_load_fd reads a memfd as policy_file_load reads a path,
 * with the same errors naming the line and the same SHA-256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "policy_file.h"
#include "policy_live.h"

static const char A[] = "trust_domain_aliases: [a.example]\n";
static const char B[] = "trust_domain_aliases: [b.example]\n";
static const char BAD[] = "trust_domain_aliases: [b.example]\nno_such_rule: true\n";

static policy_set *parse(const char *text)
{
    policy_set *p = NULL;
    hsmca_err e;
    assert_int_equal(policy_file_load_buf("test.yaml", text, strlen(text), &p, &e), HSMCA_OK);
    return p;
}

static const char *alias_of(const policy_version *v)
{
    return policy_set_alias(policy_version_set(v), 0);
}

static void test_held_version_outlives_its_replacement(void **state)
{
    (void)state;
    policy_live *l = policy_live_new(parse(A));
    assert_non_null(l);
    policy_version *held = policy_live_acquire(l);
    assert_string_equal(alias_of(held), "a.example");
    hsmca_err e;
    assert_int_equal(policy_live_replace(l, parse(B), 0, &e), HSMCA_OK);
    /* The next user sees B; the one holding A still reads A. */
    policy_version *now = policy_live_acquire(l);
    assert_string_equal(alias_of(now), "b.example");
    assert_string_equal(alias_of(held), "a.example");
    /* A replaced twice while held: freed only when given back. */
    assert_int_equal(policy_live_replace(l, parse(A), 0, &e), HSMCA_OK);
    assert_string_equal(alias_of(held), "a.example");
    policy_live_release(held);
    policy_live_release(now);
    policy_live_free(l);
}

static void test_replaced_version_only_during_grace(void **state)
{
    (void)state;
    policy_live *l = policy_live_new(NULL);
    assert_non_null(l);
    assert_null(policy_live_acquire_prev(l, 1.0)); /* nothing replaced yet */
    policy_version *v = policy_live_acquire(l);
    assert_null(policy_version_set(v)); /* "no policy file" is a version too */
    policy_live_release(v);
    hsmca_err e;
    assert_int_equal(policy_live_replace(l, parse(A), 100.0, &e), HSMCA_OK);
    policy_version *prev = policy_live_acquire_prev(l, 99.0);
    assert_non_null(prev);
    assert_null(policy_version_set(prev));
    policy_live_release(prev);
    assert_null(policy_live_acquire_prev(l, 100.0));
    /* A second replacement: the grace is the new one's, over the version it replaced. */
    assert_int_equal(policy_live_replace(l, parse(B), 200.0, &e), HSMCA_OK);
    prev = policy_live_acquire_prev(l, 150.0);
    assert_string_equal(alias_of(prev), "a.example");
    policy_live_release(prev);
    policy_live_release(NULL);
    policy_live_free(l);
    policy_live_free(NULL);
}

static int memfd_of(const char *text)
{
    int fd = memfd_create("test-policy", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    return fd; /* read at offset 0 whatever the file position */
}

static void test_load_fd_as_from_a_path(void **state)
{
    (void)state;
    char path[] = "/tmp/hsmca-policy-live.XXXXXX";
    int pfd = mkstemp(path);
    assert_true(pfd >= 0);
    assert_int_equal(write(pfd, B, strlen(B)), (ssize_t)strlen(B));
    close(pfd);
    policy_set *from_path = NULL, *from_fd = NULL;
    hsmca_err e;
    assert_int_equal(policy_file_load(path, &from_path, &e), HSMCA_OK);
    unlink(path);
    int fd = memfd_of(B);
    assert_int_equal(policy_file_load_fd("policy.yaml", fd, &from_fd, &e), HSMCA_OK);
    close(fd);
    assert_memory_equal(policy_set_sha256(from_path), policy_set_sha256(from_fd), 32);
    assert_string_equal(policy_set_alias(from_fd, 0), "b.example");
    policy_set_free(from_path);
    policy_set_free(from_fd);

    fd = memfd_of(BAD);
    policy_set *bad = (policy_set *)1;
    assert_int_equal(policy_file_load_fd("policy.yaml", fd, &bad, &e), HSMCA_EINVAL);
    close(fd);
    assert_null(bad);
    assert_non_null(strstr(e.msg, "policy.yaml:2:"));
    assert_non_null(strstr(e.msg, "no_such_rule"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_version_outlives_its_replacement),
        cmocka_unit_test(test_replaced_version_only_during_grace),
        cmocka_unit_test(test_load_fd_as_from_a_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
