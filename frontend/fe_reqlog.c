/* fe_reqlog.c - see fe_reqlog.h. */
#include "fe_reqlog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include <openssl/rand.h>

#include "util.h"

static pthread_once_t prefix_once = PTHREAD_ONCE_INIT;
static uint32_t prefix;
static atomic_uint_fast32_t counter;

static void prefix_init(void)
{
    /* Without randomness the ids still differ within the process: the prefix only
     * tells processes apart. */
    if (RAND_bytes((unsigned char *)&prefix, sizeof(prefix)) != 1)
        prefix = (uint32_t)getpid() * 2654435761u;
}

void fe_reqlog_start(fe_reqlog *r)
{
    pthread_once(&prefix_once, prefix_init);
    uint32_t n = (uint32_t)atomic_fetch_add(&counter, 1) + 1;
    snprintf(r->id, sizeof(r->id), "%08x%08x", (unsigned)prefix, (unsigned)n);
    r->identity[0] = 0;
    r->authn[0] = 0;
    r->started = util_mono_now();
}

void fe_reqlog_who(fe_reqlog *r, const char *identity, const char *authn)
{
    snprintf(r->identity, sizeof(r->identity), "%s", identity ? identity : "");
    snprintf(r->authn, sizeof(r->authn), "%s", authn ? authn : "");
}

const char *fe_grpc_code_name(grpc_status_code code)
{
    switch (code) {
    case GRPC_STATUS_OK: return "OK";
    case GRPC_STATUS_CANCELLED: return "CANCELLED";
    case GRPC_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case GRPC_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case GRPC_STATUS_NOT_FOUND: return "NOT_FOUND";
    case GRPC_STATUS_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case GRPC_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case GRPC_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case GRPC_STATUS_INTERNAL: return "INTERNAL";
    case GRPC_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case GRPC_STATUS_UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
    }
}

void fe_reqlog_final(const fe_reqlog *r, grpc_status_code code, const char *reason,
                     log_limiter *refusals)
{
    if (code != GRPC_STATUS_OK && refusals && !log_limiter_allow(refusals, util_mono_now()))
        return;
    char dur[32];
    double ms = (util_mono_now() - r->started) * 1000.0;
    snprintf(dur, sizeof(dur), "%.3f", ms < 0 ? 0.0 : ms);
    const char *who = r->identity[0] ? r->identity : "-";
    const char *authn = r->authn[0] ? r->authn : "-";
    const char *name = fe_grpc_code_name(code);
    if (code == GRPC_STATUS_OK)
        LOG_EVENT(LOG_LVL_INFO, "CreateCertificate", LOG_STR("req", r->id),
                  LOG_STR("identity", who), LOG_STR("authn", authn), LOG_STR("code", name),
                  LOG_STR("dur_ms", dur));
    else
        LOG_EVENT(LOG_LVL_INFO, "refused CreateCertificate", LOG_STR("req", r->id),
                  LOG_STR("code", name), LOG_STR("reason", reason ? reason : ""),
                  LOG_STR("identity", who), LOG_STR("authn", authn), LOG_STR("dur_ms", dur));
}
