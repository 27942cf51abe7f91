/* probe.c - see probe.h. A GET of /healthz or /readyz on metrics.listen with libcurl,
 * loaded only by this command (curl_dl.h). Exit 0 when the answer is 200, 1 otherwise
 * (the body, or why there is none, is printed either way), 2 on a usage error. --grpc
 * asks the gRPC port instead (probe_grpc.c). */
#include "probe.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "curl_dl.h"
#include "log.h"

#define PROBE_MAX_BODY 65536

static void usage(FILE *f)
{
    fputs("usage: hsmca probe [--ready] [--config FILE | --url URL] [--timeout SECONDS]\n"
          "       hsmca probe --grpc [--config FILE | --addr HOST:PORT --root FILE]\n"
          "                   [--timeout SECONDS]\n"
          "\n"
          "Asks a running CA's metrics listener (metrics.listen in FILE) whether it is\n"
          "healthy (/healthz: the front end answers and a signer is connected) or, with\n"
          "--ready, ready (/readyz: signer connected, token logged in, audit log writable\n"
          "with a current checkpoint, serving certificate valid, issuer keys loaded).\n"
          "Prints the answer; exits 0 when it is, 1 when not (or no answer), 2 on a usage\n"
          "error. For Kubernetes exec probes and systemd (ExecStartPost, watchdogs).\n"
          "With --grpc it calls grpc.health.v1.Health/Check on the gRPC port instead,\n"
          "over TLS as istio-agent does (the roots of ca.root_bundle, the serving\n"
          "certificate's name checked against the address): SERVING when ready.\n"
          "\n"
          "  --ready          /readyz instead of /healthz\n"
          "  --config FILE    the CA's config: the listener is its metrics.listen\n"
          "  --url URL        the listener's base URL instead (http://127.0.0.1:15014)\n"
          "  --grpc           the gRPC health check: the port is FILE's server.listen\n"
          "                   (a wildcard host is asked as localhost)\n"
          "  --addr HOST:PORT with --grpc, instead of --config: the gRPC port; HOST is the\n"
          "                   name the serving certificate must hold\n"
          "  --root FILE      with --addr: PEM roots to trust\n"
          "  --timeout S      seconds to wait for the answer (default 5)\n",
          f);
}

/* The base URL from the config's metrics.listen: a wildcard host is asked on loopback. */
static int url_from_config(const char *path, char *out, size_t outsz)
{
    static hsmca_config cfg;
    hsmca_err e;
    if (config_load(path, &cfg, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca probe: %s\n", e.msg);
        return -1;
    }
    if (!cfg.metrics_listen[0]) {
        fprintf(stderr, "hsmca probe: %s: metrics.listen is \"\": no listener to ask\n", path);
        return -1;
    }
    const char *colon = strrchr(cfg.metrics_listen, ':');
    if (!colon) {
        fprintf(stderr, "hsmca probe: metrics.listen '%s' is not host:port\n", cfg.metrics_listen);
        return -1;
    }
    int hl = (int)(colon - cfg.metrics_listen);
    const char *host = cfg.metrics_listen;
    if (hl == 0 || !strncmp(host, "0.0.0.0", (size_t)hl))
        host = "127.0.0.1", hl = 9;
    else if (!strncmp(host, "[::]", (size_t)hl))
        host = "[::1]", hl = 5;
    snprintf(out, outsz, "http://%.*s%s", hl, host, colon);
    return 0;
}

/* GETs url; prints the body; 0 on HTTP 200. */
static int get(const char *url, long timeout)
{
    hsmca_err e;
    if (curl_dl_load(&e) != HSMCA_OK) {
        fprintf(stderr, "hsmca probe: %s\n", e.msg);
        return 1;
    }
    const curl_dl_api *cu = curl_dl();
    CURL *c = cu->easy_init();
    if (!c) {
        fprintf(stderr, "hsmca probe: cannot initialise libcurl\n");
        return 1;
    }
    curl_dl_body b = {.max = PROBE_MAX_BODY};
    char err[CURL_ERROR_SIZE] = "";
    cu->easy_setopt(c, CURLOPT_URL, url);
    cu->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    cu->easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    cu->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cu->easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_dl_body_write);
    cu->easy_setopt(c, CURLOPT_WRITEDATA, &b);
    cu->easy_setopt(c, CURLOPT_ERRORBUFFER, err);
    cu->easy_setopt(c, CURLOPT_USERAGENT, "hsmca-probe/" HSMCA_VERSION);
    CURLcode cc = cu->easy_perform(c);
    long status = 0;
    cu->easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    cu->easy_cleanup(c);
    if (cc != CURLE_OK) {
        fprintf(stderr, "hsmca probe: %s: %s\n", url, err[0] ? err : "no answer");
        free(b.buf);
        return 1;
    }
    fwrite(b.buf ? b.buf : "", 1, b.len, stdout);
    free(b.buf);
    if (status != 200)
        fprintf(stderr, "hsmca probe: %s answered HTTP %ld\n", url, status);
    return status == 200 ? 0 : 1;
}

int probe_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"ready", no_argument, 0, 'r'},     {"config", required_argument, 0, 'c'},
        {"url", required_argument, 0, 'u'}, {"timeout", required_argument, 0, 't'},
        {"grpc", no_argument, 0, 'g'},      {"addr", required_argument, 0, 'a'},
        {"root", required_argument, 0, 'R'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *config = NULL, *url = NULL, *addr = NULL, *root = NULL;
    int ready = 0, grpc = 0, c;
    long timeout = 5;
    optind = 1;
    while ((c = getopt_long(argc, argv, "rc:u:t:ga:R:h", opts, NULL)) != -1) {
        switch (c) {
        case 'g': grpc = 1; break;
        case 'a': addr = optarg; break;
        case 'R': root = optarg; break;
        case 'r': ready = 1; break;
        case 'c': config = optarg; break;
        case 'u': url = optarg; break;
        case 't': timeout = strtol(optarg, NULL, 10); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    int bad = grpc ? url || ready || (!config == !addr) || (addr && !root) || (config && root)
                   : addr || root || (!config == !url);
    if (optind < argc || bad || timeout < 1 || timeout > 600) {
        usage(stderr);
        return 2;
    }
    log_init("cli");
    if (grpc)
        return probe_grpc(config, addr, root, timeout);
    char base[600];
    if (config && url_from_config(config, base, sizeof(base)) != 0)
        return 1;
    char full[700];
    snprintf(full, sizeof(full), "%s%s", config ? base : url, ready ? "/readyz" : "/healthz");
    return get(full, timeout);
}
