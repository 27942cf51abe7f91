/* fe_pbcheck.h - checks protobuf wire data before protobuf-c sees it. */
#ifndef HSMCA_FE_PBCHECK_H
#define HSMCA_FE_PBCHECK_H

#include "hsmca_err.h"
#include <stddef.h>
#include <stdint.h>

/* The largest max_depth fe_pb_check_struct accepts (it sizes the walker's stack). */
#define FE_PB_MAX_DEPTH 100

/* Depth: the top Struct is level 1; every nested Value, Struct and ListValue
 * adds one (map entries do not), so Struct{"k": Value{struct_value: Struct{}}}
 * has depth 3. max_depth must be in 1..FE_PB_MAX_DEPTH.
 *
 * Walks a google.protobuf.Struct in wire format and refuses it (HSMCA_EINVAL)
 * when nesting exceeds max_depth, a field is malformed or truncated, a varint is not
 * in its shortest form (common/pbwire.h: Istio's clients never write one otherwise),
 * or a field of Struct / Value / ListValue has the wrong wire type. Iterative: no
 * recursion on attacker input. */
HSMCA_MUSTCHECK hsmca_code fe_pb_check_struct(const uint8_t *buf, size_t len, int max_depth,
                                              hsmca_err *e);

/* In a Struct already checked by fe_pb_check_struct: the string value of the
 * top-level field key (its bytes in buf, not NUL-terminated). 1 when the key
 * is there with a string value, else 0 (absent, another kind of value). */
int fe_pb_struct_string(const uint8_t *buf, size_t len, const char *key, const uint8_t **val,
                        size_t *vlen);

#endif
