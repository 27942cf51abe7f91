/* main.c - the `hsmca` command line: one subcommand per task; `serve` execs the
 * supervisor, `hsmca-supervisor`, which execs the children, `hsmca-signer`,
 * `hsmca-frontend`, `hsmca-metrics`, `hsmca-publish` and `hsmca-keyfetch` (programs of
 * their own, supervisor/sup_procs.c). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "admin_cmd.h"
#include "audit_cmd.h"
#include "ca_cmd.h"
#include "config_cmd.h"
#include "dev.h"
#include "intermediate_cmd.h"
#include "k8s_cmd.h"
#include "log.h"
#include "probe.h"
#include "request.h"
#include "serve.h"
#include "token_check.h"
#include "version.h"

static void usage(FILE *f)
{
    fputs("usage: hsmca COMMAND [flags]   (hsmca COMMAND --help for its flags)\n"
          "\n"
          "A certificate authority for Istio whose key never leaves the PKCS#11 token.\n"
          "\n"
          "Commands:\n"
          "  admin status  the running signer's state, over its admin socket\n"
          "  audit      check the signing log offline: verify, prove, consistency, show, vkey\n"
          "  ca init    make the CA key in the token, then a self-signed root or a CSR\n"
          "             signed by it there\n"
          "  ca import  check a CA certificate against the token key and its root, install it\n"
          "  ca show    the CA certificate, its chain, expiry, and whether the token key matches\n"
          "  ca revoke  revoke a certificate this CA issued (admin socket); the CRL is re-signed\n"
          "  ca rotate  a new CA key: prepare, import-next, overlap, switch, cross-sign, finish\n"
          "  config check  what serve would refuse about a config (the YAML, ca.cert and its\n"
          "                chain, the policy file, JWKS, PIN files, users, audit.dir), with\n"
          "                no token, PIN or port; each problem by file, line and key\n"
          "  dev        run a development CA on a SoftHSM2 token (creates it on first start)\n"
          "  dev init   create the dev CA's token, keys and config without starting it\n"
          "  dev token  print a JWT the dev CA accepts\n"
          "  intermediate  istiod intermediate CAs: request, list, show, approve (M of N),\n"
          "                deny, fetch (the cacerts directory), crl (istiod's own empty CRL)\n"
          "  k8s publish-roots  keep istio-ca-root-cert (and the ClusterTrustBundle,\n"
          "             istio-ca-crl) in the cluster's namespaces; replicas share a Lease\n"
          "  probe      is a running CA healthy (/healthz) or, with --ready, ready\n"
          "             (/readyz)? exit 0 or 1: for exec probes and systemd; --grpc:\n"
          "             the gRPC health check over TLS on the gRPC port\n"
          "  request    ask a running CA for a certificate (a test client)\n"
          "  serve      run the CA from a YAML config: supervisor, signer, front end\n"
          "  token check   open the token as serve's signer would (same program, user,\n"
          "                sandbox), list the keys' attributes, say whether serve would\n"
          "                start and what to fix: run it first on a new HSM\n"
          "  token keygen  make the CA or audit key in the token (sensitive, never\n"
          "                extractable, sign only); prints its fingerprint\n"
          "  version    the version, the commit and the libraries' versions\n"
          "\n"
          "serve and dev run the programs installed beside hsmca (or in\n"
          "../libexec/hsmca/): hsmca-supervisor, which they become, starts\n"
          "hsmca-signer, the privileged process that holds the token session,\n"
          "hsmca-frontend, the sandboxed gRPC front end, hsmca-metrics, the\n"
          "sandboxed metrics and health listener (metrics.listen), hsmca-publish,\n"
          "the root distribution (publish.enabled), and hsmca-keyfetch, the issuer's\n"
          "key fetcher (auth.jwt.discovery).\n",
          f);
}

static void serve_usage(FILE *f)
{
    fputs("usage: hsmca serve --config FILE\n"
          "\n"
          "Runs the CA described by FILE (YAML; see hsm-config/softhsm-dev.yaml):\n"
          "a supervisor that starts the signer (PKCS#11 session, PIN, TBS checks)\n"
          "and the sandboxed front end (gRPC over TLS), connects them, and restarts\n"
          "either if it dies. Stops on SIGTERM or SIGINT. SIGHUP reloads the policy\n"
          "file and the issuer keys with no restart (docs/OPERATIONS.md, Reload); a\n"
          "signer whose token refused the PIN restarts once when the PIN file changes.\n",
          f);
}

static int serve_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *config = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'h': serve_usage(stdout); return 0;
        default:
            fprintf(stderr, "hsmca serve: unexpected argument '%s'\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hsmca serve: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!config) {
        fputs("hsmca serve: --config FILE is required\n", stderr);
        return 2;
    }
    log_init("supervisor");
    return serve_exec(config);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "admin"))
        return admin_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "intermediate"))
        return intermediate_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "audit"))
        return audit_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "ca"))
        return ca_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "dev"))
        return dev_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "token"))
        return token_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve"))
        return serve_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "probe"))
        return probe_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "request"))
        return request_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "config"))
        return config_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "k8s"))
        return k8s_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version"))
        return version_main();
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hsmca: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
