/* dropped_result.c - compiled by tests/build/check_mustcheck.sh, never linked.
 * With DROP defined it ignores an hsmca_code result, which must not compile
 * (-Werror with HSMCA_MUSTCHECK); without it, the same call checked compiles. */
#include "signer_tbs.h"

int check_one(const uint8_t *tbs, size_t len, const tbs_policy *pol, hsmca_err *e);

int check_one(const uint8_t *tbs, size_t len, const tbs_policy *pol, hsmca_err *e)
{
#ifdef DROP
    tbs_validate(tbs, len, PROFILE_WORKLOAD, pol, 0, NULL, e);
    return 0;
#else
    return tbs_validate(tbs, len, PROFILE_WORKLOAD, pol, 0, NULL, e) == HSMCA_OK;
#endif
}
