/* fe_grpcrt.h - gRPC core's runtime settings that are not channel arguments.
 *
 * Debian 12's abseil (20220623, which gRPC 1.51 locks with) is built without NDEBUG,
 * so every absl::Mutex keeps deadlock-detection bookkeeping: each lock taken while
 * another is held adds an edge to one process-wide lock-order graph, and each mutex
 * destroyed removes its node, under one global lock. gRPC makes and destroys mutexes
 * per connection and per call, so in a storm of new connections that graph costs
 * both the front end and the load generator a visible share of their CPU
 * (docs/PERFORMANCE.md §2).
 * A release build of abseil has it off; this turns it off here too. */
#ifndef HSMCA_FE_GRPCRT_H
#define HSMCA_FE_GRPCRT_H

/* Before grpc_init (no mutex held anywhere yet) and before the sandbox (dlsym).
 * Returns 1 when abseil's deadlock detection was turned off, 0 when this abseil has
 * no such symbol (another build: nothing to do). */
int fe_grpcrt_init(void);

#endif
