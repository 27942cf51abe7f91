/* fuzz_config.c - libFuzzer target for config_parse (common/config.h).
 *
 * The first input byte picks the base directory (bit 0: none, or /etc/hsmca,
 * which exercises the relative-path joining); the rest is the YAML text.
 * Oracles from config.h: on error *c is untouched; on success every string is
 * NUL-terminated inside its field and every list holds 0..CONFIG_MAX_LIST
 * items. config_validate then runs on what was accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static hsmca_config g_cfg, g_before; /* ~31 KiB each: kept off the stack */

static int str_ok(const char *s)
{
    return memchr(s, '\0', CONFIG_MAX_STR) != NULL;
}

static int list_ok(const config_list *l)
{
    if (l->n < 0 || l->n > CONFIG_MAX_LIST)
        return 0;
    for (int i = 0; i < l->n; i++)
        if (!str_ok(l->items[i]))
            return 0;
    return 1;
}

static int config_ok(const hsmca_config *c)
{
    const char *strs[] = {c->listen,       c->module_path, c->pin_file,     c->ca_key_uri,
                          c->softhsm2_conf, c->ca_cert,     c->root_bundle,  c->chain,
                          c->trust_domain, c->jwt_issuer,  c->jwks_file,    c->fe_user,
                          c->fe_chroot,    c->signer_user};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        if (!str_ok(strs[i]))
            return 0;
    return list_ok(&c->dns_names) && list_ok(&c->ip_addresses) && list_ok(&c->jwt_audiences) &&
           (c->signer_allow_network == 0 || c->signer_allow_network == 1) &&
           (c->signer_sysv_ipc == 0 || c->signer_sysv_ipc == 1) &&
           /* a mode the parser accepted is a known one, or none was written */
           (!c->signer_sandbox_network[0] || config_net_parse(c->signer_sandbox_network) >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 256 * 1024)
        return 0;
    size_t n = size - 1;
    char *yaml = malloc(n ? n : 1); /* exactly n bytes, no NUL: the length is the contract */
    if (!yaml)
        return 0;
    memcpy(yaml, data + 1, n);
    memset(&g_cfg, 0xA5, sizeof(g_cfg));
    memcpy(&g_before, &g_cfg, sizeof(g_cfg));
    hsmca_err e;
    hsmca_err_clear(&e);
    const char *base = (data[0] & 1) ? "/etc/hsmca" : NULL;
    if (config_parse("fuzz.yaml", yaml, n, base, &g_cfg, &e) == HSMCA_OK) {
        if (!config_ok(&g_cfg))
            abort();
        hsmca_err_clear(&e);
        if (config_validate(&g_cfg, &e) != HSMCA_OK && e.msg[0] == '\0')
            abort();
    } else if (e.code == HSMCA_OK || e.msg[0] == '\0' ||
               memcmp(&g_cfg, &g_before, sizeof(g_cfg)) != 0) {
        abort(); /* a refusal names its check and leaves *c alone */
    }
    free(yaml);
    return 0;
}
