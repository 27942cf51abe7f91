/* fe_pbcheck.c - see fe_pbcheck.h.
 *
 * protobuf-c unpacks recursive messages recursively and without a depth limit,
 * so the metadata Struct is walked here first, iteratively, with an explicit
 * stack of "where does this message end" frames sized by the depth cap. */
#include "fe_pbcheck.h"

#include <string.h>

#include "pbwire.h"

enum { WT_VARINT = PBWIRE_VARINT, WT_I64 = PBWIRE_I64, WT_LEN = PBWIRE_LEN, WT_I32 = PBWIRE_I32 };

typedef enum { M_STRUCT, M_ENTRY, M_VALUE, M_LIST } pb_msg;

static const char *const msg_name[] = {"Struct", "Struct map entry", "Value", "ListValue"};

typedef struct {
    pb_msg type;
    size_t end; /* offset one past the last byte of this message */
} pb_frame;

/* Depth counts Struct, Value and ListValue; a map entry sits between a Struct
 * and its Value without a level of its own, so at most one entry frame per two
 * levels: 2 * FE_PB_MAX_DEPTH frames always suffice. */
#define PB_STACK_MAX (2 * FE_PB_MAX_DEPTH + 1)

/* The wire type each known field must have, or -1 for a field the message
 * does not define. */
static int expected_wt(pb_msg m, uint64_t field)
{
    switch (m) {
    case M_STRUCT: return field == 1 ? WT_LEN : -1;              /* fields */
    case M_ENTRY: return field == 1 || field == 2 ? WT_LEN : -1; /* key, value */
    case M_LIST: return field == 1 ? WT_LEN : -1;                /* values */
    case M_VALUE:
        switch (field) {
        case 1: return WT_VARINT; /* null_value */
        case 2: return WT_I64;    /* number_value */
        case 3: return WT_LEN;    /* string_value */
        case 4: return WT_VARINT; /* bool_value */
        case 5: return WT_LEN;    /* struct_value */
        case 6: return WT_LEN;    /* list_value */
        default: return -1;
        }
    }
    return -1;
}

/* The message a length-delimited field opens, or -1 when its bytes are opaque
 * (a string). */
static int child_msg(pb_msg m, uint64_t field)
{
    switch (m) {
    case M_STRUCT: return M_ENTRY;
    case M_ENTRY: return field == 2 ? M_VALUE : -1;
    case M_LIST: return M_VALUE;
    case M_VALUE: return field == 5 ? M_STRUCT : field == 6 ? M_LIST : -1;
    }
    return -1;
}

hsmca_code fe_pb_check_struct(const uint8_t *buf, size_t len, int max_depth, hsmca_err *e)
{
    pb_frame stack[PB_STACK_MAX];
    int sp = 0, depth = 1;
    size_t pos = 0;

    if (max_depth < 1 || max_depth > FE_PB_MAX_DEPTH)
        return hsmca_fail(e, HSMCA_EINTERNAL, "metadata: depth limit %d outside 1..%d", max_depth,
                          FE_PB_MAX_DEPTH);
    if (len > 0 && !buf)
        return hsmca_fail(e, HSMCA_EINVAL, "metadata: no buffer");
    stack[sp++] = (pb_frame){M_STRUCT, len};

    while (sp > 0) {
        pb_frame *top = &stack[sp - 1];
        if (pos == top->end) {
            if (top->type != M_ENTRY)
                depth--;
            sp--;
            continue;
        }
        uint64_t tag, v;
        if (!pbwire_varint(buf, top->end, &pos, &tag))
            return hsmca_fail(e, HSMCA_EINVAL, "metadata: truncated or overlong tag in %s",
                              msg_name[top->type]);
        uint64_t field = tag >> 3;
        int wt = (int)(tag & 7);
        int want = expected_wt(top->type, field);
        if (want < 0)
            return hsmca_fail(e, HSMCA_EINVAL, "metadata: unknown field %llu in %s",
                              (unsigned long long)field, msg_name[top->type]);
        if (wt != want)
            return hsmca_fail(e, HSMCA_EINVAL,
                              "metadata: field %llu of %s has wire type %d, expected %d",
                              (unsigned long long)field, msg_name[top->type], wt, want);
        switch (wt) {
        case WT_VARINT:
            if (!pbwire_varint(buf, top->end, &pos, &v))
                return hsmca_fail(e, HSMCA_EINVAL,
                                  "metadata: truncated or overlong varint "
                                  "in field %llu of %s",
                                  (unsigned long long)field, msg_name[top->type]);
            break;
        case WT_I64:
            if (top->end - pos < 8)
                return hsmca_fail(e, HSMCA_EINVAL, "metadata: truncated number in %s",
                                  msg_name[top->type]);
            pos += 8;
            break;
        case WT_LEN: {
            if (!pbwire_varint(buf, top->end, &pos, &v))
                return hsmca_fail(e, HSMCA_EINVAL,
                                  "metadata: truncated or overlong length "
                                  "in field %llu of %s",
                                  (unsigned long long)field, msg_name[top->type]);
            if (v > top->end - pos)
                return hsmca_fail(e, HSMCA_EINVAL,
                                  "metadata: field %llu of %s runs past the "
                                  "end of its message",
                                  (unsigned long long)field, msg_name[top->type]);
            int child = child_msg(top->type, field);
            if (child < 0) {
                pos += (size_t)v; /* key or string_value: opaque bytes */
                break;
            }
            if (child != M_ENTRY && ++depth > max_depth)
                return hsmca_fail(e, HSMCA_EINVAL, "metadata nesting deeper than %d", max_depth);
            if (sp >= PB_STACK_MAX) /* unreachable by the sizing argument above */
                return hsmca_fail(e, HSMCA_EINTERNAL, "metadata: walker stack full");
            stack[sp++] = (pb_frame){(pb_msg)child, pos + (size_t)v};
            break;
        }
        default: return hsmca_fail(e, HSMCA_EINTERNAL, "metadata: wire type %d not handled", wt);
        }
    }
    return HSMCA_OK;
}

/* One field of the message buf[start..end) at *pos: its number, and for a
 * length-delimited field its bytes; 0 at the end or when malformed. */
static int next_field(const uint8_t *buf, size_t end, size_t *pos, uint64_t *field,
                      const uint8_t **data, size_t *dlen)
{
    uint64_t tag, v;
    if (*pos >= end || !pbwire_varint(buf, end, pos, &tag))
        return 0;
    *field = tag >> 3;
    *data = NULL;
    *dlen = 0;
    switch (tag & 7) {
    case 0: return pbwire_varint(buf, end, pos, &v);
    case 1: return end - *pos >= 8 ? (*pos += 8, 1) : 0;
    case 5: return end - *pos >= 4 ? (*pos += 4, 1) : 0;
    case 2:
        if (!pbwire_varint(buf, end, pos, &v) || v > end - *pos)
            return 0;
        *data = buf + *pos;
        *dlen = (size_t)v;
        *pos += (size_t)v;
        return 1;
    default: return 0;
    }
}

int fe_pb_struct_string(const uint8_t *buf, size_t len, const char *key, const uint8_t **val,
                        size_t *vlen)
{
    size_t kl = strlen(key), pos = 0;
    uint64_t f;
    const uint8_t *entry;
    size_t elen;
    int found = 0;
    /* Struct.fields (1): map entries {key = 1, value = 2}; a later entry for the
     * same key replaces an earlier one (protobuf map semantics). */
    while (next_field(buf, len, &pos, &f, &entry, &elen)) {
        if (f != 1 || !entry)
            continue;
        size_t ep = 0;
        const uint8_t *k = NULL, *value = NULL, *d;
        size_t klen = 0, valuelen = 0, dl;
        while (next_field(entry, elen, &ep, &f, &d, &dl)) {
            if (f == 1 && d)
                k = d, klen = dl;
            else if (f == 2 && d)
                value = d, valuelen = dl;
        }
        if (!k || klen != kl || memcmp(k, key, kl) != 0)
            continue;
        /* Value: the last of its oneof wins; string_value is field 3. */
        const uint8_t *s = NULL;
        size_t sl = 0, vp = 0;
        int is_string = 0;
        while (value && next_field(value, valuelen, &vp, &f, &d, &dl)) {
            if (f >= 1 && f <= 6) {
                is_string = f == 3 && d;
                s = d, sl = dl;
            }
        }
        found = is_string;
        *val = is_string ? s : NULL;
        *vlen = is_string ? sl : 0;
    }
    return found;
}
