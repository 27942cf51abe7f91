/* main.c - the `hsmca` command: one binary, one subcommand per role. */
#include <stdio.h>
#include <string.h>

#include "audit_cmd.h"
#include "dev.h"
#include "frontend.h"
#include "log.h"
#include "request.h"
#include "signer.h"
#include "supervisor.h"

static void usage(FILE *f)
{
    fputs("usage: hsmca COMMAND [flags]   (hsmca COMMAND --help for its flags)\n"
          "\n"
          "A certificate authority for Istio whose key never leaves the PKCS#11 token.\n"
          "\n"
          "Commands:\n"
          "  audit      check the signing log offline: verify, prove, consistency, show, vkey\n"
          "  dev        run a development CA on a SoftHSM2 token (creates it on first start)\n"
          "  dev token  print a JWT the dev CA accepts\n"
          "  serve      run the CA from a YAML config: supervisor, signer, front end\n"
          "  version    print the version\n"
          "\n"
          "Internal (started by serve/dev, not by hand):\n"
          "  signer     the privileged process that holds the token session\n"
          "  frontend   the sandboxed gRPC front end\n",
          f);
}

static int serve_main(int argc, char **argv)
{
    const char *config = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: hsmca serve --config FILE\n"
                 "\n"
                 "Runs the CA described by FILE (YAML; see hsm-config/softhsm-dev.yaml):\n"
                 "a supervisor that starts the signer (PKCS#11 session, PIN, TBS checks)\n"
                 "and the sandboxed front end (gRPC over TLS), connects them, and restarts\n"
                 "either if it dies. Stops on SIGTERM or SIGINT. SIGHUP restarts the\n"
                 "signer, which reads the PIN file again: the way to retry a login after\n"
                 "the token refused the PIN (it is never retried on its own).");
            return 0;
        }
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
        else {
            fprintf(stderr, "hsmca serve: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!config) {
        fputs("hsmca serve: --config FILE is required\n", stderr);
        return 2;
    }
    log_init("supervisor");
    return supervisor_run(config);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "audit"))
        return audit_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "dev"))
        return dev_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return serve_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "request"))
        return request_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "signer"))
        return signer_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "frontend"))
        return frontend_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("hsmca %s\n", HSMCA_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hsmca: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
