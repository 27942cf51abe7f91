/* probe.h - `hsmca probe`: the health or readiness of a running CA, for exec probes and
 * systemd (docs/OPERATIONS.md "Health"). */
#ifndef HSMCA_PROBE_H
#define HSMCA_PROBE_H

int probe_main(int argc, char **argv);

/* --grpc: grpc.health.v1.Health/Check on the gRPC port of config's server.listen
 * (trusting its ca.root_bundle), or of addr trusting the PEM file root. 0 when the
 * answer is SERVING, 1 otherwise (printed). */
int probe_grpc(const char *config, const char *addr, const char *root, long timeout);

#endif
