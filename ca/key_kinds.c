/* key_kinds.c - see key_kinds.h. */
#include "key_kinds.h"

#include <string.h>

static const key_kind kinds[] = {
    {"ec-p256", P11_KEY_EC_P256, 1, 1, "EC P-256", "ecdsa-p256"},
    {"ec-p384", P11_KEY_EC_P384, 1, 1, "EC P-384", "ecdsa-p384"},
    {"rsa-2048", P11_KEY_RSA_2048, 1, 0, "RSA-2048", NULL},
    {"rsa-3072", P11_KEY_RSA_3072, 1, 0, "RSA-3072", NULL},
    {"rsa-4096", P11_KEY_RSA_4096, 1, 0, "RSA-4096", NULL},
    {"ed25519", P11_KEY_ED25519, 0, 1, "Ed25519", "ed25519"},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

const key_kind *key_kind_find(const char *name)
{
    for (size_t i = 0; name && i < N_KINDS; i++)
        if (!strcmp(name, kinds[i].name))
            return &kinds[i];
    return NULL;
}

const key_kind *key_kind_of(p11_key_type type)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (kinds[i].type == type)
            return &kinds[i];
    return NULL;
}

const key_kind *key_kind_of_alg(const char *alg)
{
    for (size_t i = 0; alg && i < N_KINDS; i++)
        if (kinds[i].alg && !strcmp(alg, kinds[i].alg))
            return &kinds[i];
    return NULL;
}

const char *key_kind_names(int audit)
{
    return audit ? "ed25519, ec-p256 or ec-p384" : "ec-p256, ec-p384, rsa-2048, rsa-3072 or rsa-4096";
}
