/* test_fe_pbcheck.c - the metadata Struct walker: depth, wire types, truncation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h needs the headers above. */
#include <cmocka.h>

#include "fe_pbcheck.h"

/* A growable byte buffer for building wire messages by hand. */
typedef struct {
    uint8_t *d;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 16;
        b->d = realloc(b->d, b->cap);
        assert_non_null(b->d);
    }
    if (n)
        memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void put_varint(buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

static void put_tag(buf *b, unsigned field, unsigned wt)
{
    put_varint(b, (uint64_t)field << 3 | wt);
}

/* field (wire type 2) holding inner, then frees inner. */
static void put_len(buf *b, unsigned field, buf *inner)
{
    put_tag(b, field, 2);
    put_varint(b, inner->n);
    put(b, inner->d, inner->n);
    free(inner->d);
    *inner = (buf){0};
}

/* Value messages. */
static buf value_null(void)
{
    buf b = {0};
    put_tag(&b, 1, 0);
    put_varint(&b, 0);
    return b;
}

static buf value_all_scalars(void)
{
    buf b = {0};
    uint8_t dbl[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}; /* 1.0 */
    put_tag(&b, 1, 0);
    put_varint(&b, 0);
    put_tag(&b, 2, 1);
    put(&b, dbl, 8);
    put_tag(&b, 3, 2);
    put_varint(&b, 5);
    put(&b, "hello", 5);
    put_tag(&b, 4, 0);
    put_varint(&b, 1);
    return b;
}

/* Struct { fields: { key: value } } (consumes value). */
static buf struct_of(const char *key, buf *value)
{
    buf entry = {0}, s = {0};
    put_tag(&entry, 1, 2);
    put_varint(&entry, strlen(key));
    put(&entry, key, strlen(key));
    put_len(&entry, 2, value);
    put_len(&s, 1, &entry);
    return s;
}

/* Value { struct_value (5) or list_value (6): inner } (consumes inner). */
static buf value_of(unsigned field, buf *inner)
{
    buf v = {0};
    put_len(&v, field, inner);
    return v;
}

/* ListValue { values: value } (consumes value). */
static buf list_of(buf *value)
{
    buf l = {0};
    put_len(&l, 1, value);
    return l;
}

/* A Struct of exactly `depth` levels through struct_value: Struct(1) > Value(2)
 * > Struct(3) > ... ; the innermost is an empty Struct (odd) or a null Value. */
static buf nested_structs(int depth)
{
    buf cur = depth % 2 ? (buf){0} : value_null();
    for (int lvl = depth - 1; lvl >= 1; lvl--) {
        if (lvl % 2) /* Struct level wrapping the Value below */
            cur = struct_of("k", &cur);
        else
            cur = value_of(5, &cur);
    }
    return cur;
}

/* Struct(1) > Value(2) > ListValue(3) > Value(4) > ListValue(5) > ... */
static buf nested_lists(int depth)
{
    buf cur = depth % 2 ? (buf){0} : value_null();
    for (int lvl = depth - 1; lvl >= 2; lvl--) {
        if (lvl % 2)
            cur = list_of(&cur);
        else
            cur = value_of(6, &cur);
    }
    return struct_of("l", &cur);
}

static hsmca_err err;

static void assert_refused(const buf *b, int max_depth, const char *msg)
{
    hsmca_err_clear(&err);
    assert_int_equal(fe_pb_check_struct(b->d, b->n, max_depth, &err), HSMCA_EINVAL);
    assert_int_equal(err.code, HSMCA_EINVAL);
    assert_string_equal(err.msg, msg);
}

static void assert_accepted(const buf *b, int max_depth)
{
    hsmca_err_clear(&err);
    hsmca_code rc = fe_pb_check_struct(b->d, b->n, max_depth, &err);
    if (rc != HSMCA_OK)
        fail_msg("refused: %s", err.msg);
}

static void test_empty_and_flat(void **state)
{
    (void)state;
    buf empty = {0};
    assert_int_equal(fe_pb_check_struct(NULL, 0, 1, &err), HSMCA_OK);
    assert_accepted(&empty, 1);

    /* Several entries with every scalar kind, at depth 2. */
    buf v1 = value_all_scalars(), v2 = value_null();
    buf s = struct_of("a", &v1), s2 = struct_of("b", &v2);
    put(&s, s2.d, s2.n);
    free(s2.d);
    assert_accepted(&s, 2);
    assert_refused(&s, 1, "metadata nesting deeper than 1");
    /* An entry with neither key nor value is legal protobuf. */
    buf e = {0}, s3 = {0};
    put_len(&s3, 1, &e);
    assert_accepted(&s3, 1);
    free(s.d);
    free(s3.d);
}

static void test_depth_limit(void **state)
{
    (void)state;
    for (int max = 1; max <= FE_PB_MAX_DEPTH; max += (max < 8 ? 1 : 23)) {
        buf at = nested_structs(max), over = nested_structs(max + 1);
        char msg[64];
        snprintf(msg, sizeof(msg), "metadata nesting deeper than %d", max);
        assert_accepted(&at, max);
        assert_refused(&over, max, msg);
        free(at.d);
        free(over.d);
        if (max >= 3) {
            buf lat = nested_lists(max), lover = nested_lists(max + 1);
            assert_accepted(&lat, max);
            assert_refused(&lover, max, msg);
            free(lat.d);
            free(lover.d);
        }
    }
    /* The largest limit, where the walker's own stack is fullest. */
    buf at = nested_structs(FE_PB_MAX_DEPTH), over = nested_structs(FE_PB_MAX_DEPTH + 1);
    assert_accepted(&at, FE_PB_MAX_DEPTH);
    assert_refused(&over, FE_PB_MAX_DEPTH, "metadata nesting deeper than 100");
    free(at.d);
    free(over.d);
    /* Depth is nesting, not breadth: many siblings at depth 3 are fine. */
    buf wide = {0};
    for (int i = 0; i < 1000; i++) {
        buf inner = {0};
        buf v = value_of(5, &inner);
        buf s = struct_of("k", &v);
        put(&wide, s.d, s.n);
        free(s.d);
    }
    assert_accepted(&wide, 3);
    assert_refused(&wide, 2, "metadata nesting deeper than 2");
    free(wide.d);
}

static void test_very_deep(void **state)
{
    (void)state;
    buf deep = nested_structs(10000);
    assert_refused(&deep, 32, "metadata nesting deeper than 32");
    free(deep.d);
    buf ldeep = nested_lists(10001);
    assert_refused(&ldeep, FE_PB_MAX_DEPTH, "metadata nesting deeper than 100");
    free(ldeep.d);
}

static void test_bad_limits(void **state)
{
    (void)state;
    buf empty = {0};
    assert_int_equal(fe_pb_check_struct(empty.d, 0, 0, &err), HSMCA_EINTERNAL);
    assert_int_equal(fe_pb_check_struct(empty.d, 0, FE_PB_MAX_DEPTH + 1, &err), HSMCA_EINTERNAL);
}

static void test_truncated(void **state)
{
    (void)state;
    buf v = value_all_scalars();
    buf s = struct_of("key", &v);
    /* Every proper prefix is refused (each cut lands inside some field). */
    for (size_t cut = 1; cut < s.n; cut++) {
        hsmca_err_clear(&err);
        if (fe_pb_check_struct(s.d, cut, 5, &err) != HSMCA_EINVAL)
            fail_msg("prefix of %zu/%zu bytes accepted", cut, s.n);
    }
    buf one = {0};
    put(&one, s.d, 1);
    assert_refused(&one, 5, "metadata: truncated or overlong length in field 1 of Struct");
    free(one.d);
    free(s.d);

    /* A length that runs past the enclosing message (but not past the buffer). */
    buf inner = {0}, entry = {0}, outer = {0};
    put_tag(&inner, 3, 2);
    put_varint(&inner, 10); /* string of 10 bytes, but the Value is only 2 long */
    put_tag(&entry, 2, 2);
    put_varint(&entry, inner.n);
    put(&entry, inner.d, inner.n);
    put(&entry, "0123456789", 10); /* the bytes exist, but in the entry, not the Value */
    put_len(&outer, 1, &entry);
    assert_refused(&outer, 5, "metadata: field 3 of Value runs past the end of its message");
    free(inner.d);
    free(outer.d);

    /* Truncated double. */
    buf d = {0};
    put_tag(&d, 2, 1);
    put(&d, "\0\0\0", 3);
    buf sd = struct_of("x", &d);
    assert_refused(&sd, 5, "metadata: truncated number in Value");
    free(sd.d);
}

static void test_varints(void **state)
{
    (void)state;
    /* 10-byte varint is the maximum; the 10th byte may only be 0 or 1. */
    static const uint8_t ok10[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t bad10[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0x02};
    static const uint8_t long11[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80,
                                     0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    buf v = {0}, s;
    put(&v, ok10, sizeof(ok10));
    s = struct_of("n", &v);
    assert_accepted(&s, 2);
    free(s.d);
    put(&v, bad10, sizeof(bad10));
    s = struct_of("n", &v);
    assert_refused(&s, 2, "metadata: truncated or overlong varint in field 1 of Value");
    free(s.d);
    put(&v, long11, sizeof(long11));
    s = struct_of("n", &v);
    assert_refused(&s, 2, "metadata: truncated or overlong varint in field 1 of Value");
    free(s.d);
    /* An overlong length prefix on the top-level field. */
    static const uint8_t badlen[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0xff, 0x7f};
    buf b = {0};
    put(&b, badlen, sizeof(badlen));
    assert_refused(&b, 2, "metadata: truncated or overlong length in field 1 of Struct");
    free(b.d);
    b = (buf){0};
    /* A huge but well-formed length. */
    static const uint8_t hugelen[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
    put(&b, hugelen, sizeof(hugelen));
    assert_refused(&b, 2, "metadata: field 1 of Struct runs past the end of its message");
    free(b.d);
}

/* One spelling per value (common/pbwire.h): a varint or a length prefix padded with
 * 0x80 bytes is refused, though protobuf-c would read it; Istio's clients never write one. */
static void test_non_minimal_varints(void **state)
{
    (void)state;
    static const uint8_t padded[] = {0x08, 0x81, 0x00}; /* null_value 1 in two bytes */
    buf v = {0}, s;
    put(&v, padded, sizeof(padded));
    s = struct_of("n", &v);
    assert_refused(&s, 2, "metadata: truncated or overlong varint in field 1 of Value");
    free(s.d);
    static const uint8_t padlen[] = {0x0a, 0x80, 0x00}; /* an empty entry, length in two bytes */
    buf b = {0};
    put(&b, padlen, sizeof(padlen));
    assert_refused(&b, 2, "metadata: truncated or overlong length in field 1 of Struct");
    free(b.d);
    static const uint8_t minimal[] = {0x0a, 0x00}; /* the same, in its one spelling */
    b = (buf){0};
    put(&b, minimal, sizeof(minimal));
    assert_accepted(&b, 2);
    free(b.d);
}

static void test_wire_types(void **state)
{
    (void)state;
    struct {
        unsigned field, wt;
        const char *msg;
    } cases[] = {
        {1, 2, "metadata: field 1 of Value has wire type 2, expected 0"},
        {2, 0, "metadata: field 2 of Value has wire type 0, expected 1"},
        {2, 5, "metadata: field 2 of Value has wire type 5, expected 1"},
        {3, 0, "metadata: field 3 of Value has wire type 0, expected 2"},
        {4, 1, "metadata: field 4 of Value has wire type 1, expected 0"},
        {5, 0, "metadata: field 5 of Value has wire type 0, expected 2"},
        {6, 3, "metadata: field 6 of Value has wire type 3, expected 2"},
        {7, 0, "metadata: unknown field 7 in Value"},
        {0, 0, "metadata: unknown field 0 in Value"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        buf v = {0};
        put_tag(&v, cases[i].field, cases[i].wt);
        put(&v, "\0\0\0\0\0\0\0\0", 8); /* enough payload for any type */
        buf s = struct_of("k", &v);
        assert_refused(&s, 4, cases[i].msg);
        free(s.d);
    }
    /* Struct: field 1 as a varint, and an unknown field. */
    buf s = {0};
    put_tag(&s, 1, 0);
    put_varint(&s, 1);
    assert_refused(&s, 4, "metadata: field 1 of Struct has wire type 0, expected 2");
    free(s.d);
    s = (buf){0};
    put_tag(&s, 2, 2);
    put_varint(&s, 0);
    assert_refused(&s, 4, "metadata: unknown field 2 in Struct");
    free(s.d);
    /* Map entry: key as a varint, unknown field 3. */
    buf e = {0};
    put_tag(&e, 1, 0);
    put_varint(&e, 1);
    s = (buf){0};
    put_len(&s, 1, &e);
    assert_refused(&s, 4, "metadata: field 1 of Struct map entry has wire type 0, expected 2");
    free(s.d);
    put_tag(&e, 3, 2);
    put_varint(&e, 0);
    s = (buf){0};
    put_len(&s, 1, &e);
    assert_refused(&s, 4, "metadata: unknown field 3 in Struct map entry");
    free(s.d);
    /* ListValue: values as fixed64, and an unknown field, inside a list_value. */
    buf l = {0};
    put_tag(&l, 1, 1);
    put(&l, "\0\0\0\0\0\0\0\0", 8);
    buf v = value_of(6, &l);
    s = struct_of("k", &v);
    assert_refused(&s, 4, "metadata: field 1 of ListValue has wire type 1, expected 2");
    free(s.d);
    put_tag(&l, 9, 0);
    put_varint(&l, 0);
    v = value_of(6, &l);
    s = struct_of("k", &v);
    assert_refused(&s, 4, "metadata: unknown field 9 in ListValue");
    free(s.d);
    /* Groups (wire types 3/4) at the top. */
    s = (buf){0};
    put_tag(&s, 1, 3);
    assert_refused(&s, 4, "metadata: field 1 of Struct has wire type 3, expected 2");
    free(s.d);
}

static buf value_string(const char *v)
{
    buf b = {0};
    put_tag(&b, 3, 2);
    put_varint(&b, strlen(v));
    put(&b, v, strlen(v));
    return b;
}

static int lookup(const buf *b, const char *key, char *out, size_t outsz)
{
    const uint8_t *v = NULL;
    size_t n = 0;
    int found = fe_pb_struct_string(b->d, b->n, key, &v, &n);
    if (found)
        snprintf(out, outsz, "%.*s", (int)n, (const char *)v);
    return found;
}

/* fe_pb_struct_string: ztunnel's ImpersonatedIdentity (fe_impersonate.h). */
static void test_struct_string(void **state)
{
    (void)state;
    char got[64];
    buf v = value_string("spiffe://cluster.local/ns/a/sa/b");
    buf s = struct_of("ImpersonatedIdentity", &v);
    assert_true(lookup(&s, "ImpersonatedIdentity", got, sizeof(got)));
    assert_string_equal(got, "spiffe://cluster.local/ns/a/sa/b");
    assert_false(lookup(&s, "ImpersonatedIdentit", got, sizeof(got)));
    assert_false(lookup(&s, "ImpersonatedIdentityX", got, sizeof(got)));
    /* A later entry for the key replaces the earlier one (map semantics). */
    v = value_string("second");
    buf s2 = struct_of("ImpersonatedIdentity", &v);
    put(&s, s2.d, s2.n);
    free(s2.d);
    assert_true(lookup(&s, "ImpersonatedIdentity", got, sizeof(got)));
    assert_string_equal(got, "second");
    free(s.d);
    /* Not a string value: absent. */
    v = value_null();
    s = struct_of("ImpersonatedIdentity", &v);
    assert_false(lookup(&s, "ImpersonatedIdentity", got, sizeof(got)));
    free(s.d);
    /* In a nested Struct only: not at the top, absent. */
    v = value_string("x");
    buf inner = struct_of("ImpersonatedIdentity", &v);
    buf nested = value_of(5, &inner);
    s = struct_of("other", &nested);
    assert_false(lookup(&s, "ImpersonatedIdentity", got, sizeof(got)));
    free(s.d);
    buf empty = {0};
    assert_false(lookup(&empty, "ImpersonatedIdentity", got, sizeof(got)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_and_flat), cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_very_deep),      cmocka_unit_test(test_bad_limits),
        cmocka_unit_test(test_truncated),      cmocka_unit_test(test_varints),
        cmocka_unit_test(test_wire_types),     cmocka_unit_test(test_struct_string),
        cmocka_unit_test(test_non_minimal_varints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
