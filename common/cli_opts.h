/* cli_opts.h - a subcommand's arguments read with getopt_long, in the order given:
 * the long flags of its table, -h, and up to a fixed number of operands. Anything
 * else is refused as "CMD: unexpected argument 'ARG'" (the `hsmca audit ...`
 * commands' words for it). */
#ifndef HSMCA_CLI_OPTS_H
#define HSMCA_CLI_OPTS_H

#include <getopt.h>

typedef struct {
    const char *cmd;            /* "hsmca audit verify": the start of its messages */
    const struct option *flags; /* getopt_long's table, ending in {0, 0, 0, 0} */
    const char **operands;      /* where the operands go, in order (not owned) */
    int max_operands, n_operands;
    int at; /* the index in argv of the argument last read */
} cli_opts;

/* Starts reading a new argv (from argv[1]: argv[0] names the subcommand). The table
 * holds {"help", no_argument, 0, 'h'} for --help; -h is always read as 'h'. Up to
 * max_operands operands go to operands[0..), counted in o->n_operands. */
void cli_opts_init(cli_opts *o, const char *cmd, const struct option *flags, const char **operands,
                   int max_operands);

/* The next flag: its val (its value in optarg), or -1 after the last argument.
 * Operands are stored, not returned. A flag not in the table, a flag without its
 * value, an operand that begins with '-', "--", or an operand too many: says
 * "CMD: unexpected argument 'ARG'" on stderr and returns '?'. */
int cli_opts_next(cli_opts *o, int argc, char **argv);

#endif
