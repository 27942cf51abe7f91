/* main.c - `hsmca-supervisor`, the supervisor program: `hsmca serve` and `hsmca dev` exec it
 * (the same process: its pid is the service's main pid), and it starts, connects and
 * restarts the children (supervisor.h). It links the supervisor, token, policy and common
 * modules and the libcurl loader: no gRPC, no PKCS#11, no signing log. */
#include <getopt.h>
#include <stdio.h>

#include "log.h"
#include "supervisor.h"

static void usage(FILE *f)
{
    fputs("usage: hsmca-supervisor --config FILE --hsmca PATH\n"
          "\n"
          "The supervisor of `hsmca serve` and `hsmca dev`, which exec it: runs the CA\n"
          "described by FILE. PATH is the hsmca program (an absolute path): the\n"
          "children's programs (hsmca-signer, hsmca-publish, ...) are found beside it\n"
          "or in ../libexec/hsmca/. Not meant to be run by hand.\n",
          f);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"hsmca", required_argument, 0, 'x'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *config = NULL, *cli = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:x:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'x': cli = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !config || !cli || cli[0] != '/') {
        usage(stderr);
        return 2;
    }
    log_init("supervisor");
    return supervisor_run(config, cli);
}
