/* leaf_tbs_ref.h - the reference for leaf_tbs_build's DER: the X509-API builder the
 * front end used before its DER template (OpenSSL's X509 object, X509_add1_ext_i2d,
 * i2d_re_X509_tbs), kept for tests/unit/test_leaf_tbs.c only, which asserts the two
 * give the same bytes. Same parameters and refusals; the serial is given (16
 * content octets) instead of drawn. */
#ifndef HSMCA_LEAF_TBS_REF_H
#define HSMCA_LEAF_TBS_REF_H

#include "leaf_tbs.h"

HSMCA_MUSTCHECK hsmca_code leaf_tbs_ref_build(const leaf_tbs_params *p, const uint8_t serial[16],
                                            uint8_t **der, size_t *len, hsmca_err *e);

#endif
