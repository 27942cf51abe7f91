/* sup_exec.h - where the supervisor finds the programs it runs as its children. */
#ifndef HSMCA_SUP_EXEC_H
#define HSMCA_SUP_EXEC_H

#include <stddef.h>

#include "hsmca_err.h"

/* The program of a child role (a row of sup_procs.c: "signer", "publish", ...), hsmca-ROLE:
 * beside self (the running `hsmca`, an absolute path: the build tree, a bundle), else in
 * ../libexec/hsmca/ from self's directory (an installed tree: /usr/bin/hsmca,
 * /usr/libexec/hsmca/hsmca-signer). Never a search of PATH: the supervisor runs as
 * root, and only a file installed with hsmca itself may become its signer. Writes the
 * path into out; HSMCA_ENOTFOUND naming both places when neither is an executable file. */
HSMCA_MUSTCHECK hsmca_code sup_exec_find(const char *self, const char *role, char *out,
                                         size_t outsz, hsmca_err *e);

#endif
