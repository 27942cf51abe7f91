/* k8s_cmd.c - see k8s_cmd.h. The program is found as serve finds its children
 * (sup_exec.h): beside this one or in ../libexec/hsmca/, never through PATH. */
#include "k8s_cmd.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_table.h"
#include "log.h"
#include "sup_exec.h"

/* Execs hsmca-ROLE with argv[1..) after it (argv[0], the subcommand's name, replaced by
 * the program's path). Returns only on failure: EXIT_CONFIG after saying why. */
static int run_program(const char *cmd, const char *role, char **argv)
{
    char self[PATH_MAX], prog[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: cannot find our own executable: %s\n", cmd, strerror(errno));
        return EXIT_CONFIG;
    }
    self[n] = '\0';
    hsmca_err e;
    if (sup_exec_find(self, role, prog, sizeof(prog), &e) != HSMCA_OK) {
        fprintf(stderr, "%s: %s\n", cmd, e.msg);
        return EXIT_CONFIG;
    }
    argv[0] = prog;
    execv(prog, argv);
    fprintf(stderr, "%s: cannot run %s: %s\n", cmd, prog, strerror(errno));
    return EXIT_CONFIG;
}

static int publish_roots(int argc, char **argv)
{
    (void)argc;
    return run_program("hsmca k8s publish-roots", "publish", argv);
}

static const cli_cmd subcommands[] = {
    {"publish-roots", publish_roots, NULL,
     "keep istio-ca-root-cert (and the ClusterTrustBundle, istio-ca-crl)\n"
     "in the cluster's namespaces, under a Lease"},
    {NULL, NULL, NULL, NULL}};

int k8s_main(int argc, char **argv)
{
    const cli_cmd *sub = argc >= 2 ? cli_cmd_find(subcommands, argv[1]) : NULL;
    if (sub)
        return sub->run(argc - 1, argv + 1);
    /* Only the flags ask for help: `hsmca k8s help` is a usage error. */
    FILE *f = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr;
    fputs("usage: hsmca k8s publish-roots --config FILE [flags]   (--help for its flags)\n"
          "\n",
          f);
    cli_cmd_print(f, subcommands, 13);
    return f == stdout ? 0 : 2;
}
