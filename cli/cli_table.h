/* cli_table.h - a command's subcommands as data: one row per keyword, from which both
 * the dispatch and the usage list are made, so --help cannot name a command that does
 * not run or miss one that does. */
#ifndef HSMCA_CLI_TABLE_H
#define HSMCA_CLI_TABLE_H

#include <stdio.h>

typedef struct {
    const char *name; /* what the user types; only its first word is matched */
    int (*run)(int argc, char **argv); /* called with argv[0] = the keyword */
    const char *args; /* the operands and flags shown after the name, or NULL */
    const char *help; /* the usage line; "\n" starts a continuation; NULL: not listed */
} cli_cmd;

/* The row whose name's first word is WORD in ROWS (ended by a NULL name), or NULL;
 * the first such row when several share the word. */
const cli_cmd *cli_cmd_find(const cli_cmd *rows, const char *word);

/* Prints each listed row to F as "  NAME ARGS  HELP": NAME ARGS padded to WIDTH
 * (two spaces after it when longer), each continuation line of HELP indented to
 * where HELP started. */
void cli_cmd_print(FILE *f, const cli_cmd *rows, int width);

/* 1 if ARG asks for help: "help", "--help" or "-h". */
int cli_is_help(const char *arg);

/* Runs the row argv[1] names with (argc - 1, argv + 1) and returns its status. With
 * no argv[1]: USAGE on stderr, 2. A help word: USAGE on stdout, 0. Any other word:
 * "PROG: unknown command 'WORD'" and USAGE on stderr, 2. */
int cli_dispatch(const char *prog, const cli_cmd *rows, void (*usage)(FILE *f), int argc,
                 char **argv);

#endif
