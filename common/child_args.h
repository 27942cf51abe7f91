/* child_args.h - the command line of the two child processes (`hsmca-signer`,
 * `hsmca-frontend`), which the supervisor starts as
 * `--config FILE --ipc-fd N --ctl-fd M`: one parser, so both read it alike. */
#ifndef HSMCA_CHILD_ARGS_H
#define HSMCA_CHILD_ARGS_H

#include <stdio.h>

typedef struct {
    const char *config; /* borrowed from argv */
    int ipc_fd;         /* the peer's IPC socket */
    int ctl_fd;         /* the control channel to the supervisor */
    int metrics_fd;     /* --metrics-fd (optional, -1 when not given): the front end's link
                           to the metrics process (common/mx_contract.h) */
} child_args;

/* Parses argv (argv[0] is the program) into *out: -1 to go on, else the exit code, after usage on
 * stdout (--help: 0) or stderr (2: unknown, missing or extra argument, fd not a number 3..INT_MAX,
 * both fds equal). */
int child_args_parse(int argc, char **argv, void (*usage)(FILE *), child_args *out);

#endif
