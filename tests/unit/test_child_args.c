/* test_child_args.c - the child processes' command line (common/child_args.h),
 * shared by `hsmca-signer` and `hsmca-frontend`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "child_args.h"

static FILE *g_usage_to;
static int g_usage_calls;

static void usage(FILE *f)
{
    g_usage_to = f;
    g_usage_calls++;
}

/* Parses a NULL-terminated list of words after the role "signer". */
static int parse(child_args *out, ...)
{
    char *argv[16] = {"signer"};
    int argc = 1;
    va_list ap;
    va_start(ap, out);
    for (char *w; argc < 15 && (w = va_arg(ap, char *)) != NULL;)
        argv[argc++] = w;
    va_end(ap);
    argv[argc] = NULL;
    g_usage_to = NULL;
    g_usage_calls = 0;
    return child_args_parse(argc, argv, usage, out);
}

static void expect_refused(int rc)
{
    assert_int_equal(rc, 2);
    assert_int_equal(g_usage_calls, 1);
    assert_ptr_equal(g_usage_to, stderr);
}

static void test_accepts_what_the_supervisor_passes(void **state)
{
    child_args a;
    assert_int_equal(parse(&a, "--config", "/etc/hsmca.yaml", "--ipc-fd", "3", "--ctl-fd", "4",
                           NULL),
                     -1);
    assert_string_equal(a.config, "/etc/hsmca.yaml");
    assert_int_equal(a.ipc_fd, 3);
    assert_int_equal(a.ctl_fd, 4);
    assert_int_equal(g_usage_calls, 0);
    /* any order, the --opt=value form, large descriptors */
    assert_int_equal(parse(&a, "--ctl-fd=2147483647", "--ipc-fd=10", "--config=c", NULL), -1);
    assert_int_equal(a.ipc_fd, 10);
    assert_int_equal(a.ctl_fd, 2147483647);
    /* the parser can run again in the same process */
    assert_int_equal(parse(&a, "-c", "x", "-i", "5", "-k", "6", NULL), -1);
    assert_int_equal(a.ipc_fd, 5);
}

static void test_help(void **state)
{
    child_args a;
    assert_int_equal(parse(&a, "--help", NULL), 0);
    assert_ptr_equal(g_usage_to, stdout);
    assert_int_equal(parse(&a, "--config", "c", "-h", NULL), 0);
}

static void test_missing_or_extra(void **state)
{
    child_args a;
    expect_refused(parse(&a, NULL));
    expect_refused(parse(&a, "--ipc-fd", "3", "--ctl-fd", "4", NULL));
    expect_refused(parse(&a, "--config", "c", "--ctl-fd", "4", NULL));
    expect_refused(parse(&a, "--config", "c", "--ipc-fd", "3", NULL));
    expect_refused(parse(&a, "--config", "", "--ipc-fd", "3", "--ctl-fd", "4", NULL));
    expect_refused(parse(&a, "--config", "c", "--ipc-fd", "3", "--ctl-fd", "4", "extra", NULL));
    expect_refused(parse(&a, "--config", "c", "--ipc-fd", "3", "--ctl-fd", "4", "--pin", "1",
                         NULL));
    expect_refused(parse(&a, "--config", "c", "--ipc-fd", "3", "--ctl-fd", "3", NULL));
}

static void test_fd_numbers_are_strict(void **state)
{
    /* The old copies read these with atoi: "abc" became fd 0 (stdin), "3x" fd 3,
     * and the overflowing ones were undefined. */
    static const char *const bad[] = {"abc", "3x", "x3", "", " 3", "3 ", "+3", "-1", "-0",
                                      "0",   "1",  "2",  "0x3", "3.0", "2147483648",
                                      "99999999999999999999"};
    child_args a;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = parse(&a, "--config", "c", "--ipc-fd", bad[i], "--ctl-fd", "4", NULL);
        if (rc != 2)
            fail_msg("--ipc-fd '%s' accepted (%d)", bad[i], rc);
        expect_refused(rc);
        expect_refused(parse(&a, "--config", "c", "--ipc-fd", "3", "--ctl-fd", bad[i], NULL));
    }
    assert_int_equal(parse(&a, "--config", "c", "--ipc-fd", "007", "--ctl-fd", "4", NULL), -1);
    assert_int_equal(a.ipc_fd, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_what_the_supervisor_passes),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_missing_or_extra),
        cmocka_unit_test(test_fd_numbers_are_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
