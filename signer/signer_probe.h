/* signer_probe.h - the tokens' health while no request comes: a thread that probes the
 * CA key's pool and the audit key's session every SIGNER_PROBE_S (p11_pool_probe), so a
 * removed token shows as reconnecting in the StatusReply (and readiness) within seconds
 * and is reconnected to when it is back, not only at the next request. The probe is one
 * C_GetSessionInfo on an idle session: a busy pool is probed by its signatures. A hung
 * token holds this thread only. Private to signer/. */
#ifndef HSMCA_SIGNER_PROBE_H
#define HSMCA_SIGNER_PROBE_H

typedef struct signer_ctx signer_ctx;

#define SIGNER_PROBE_S 2.0

/* Starts the thread (fatal when it cannot). */
void signer_probe_start(signer_ctx *s);

/* Stops it: 1 once it has ended (or none ran), 0 when it is still in a token call after
 * SIGNER_STOP_TIMEOUT_S (the caller then leaves the token to the process's exit). */
int signer_probe_stop(signer_ctx *s);

#endif
