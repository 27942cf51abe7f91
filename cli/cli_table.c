/* cli_table.c - find a subcommand's row, print the rows, dispatch (cli_table.h). */
#include "cli_table.h"

#include <string.h>

const cli_cmd *cli_cmd_find(const cli_cmd *rows, const char *word)
{
    size_t n = strlen(word);
    for (const cli_cmd *r = rows; r->name; r++) {
        size_t len = strcspn(r->name, " ");
        if (len == n && !strncmp(r->name, word, n))
            return r;
    }
    return NULL;
}

void cli_cmd_print(FILE *f, const cli_cmd *rows, int width)
{
    for (const cli_cmd *r = rows; r->name; r++) {
        if (!r->help)
            continue;
        int col = fprintf(f, "  %s%s%s", r->name, r->args ? " " : "", r->args ? r->args : "");
        int at = col + 2 > width + 2 ? col + 2 : width + 2;
        fprintf(f, "%*s", at - col, "");
        for (const char *p = r->help; *p;) {
            size_t len = strcspn(p, "\n");
            fprintf(f, "%.*s\n", (int)len, p);
            p += len;
            if (*p == '\n' && *++p)
                fprintf(f, "%*s", at, "");
        }
    }
}

int cli_is_help(const char *arg)
{
    return !strcmp(arg, "help") || !strcmp(arg, "--help") || !strcmp(arg, "-h");
}

int cli_dispatch(const char *prog, const cli_cmd *rows, void (*usage)(FILE *f), int argc,
                 char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const cli_cmd *r = cli_cmd_find(rows, argv[1]);
    if (r)
        return r->run(argc - 1, argv + 1);
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
    usage(stderr);
    return 2;
}
