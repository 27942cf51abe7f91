/* metrics.h - the metrics process (docs/ARCHITECTURE.md §1; docs/OPERATIONS.md "Metrics"). */
#ifndef HSMCA_METRICS_H
#define HSMCA_METRICS_H

/* `hsmca-metrics --config FILE --ipc-fd N --ctl-fd M`: N is the link to the front end
 * (common/mx_contract.h), M the control channel (a new link after the front end's restart,
 * CTL_NEW_PEER). Returns an exit code: 0 on SIGTERM or when the supervisor goes,
 * EXIT_CONFIG on a bad config or sandbox. While metrics.listen cannot be bound it tries
 * again every few seconds (the CA issues meanwhile). */
int metrics_main(int argc, char **argv);

#endif
