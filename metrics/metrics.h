/* metrics.h - the metrics process (DESIGN.md §1; docs/OPERATIONS.md "Metrics"). */
#ifndef HSMCA_METRICS_H
#define HSMCA_METRICS_H

/* `hsmca-metrics --config FILE --ipc-fd N --ctl-fd M`: N is the link to the front end
 * (common/mx_contract.h), M the control channel (a new link after the front end's restart,
 * CTL_NEW_PEER). Returns an exit code: 0 on SIGTERM or when the supervisor goes, 1 when
 * metrics.listen cannot be bound (the supervisor tries again later), EXIT_CONFIG on a bad
 * config or sandbox. */
int metrics_main(int argc, char **argv);

#endif
