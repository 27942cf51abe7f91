/* main.c - the `hsmca` command line: one subcommand per task; `serve` execs the
 * supervisor, `hsmca-supervisor`, which execs the children, `hsmca-signer`,
 * `hsmca-frontend`, `hsmca-metrics`, `hsmca-publish` and `hsmca-keyfetch` (programs of
 * their own, supervisor/sup_procs.c). */
#include <getopt.h>
#include <stdio.h>

#include "admin_cmd.h"
#include "audit_cmd.h"
#include "ca_cmd.h"
#include "cli_table.h"
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

static int serve_main(int argc, char **argv);

static int version_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return version_main();
}

/* The commands: dispatch matches a row's first word, --help lists every row with a
 * help text; a command with subcommands has a row per subcommand a user runs. */
static const cli_cmd commands[] = {
    {"admin status", admin_main, NULL, "the running signer's state, over its admin socket"},
    {"audit", audit_main, NULL,
     "check the signing log offline: verify, prove, consistency, show, vkey"},
    {"ca init", ca_main, NULL,
     "make the CA key in the token, then a self-signed root or a CSR\n"
     "signed by it there"},
    {"ca import", ca_main, NULL,
     "check a CA certificate against the token key and its root, install it"},
    {"ca show", ca_main, NULL,
     "the CA certificate, its chain, expiry, and whether the token key matches"},
    {"ca revoke", ca_main, NULL,
     "revoke a certificate this CA issued (admin socket); the CRL is re-signed"},
    {"ca rotate", ca_main, NULL,
     "a new CA key: prepare, import-next, overlap, switch, cross-sign, finish"},
    {"config check", config_main, NULL,
     "what serve would refuse about a config (the YAML, ca.cert and its\n"
     "chain, the policy file, JWKS, PIN files, users, audit.dir), with\n"
     "no token, PIN or port; each problem by file, line and key"},
    {"dev", dev_main, NULL,
     "run a development CA on a SoftHSM2 token (creates it on first start)"},
    {"dev init", dev_main, NULL, "create the dev CA's token, keys and config without starting it"},
    {"dev token", dev_main, NULL, "print a JWT the dev CA accepts"},
    {"intermediate", intermediate_main, NULL,
     "istiod intermediate CAs: request, list, show, approve (M of N),\n"
     "deny, fetch (the cacerts directory), crl (istiod's own empty CRL)"},
    {"k8s publish-roots", k8s_main, NULL,
     "keep istio-ca-root-cert (and the ClusterTrustBundle,\n"
     "istio-ca-crl) in the cluster's namespaces; replicas share a Lease"},
    {"probe", probe_main, NULL,
     "is a running CA healthy (/healthz) or, with --ready, ready\n"
     "(/readyz)? exit 0 or 1: for exec probes and systemd; --grpc:\n"
     "the gRPC health check over TLS on the gRPC port"},
    {"request", request_main, NULL, "ask a running CA for a certificate (a test client)"},
    {"serve", serve_main, NULL, "run the CA from a YAML config: supervisor, signer, front end"},
    {"token check", token_main, NULL,
     "open the token as serve's signer would (same program, user,\n"
     "sandbox), list the keys' attributes, say whether serve would\n"
     "start and what to fix: run it first on a new HSM"},
    {"token keygen", token_main, NULL,
     "make the CA or audit key in the token (sensitive, never\n"
     "extractable, sign only); prints its fingerprint"},
    {"version", version_run, NULL, "the version, the commit and the libraries' versions"},
    {"--version", version_run, NULL, NULL},
    {NULL, NULL, NULL, NULL}};

static void usage(FILE *f)
{
    fputs("usage: hsmca COMMAND [flags]   (hsmca COMMAND --help for its flags)\n"
          "\n"
          "A certificate authority for Istio whose key never leaves the PKCS#11 token.\n"
          "\n"
          "Commands:\n",
          f);
    cli_cmd_print(f, commands, 11);
    fputs("\n"
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
    return cli_dispatch("hsmca", commands, usage, argc, argv);
}
