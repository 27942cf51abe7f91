/* loadgen.c - a CreateCertificate load generator on gRPC core (issue 8).
 *
 * Simulates P pods, each with its own key, CSR (its SPIFFE ID in a URI SAN) and
 * dev token (minted before the run with the dev issuer's key in DIR), and sends
 * their requests over K TLS channels with C calls in flight, for N requests or S
 * seconds; closed loop by default, open loop at --rate R/s, istio-agent-like
 * retries with --retry (loadgen_grpc.c). Prints certificates/s, latency
 * percentiles, outcomes by gRPC status, and with the server's pids the front
 * end's and the signer's CPU per certificate and peak RSS. With --cfssl URL it
 * sends the same CSRs to `cfssl serve` instead (loadgen_http.c).
 *
 * A benchmark, not a test: it asserts nothing about timings. Exit status: 0 when
 * at least one certificate was issued, 1 when none was, 2 when setup failed. The
 * last line is "result ok=N ..." (key=value, for scripts). */
#include "loadgen.h"

#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "bench_proc.h"
#include "dev_jwt.h"
#include "util.h"

static const char *const CODE_NAMES[LG_CODES] = {"OK",
                                                 "CANCELLED",
                                                 "UNKNOWN",
                                                 "INVALID_ARGUMENT",
                                                 "DEADLINE_EXCEEDED",
                                                 "NOT_FOUND",
                                                 "ALREADY_EXISTS",
                                                 "PERMISSION_DENIED",
                                                 "RESOURCE_EXHAUSTED",
                                                 "FAILED_PRECONDITION",
                                                 "ABORTED",
                                                 "OUT_OF_RANGE",
                                                 "UNIMPLEMENTED",
                                                 "INTERNAL",
                                                 "UNAVAILABLE",
                                                 "DATA_LOSS",
                                                 "UNAUTHENTICATED",
                                                 "OTHER"};

double lg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int lg_stats_lat(lg_stats *s, double seconds)
{
    if (s->n_lat == s->cap_lat) {
        size_t cap = s->cap_lat ? 2 * s->cap_lat : 4096;
        double *p = realloc(s->lat, cap * sizeof(*p));
        if (!p)
            return -1;
        s->lat = p, s->cap_lat = cap;
    }
    s->lat[s->n_lat++] = seconds;
    return 0;
}

uint64_t lg_share(uint64_t n, int i, int t)
{
    return n / (uint64_t)t + ((uint64_t)i < n % (uint64_t)t);
}

/* ---- server figures ------------------------------------------------------------------ */

/* The supervisor's children, found as tests/integration/hsmca_harness.py does: the
 * processes whose parent is `server` and whose argv[1] is "frontend" or "signer". */
static void find_children(pid_t server, pid_t *fe, pid_t *sg)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[300], buf[1024];
        pid_t pid = (pid_t)atoi(de->d_name), ppid = 0;
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        if (!p || sscanf(p + 2, "%*c %d", &ppid) != 1 || ppid != server)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        f = fopen(path, "r");
        n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        const char *argv0 = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
        if (strcmp(argv0, "hsmca-frontend") == 0)
            *fe = pid;
        else if (strcmp(argv0, "hsmca-signer") == 0)
            *sg = pid;
    }
    if (d)
        closedir(d);
}

typedef struct {
    pid_t fe, sg;
    double fe_cpu0, sg_cpu0, self_cpu0;
    double fe_rss0, sg_rss0, fe_rss, sg_rss; /* --idle: before connecting, and held */
} lg_server;

static void sample_idle(void *arg)
{
    lg_server *s = arg;
    s->fe_rss = bench_proc_rss_mib(s->fe);
    s->sg_rss = bench_proc_rss_mib(s->sg);
}

/* --idle: what K idle TLS connections cost the server (issue 8 target: 1,000 of them
 * at most 64 MiB front end, 32 MiB signer). */
static int report_idle(const lg_opts *o, const lg_server *srv)
{
    printf("\n== loadgen: %d idle TLS connections to %s (one call each, then held %.0f s) ==\n",
           o->connections, o->addr, o->idle);
    printf("VmRSS front end       %.1f MiB (%.1f before connecting; %.1f KiB per connection)\n",
           srv->fe_rss, srv->fe_rss0, (srv->fe_rss - srv->fe_rss0) * 1024 / o->connections);
    printf("VmRSS signer          %.1f MiB (%.1f before connecting)\n", srv->sg_rss, srv->sg_rss0);
    printf("peak RSS (VmHWM)      front end %.1f MiB, signer %.1f MiB\n",
           bench_proc_hwm_mib(srv->fe), bench_proc_hwm_mib(srv->sg));
    printf("result idle_connections=%d fe_rss_mib=%.1f fe_rss0_mib=%.1f signer_rss_mib=%.1f "
           "signer_rss0_mib=%.1f\n",
           o->connections, srv->fe_rss, srv->fe_rss0, srv->sg_rss, srv->sg_rss0);
    return srv->fe_rss > 0 ? 0 : 1;
}

static void sample_before(void *arg)
{
    lg_server *s = arg;
    s->fe_cpu0 = bench_proc_cpu(s->fe);
    s->sg_cpu0 = bench_proc_cpu(s->sg);
    s->self_cpu0 = bench_self_cpu();
}

/* ---- the simulated pods -------------------------------------------------------------- */

static EVP_PKEY *make_key(const char *kind)
{
    return strcmp(kind, "rsa-2048") == 0 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
}

/* A PEM CSR with an empty subject and uri as its one URI SAN, signed with pkey. */
static char *make_csr(EVP_PKEY *pkey, const char *uri)
{
    X509_REQ *req = X509_REQ_new();
    GENERAL_NAMES *gens = GENERAL_NAMES_new();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    ASN1_IA5STRING *ia5 = ASN1_IA5STRING_new();
    STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
    BIO *bio = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (req && gens && gn && ia5 && exts && bio && ASN1_STRING_set(ia5, uri, -1)) {
        GENERAL_NAME_set0_value(gn, GEN_URI, ia5);
        ia5 = NULL;
        if (sk_GENERAL_NAME_push(gens, gn))
            gn = NULL;
        X509_EXTENSION *ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, gens);
        if (ext && !sk_X509_EXTENSION_push(exts, ext))
            X509_EXTENSION_free(ext);
        char *data;
        long len;
        if (ext && X509_REQ_set_version(req, 0) && X509_REQ_set_pubkey(req, pkey) &&
            X509_REQ_add_extensions(req, exts) && X509_REQ_sign(req, pkey, EVP_sha256()) > 0 &&
            PEM_write_bio_X509_REQ(bio, req) && (len = BIO_get_mem_data(bio, &data)) > 0 &&
            (out = malloc((size_t)len + 1))) {
            memcpy(out, data, (size_t)len);
            out[len] = '\0';
        }
    }
    ASN1_IA5STRING_free(ia5);
    GENERAL_NAME_free(gn);
    GENERAL_NAMES_free(gens);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
    BIO_free(bio);
    X509_REQ_free(req);
    return out;
}

/* IstioCertificateRequest { string csr = 1; }: tag 0x0A, varint length, the PEM. */
static uint8_t *encode_request(const char *csr, size_t *len)
{
    size_t n = strlen(csr), i = 1;
    uint8_t *b = malloc(n + 11);
    if (!b)
        return NULL;
    b[0] = 0x0A;
    for (size_t v = n;; v >>= 7) {
        b[i++] = (uint8_t)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    memcpy(b + i, csr, n);
    *len = i + n;
    return b;
}

/* cfssl's sign request: {"certificate_request": "<PEM, newlines as \n>"}. */
static char *cfssl_body(const char *csr, size_t *len)
{
    size_t n = strlen(csr);
    char *b = malloc(2 * n + 64), *p = b;
    if (!b)
        return NULL;
    p += sprintf(p, "{\"certificate_request\": \"");
    for (const char *c = csr; *c; c++) {
        if (*c == '\n')
            *p++ = '\\', *p++ = 'n';
        else
            *p++ = *c;
    }
    p += sprintf(p, "\"}");
    *len = (size_t)(p - b);
    return b;
}

/* Pod i: namespace lg<i/100>, service account pod<i>. */
static int make_pods(const lg_opts *o, lg_pod *pods)
{
    for (int i = 0; i < o->pods; i++) {
        char ns[32], sa[32], uri[128];
        snprintf(ns, sizeof(ns), "lg%d", i / 100);
        snprintf(sa, sizeof(sa), "pod%d", i);
        snprintf(uri, sizeof(uri), "spiffe://cluster.local/ns/%s/sa/%s", ns, sa);
        EVP_PKEY *k = make_key(o->csr_key);
        lg_pod *p = &pods[i];
        p->csr_pem = k ? make_csr(k, uri) : NULL;
        EVP_PKEY_free(k);
        if (!p->csr_pem || !(p->body = encode_request(p->csr_pem, &p->body_len)) ||
            !(p->http_body = cfssl_body(p->csr_pem, &p->http_len))) {
            fprintf(stderr, "loadgen: cannot make the CSR of pod %d\n", i);
            return -1;
        }
        if (o->cfssl_url)
            continue; /* cfssl takes no token */
        hsmca_err e = {0};
        char *jwt = dev_jwt_mint(o->dir, DEV_JWT_ISSUER, "istio-ca", ns, sa, o->token_ttl, &e);
        if (!jwt || !(p->auth = malloc(strlen(jwt) + 8))) {
            fprintf(stderr, "loadgen: cannot mint the token of pod %d: %s\n", i, e.msg);
            free(jwt);
            return -1;
        }
        sprintf(p->auth, "Bearer %s", jwt);
        free(jwt);
    }
    return 0;
}

static void free_pods(lg_pod *pods, int n)
{
    for (int i = 0; pods && i < n; i++) {
        free(pods[i].csr_pem);
        free(pods[i].body);
        free(pods[i].auth);
        free(pods[i].http_body);
    }
    free(pods);
}

/* ---- the report ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double q)
{
    if (!n)
        return 0;
    size_t i = (size_t)(q * (double)n);
    return v[i < n ? i : n - 1];
}

/* --retry: the backoff the client slept, and with --requests and --max-rate R the storm
 * target of issue 8: all N certificates within 1.3 x N / R plus the client's backoff,
 * where "its backoff" is the total backoff slept by the request whose final answer
 * came last (the sleeps on the path to the last certificate; the server can do nothing
 * while that request sleeps). Returns the target in seconds, 0 when not computed. */
static double report_storm(const lg_opts *o, const lg_stats *all, double t0)
{
    if (!o->retry)
        return 0;
    printf("backoff slept         %.1f s in all (mean %.3f s per request; %llu requests slept, "
           "the longest %.1f s); the request answered last slept %.2f s over %d attempts\n",
           all->backoff_sum, all->started ? all->backoff_sum / (double)all->started : 0,
           (unsigned long long)all->backoff_reqs, all->backoff_max, all->final_backoff,
           all->final_attempts);
    if (!o->requests || o->max_rate <= 0 || all->t_final <= 0)
        return 0;
    double last = all->t_final - t0, work = 1.3 * (double)o->requests / o->max_rate;
    double target = work + all->final_backoff;
    int met = all->ok == o->requests && last <= target;
    printf("storm target          last answer at %.2f s; target 1.3 x %llu / %.1f/s = %.2f s + "
           "its backoff %.2f s = %.2f s; ratio %.2f, %s%s\n",
           last, (unsigned long long)o->requests, o->max_rate, work, all->final_backoff, target,
           last / target, met ? "met" : "NOT met",
           all->ok == o->requests ? "" : " (not every request got its certificate)");
    printf("                      without the backoff: %.2f s of the last request's time was "
           "not sleeping (target %.2f s)\n",
           last - all->final_backoff, work);
    return target;
}

static int report(const lg_opts *o, lg_stats *st, int n_st, const lg_server *srv, double t0,
                  double t_end)
{
    lg_stats all = {0};
    for (int i = 0; i < n_st; i++) {
        all.ok += st[i].ok, all.late += st[i].late, all.late_ok += st[i].late_ok;
        all.abandoned += st[i].abandoned;
        all.retries += st[i].retries, all.attempts += st[i].attempts;
        all.started += st[i].started;
        for (int c = 0; c < LG_CODES; c++)
            all.codes[c] += st[i].codes[c];
        for (size_t j = 0; j < st[i].n_lat; j++)
            if (lg_stats_lat(&all, st[i].lat[j]) != 0)
                return -1;
        if (st[i].t_last > all.t_last)
            all.t_last = st[i].t_last;
        all.backoff_sum += st[i].backoff_sum, all.backoff_reqs += st[i].backoff_reqs;
        if (st[i].backoff_max > all.backoff_max)
            all.backoff_max = st[i].backoff_max;
        if (st[i].t_final > all.t_final) {
            all.t_final = st[i].t_final;
            all.final_backoff = st[i].final_backoff;
            all.final_attempts = st[i].final_attempts;
        }
    }
    qsort(all.lat, all.n_lat, sizeof(double), cmp_double);
    /* --requests: until the last answer; --seconds: the answers within them. */
    double wall = o->requests ? all.t_last - t0 : o->seconds;
    double fe = bench_proc_cpu(srv->fe) - srv->fe_cpu0, sg = bench_proc_cpu(srv->sg) - srv->sg_cpu0;
    double me = bench_self_cpu() - srv->self_cpu0, busy = t_end - t0;
    char mode[96], errs[1024] = "";
    if (o->rate > 0)
        snprintf(mode, sizeof(mode), "open loop at %.0f/s, at most %d outstanding", o->rate,
                 o->concurrency);
    else
        snprintf(mode, sizeof(mode), "closed loop, %d in flight", o->concurrency);
    printf("\n== loadgen: CreateCertificate to %s; %s; %d connections, %d pods, CSR key %s%s; "
           "%d thread(s) ==\n",
           o->cfssl_url ? o->cfssl_url : o->addr, mode,
           o->cfssl_url ? o->concurrency : o->connections, o->pods, o->csr_key,
           o->retry ? ", istio-agent retries" : "", o->threads);
    printf("certs/s (OK)          %.1f   (%llu OK in %.2f s; %llu requests, %llu attempts, %llu "
           "retries)\n",
           wall > 0 ? (double)all.ok / wall : 0, (unsigned long long)all.ok, wall,
           (unsigned long long)all.started, (unsigned long long)all.attempts,
           (unsigned long long)all.retries);
    if (!o->requests)
        printf("                      %llu answered after the deadline, %llu retries abandoned "
               "at it (not counted)\n",
               (unsigned long long)all.late, (unsigned long long)all.abandoned);
    printf("latency (OK)          p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
           pct(all.lat, all.n_lat, .5) * 1e3, pct(all.lat, all.n_lat, .9) * 1e3,
           pct(all.lat, all.n_lat, .99) * 1e3, all.n_lat ? all.lat[all.n_lat - 1] * 1e3 : 0);
    for (int c = 0; c < LG_CODES; c++)
        if (all.codes[c])
            snprintf(errs + strlen(errs), sizeof(errs) - strlen(errs), "%s%s=%llu",
                     errs[0] ? " " : "", CODE_NAMES[c], (unsigned long long)all.codes[c]);
    printf("outcomes by status    %s\n", errs[0] ? errs : "none");
    /* The server's CPU is taken until the last answer: the certificates issued after
     * the deadline count here, not in certs/s. */
    double per = all.ok + all.late_ok ? 1e6 / (double)(all.ok + all.late_ok) : 0;
    char sgcpu[64] = "", sghwm[64] = "";
    if (srv->sg > 0) {
        snprintf(sgcpu, sizeof(sgcpu), ", signer %.0f us", sg * per);
        snprintf(sghwm, sizeof(sghwm), ", signer %.1f MiB", bench_proc_hwm_mib(srv->sg));
    }
    const char *fe_name = o->cfssl_url ? "server" : "front end";
    if (srv->fe > 0)
        printf("CPU per certificate   %s %.0f us%s, loadgen %.0f us (over %.2f s: %.2f, %.2f, "
               "%.2f cores)\n",
               fe_name, fe * per, sgcpu, me * per, busy, fe / busy, sg / busy, me / busy);
    else
        printf("CPU per certificate   loadgen %.0f us (server: give --server-pid or "
               "--frontend-pid)\n",
               me * per);
    if (srv->fe > 0)
        printf("peak RSS (VmHWM)      %s %.1f MiB%s\n", fe_name, bench_proc_hwm_mib(srv->fe),
               sghwm);
    double target = report_storm(o, &all, t0);
    printf("result ok=%llu requests=%llu certs_per_s=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f "
           "max_ms=%.2f fe_cpu_us=%.0f signer_cpu_us=%.0f loadgen_cpu_us=%.0f fe_hwm_mib=%.1f "
           "signer_hwm_mib=%.1f errors=%llu last_s=%.2f backoff_last_s=%.2f backoff_mean_s=%.3f "
           "backoff_max_s=%.2f target_s=%.2f\n",
           (unsigned long long)all.ok, (unsigned long long)all.started,
           wall > 0 ? (double)all.ok / wall : 0, pct(all.lat, all.n_lat, .5) * 1e3,
           pct(all.lat, all.n_lat, .9) * 1e3, pct(all.lat, all.n_lat, .99) * 1e3,
           all.n_lat ? all.lat[all.n_lat - 1] * 1e3 : 0, srv->fe > 0 ? fe * per : -1,
           srv->sg > 0 ? sg * per : -1, me * per, bench_proc_hwm_mib(srv->fe),
           bench_proc_hwm_mib(srv->sg),
           (unsigned long long)(all.started - all.ok - all.late - all.abandoned),
           all.t_final > 0 ? all.t_final - t0 : 0, all.final_backoff,
           all.started ? all.backoff_sum / (double)all.started : 0, all.backoff_max, target);
    free(all.lat);
    return all.ok > 0 ? 0 : 1;
}

/* ---- options ------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: loadgen --dir DEVDIR [--addr HOST:PORT] [--connections K] [--concurrency C]\n"
            "               [--requests N | --seconds S] [--rate R] [--retry] [--pods P]\n"
            "               [--csr-key ec-p256|rsa-2048] [--threads T] [--timeout S] [--cold]\n"
            "               [--server-pid PID | --frontend-pid PID --signer-pid PID]\n"
            "               [--root FILE] [--target-name NAME] [--cfssl http[s]://HOST:PORT]\n"
            "               [--idle S] [--max-rate R]\n"
            "Sends CreateCertificate requests of P simulated pods (own key, CSR, dev token\n"
            "minted with DEVDIR's dev issuer key) over K TLS channels (trusting\n"
            "DEVDIR/root-cert.pem), C calls in flight (closed loop) or arriving at R/s\n"
            "(open loop, C = most outstanding), for N requests or S seconds (default 10 s).\n"
            "--retry: retry UNAVAILABLE and RESOURCE_EXHAUSTED like istio-agent (backoff\n"
            "500 ms doubling to 60 s, jittered). --cold: no warm-up call per channel (the\n"
            "connections are made inside the timed phase). Prints certs/s, latency\n"
            "percentiles, outcomes by gRPC status and, given the server's pids, the front\n"
            "end's and signer's CPU per certificate and peak RSS. --cfssl: the same CSRs to\n"
            "`cfssl serve` (HTTP, or TLS trusting --root with https://; C connections)\n"
            "instead. --idle S: no load; the K connections make one call each, are held idle\n"
            "S seconds, then the server's VmRSS is printed (needs the server's pids).\n"
            "--max-rate R (with --retry --requests N): the server's maximum rate measured\n"
            "before; prints issue 8's storm target, all N certificates within 1.3 x N / R\n"
            "plus the backoff the request answered last slept, and the ratio.\n"
            "Defaults: --addr localhost:15012, K 4, C 64, P 100, T 1, timeout 30 s, target\n"
            "name localhost.\n");
}

static int parse(int argc, char **argv, lg_opts *o)
{
    *o = (lg_opts){.addr = "localhost:15012",
                   .target_name = "localhost",
                   .csr_key = "ec-p256",
                   .connections = 4,
                   .concurrency = 64,
                   .threads = 1,
                   .pods = 100,
                   .seconds = 10,
                   .timeout = 30,
                   .token_ttl = 3600};
    static const struct option lo[] = {{"addr", 1, 0, 'a'},
                                       {"dir", 1, 0, 'd'},
                                       {"root", 1, 0, 'R'},
                                       {"target-name", 1, 0, 'N'},
                                       {"connections", 1, 0, 'k'},
                                       {"concurrency", 1, 0, 'c'},
                                       {"requests", 1, 0, 'n'},
                                       {"seconds", 1, 0, 's'},
                                       {"rate", 1, 0, 'r'},
                                       {"retry", 0, 0, 'y'},
                                       {"pods", 1, 0, 'p'},
                                       {"csr-key", 1, 0, 'K'},
                                       {"threads", 1, 0, 't'},
                                       {"timeout", 1, 0, 'T'},
                                       {"cold", 0, 0, 'C'},
                                       {"server-pid", 1, 0, 'S'},
                                       {"frontend-pid", 1, 0, 'F'},
                                       {"signer-pid", 1, 0, 'G'},
                                       {"cfssl", 1, 0, 'x'},
                                       {"idle", 1, 0, 'I'},
                                       {"max-rate", 1, 0, 'M'},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'a': o->addr = optarg; break;
        case 'd': o->dir = optarg; break;
        case 'R': o->root_file = optarg; break;
        case 'N': o->target_name = optarg; break;
        case 'k': o->connections = atoi(optarg); break;
        case 'c': o->concurrency = atoi(optarg); break;
        case 'n': o->requests = strtoull(optarg, NULL, 10); break;
        case 's': o->seconds = atof(optarg); break;
        case 'r': o->rate = atof(optarg); break;
        case 'y': o->retry = 1; break;
        case 'p': o->pods = atoi(optarg); break;
        case 'K': o->csr_key = optarg; break;
        case 't': o->threads = atoi(optarg); break;
        case 'T': o->timeout = atof(optarg); break;
        case 'C': o->cold = 1; break;
        case 'S': o->server_pid = (pid_t)atoi(optarg); break;
        case 'F': o->fe_pid = (pid_t)atoi(optarg); break;
        case 'G': o->sg_pid = (pid_t)atoi(optarg); break;
        case 'x': o->cfssl_url = optarg; break;
        case 'I': o->idle = atof(optarg); break;
        case 'M': o->max_rate = atof(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    const char *bad = NULL;
    if (optind != argc)
        bad = "unexpected arguments";
    else if (!o->dir && !o->cfssl_url)
        bad = "--dir DEVDIR is needed (the dev issuer's key and root-cert.pem)";
    else if (o->connections < 1 || o->connections > 100000 || o->concurrency < 1 ||
             o->concurrency > 1000000 || o->pods < 1 || o->pods > 1000000)
        bad = "--connections, --concurrency and --pods must be positive";
    else if (o->threads < 1 || o->threads > LG_MAX_THREADS || o->threads > o->connections ||
             o->threads > o->concurrency)
        bad = "--threads must be 1..16 and at most --connections and --concurrency";
    else if (o->seconds <= 0 || o->timeout <= 0 || o->rate < 0 || o->max_rate < 0)
        bad = "--seconds and --timeout must be positive, --rate and --max-rate not negative";
    else if (strcmp(o->csr_key, "ec-p256") != 0 && strcmp(o->csr_key, "rsa-2048") != 0)
        bad = "--csr-key is ec-p256 or rsa-2048";
    else if (o->cfssl_url && (o->rate > 0 || o->retry))
        bad = "--cfssl runs closed loop only (no --rate, --retry)";
    else if (o->idle < 0 || (o->idle > 0 && (o->cfssl_url || o->cold)))
        bad = "--idle takes seconds, and not with --cfssl or --cold";
    if (!bad && o->idle > 0 && o->concurrency < o->connections)
        o->concurrency = o->connections; /* one warm-up call per connection */
    if (bad) {
        fprintf(stderr, "loadgen: %s\n", bad);
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    lg_opts o;
    if (parse(argc, argv, &o) != 0)
        return 2;
    lg_server srv = {.fe = o.fe_pid, .sg = o.sg_pid};
    if (o.server_pid > 0)
        find_children(o.server_pid, &srv.fe, &srv.sg);
    if (o.server_pid > 0 && (srv.fe <= 0 || srv.sg <= 0))
        fprintf(stderr, "loadgen: warning: no frontend/signer child of pid %d\n", o.server_pid);
    char root_path[4096], *root = NULL;
    size_t root_len;
    hsmca_err e = {0};
    if (!o.cfssl_url) {
        snprintf(root_path, sizeof(root_path), "%s", o.root_file ? o.root_file : "");
        if (!o.root_file)
            snprintf(root_path, sizeof(root_path), "%s/root-cert.pem", o.dir);
        if (util_read_file(root_path, 1 << 20, &root, &root_len, &e) != HSMCA_OK) {
            fprintf(stderr, "loadgen: %s\n", e.msg);
            return 2;
        }
    }
    lg_pod *pods = calloc((size_t)o.pods, sizeof(*pods));
    lg_stats st[LG_MAX_THREADS];
    memset(st, 0, sizeof(st));
    double t_prep = lg_now(), t0 = 0;
    fprintf(stderr, "loadgen: making %d pods (%s keys, CSRs%s)...\n", o.pods, o.csr_key,
            o.cfssl_url ? "" : ", tokens");
    int rc = pods && make_pods(&o, pods) == 0 ? 0 : 2;
    if (rc == 0) {
        fprintf(stderr, "loadgen: %d pods in %.1f s; %s\n", o.pods, lg_now() - t_prep,
                o.cold ? "no warm-up" : "warming up the connections");
        srv.fe_rss0 = bench_proc_rss_mib(srv.fe);
        srv.sg_rss0 = bench_proc_rss_mib(srv.sg);
        int r = o.cfssl_url  ? lg_http_run(&o, pods, st, sample_before, &srv, &t0)
                : o.idle > 0 ? lg_grpc_run(&o, root, pods, st, sample_idle, &srv, &t0)
                             : lg_grpc_run(&o, root, pods, st, sample_before, &srv, &t0);
        double t_end = lg_now();
        rc = r != 0       ? 2
             : o.idle > 0 ? report_idle(&o, &srv)
                          : report(&o, st, o.cfssl_url ? 1 : o.threads, &srv, t0, t_end);
    }
    for (int i = 0; i < LG_MAX_THREADS; i++)
        free(st[i].lat);
    free_pods(pods, o.pods);
    free(root);
    return rc;
}
