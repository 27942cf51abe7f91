/* mx_contract.h - the link between the metrics process (metrics/) and the front end
 * (frontend/fe_metrics_link.c): a SOCK_SEQPACKET socketpair the supervisor creates at each
 * start of the front end. The supervisor keeps the metrics end and hands it to each
 * metrics process it starts, so a restarted metrics process finds the same link.
 *
 * A request is one packet: u8 kind | u64 id (big-endian). The answer is one or more
 * packets: u8 kind | u64 id | u8 flags | text (at most MX_CHUNK bytes); the last has
 * MX_LAST, and MX_OK says the check passed (healthy, ready) or the figures are complete.
 * A reader drops packets whose id is not the one it waits for (a previous metrics
 * process's late answer). The whole answer is at most MX_MAX_REPLY bytes of text. */
#ifndef HSMCA_MX_CONTRACT_H
#define HSMCA_MX_CONTRACT_H

#define MX_KIND_METRICS 'M' /* the exposition text (Prometheus text format 0.0.4) */
#define MX_KIND_HEALTH 'H'  /* /healthz: the front end answers and a signer is connected */
#define MX_KIND_READY 'R'   /* /readyz: every readiness condition, one line each */

#define MX_REQ_LEN 9
#define MX_HDR_LEN 10
#define MX_CHUNK 16384
#define MX_MAX_REPLY (1u << 20)
#define MX_LAST 1u
#define MX_OK 2u

/* How long the metrics process waits for the front end's whole answer. */
#define MX_TIMEOUT_MS 2000

/* The front end's end of the link as a child argument (common/child_args.h). */
#define MX_FE_FD 5

#endif
