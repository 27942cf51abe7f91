/* ca_cmd.c - `hsmca ca`: the subcommands' dispatch and help (ca_cmd.h). */
#include "ca_cmd.h"

#include <stdio.h>
#include <string.h>

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

const char ca_init_help[] =
    "usage: hsmca ca init --config FILE --subject NAME\n"
    "                     (--self-signed [--ttl 10y] | --csr OUT.csr)\n"
    "                     [--type ec-p256|ec-p384|rsa-2048|rsa-3072|rsa-4096]\n"
    "                     [--existing-key] [--force]\n"
    "\n"
    "Makes the CA key pkcs11.ca_key names in its token, with hsmca's template (as\n"
    "`hsmca token keygen --key ca`: CKA_SENSITIVE, CKA_EXTRACTABLE false, CKA_SIGN\n"
    "and no other use), and opens it as serve does (a key failing serve's checks is\n"
    "refused). A key already there is refused unless --existing-key, which takes it\n"
    "after the same checks. Then, signed in the token by hsmca's own PKCS#11 code:\n"
    "\n"
    "  --self-signed  a root CA certificate (CA:TRUE and keyUsage keyCertSign,\n"
    "                 cRLSign, digitalSignature, both critical; SKI/AKI; a random\n"
    "                 128-bit serial) written to ca.cert, and to ca.root_bundle when\n"
    "                 that is set elsewhere and absent\n"
    "  --ttl          its validity: years (10y, the default) or days (3650d, 3650)\n"
    "  --csr OUT.csr  a PKCS#10 CSR for a root CA to sign (then `hsmca ca import`)\n"
    "  --subject      the name, as \"/O=Example/CN=Example Mesh CA\"\n"
    "  --type         the new key's type (default ec-p256); with --existing-key, the\n"
    "                 type the key must have\n"
    "  --force        replace ca.cert (or OUT.csr) when it exists; else refused\n"
    "                 before any key is made\n"
    "\n"
    "Prints the public key's SHA-256 (of its DER SubjectPublicKeyInfo), and the\n"
    "certificate's. Exit status: 0 done, 1 refused or failed, 2 bad usage, 78 the\n"
    "config does not load or names no CA key.";

const char ca_import_help[] =
    "usage: hsmca ca import --config FILE --cert CA.pem [--chain CHAIN.pem]\n"
    "                       [--root ROOT.pem] [--force]\n"
    "\n"
    "Checks CA.pem (one certificate) and installs it, nothing unless every check\n"
    "passed: its public key is the token's CA key (opened as serve opens it; a\n"
    "mismatch names both SHA-256 fingerprints); basicConstraints CA:TRUE, keyUsage\n"
    "keyCertSign, and serve's own rule for ca.cert (a CA, a subjectKeyIdentifier,\n"
    "not expired); it chains to ROOT.pem (its certificates the only trust anchors)\n"
    "through CHAIN.pem (untrusted intermediates), verified now. --root may be left\n"
    "out for a self-signed CA.pem.\n"
    "\n"
    "Installs CA.pem to ca.cert, CHAIN.pem to ca.chain, ROOT.pem to ca.root_bundle\n"
    "(each written to a temporary file, synced and renamed); a file already holding\n"
    "other content is replaced only with --force. ca.chain and ca.root_bundle must\n"
    "be set in the config for --chain and --root. Exit status: 0 installed, 1\n"
    "refused, 2 bad usage, 78 the config does not load.";

const char ca_show_help[] =
    "usage: hsmca ca show --config FILE [--json]\n"
    "\n"
    "Prints the CA certificate (ca.cert: subject, issuer, serial, validity and days\n"
    "left, key type, SHA-256 of the certificate and of its public key), its chain\n"
    "through ca.chain to a root in ca.root_bundle (verified now), the roots in the\n"
    "bundle, the key URI, and whether the token's key (opened as serve opens it,\n"
    "with the PIN from pkcs11.pin_file) is the certificate's. --json prints the same\n"
    "as one JSON object. While a rotation is under way (ca.next_* or ca.previous_*\n"
    "set), a rotation section: its state and next step, the next key in the token,\n"
    "the next and previous certificates (docs/ROTATION.md). Exit status: 0 the token\n"
    "key matches and the chain verifies, 1 not, 2 bad usage, 78 the config does not load.";

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
