/* pbwire.c - see pbwire.h. */
#include "pbwire.h"

int pbwire_varint(const uint8_t *p, size_t end, size_t *off, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 70 && *off < end; shift += 7) {
        uint8_t b = p[(*off)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) /* the last byte: not 0 unless it is the only one; the tenth
                            carries the one bit a uint64 has left */
            return (shift == 0 || b != 0) && (shift < 63 || b <= 1);
    }
    return 0;
}
