/* ca.h - the CA ceremony, a library of the `hsmca` program. With the signer (signer/),
 * this is the only code that opens the CA key's token or writes the signing log: an
 * operator's steps, run in the operator's process with the config's PKCS#11 module.
 * init, import, rotate and token keygen are ca-key entries of the log (ca_audit.h),
 * written while serve is stopped; show only reads. What asks the running signer instead
 * (`hsmca ca revoke`, `hsmca intermediate`, `hsmca token check`) is a client in cli/;
 * `hsmca dev` makes a throwaway token of its own (cli/dev_ca.c). docs/CEREMONY.md is
 * the procedure, docs/ROTATION.md the key rotation.
 *
 * Each command takes its argv (argv[0] its name). Exit status: 0 done, 1 refused or
 * failed (show: the token key does not match, or the chain does not verify), 2 bad usage,
 * 78 (EXIT_CONFIG) a config that does not load or names no key. */
#ifndef HSMCA_CA_H
#define HSMCA_CA_H

/* `hsmca ca init`: the CA key made in the token, then a self-signed root or a CSR. */
int ca_init(int argc, char **argv);
/* `hsmca ca import`: a CA certificate checked against the token's key, then installed. */
int ca_import(int argc, char **argv);
/* `hsmca ca show`: the CA certificate, its chain and whether the token's key matches. */
int ca_show(int argc, char **argv);
/* `hsmca ca rotate STEP` (ca_rotate.c: docs/ROTATION.md). */
int ca_rotate(int argc, char **argv);
/* `hsmca token keygen` (token_cmd.c): the CA key or the audit key made in the token. */
int token_keygen(int argc, char **argv);

/* The --help texts of init, import and show (static strings). */
extern const char ca_init_help[], ca_import_help[], ca_show_help[];

#endif
