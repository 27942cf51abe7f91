/* config_int.h - what config.c (the parser) shares with config_validate.c. */
#ifndef HSMCA_CONFIG_INT_H
#define HSMCA_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>

/* Decimal digits, no sign, no leading zero, at most UINT32_MAX; with duration, the
 * number may end in s, m, h or d. Returns 0 on success. */
int config_parse_u32(const char *s, size_t len, int duration, uint32_t *out);

#endif
