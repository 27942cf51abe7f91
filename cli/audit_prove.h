/* audit_prove.h - `hsmca audit prove`. */
#ifndef HSMCA_AUDIT_PROVE_H
#define HSMCA_AUDIT_PROVE_H

/* `hsmca audit prove ...` (argv[0] is "prove"); exit code as audit_main's. */
int audit_prove_main(int argc, char **argv);

#endif
