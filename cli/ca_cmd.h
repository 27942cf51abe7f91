/* ca_cmd.h - `hsmca ca init|import|show|revoke|rotate`: the dispatch, and revoke, which
 * asks the running signer through its admin socket. The other subcommands are the CA
 * ceremony (ca/ca.h), run in this process with the config's PKCS#11 module
 * (docs/CEREMONY.md). */
#ifndef HSMCA_CA_CMD_H
#define HSMCA_CA_CMD_H

/* argv[0] is "ca". Exit status: 0 done, 1 refused or failed (show: the token key does
 * not match, or the chain does not verify), 2 bad usage, 78 (EXIT_CONFIG) a config that
 * does not load or names no CA key. */
int ca_main(int argc, char **argv);

/* `hsmca ca revoke` (ca_revoke.c: through the admin socket) and its --help text. */
int ca_revoke(int argc, char **argv);
extern const char ca_revoke_help[];

#endif
