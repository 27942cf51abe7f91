/* ca_cmd.c - `hsmca ca`: the subcommands' dispatch and usage (ca_cmd.h); each
 * subcommand's --help text is its own file's. */
#include "ca_cmd.h"

#include <stdio.h>
#include <string.h>

#include "ca.h"

static void usage(FILE *f)
{
    fputs("usage: hsmca ca COMMAND --config FILE [flags]   (hsmca ca COMMAND --help)\n"
          "\n"
          "The CA key in the token pkcs11.ca_key names, and its certificate (ca.cert,\n"
          "ca.chain, ca.root_bundle): a ceremony step-by-step in docs/CEREMONY.md.\n"
          "\n"
          "  init    make the CA key in the token (sensitive, never extractable, sign\n"
          "          only), then a self-signed root (--self-signed) or a CSR (--csr)\n"
          "          signed by it in the token\n"
          "  import  check a CA certificate from a root CA (the token's key, a CA, its\n"
          "          chain to the root) and install it where the config points\n"
          "  show    the CA certificate, its chain, the key URI and whether the token's\n"
          "          key matches (--json for scripts)\n"
          "  revoke  revoke a certificate (an intermediate or a workload's) through the\n"
          "          signer's admin socket: an audit-log entry, then a new CRL signed in\n"
          "          the token and written to crl.path\n"
          "  rotate  replace the CA key and root: prepare, import-next, overlap, switch,\n"
          "          cross-sign, finish\n"
          "          (docs/ROTATION.md)\n"
          "\n"
          "init, import and show read the PIN from pkcs11.pin_file only. init, import and\n"
          "rotate are ca-key entries of the signing log (audit.dir), which they take while\n"
          "hsmca serve is stopped; revoke goes through the running signer.\n",
          f);
}

int ca_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "init"))
        return ca_init(argc - 1, argv + 1);
    if (!strcmp(cmd, "import"))
        return ca_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "show"))
        return ca_show(argc - 1, argv + 1);
    if (!strcmp(cmd, "revoke"))
        return ca_revoke(argc - 1, argv + 1);
    if (!strcmp(cmd, "rotate"))
        return ca_rotate(argc - 1, argv + 1);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hsmca ca: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
