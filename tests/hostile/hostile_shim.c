/* hostile_shim.c - the stress group's signer signs through the fault-injecting
 * PKCS#11 shim (tests/p11shim/README.md) in front of the dev CA's SoftHSM token,
 * so a test can make C_Sign slow or hold it ("hang C_Sign always", then
 * "release"): workers that are busy, not blocked on a socket. The shim opens its
 * control and counts files when the signer loads it, before the signer drops
 * privileges and enters seccomp; afterwards it only reads and writes them
 * through those fds. Its token bucket is raised so that invariant 7's rate
 * limit never refuses first: these tests are about the queue. It runs without
 * the audit key: the checkpoint publisher's C_Sign on it (its own thread) would
 * be held and counted with the workers' by the shim. */
#include "hostile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util.h"

#define HS_RATE 1000000u /* issuance.rate_per_second and rate_burst of this signer */

static struct {
    char control[1100], counts[1100];
} shim;

/* The shim as pkcs11.module, the real module behind it (P11SHIM_MODULE), the
 * bucket raised; checked with the real parser: those fields, and only they,
 * changed. */
static int stress_prepare(void)
{
    const char *lib = getenv("P11SHIM");
    if (!lib || !*lib || access(lib, R_OK) != 0) {
        fprintf(stderr, "P11SHIM must name libp11shim.so (the CMake test sets it): \"%s\"\n",
                lib ? lib : "");
        return -1;
    }
    snprintf(shim.control, sizeof(shim.control), "%s/p11shim.control", hf.dir);
    snprintf(shim.counts, sizeof(shim.counts), "%s/p11shim.counts", hf.dir);
    FILE *f = fopen(shim.control, "w"); /* pass-through until a test writes a rule */
    if (!f)
        return -1;
    fclose(f);
    char module[CONFIG_MAX_STR + 8], rate[16];
    snprintf(module, sizeof(module), "\"%s\"", lib);
    snprintf(rate, sizeof(rate), "%u", HS_RATE);
    const hf_yaml_kv kv[] = {{"pkcs11", "module", module},
                             {"issuance", "rate_per_second", rate},
                             {"issuance", "rate_burst", rate},
                             {"pkcs11", "audit_key", "\"\""}};
    hsmca_config *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
    int rc = -1;
    if (!before || !after || hf_rewrite_config(kv, 4, before, after) != 0)
        goto done;
    if (strcmp(after->module_path, lib) != 0 || after->rate_per_second != HS_RATE ||
        after->rate_burst != HS_RATE || !strcmp(before->module_path, lib)) {
        fprintf(stderr, "%s: module %s, rate %u/s burst %u after the rewrite\n", hf.conf,
                after->module_path, after->rate_per_second, after->rate_burst);
        goto done;
    }
    memcpy(after->module_path, before->module_path, sizeof(after->module_path));
    after->rate_per_second = before->rate_per_second;
    after->rate_burst = before->rate_burst;
    memcpy(after->source_sha256, before->source_sha256, sizeof(after->source_sha256));
    if (after->audit_key_uri[0])
        goto done;
    memcpy(after->audit_key_uri, before->audit_key_uri, sizeof(after->audit_key_uri));
    if (memcmp(before, after, sizeof(*before)) != 0) {
        fprintf(stderr,
                "%s: the rewrite changed more than the module, the rate and the audit key\n",
                hf.conf);
        goto done;
    }
    /* The signer inherits these; this program has no threads. */
    if (setenv("P11SHIM_MODULE", before->module_path, 1) != 0 ||
        setenv("P11SHIM_CONTROL", shim.control, 1) != 0 ||
        setenv("P11SHIM_COUNTS", shim.counts, 1) != 0)
        goto done;
    fprintf(stderr, "%s: pkcs11.module %s in front of %s; issuance.rate_per_second %u\n", hf.conf,
            lib, before->module_path, HS_RATE);
    rc = 0;
done:
    free(before);
    free(after);
    return rc;
}

int hf_stress_group_setup(void **state)
{
    int rc = hf_start_signer("hostile-stress", stress_prepare);
    unsetenv("P11SHIM_MODULE");
    unsetenv("P11SHIM_CONTROL");
    unsetenv("P11SHIM_COUNTS");
    return rc;
}

/* In place, as the shim wants it: its fd stays on this file. */
void hf_shim_control(const char *rules)
{
    int fd = open(shim.control, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_true(fd >= 0);
    size_t n = strlen(rules);
    assert_int_equal(write(fd, rules, n), (ssize_t)n);
    close(fd);
}

unsigned long hf_shim_count(const char *fn)
{
    /* The shim rewrites the file in place: read until two reads agree. */
    for (int tries = 0; tries < 1000; tries++) {
        char *a = hf_read_text(shim.counts, 1 << 16), *b = hf_read_text(shim.counts, 1 << 16);
        int same = a && b && !strcmp(a, b);
        unsigned long v = 0;
        size_t k = strlen(fn);
        for (const char *line = a; same && line && *line;) {
            if (!strncmp(line, fn, k) && line[k] == ' ')
                v = strtoul(line + k + 1, NULL, 10);
            line = strchr(line, '\n');
            line = line ? line + 1 : NULL;
        }
        free(a);
        free(b);
        if (same)
            return v;
        usleep(1000);
    }
    fail_msg("%s: no two reads agree", shim.counts);
    return 0;
}

void hf_shim_wait_hanging(unsigned long n, int timeout_ms)
{
    double t0 = util_mono_now();
    unsigned long h;
    while ((h = hf_shim_count("hanging")) != n) {
        if (util_mono_now() - t0 > timeout_ms / 1000.0)
            fail_msg("the shim holds %lu calls, not %lu, after %d ms", h, n, timeout_ms);
        usleep(2000);
    }
}

size_t hf_audit_count(const char *kind)
{
    char path[1100], want[64];
    snprintf(path, sizeof(path), "%s/audit/log", hf.dir);
    snprintf(want, sizeof(want), "\"kind\":\"%s\"", kind);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("%s: %s (the dev CA's audit.dir)", path, strerror(errno));
    static char line[1 << 17]; /* entries are < 64 KiB */
    size_t n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, want) != NULL;
    fclose(f);
    return n;
}

void hf_audit_wait(const char *kind, size_t n, int timeout_ms)
{
    double t0 = util_mono_now();
    size_t have;
    while ((have = hf_audit_count(kind)) < n) {
        if (util_mono_now() - t0 > timeout_ms / 1000.0)
            fail_msg("the audit log has %zu \"%s\" entries, not %zu, after %d ms", have, kind, n,
                     timeout_ms);
        usleep(2000);
    }
}
