/* ca_cmd.h - `hsmca ca init|import|show`: the CA key and its certificate, a ceremony
 * run by an operator in this process with the config's PKCS#11 module (docs/CEREMONY.md). */
#ifndef HSMCA_CA_CMD_H
#define HSMCA_CA_CMD_H

/* argv[0] is "ca". Exit status: 0 done, 1 refused or failed (show: the token key does
 * not match, or the chain does not verify), 2 bad usage, 78 (EXIT_CONFIG) a config that
 * does not load or names no CA key. */
int ca_main(int argc, char **argv);

/* The subcommands (argv[0] their name) and their --help texts. */
int ca_init(int argc, char **argv);
int ca_import(int argc, char **argv);
int ca_show(int argc, char **argv);
int ca_revoke(int argc, char **argv); /* ca_revoke.c: through the admin socket */
int ca_rotate(int argc, char **argv); /* ca_rotate.c: docs/ROTATION.md */
extern const char ca_init_help[], ca_import_help[], ca_show_help[], ca_revoke_help[];

#endif
