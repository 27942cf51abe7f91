/* signer.h - the privileged signer process (docs/ARCHITECTURE.md §1, §3). */
#ifndef HSMCA_SIGNER_H
#define HSMCA_SIGNER_H

/* `hsmca-signer --config FILE --ipc-fd N --ctl-fd M`: runs until its control
 * channel closes (the supervisor went away) or SIGTERM. Returns an exit code. */
int signer_main(int argc, char **argv);

#endif
