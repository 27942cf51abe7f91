/* bench_signer.c - how fast the token signs, and how fast the signer issues.
 *
 * The project's goal: the HSM is the bottleneck, not our code. On a noisy
 * 2-core machine only figures taken in the same run compare, so for each CA
 * key type this program measures, one after the other:
 *   raw     p11_pool_sign_digest in 1 and 2 threads for --seconds: C_Sign/s
 *           and the CPU one signature costs in this process (SoftHSM is
 *           software: its "HSM time" is CPU time on the same cores);
 *   signer  a real `hsmca-signer` on a socketpair, fed pre-built valid
 *           workload TBSs with a window of requests in flight: certificates/s,
 *           the signer's CPU per certificate, its peak RSS
 *           (bench_signer_ipc.c).
 *           The signer runs --rounds times with its audit log on and off
 *           (on, off, off, on, ...: the same dev CA, the same token), so the
 *           log's cost is a ratio taken in one run (issue 6: at most 10%), with
 *           the log's fdatasyncs per second and intents per sync.
 * The signer's CPU per certificate minus the raw CPU per signature is what
 * our code (IPC, DER checks, serial set, assembly, verify, log) adds.
 *
 * A benchmark, not a test: it prints figures and asserts nothing about them.
 * It fails only when something does not work (setup, a refused request). */
#include "bench.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "p11.h"
#include "signer_core.h"
#include "testutil.h"
#include "util.h"

#ifndef HSMCA_BIN_DEFAULT
#define HSMCA_BIN_DEFAULT "hsmca"
#endif

/* ---- process figures ------------------------------------------------------------- */

/* ---- raw token rate ---------------------------------------------------------------- */

typedef struct {
    p11_pool *pool;
    double deadline;
    uint64_t n;
    hsmca_code rc;
    hsmca_err e;
} raw_worker;

static void *raw_loop(void *arg)
{
    raw_worker *w = arg;
    uint8_t digest[32], sig[IPC_SIG_MAX];
    util_random(digest, sizeof(digest));
    /* Bounded by the deadline; the cap only guards against a broken clock. */
    for (uint64_t i = 0; i < 100000000ULL && util_mono_now() < w->deadline; i++) {
        size_t len = sizeof(sig);
        digest[i % 32] ^= (uint8_t)i;
        if ((w->rc = p11_pool_sign_digest(w->pool, digest, 32, sig, &len, &w->e)) != HSMCA_OK)
            break;
        w->n++;
    }
    return NULL;
}

/* Signs in `threads` threads for `seconds`; *rate in signs/s, *cpu_us in CPU
 * microseconds of this process per signature. */
static int raw_run(p11_pool *pool, int threads, int seconds, double *rate, double *cpu_us)
{
    raw_worker w[2];
    pthread_t th[2];
    double c0 = bench_self_cpu(), t0 = util_mono_now();
    int started = 0, bad = 0;
    for (; started < threads; started++) {
        w[started] = (raw_worker){.pool = pool, .deadline = t0 + seconds};
        if (pthread_create(&th[started], NULL, raw_loop, &w[started]) != 0) {
            fprintf(stderr, "bench: cannot start a signing thread\n");
            bad = 1;
            break;
        }
    }
    uint64_t n = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        n += w[i].n;
        if (w[i].rc != HSMCA_OK) {
            fprintf(stderr, "bench: raw sign failed: %s\n", w[i].e.msg);
            bad = 1;
        }
    }
    double wall = util_mono_now() - t0, cpu = bench_self_cpu() - c0;
    *rate = n / wall;
    *cpu_us = n ? cpu * 1e6 / n : 0;
    return bad || !n ? -1 : 0;
}

/* Raw C_Sign/s on the dev token in DIR at 1 and 2 threads. */
static int raw_bench(const char *dir, int seconds, bench_row *row)
{
    char path[1100], pin[256];
    hsmca_err e;
    p11_module *m = NULL;
    p11_pool *pool = NULL;
    snprintf(path, sizeof(path), "%s/pin", dir);
    if (util_read_secret(path, pin, sizeof(pin), &e) != HSMCA_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        return -1;
    }
    hsmca_code rc = p11_module_load(BENCH_MODULE, &m, &e);
    if (rc == HSMCA_OK)
        rc = p11_pool_open(m, BENCH_KEY_URI, pin, 2, &pool, &e);
    OPENSSL_cleanse(pin, sizeof(pin));
    int bad = rc != HSMCA_OK;
    if (bad)
        fprintf(stderr, "bench: token: %s\n", e.msg);
    for (int t = 1; t <= 2 && !bad; t++) {
        bad = raw_run(pool, t, seconds, &row->raw_rate[t], &row->raw_cpu_us[t]) != 0;
        if (!bad)
            printf("raw key=%s threads=%d signs_per_s=%.1f cpu_us_per_sign=%.1f\n", row->key, t,
                   row->raw_rate[t], row->raw_cpu_us[t]);
        fflush(stdout);
    }
    p11_pool_close(pool);
    p11_module_unload(m);
    return bad ? -1 : 0;
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("usage: bench_signer [--key ec-p256|rsa-2048] [--seconds N] [--rounds N]\n"
          "                    [--window N] [--raw-only] [--dir DEVDIR] [--keep]\n"
          "\n"
          "Measures, in one run, the raw C_Sign rate of a SoftHSM dev token (1 and 2\n"
          "threads) and the issuance rate of a real `hsmca-signer` fed pre-built TBSs\n"
          "over its IPC socket, with its audit log on and off, for each CA key type\n"
          "(both unless --key).\n"
          "  --seconds N   duration of each figure, and of each signer phase (default 3)\n"
          "  --rounds N    signer phases per mode, log on and off alternating (default 2)\n"
          "  --window N    signer requests in flight (default 256)\n"
          "  --raw-only    only the raw token figures (one line each, for bench_e2e.py)\n"
          "  --dir DEVDIR  use an existing `hsmca dev init` directory (kept; its\n"
          "                hsmca.yaml is rewritten unless --raw-only); default: a new\n"
          "                one per key type under $HSMCA_TEST_TMP or /tmp, removed after\n"
          "  --keep        keep the temporary directories (signer-log-on.log and\n"
          "                signer-log-off.log, the last phase of each, are in them)\n"
          "hsmca binary: $HSMCA_BIN, else the one this program was built with.\n",
          f);
}

static int parse_opts(int argc, char **argv, bench_opts *o)
{
    static const struct option opts[] = {{"key", required_argument, 0, 'k'},
                                         {"seconds", required_argument, 0, 's'},
                                         {"window", required_argument, 0, 'w'},
                                         {"raw-only", no_argument, 0, 'r'},
                                         {"dir", required_argument, 0, 'd'},
                                         {"keep", no_argument, 0, 'K'},
                                         {"rounds", required_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    *o = (bench_opts){
        .keys = {"ec-p256", "rsa-2048"}, .n_keys = 2, .seconds = 3, .rounds = 2, .window = 256};
    int c;
    while ((c = getopt_long(argc, argv, "k:s:w:rd:Kn:h", opts, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (strcmp(optarg, "ec-p256") && strcmp(optarg, "rsa-2048"))
                return -1;
            o->keys[0] = optarg;
            o->n_keys = 1;
            break;
        case 's': o->seconds = atoi(optarg); break;
        case 'w': o->window = (unsigned)atoi(optarg); break;
        case 'r': o->raw_only = 1; break;
        case 'd': o->dir = optarg; break;
        case 'K': o->keep = 1; break;
        case 'n': o->rounds = atoi(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
    }
    if (optind < argc || o->seconds < 1 || o->seconds > 60 || o->rounds < 1 || o->rounds > 20 ||
        o->window < 1 || o->window > BENCH_MAX_WINDOW)
        return -1;
    return 0;
}

/* The key type of the CA in an existing dev dir, from its root certificate. */
static const char *dir_key_type(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/root-cert.pem", dir);
    FILE *f = fopen(path, "r");
    X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    int id = x ? EVP_PKEY_get_base_id(X509_get0_pubkey(x)) : 0;
    X509_free(x);
    return id == EVP_PKEY_EC ? "ec-p256" : id == EVP_PKEY_RSA ? "rsa-2048" : NULL;
}

static void print_table(const bench_opts *o, const bench_row *rows, int n)
{
    printf("\n== bench_signer: raw %d s per figure; signer %d x %d s per mode (audit log on, "
           "off, off, on, ...); %d sessions (%u signer threads: a checker, a worker each), window "
           "%u, rate limit "
           "raised to %u/s "
           "(hsmca.yaml rewritten) ==\n",
           o->seconds, o->rounds, o->seconds, BENCH_SESSIONS, signer_worker_count(BENCH_SESSIONS),
           o->window, BENCH_RATE);
    printf("%-9s %-4s %9s %9s %9s %8s %7s %8s %9s %8s %8s %7s\n", "key", "log", "raw 1T/s",
           "raw 2T/s", "signer/s", "on/off", "/raw2", "syncs/s", "intents", "signer", "bench",
           "VmHWM");
    printf("%-9s %-4s %9s %9s %9s %8s %7s %8s %9s %8s %8s %7s\n", "", "", "C_Sign", "C_Sign",
           "certs", "", "", "", "/sync", "CPU/wall", "CPU/wall", "MiB");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double off = bench_rate(&r->sig[BENCH_LOG_OFF]), on = bench_rate(&r->sig[BENCH_LOG_ON]);
        for (int mode = BENCH_LOG_OFF; mode <= BENCH_LOG_ON; mode++) {
            const bench_mode *m = &r->sig[mode];
            char ratio[16] = "", syncs[16] = "", per[16] = "";
            if (mode == BENCH_LOG_ON)
                snprintf(ratio, sizeof(ratio), "%.3f", off > 0 ? on / off : 0);
            if (mode == BENCH_LOG_ON && m->syncs) {
                snprintf(syncs, sizeof(syncs), "%.0f", m->wall > 0 ? m->syncs / m->wall : 0);
                snprintf(per, sizeof(per), "%.2f", m->syncs ? (double)m->intents / m->syncs : 0);
            }
            printf("%-9s %-4s %9.0f %9.0f %9.0f %8s %7.2f %8s %9s %8.2f %8.2f %7.1f\n", r->key,
                   mode == BENCH_LOG_ON ? "on" : "off", r->raw_rate[1], r->raw_rate[2],
                   bench_rate(m), ratio, r->raw_rate[2] > 0 ? bench_rate(m) / r->raw_rate[2] : 0,
                   syncs, per, m->wall > 0 ? m->signer_cpu / m->wall : 0,
                   m->wall > 0 ? m->self_cpu / m->wall : 0, m->hwm_mib);
        }
    }
    printf("\nThe log's cost (issue 6: at most 10%%): certs/s with the log on over off.\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        double off = bench_rate(&r->sig[BENCH_LOG_OFF]), on = bench_rate(&r->sig[BENCH_LOG_ON]);
        printf("  %-9s on %.0f / off %.0f certs/s = %.3f (%s 10%% goal)\n", r->key, on, off,
               off > 0 ? on / off : 0, off > 0 && on >= 0.9 * off ? "within the" : "OUTSIDE the");
    }
    printf("\nCPU per signature (SoftHSM runs on the same cores, inside the signer):\n");
    for (int i = 0; i < n; i++) {
        const bench_row *r = &rows[i];
        for (int mode = BENCH_LOG_OFF; mode <= BENCH_LOG_ON; mode++) {
            const bench_mode *m = &r->sig[mode];
            double per = m->codes[0] ? m->signer_cpu * 1e6 / (double)m->codes[0] : 0;
            /* The token's cost at the signer's own session count: SoftHSM's sessions
             * contend for its locks, so a signature in two threads costs more CPU
             * than in one, inside the signer as in the raw loop. */
            double token = r->raw_cpu_us[BENCH_SESSIONS];
            double ours = per - token;
            printf("  %-9s log %-3s token %.1f us/sign (raw, %d threads; 1 thread: %.1f); signer "
                   "%.1f us/cert; our code adds %.1f us/cert (%.0f%% of the signer's CPU)\n",
                   r->key, mode == BENCH_LOG_ON ? "on" : "off", token, BENCH_SESSIONS,
                   r->raw_cpu_us[1], per, ours, per > 0 ? 100.0 * ours / per : 0);
        }
    }
    for (int i = 0; i < n; i++)
        printf("  %-9s the front end's leaf_tbs_build: %.1f us CPU per TBS (this process, untimed)\n",
               rows[i].key, rows[i].tbs_cpu_us);
    double load[1] = {-1};
    getloadavg(load, 1);
    printf("(%ld cores online, 1-minute load average %.2f at the end: other work on the\n"
           " machine shows up in the absolute figures more than in the ratios. Signer CPU/wall\n"
           " near the core count means the cores, not the token's parallelism, were the limit.\n"
           " syncs/s counts the signer's whole life per timed second; intents/sync counts every\n"
           " request it signed, the warm-up and late replies too.)\n",
           sysconf(_SC_NPROCESSORS_ONLN), load[0]);
}

/* Runs every figure for one key type in its own dev dir. */
static int bench_key(const bench_opts *o, const char *key, bench_row *row)
{
    char *dir = o->dir ? strdup(o->dir) : tu_mkdtemp("bench");
    int bad = !dir;
    row->key = key;
    if (!bad && o->dir) {
        char conf[1100];
        snprintf(conf, sizeof(conf), "%s/softhsm2.conf", dir);
        setenv("SOFTHSM2_CONF", conf, 1);
        bad = !(row->key = dir_key_type(dir));
    } else if (!bad) {
        printf("setting up a dev CA (%s) in %s\n", key, dir);
        fflush(stdout);
        bad = tu_dev_init(dir, key) != 0;
    }
    if (!bad)
        bad = raw_bench(dir, o->seconds, row) != 0;
    if (!bad && !o->raw_only)
        bad = bench_signer_run(dir, o, row) != 0;
    if (!o->dir && !o->keep && dir)
        tu_system("rm -rf '%s'", dir);
    else if (!o->dir && dir)
        printf("kept %s\n", dir);
    free(dir);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    bench_opts o;
    if (parse_opts(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    if (o.dir && o.n_keys != 1)
        o.n_keys = 1; /* the dir's own key type is the one measured */
    if (!getenv("HSMCA_BIN"))
        setenv("HSMCA_BIN", HSMCA_BIN_DEFAULT, 1);
    signal(SIGPIPE, SIG_IGN);
    bench_row rows[2];
    memset(rows, 0, sizeof(rows));
    for (int i = 0; i < o.n_keys; i++)
        if (bench_key(&o, o.keys[i], &rows[i]) != 0)
            return 1;
    if (!o.raw_only)
        print_table(&o, rows, o.n_keys);
    return 0;
}
