/* k8s_lease.c - see k8s.h: the coordination.k8s.io/v1 Lease that says
 * which replica writes, with client-go's leader-election rules
 * (k8s.io/client-go/tools/leaderelection):
 *   - absent: created with this holder; a create that conflicts lost the race;
 *   - held by another: expired once its record (holderIdentity, renewTime) has not
 *     changed for leaseDurationSeconds, measured on this process's own monotonic clock
 *     from when it first saw that record (so clocks that disagree do not matter), then
 *     taken with an update carrying the resourceVersion read (a conflict lost the race);
 *   - held by this process: renewed (renewTime) at every round; acquireTime and
 *     leaseTransitions change only when the holder does.
 * Writes are allowed for two thirds of the duration after a renewal was sent.
 * Any failure to renew stops the writes at once: a replica that cannot prove it holds
 * the Lease must not write while another may already have taken it over. */
#include "k8s.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "log.h"

#define LEASE_API "/apis/coordination.k8s.io/v1/namespaces/"

void k8s_microtime(char out[32])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%06dZ", (int)(ts.tv_nsec / 1000) % 1000000);
}

int k8s_lease_valid(const k8s_lease *l, double now)
{
    /* client-go's renew deadline (two thirds of the duration): the write that follows
     * still lands well before any other replica can count the Lease expired, since
     * renewed_at was taken before the renewal was sent and the others count from
     * when they saw it. */
    return l->held && now - l->renewed_at < (double)l->duration * 2.0 / 3.0;
}

static void lease_path(const k8s_lease *l, int with_name, char *out, size_t outsz)
{
    snprintf(out, outsz, LEASE_API "%s/leases%s%s", l->ns, with_name ? "/" : "",
             with_name ? l->name : "");
}

static void lose(k8s_lease *l, const char *why)
{
    if (l->held)
        LOG_EVENT(LOG_LVL_WARN, "lease lost: writes stopped", LOG_STR("lease", l->name),
                  LOG_STR("reason", why));
    l->held = 0;
}

static void won(k8s_lease *l, double now, int taken)
{
    if (!l->held || taken)
        LOG_EVENT(LOG_LVL_INFO, "lease acquired: this replica writes", LOG_STR("lease", l->name),
                  LOG_STR("namespace", l->ns), LOG_STR("holder", l->identity));
    l->held = 1;
    l->renewed_at = now;
}

static void create(k8s_client *a, k8s_lease *l, double now)
{
    char t[32], path[700];
    k8s_microtime(t);
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:I,s:s,s:s,s:I}}", "apiVersion",
                            "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", l->name,
                            "namespace", l->ns, "spec", "holderIdentity", l->identity,
                            "leaseDurationSeconds", (json_int_t)l->duration, "acquireTime", t,
                            "renewTime", t, "leaseTransitions", (json_int_t)0);
    long status = 0;
    json_t *resp = NULL;
    hsmca_err e;
    lease_path(l, 0, path, sizeof(path));
    hsmca_code rc = obj ? k8s_post(a, path, obj, &status, &resp, &e)
                        : hsmca_fail(&e, HSMCA_ENOMEM, "out of memory");
    json_decref(obj);
    json_decref(resp);
    if (rc == HSMCA_OK && (status == 200 || status == 201))
        won(l, now, 1);
    else if (rc == HSMCA_OK && status == 409)
        lose(l, "another replica created the Lease first");
    else {
        /* A holder whose Lease is gone and cannot be made again holds nothing: another
         * replica may create it meanwhile. */
        char why[300];
        snprintf(why, sizeof(why), "%s (HTTP %ld)", rc == HSMCA_OK ? "refused" : e.msg, status);
        lose(l, why);
        LOG_EVENT(LOG_LVL_WARN, "cannot create the Lease", LOG_STR("namespace", l->ns),
                  LOG_STR("lease", l->name), LOG_STR("reason", why));
    }
}

/* The Lease obj (as read) taken or renewed by this process with an update. */
static void update(k8s_client *a, k8s_lease *l, json_t *obj, const char *holder, double now)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(obj, "spec", spec);
    }
    char t[32], path[700];
    k8s_microtime(t);
    int taken = strcmp(holder, l->identity) != 0;
    json_object_set_new(spec, "holderIdentity", json_string(l->identity));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(l->duration));
    json_object_set_new(spec, "renewTime", json_string(t));
    if (taken) {
        json_int_t n = json_integer_value(json_object_get(spec, "leaseTransitions"));
        json_object_set_new(spec, "acquireTime", json_string(t));
        json_object_set_new(spec, "leaseTransitions", json_integer(n + 1));
    }
    long status = 0;
    json_t *resp = NULL;
    hsmca_err e;
    lease_path(l, 1, path, sizeof(path));
    hsmca_code rc = k8s_put(a, path, obj, &status, &resp, &e);
    json_decref(resp);
    if (rc == HSMCA_OK && status == 200) {
        if (taken && holder[0])
            LOG_EVENT(LOG_LVL_INFO, "lease expired: taking it over", LOG_STR("lease", l->name),
                      LOG_STR("previous_holder", holder));
        won(l, now, taken);
    } else if (rc == HSMCA_OK && status == 409) {
        lose(l, "another replica updated the Lease first (resourceVersion conflict)");
    } else {
        char why[300];
        snprintf(why, sizeof(why), "%s (HTTP %ld)", rc == HSMCA_OK ? "update refused" : e.msg,
                 status);
        lose(l, why);
        LOG_EVENT(LOG_LVL_WARN, "cannot update the Lease", LOG_STR("namespace", l->ns),
                  LOG_STR("lease", l->name), LOG_STR("reason", why));
    }
}

int k8s_lease_step(k8s_client *a, k8s_lease *l, double now)
{
    char path[700];
    lease_path(l, 1, path, sizeof(path));
    long status = 0;
    json_t *obj = NULL;
    hsmca_err e;
    if (k8s_get(a, path, &status, &obj, &e) != HSMCA_OK) {
        lose(l, e.msg);
        LOG_EVENT(LOG_LVL_WARN, "cannot read the Lease", LOG_STR("namespace", l->ns),
                  LOG_STR("lease", l->name), LOG_STR("error", e.msg));
        return 0;
    }
    if (status == 404) {
        json_decref(obj);
        create(a, l, now);
        return l->held;
    }
    json_t *spec = json_object_get(obj, "spec");
    if (status != 200 || !json_is_object(obj)) {
        json_decref(obj);
        char why[80];
        snprintf(why, sizeof(why), "reading it answered HTTP %ld", status);
        lose(l, why);
        LOG_EVENT(LOG_LVL_WARN,
                  "cannot read the Lease (RBAC: get, create, update on "
                  "leases.coordination.k8s.io)",
                  LOG_STR("namespace", l->ns), LOG_STR("lease", l->name),
                  LOG_INT("status", status));
        return 0;
    }
    /* A copy: update() replaces the string in obj. */
    char holder[256];
    const char *h = json_string_value(json_object_get(spec, "holderIdentity"));
    snprintf(holder, sizeof(holder), "%s", h ? h : "");
    const char *renew = json_string_value(json_object_get(spec, "renewTime"));
    json_int_t dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
    char record[sizeof(l->observed)];
    snprintf(record, sizeof(record), "%s|%.64s", holder, renew ? renew : "");
    if (strcmp(record, l->observed) != 0) {
        snprintf(l->observed, sizeof(l->observed), "%s", record);
        l->observed_at = now;
    }
    int other = holder[0] && strcmp(holder, l->identity) != 0;
    if (other && now - l->observed_at < (double)(dur > 0 ? dur : l->duration)) {
        lose(l, "another replica renewed the Lease");
        json_decref(obj);
        return 0;
    }
    update(a, l, obj, holder, now);
    json_decref(obj);
    return l->held;
}

void k8s_lease_release(k8s_client *a, k8s_lease *l)
{
    if (!l->held)
        return;
    char path[700];
    lease_path(l, 1, path, sizeof(path));
    long status = 0;
    json_t *obj = NULL, *resp = NULL;
    hsmca_err e;
    const char *holder = NULL;
    if (k8s_get(a, path, &status, &obj, &e) == HSMCA_OK && status == 200)
        holder = json_string_value(json_object_get(json_object_get(obj, "spec"), "holderIdentity"));
    if (holder && !strcmp(holder, l->identity)) {
        /* client-go's release: no holder, a one-second lease, so the next round of any
         * replica takes it. */
        json_t *spec = json_object_get(obj, "spec");
        json_object_set_new(spec, "holderIdentity", json_string(""));
        json_object_set_new(spec, "leaseDurationSeconds", json_integer(1));
        if (k8s_put(a, path, obj, &status, &resp, &e) == HSMCA_OK && status == 200)
            LOG_EVENT(LOG_LVL_INFO, "lease released", LOG_STR("lease", l->name));
    }
    json_decref(obj);
    json_decref(resp);
    l->held = 0;
}
