/* test_cli_table.c - the command tables (cli/cli_table.h): a row is found by its first
 * word, the usage list is printed from the same rows, and the dispatch's exit statuses
 * (2 for a missing or unknown command, 0 for help) are those of every hsmca command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_table.h"

static int ran_argc;
static const char *ran_argv0;

static int run_a(int argc, char **argv)
{
    ran_argc = argc;
    ran_argv0 = argv[0];
    return 7;
}

static int run_b(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return 9;
}

static const cli_cmd rows[] = {
    {"ca init", run_a, NULL, "make the key\nthen the root"},
    {"ca show", run_b, NULL, "the certificate"},
    {"audit", run_b, "DIR [--json]", "check the log"},
    {"dev tokens", run_b, NULL, "one short of the width"},
    {"--version", run_b, NULL, NULL},
    {NULL, NULL, NULL, NULL}};

static FILE *usage_to;

static void usage(FILE *f)
{
    usage_to = f;
}

static void test_find_first_word(void **state)
{
    (void)state;
    assert_ptr_equal(cli_cmd_find(rows, "ca"), &rows[0]);
    assert_ptr_equal(cli_cmd_find(rows, "audit"), &rows[2]);
    assert_ptr_equal(cli_cmd_find(rows, "--version"), &rows[4]);
    assert_null(cli_cmd_find(rows, "c"));
    assert_null(cli_cmd_find(rows, "ca init"));
    assert_null(cli_cmd_find(rows, "cas"));
    assert_null(cli_cmd_find(rows, ""));
}

/* A name one short of the column, or longer, still has two spaces before its help. */
static void test_print_rows(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_cmd_print(f, rows, 11);
    fclose(f);
    assert_string_equal(buf, "  ca init    make the key\n"
                             "             then the root\n"
                             "  ca show    the certificate\n"
                             "  audit DIR [--json]  check the log\n"
                             "  dev tokens  one short of the width\n");
    free(buf);
}

static void test_dispatch(void **state)
{
    (void)state;
    char *none[] = {"hsmca", NULL};
    char *ca[] = {"hsmca", "ca", "init", "--csr", NULL};
    char *help[] = {"hsmca", "help", NULL};
    char *dashh[] = {"hsmca", "-h", NULL};
    char *bogus[] = {"hsmca", "bogus", NULL};

    usage_to = NULL;
    assert_int_equal(cli_dispatch("hsmca", rows, usage, 1, none), 2);
    assert_ptr_equal(usage_to, stderr);
    assert_int_equal(cli_dispatch("hsmca", rows, usage, 4, ca), 7);
    assert_int_equal(ran_argc, 3);
    assert_string_equal(ran_argv0, "ca");
    usage_to = NULL;
    assert_int_equal(cli_dispatch("hsmca", rows, usage, 2, help), 0);
    assert_ptr_equal(usage_to, stdout);
    usage_to = NULL;
    assert_int_equal(cli_dispatch("hsmca", rows, usage, 2, dashh), 0);
    assert_ptr_equal(usage_to, stdout);
    usage_to = NULL;
    assert_int_equal(cli_dispatch("hsmca", rows, usage, 2, bogus), 2);
    assert_ptr_equal(usage_to, stderr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_first_word),
        cmocka_unit_test(test_print_rows),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
