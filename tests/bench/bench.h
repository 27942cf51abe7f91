/* bench.h - shared by the two files of bench_signer (see bench_signer.c). */
#ifndef HSMCA_BENCH_H
#define HSMCA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_MODULE "/usr/lib/softhsm/libsofthsm2.so"
#define BENCH_KEY_URI "pkcs11:token=hsmca;object=ca-key;type=private"
#define BENCH_SPIFFE "spiffe://cluster.local/ns/default/sa/sleep"
#define BENCH_RATE 1000000u /* signatures/s and burst: far above any token here */
#define BENCH_RATE_STR "1000000"
#define BENCH_SESSIONS 2
#define BENCH_MAX_CODES 16
#define BENCH_MAX_WINDOW 4096 /* the signer queues at most 8192 */

typedef struct {
    const char *keys[2];
    int n_keys;
    int seconds;
    unsigned window;
    int raw_only;
    int keep;
    const char *dir; /* an existing dev dir (kept), or NULL for a temp one */
} bench_opts;

/* The figures of one CA key type. */
typedef struct {
    const char *key;
    double raw_rate[3], raw_cpu_us[3]; /* index: threads (1, 2) */
    double sig_rate, sig_cpu_us, sig_cpu_wall, client_cpu_wall, hwm_mib, tbs_cpu_us;
    uint64_t sig_ok, sig_codes[BENCH_MAX_CODES];
} bench_row;

/* CPU seconds (user + system) of this process. */
double bench_self_cpu(void);
/* CPU seconds of pid from /proc/PID/stat, or -1. */
double bench_proc_cpu(pid_t pid);
/* Peak resident set (VmHWM) of pid in MiB, or -1. */
double bench_proc_hwm_mib(pid_t pid);

/* Issuance rate of a real `hsmca signer` on the dev CA in dir: rewrites
 * dir/hsmca.yaml (sessions, rate limit), fills the sig_* fields of row. */
int bench_signer_run(const char *dir, const bench_opts *o, bench_row *row);

#endif
