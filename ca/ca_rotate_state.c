/* ca_rotate_state.c - where a rotation is (ca_rotate.h): the keys each step leaves set
 * in the config, and whether the new CA's root is in ca.root_bundle yet. */
#include "ca_rotate.h"

#include <string.h>

rot_state rot_state_of(const hsmca_config *c, STACK_OF(X509) * bundle, hsmca_err *why)
{
    int next = c->ca_next_key[0] || c->ca_next_cert[0] || c->ca_next_chain[0] || c->ca_next_root[0];
    int prev = c->ca_previous_key[0] || c->ca_previous_cert[0] || c->ca_previous_chain[0];
    hsmca_err_clear(why);
    if (!next && !prev)
        return ROT_NONE;
    if (next && prev)
        return hsmca_fail(why, HSMCA_EINVAL,
                          "ca.next_* and ca.previous_* are both set: no step leaves both"),
               ROT_UNCLEAR;
    if (prev)
        return c->ca_previous_key[0] && c->ca_previous_cert[0]
                   ? ROT_SWITCHED
                   : (hsmca_fail(why, HSMCA_EINVAL,
                                 "ca.previous_key and ca.previous_cert are set together "
                                 "(by rotate switch): one is missing"),
                      ROT_UNCLEAR);
    if (!c->ca_next_key[0])
        return hsmca_fail(why, HSMCA_EINVAL,
                          "ca.next_cert, ca.next_chain or ca.next_root is set without "
                          "ca.next_key"),
               ROT_UNCLEAR;
    if (!c->ca_next_cert[0])
        return ROT_PREPARED; /* prepare --csr: import-next is next */
    X509 *root = rot_next_root(c, why);
    if (!root)
        return ROT_UNCLEAR;
    int there = bundle && rot_find(bundle, root) >= 0;
    X509_free(root);
    return there ? ROT_OVERLAP : c->ca_next_root[0] ? ROT_IMPORTED : ROT_PREPARED;
}

const char *rot_state_name(rot_state st)
{
    static const char *const names[] = {"none",    "prepared", "imported",
                                        "overlap", "switched", "unclear"};
    return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "unclear";
}

const char *rot_state_next(const hsmca_config *c, rot_state st)
{
    switch (st) {
    case ROT_PREPARED: return c->ca_next_cert[0] ? "overlap" : "import-next";
    case ROT_IMPORTED: return "overlap";
    case ROT_OVERLAP: return "switch";
    case ROT_SWITCHED: return "finish";
    default: return "";
    }
}
