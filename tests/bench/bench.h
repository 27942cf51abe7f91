/* bench.h - shared by the two files of bench_signer (see bench_signer.c). */
#ifndef HSMCA_BENCH_H
#define HSMCA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench_proc.h"

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
    int rounds; /* of the signer figures: each round runs it with the log on and off */
    unsigned window;
    int raw_only;
    int keep;
    const char *dir; /* an existing dev dir (kept), or NULL for a temp one */
} bench_opts;

/* The signer with its audit log off (audit.disabled: true) and on (the dev CA's). */
enum { BENCH_LOG_OFF = 0, BENCH_LOG_ON = 1 };

/* The signer's figures in one mode, summed over the rounds. */
typedef struct {
    uint64_t codes[BENCH_MAX_CODES]; /* replies by code within the timed phases */
    uint64_t intents;                /* every request signed, the untimed ones too */
    uint64_t syncs;                  /* the log's fdatasyncs, from "audit log closed" */
    double wall, signer_cpu, self_cpu, hwm_mib;
} bench_mode;

/* The figures of one CA key type. */
typedef struct {
    const char *key;
    double raw_rate[3], raw_cpu_us[3]; /* index: threads (1, 2) */
    bench_mode sig[2];                 /* index: BENCH_LOG_OFF, BENCH_LOG_ON */
    double tbs_cpu_us;
} bench_row;

/* Certificates per second of one mode. */
static inline double bench_rate(const bench_mode *m)
{
    return m->wall > 0 ? (double)m->codes[0] / m->wall : 0;
}

/* Issuance rate of a real `hsmca-signer` on the dev CA in dir, o->rounds times
 * with its audit log on and off (alternating which goes first): rewrites
 * dir/hsmca.yaml (sessions, rate limit) and writes dir/hsmca-nolog.yaml (the
 * same with audit.disabled: true); fills row->sig. */
int bench_signer_run(const char *dir, const bench_opts *o, bench_row *row);

#endif
