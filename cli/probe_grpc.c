/* probe_grpc.c - `hsmca probe --grpc`: grpc.health.v1.Health/Check on the CA's gRPC port,
 * over TLS as istio-agent connects (grpc_unary.h: the roots of ca.root_bundle, the
 * serving certificate's name checked against the address's host). The front end answers
 * SERVING exactly when it is ready (the conditions of /readyz). */
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "grpc_unary.h"
#include "util.h"

#define HEALTH_METHOD "/grpc.health.v1.Health/Check"

/* The address to call for the config's server.listen: a wildcard host is asked on
 * localhost, a name the serving certificate always holds. */
static int target_from_config(const hsmca_config *cfg, char *out, size_t outsz)
{
    const char *colon = strrchr(cfg->listen, ':');
    if (!colon) {
        fprintf(stderr, "hsmca probe: server.listen '%s' is not host:port\n", cfg->listen);
        return -1;
    }
    int hl = (int)(colon - cfg->listen);
    const char *host = cfg->listen;
    if (hl == 0 || !strncmp(host, "0.0.0.0", (size_t)hl) || !strncmp(host, "[::]", (size_t)hl))
        host = "localhost", hl = 9;
    snprintf(out, outsz, "%.*s%s", hl, host, colon);
    return 0;
}

/* The ServingStatus in a HealthCheckResponse (status = 1, a varint; absent is UNKNOWN). */
static const char *serving_status(const grpc_slice *resp)
{
    static const char *names[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
    const uint8_t *p = GRPC_SLICE_START_PTR(*resp);
    size_t n = GRPC_SLICE_LENGTH(*resp);
    if (n == 0)
        return names[0];
    if (n == 2 && p[0] == 0x08 && p[1] < sizeof(names) / sizeof(names[0]))
        return names[p[1]];
    return NULL;
}

static int check(const char *addr, const char *root_pem, long timeout)
{
    grpc_init();
    grpc_slice resp;
    grpc_unary u = {"hsmca probe", addr, root_pem, NULL, NULL, HEALTH_METHOD, timeout};
    int rc = grpc_unary_call(&u, (const uint8_t *)"", 0, &resp); /* service "" */
    if (rc == 0) {
        const char *status = serving_status(&resp);
        if (!status) {
            fprintf(stderr, "hsmca probe: %s: the answer is not a HealthCheckResponse\n", addr);
            rc = 1;
        } else {
            printf("%s: %s\n", addr, status);
            rc = strcmp(status, "SERVING") != 0;
            if (rc)
                fprintf(stderr, "hsmca probe: %s is not ready (hsmca probe --ready names the "
                                "condition)\n",
                        addr);
        }
        grpc_slice_unref(resp);
    }
    grpc_shutdown();
    return rc;
}

int probe_grpc(const char *config, const char *addr, const char *root, long timeout)
{
    static hsmca_config cfg;
    hsmca_err e;
    char target[CONFIG_MAX_STR + 16], *root_pem = NULL;
    if (config) {
        if (config_load(config, &cfg, &e) != HSMCA_OK) {
            fprintf(stderr, "hsmca probe: %s\n", e.msg);
            return 1;
        }
        if (target_from_config(&cfg, target, sizeof(target)) != 0)
            return 1;
        addr = target;
        root = cfg.root_bundle;
    }
    if (util_read_file(root, 1 << 20, &root_pem, NULL, &e) != HSMCA_OK) {
        fprintf(stderr, "hsmca probe: the roots to trust (%s): %s\n",
                config ? "ca.root_bundle" : "--root", e.msg);
        return 1;
    }
    int rc = check(addr, root_pem, timeout);
    free(root_pem);
    return rc;
}
