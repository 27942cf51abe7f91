/* probe.h - `hsmca probe`: the health or readiness of a running CA, for exec probes and
 * systemd (docs/OPERATIONS.md "Health"). */
#ifndef HSMCA_PROBE_H
#define HSMCA_PROBE_H

int probe_main(int argc, char **argv);

#endif
