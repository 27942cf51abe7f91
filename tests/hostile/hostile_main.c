/* hostile_main.c - the hostile front end's groups, each with its own signer
 * process on its own dev CA (hostile.h says what each file covers). */
#include "hostile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int group_setup(void **state)
{
    return hf_start_signer("hostile", NULL);
}

/* The tests of several files, in order, as one group. */
static int run_group(const char *name, const struct CMUnitTest *const *parts, const size_t *counts,
                     size_t n_parts, CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *only = getenv("HF_ONLY"); /* a developer's shortcut to one group */
    if (only && *only && !strstr(name, only))
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < n_parts; i++)
        total += counts[i];
    struct CMUnitTest *all = calloc(total, sizeof(*all));
    if (!all) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    size_t at = 0;
    for (size_t i = 0; i < n_parts; i++) {
        memcpy(all + at, parts[i], counts[i] * sizeof(*all));
        at += counts[i];
    }
    int failed = _cmocka_run_group_tests(name, all, total, setup, teardown);
    free(all);
    return failed;
}

int main(void)
{
    size_t n_profile, n_spiffe, n_wire;
    const struct CMUnitTest *profile = hf_profile_tests(&n_profile);
    const struct CMUnitTest *spiffe = hf_spiffe_tests(&n_spiffe);
    const struct CMUnitTest *wire = hf_wire_tests(&n_wire);
    const struct CMUnitTest *g1[] = {profile, spiffe, hf_ipc_tests, wire, hf_status_tests,
                                     hf_log_tests};
    const size_t n1[] = {n_profile, n_spiffe, hf_n_ipc_tests, n_wire, hf_n_status_tests,
                         hf_n_log_tests};
    const struct CMUnitTest *g2[] = {hf_stress_tests, hf_queue_tests, hf_status_shim_tests,
                                     hf_stress_stop_tests};
    const size_t n2[] = {hf_n_stress_tests, hf_n_queue_tests, hf_n_status_shim_tests,
                         hf_n_stress_stop_tests};
    const struct CMUnitTest *g3[] = {hf_rate_tests};
    const size_t n3[] = {hf_n_rate_tests};
    size_t n_deny;
    const struct CMUnitTest *g4[] = {hf_deny_tests(&n_deny)};
    const size_t n4[] = {n_deny};
    size_t n_policy;
    const struct CMUnitTest *g5[] = {hf_policy_tests(&n_policy), hf_reload_tests};
    const size_t n5[] = {n_policy, hf_n_reload_tests};
    int failed =
        run_group("signer invariants 1-6 and the IPC", g1, n1, 6, group_setup, hf_group_teardown);
    failed += run_group("flood, stall, queue and stop", g2, n2, 4, hf_stress_group_setup,
                        hf_group_teardown);
    failed += run_group("signer invariant 7: rate", g3, n3, 1, hf_rate_group_setup,
                        hf_rate_group_teardown);
    failed +=
        run_group("refusals in the signing log", g4, n4, 1, hf_deny_group_setup, hf_group_teardown);
    failed += run_group("the SAN policy file", g5, n5, 2, hf_policy_group_setup, hf_group_teardown);
    size_t n_bind;
    const struct CMUnitTest *g6[] = {hf_bind_tests(&n_bind)};
    const size_t n6[] = {n_bind};
    failed += run_group("identity binding", g6, n6, 1, hf_bind_group_setup, hf_group_teardown);
    size_t n_revoke;
    const struct CMUnitTest *g7[] = {hf_revoke_tests(&n_revoke)};
    const size_t n7[] = {n_revoke};
    failed += run_group("revocations", g7, n7, 1, hf_revoke_group_setup, hf_group_teardown);
    return failed;
}
