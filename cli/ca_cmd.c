/* ca_cmd.c - `hsmca ca`: the subcommands' dispatch and usage (ca_cmd.h); each
 * subcommand's --help text is its own file's. */
#include "ca_cmd.h"

#include <stdio.h>

#include "ca.h"
#include "cli_table.h"

static void usage(FILE *f);

static const cli_cmd commands[] = {
    {"init", ca_init, NULL,
     "make the CA key in the token (sensitive, never extractable, sign\n"
     "only), then a self-signed root (--self-signed) or a CSR (--csr)\n"
     "signed by it in the token"},
    {"import", ca_import, NULL,
     "check a CA certificate from a root CA (the token's key, a CA, its\n"
     "chain to the root) and install it where the config points"},
    {"show", ca_show, NULL,
     "the CA certificate, its chain, the key URI and whether the token's\n"
     "key matches (--json for scripts)"},
    {"revoke", ca_revoke, NULL,
     "revoke a certificate (an intermediate or a workload's) through the\n"
     "signer's admin socket: an audit-log entry, then a new CRL signed in\n"
     "the token and written to crl.path"},
    {"rotate", ca_rotate, NULL,
     "replace the CA key and root: prepare, import-next, overlap, switch,\n"
     "cross-sign, finish\n"
     "(docs/ROTATION.md)"},
    {NULL, NULL, NULL, NULL}};

static void usage(FILE *f)
{
    fputs("usage: hsmca ca COMMAND --config FILE [flags]   (hsmca ca COMMAND --help)\n"
          "\n"
          "The CA key in the token pkcs11.ca_key names, and its certificate (ca.cert,\n"
          "ca.chain, ca.root_bundle): a ceremony step-by-step in docs/CEREMONY.md.\n"
          "\n",
          f);
    cli_cmd_print(f, commands, 8);
    fputs("\n"
          "init, import and show read the PIN from pkcs11.pin_file only. init, import and\n"
          "rotate are ca-key entries of the signing log (audit.dir), which they take while\n"
          "hsmca serve is stopped; revoke goes through the running signer.\n",
          f);
}

int ca_main(int argc, char **argv)
{
    return cli_dispatch("hsmca ca", commands, usage, argc, argv);
}
