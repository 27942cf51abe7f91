/* fuzz_policy.c - libFuzzer target for policy_file_parse (policy/policy_file.h) and
 * the rules it feeds.
 *
 * The input is the YAML text. Oracles from policy_file.h: a refusal is EINVAL or
 * ENOMEM with a message and leaves *out NULL; an accepted policy answers every
 * rule (identity, aliases in the SAN match, DNS names, TTL cap, key types) with OK
 * or EPERM and a message naming the rule, and a refusal of a rule never comes
 * without one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "policy_file.h"

#define TD "cluster.local"

static void rule_ok(hsmca_code rc, const hsmca_err *e, const char *prefix)
{
    if (rc == HSMCA_OK)
        return;
    if (rc != HSMCA_EPERM || strncmp(e->msg, prefix, strlen(prefix)) != 0)
        abort();
}

static void exercise(const policy_set *p)
{
    static const char *const ids[] = {
        "spiffe://cluster.local/ns/default/sa/sleep", "spiffe://old.example/ns/kube-system/sa/a",
        "spiffe://legacy/ns/payments/sa/build.bot", "spiffe://cluster.local/x"};
    static const char *const names[] = {"sleep.example.com", "web.default.svc",
                                        "web.default.svc.cluster.local", "Bad.Name", ""};
    static const policy_key keys[] = {
        {POLICY_KEY_RSA, 2048}, {POLICY_KEY_RSA, 3072}, {POLICY_KEY_P256, 0}, {POLICY_KEY_P384, 0}};
    hsmca_err e;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        policy_who who;
        hsmca_err_clear(&e);
        hsmca_code rc = policy_identity(p, TD, ids[i], strlen(ids[i]), &who, &e);
        rule_ok(rc, &e, "policy");
        if (rc == HSMCA_OK && (!memchr(who.ns, '\0', sizeof(who.ns)) || !who.ns[0]))
            abort();
        for (size_t j = 0; rc == HSMCA_OK && j < sizeof(names) / sizeof(names[0]); j++) {
            hsmca_err_clear(&e);
            rule_ok(policy_check_dns(p, &who, names[j], strlen(names[j]), &e), &e,
                    "policy rule dns_names: ");
        }
        if (rc == HSMCA_OK)
            (void)policy_ns_max_ttl(p, who.ns);
        const char *me[] = {ids[0]};
        hsmca_err_clear(&e);
        rule_ok(policy_check_sans_aliased(p, TD, me, 1, &ids[i], 1, 0, &e), &e, "SAN policy: ");
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        hsmca_err_clear(&e);
        rule_ok(policy_check_key(p, keys[i], &e), &e, "policy rule key_types: ");
    }
    for (int i = 0; i < policy_set_n_aliases(p); i++)
        if (!policy_set_alias(p, i) || !policy_set_alias(p, i)[0])
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024)
        return 0;
    char *yaml =
        malloc(size ? size : 1); /* exactly size bytes, no NUL: the length is the contract */
    if (!yaml)
        return 0;
    memcpy(yaml, data, size);
    policy_set *p = (policy_set *)(uintptr_t)1;
    hsmca_err e;
    hsmca_err_clear(&e);
    hsmca_code rc = policy_file_parse("fuzz.yaml", yaml, size, &p, &e);
    if (rc == HSMCA_OK) {
        if (!p)
            abort();
        exercise(p);
        policy_set_free(p);
    } else if (p != NULL || e.msg[0] == '\0' || (rc != HSMCA_EINVAL && rc != HSMCA_ENOMEM)) {
        abort(); /* a refusal names its check and hands back nothing */
    }
    free(yaml);
    return 0;
}
