/* loadgen.h - shared by the files of the load generator (see loadgen.c).
 *
 * loadgen.c       options, the simulated pods (keys, CSRs, tokens), server
 *                 figures from /proc, the report
 * loadgen_grpc.c  CreateCertificate over gRPC core with TLS: K channels, C calls,
 *                 closed or open loop, istio-agent-like retries
 * loadgen_http.c  the same CSRs to `cfssl serve` over HTTP/1.1 keep-alive, for the
 *                 comparison bench_load.sh prints */
#ifndef HSMCA_LOADGEN_H
#define HSMCA_LOADGEN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LG_CODES 18 /* gRPC status codes 0..16, and 17 for "other" */
#define LG_CODE_OTHER 17
#define LG_MAX_THREADS 16

/* One simulated pod: its own key, CSR and token, reused for every request. */
typedef struct {
    char *csr_pem; /* PEM CSR with the pod's SPIFFE ID */
    uint8_t *body; /* the encoded IstioCertificateRequest */
    size_t body_len;
    char *auth;      /* "Bearer <jwt>" */
    char *http_body; /* cfssl's {"certificate_request": ...} */
    size_t http_len;
} lg_pod;

typedef struct {
    const char *addr, *dir, *root_file, *target_name, *cfssl_url, *csr_key;
    int connections, concurrency, threads, pods, retry, cold;
    uint64_t requests; /* 0: run for seconds */
    double seconds, rate, timeout;
    double idle;     /* > 0: hold the warmed-up connections this long, no load (--idle) */
    double max_rate; /* > 0: the server's maximum rate, measured before (--max-rate): the
                        storm target is printed against it */
    uint32_t token_ttl;
    pid_t fe_pid, sg_pid, server_pid;
} lg_opts;

/* The figures of one worker thread, merged by the report. */
typedef struct {
    uint64_t ok, late, late_ok, abandoned, retries, attempts, started;
    uint64_t codes[LG_CODES]; /* final outcome of each request (in time) */
    double *lat;              /* seconds, OK requests in time, from their first attempt */
    size_t n_lat, cap_lat;
    double t_last; /* monotonic time of the last completion */
    /* --retry: the backoff each request slept, from a refusal to its next attempt
     * (measured, not drawn: the loop's own delay counts). */
    double backoff_sum, backoff_max;
    uint64_t backoff_reqs; /* requests that slept at all */
    double t_final;        /* the last final answer (OK, or an error not retried) */
    double final_backoff;  /* ... the total backoff of that request */
    int final_attempts;    /* ... and its attempts */
} lg_stats;

/* Monotonic seconds. */
double lg_now(void);
/* Records one latency; returns 0, or -1 when out of memory. */
int lg_stats_lat(lg_stats *s, double seconds);
/* The share of n that worker i of t gets. */
uint64_t lg_share(uint64_t n, int i, int t);

/* Warms up (one call per channel unless o->cold), then runs the load in
 * o->threads threads; t0 is set just before the timed phase starts, *stats
 * gets one lg_stats per thread. Returns 0 or -1 (setup failed, said on stderr).
 * before() runs between the warm-up and the timed phase (server CPU sample). With
 * o->idle > 0 there is no load: the connections are held idle that many seconds after
 * the warm-up, then before() runs (the RSS sample) and the run ends. */
int lg_grpc_run(const lg_opts *o, const char *root_pem, lg_pod *pods, lg_stats *stats,
                void (*before)(void *), void *arg, double *t0);
/* The same for cfssl over HTTP: o->concurrency connections, one call each in flight,
 * closed loop, one thread. */
int lg_http_run(const lg_opts *o, lg_pod *pods, lg_stats *stats, void (*before)(void *), void *arg,
                double *t0);

#endif
