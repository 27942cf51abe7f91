/* cli_opts.c - see cli_opts.h. */
#include "cli_opts.h"

#include <stdio.h>

/* "-": operands are returned in place (1), in the order given, so an operand too
 * many is refused where it stands, as a flag out of place is. */
#define CLI_OPTSTRING "-h"

void cli_opts_init(cli_opts *o, const char *cmd, const struct option *flags, const char **operands,
                   int max_operands)
{
    *o = (cli_opts){cmd, flags, operands, max_operands, 0, 1};
    optind = 0; /* glibc: a full reset, for a new argv and the optstring's ordering */
    opterr = 0; /* refusals are ours to word */
}

int cli_opts_next(cli_opts *o, int argc, char **argv)
{
    for (;;) {
        o->at = optind ? optind : 1;
        int c = getopt_long(argc, argv, CLI_OPTSTRING, o->flags, NULL);
        if (c == -1 && optind == o->at)
            return -1;
        if (c == 1 && optarg[0] != '-' && o->n_operands < o->max_operands) {
            o->operands[o->n_operands++] = optarg;
            continue;
        }
        if (c != -1 && c != 1 && c != '?')
            return c;
        /* getopt refused it, or it is an operand out of place, or "--" (getopt
         * stops there and steps over it) */
        fprintf(stderr, "%s: unexpected argument '%s'\n", o->cmd, argv[o->at]);
        return '?';
    }
}
