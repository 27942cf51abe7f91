/* k8s_cmd.c - see k8s_cmd.h. The program is found as serve finds its children
 * (sup_exec.h): beside this one or in ../libexec/hsmca/, never through PATH. */
#include "k8s_cmd.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int k8s_main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "publish-roots"))
        return run_program("hsmca k8s publish-roots", "publish", argv + 1);
    FILE *f = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr;
    fputs("usage: hsmca k8s publish-roots --config FILE [flags]   (--help for its flags)\n"
          "\n"
          "  publish-roots  keep istio-ca-root-cert (and the ClusterTrustBundle, istio-ca-crl)\n"
          "                 in the cluster's namespaces, under a Lease\n",
          f);
    return f == stdout ? 0 : 2;
}
