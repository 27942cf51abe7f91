/* fe_tlsmem.h - what an idle TLS connection costs the front end in OpenSSL.
 *
 * OpenSSL keeps each connection's record buffers (~17 KiB to read, ~17 KiB to
 * write) for the connection's whole life unless SSL_MODE_RELEASE_BUFFERS is set,
 * and gRPC core 1.51 neither sets it nor lets a caller reach the SSL_CTX. This
 * module interposes SSL_new (the executable's definition wins over libssl's for
 * every caller in the process, gRPC included) to set that mode on every TLS
 * connection: an idle connection then holds no record buffer (docs/PERFORMANCE.md). */
#ifndef HSMCA_FE_TLSMEM_H
#define HSMCA_FE_TLSMEM_H

/* Resolves libssl's SSL_new (before the sandbox: dlsym may read files). Returns 0,
 * or -1 when it cannot be found (then SSL_new fails and no connection is served). */
int fe_tlsmem_init(void);

/* TLS connections created so far with the mode set (for the benchmarks' logs). */
unsigned long fe_tlsmem_count(void);

#endif
