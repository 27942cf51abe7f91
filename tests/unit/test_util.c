/* test_util.c - the shared helpers of common/util.h: the one base64 decoder
 * (both alphabets, canonical input only), the message-safe string copy, and writing a
 * file a user named (util_write_out: never through a link). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "util.h"

/* ---- base64 ------------------------------------------------------------------ */

static void assert_decodes(uint8_t *(*dec)(const char *, size_t, size_t *), const char *in,
                           const char *want, size_t wantlen)
{
    size_t n = 99;
    uint8_t *out = dec(in, strlen(in), &n);
    if (!out)
        fail_msg("refused \"%s\"", in);
    assert_int_equal(n, wantlen);
    if (wantlen)
        assert_memory_equal(out, want, wantlen);
    free(out);
}

static void assert_refused(uint8_t *(*dec)(const char *, size_t, size_t *), const char *in,
                           size_t len)
{
    size_t n = 99;
    uint8_t *out = dec(in, len, &n);
    if (out)
        fail_msg("accepted \"%.*s\"", (int)len, in);
    assert_int_equal(n, 99); /* nothing written on refusal */
}

static void test_b64_roundtrip_both_alphabets(void **state)
{
    uint8_t in[40];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (uint8_t)(i * 37 + 0xf9); /* hits 62 and 63 in both alphabets */
    for (size_t len = 0; len <= sizeof(in); len++) {
        char *u = util_b64url_encode(in, len), *s = util_b64_encode(in, len);
        assert_non_null(u);
        assert_non_null(s);
        assert_null(strpbrk(u, "+/="));
        assert_null(strpbrk(s, "-_"));
        assert_int_equal(strlen(s) % 4, 0);
        size_t n;
        uint8_t *d = util_b64url_decode(u, strlen(u), &n);
        assert_non_null(d);
        assert_int_equal(n, len);
        if (len)
            assert_memory_equal(d, in, len);
        free(d);
        d = util_b64_decode(s, strlen(s), &n);
        assert_non_null(d);
        assert_int_equal(n, len);
        if (len)
            assert_memory_equal(d, in, len);
        free(d);
        free(u);
        free(s);
    }
}

static void test_b64url_strict(void **state)
{
    assert_decodes(util_b64url_decode, "", "", 0);
    assert_decodes(util_b64url_decode, "QQ", "A", 1);
    assert_decodes(util_b64url_decode, "QUI", "AB", 2);
    assert_decodes(util_b64url_decode, "-_8", "\xfb\xff", 2);
    const char *bad[] = {
        "QQ==",  /* padding */
        "QQ=",   /* padding */
        "QUI=",  /* padding */
        "+_8",   /* standard alphabet */
        "-/8",   /* standard alphabet */
        "Q",     /* 4k+1 characters: no encoding is this long */
        "QUJDR", /* 4k+1 */
        "QR",    /* a spare bit set: a second encoding of "A" */
        "QUJ",   /* a spare bit set */
        "QQ ",   /* whitespace */
        " QQ",   /* whitespace */
        "Q\nQ",  /* line break */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_refused(util_b64url_decode, bad[i], strlen(bad[i]));
    assert_refused(util_b64url_decode, "QU\0I", 4); /* embedded NUL within the length */
}

static void test_b64_std_strict(void **state)
{
    assert_decodes(util_b64_decode, "", "", 0);
    assert_decodes(util_b64_decode, "QQ==", "A", 1);
    assert_decodes(util_b64_decode, "QUI=", "AB", 2);
    assert_decodes(util_b64_decode, "QUJD", "ABC", 3);
    assert_decodes(util_b64_decode, "+/8=", "\xfb\xff", 2);
    const char *bad[] = {
        "QQ",       /* padding missing */
        "QQ=",      /* not whole quads */
        "QUI",      /* padding missing */
        "QUJD====", /* padding not needed */
        "QUJDRA=",  /* not whole quads */
        "QUJDRA===",
        "Q===",     /* three '=' */
        "====",
        "QQ=A",     /* data after '=' */
        "Q=QA",
        "QUI==",    /* too much padding */
        "QR==",     /* a spare bit under the padding */
        "QUJ=",     /* a spare bit under the padding */
        "-_8=",     /* url alphabet */
        "QQ==\n",   /* whitespace */
        "QU I=",
        "QQ==QQ==", /* padding in the middle */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_refused(util_b64_decode, bad[i], strlen(bad[i]));
    assert_refused(util_b64_decode, "QU\0=", 4);
}

/* util_b64_encode_to writes what util_b64_encode returns, into a buffer just large enough,
 * and nothing into one a byte short. */
static void test_b64_encode_to(void **state)
{
    (void)state;
    const uint8_t in[] = {0xfb, 0xff, 0x00, 0x10, 0x83, 0x7e, 0x01};
    for (size_t len = 0; len <= sizeof(in); len++) {
        char *want = util_b64_encode(in, len);
        assert_non_null(want);
        size_t n = strlen(want);
        char out[16];
        memset(out, 'x', sizeof(out));
        assert_int_equal(util_b64_encode_to(in, len, out, n), 0);
        assert_int_equal(out[0], 'x');
        assert_int_equal(util_b64_encode_to(in, len, out, n + 1), n);
        assert_string_equal(out, want);
        free(want);
    }
    char one[5];
    assert_int_equal(util_b64_encode_to(in, 3, one, 0), 0);
    assert_int_equal(util_b64_encode_to(in, 3, one, sizeof(one)), 4);
    assert_string_equal(one, "+/8A");
}

static void test_b64_span(void **state)
{
    assert_int_equal(util_b64_span("", 0), 0);
    assert_int_equal(util_b64_span("Ab9+/", 5), 5);
    assert_int_equal(util_b64_span("Ab9+/==", 7), 5); /* '=' is padding, not the alphabet */
    assert_int_equal(util_b64_span("AB\r\n", 4), 2);
    assert_int_equal(util_b64_span("AB-_", 4), 2); /* url characters are not standard */
    assert_int_equal(util_b64_span("ABCD", 2), 2); /* never past the length */
}

/* ---- util_printable ------------------------------------------------------------ */

static const char *shown(const char *s, size_t len, size_t outsz)
{
    static char buf[128];
    memset(buf, 'X', sizeof(buf));
    const char *r = util_printable(s, len, buf, outsz);
    assert_ptr_equal(r, buf);
    assert_non_null(memchr(buf, '\0', outsz)); /* always terminated inside outsz */
    return buf;
}

#define SHOWN(lit, outsz) shown(lit, sizeof(lit) - 1, outsz)

static void test_printable_copies_plain_text(void **state)
{
    assert_string_equal(SHOWN("spiffe://td/ns/a/sa/b", 64), "spiffe://td/ns/a/sa/b");
    assert_string_equal(SHOWN("a b <c> {d} ~!@#$%^&*()=+[]|;:,.?/", 64),
                        "a b <c> {d} ~!@#$%^&*()=+[]|;:,.?/");
    assert_string_equal(SHOWN("", 8), "");
    assert_string_equal(shown(NULL, 5, 16), "(null)");
}

static void test_printable_masks_the_rest(void **state)
{
    /* control characters, DEL, bytes above ASCII, an embedded NUL */
    assert_string_equal(SHOWN("a\nb\rc\td\x1b[0m\x7f\xc3\xa9\0z", 64), "a?b?c?d?[0m????z");
    /* quotes and backslash: values are shown between quotes in messages */
    assert_string_equal(SHOWN("k'i\"d\\", 64), "k?i?d?");
    /* a forged JSON log line stays on one line and cannot close a string */
    assert_string_equal(SHOWN("x\n{\"level\":\"info\"}", 64), "x?{?level?:?info?}");
}

static void test_printable_cap_is_visible(void **state)
{
    assert_string_equal(SHOWN("abcdefg", 8), "abcdefg");    /* fits exactly */
    assert_string_equal(SHOWN("abcdefgh", 8), "abcd...");   /* cut: shows it */
    assert_string_equal(SHOWN("abcdefghijklmnop", 5), "a..."); /* smallest room for a mark */
    assert_string_equal(SHOWN("abcdef", 4), "abc");         /* no room for a mark */
    assert_string_equal(SHOWN("abcdef", 1), "");
    /* the length is what counts, not a NUL beyond it */
    assert_string_equal(shown("abcdef", 3, 16), "abc");
    char out[4] = "zzz";
    assert_string_equal(util_printable("abc", 3, out, 0), ""); /* no room: out untouched */
    assert_string_equal(out, "zzz");
}

/* ---- hex ----------------------------------------------------------------------- */

static void test_unhex(void **state)
{
    (void)state;
    uint8_t out[4] = {0};
    size_t n = 99;
    assert_int_equal(util_unhex("00ff10ab", 8, out, sizeof(out), &n), 1);
    assert_int_equal(n, 4);
    assert_memory_equal(out, "\x00\xff\x10\xab", 4);
    assert_int_equal(util_unhex("", 0, out, sizeof(out), &n), 1);
    assert_int_equal(n, 0);
    /* lowercase only (util_hex's and the signing log's one spelling), even, within cap */
    assert_int_equal(util_unhex("AB", 2, out, sizeof(out), &n), 0);
    assert_int_equal(util_unhex("abc", 3, out, sizeof(out), &n), 0);
    assert_int_equal(util_unhex("0g", 2, out, sizeof(out), &n), 0);
    assert_int_equal(util_unhex("0011223344", 10, out, sizeof(out), &n), 0);
    char hex[9];
    util_hex((const uint8_t *)"\x01\x23\xcd\xef", 4, hex);
    assert_int_equal(util_unhex(hex, 8, out, sizeof(out), &n), 1);
    assert_memory_equal(out, "\x01\x23\xcd\xef", 4);
}

/* ---- util_write_out ----------------------------------------------------------- */

static void read_back(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void test_write_out_refuses_a_link(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("writeout");
    char victim[512], link[512], plain[512], got[64];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(link, sizeof(link), "%s/out.pem", dir);
    snprintf(plain, sizeof(plain), "%s/plain.pem", dir);
    hsmca_err e;
    assert_int_equal(util_write_file_atomic(victim, "precious\n", 9, 0644, &e), HSMCA_OK);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(util_write_out(link, "junk\n", 5, 0644, &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "it is a symbolic link"));
    read_back(victim, got, sizeof(got));
    assert_string_equal(got, "precious\n");
    /* A regular file is replaced; a new one written. */
    assert_int_equal(util_write_out(plain, "one\n", 4, 0644, &e), HSMCA_OK);
    assert_int_equal(util_write_out(plain, "two\n", 4, 0644, &e), HSMCA_OK);
    read_back(plain, got, sizeof(got));
    assert_string_equal(got, "two\n");
    unlink(link);
    unlink(victim);
    unlink(plain);
    rmdir(dir);
    free(dir);
}

/* util_write_file_atomic gives the file its mode whatever the umask; util_write_file_umask
 * leaves the umask's bits off (the signer's sandbox has no chmod). Neither leaves its temp
 * file behind. */
static void test_write_modes(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("writemode");
    char exact[512], masked[512], got[64];
    snprintf(exact, sizeof(exact), "%s/exact.pem", dir);
    snprintf(masked, sizeof(masked), "%s/masked.pem", dir);
    hsmca_err e;
    mode_t old = umask(077);
    assert_int_equal(util_write_file_atomic(exact, "one\n", 4, 0644, &e), HSMCA_OK);
    assert_int_equal(util_write_file_umask(masked, "two\n", 4, 0644, &e), HSMCA_OK);
    assert_int_equal(util_write_file_umask(masked, "three\n", 6, 0644, &e), HSMCA_OK);
    umask(old);
    struct stat st;
    assert_int_equal(stat(exact, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(stat(masked, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    read_back(masked, got, sizeof(got));
    assert_string_equal(got, "three\n");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        files += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(files, 2);
    unlink(exact);
    unlink(masked);
    rmdir(dir);
    free(dir);
}

/* ---- the PIN bound -------------------------------------------------------------- */

/* A PIN of UTIL_PIN_MAX bytes fits the buffer every reader declares; one more is refused. */
static void test_pin_bound(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("pinmax");
    char path[512], line[UTIL_PIN_MAX + 3], pin[UTIL_PIN_MAX + 1];
    snprintf(path, sizeof(path), "%s/pin", dir);
    hsmca_err e;
    memset(line, 'p', UTIL_PIN_MAX);
    line[UTIL_PIN_MAX] = '\n';
    assert_int_equal(util_write_file_atomic(path, line, UTIL_PIN_MAX + 1, 0600, &e), HSMCA_OK);
    assert_int_equal(util_read_secret(path, pin, sizeof(pin), &e), HSMCA_OK);
    assert_int_equal(strlen(pin), UTIL_PIN_MAX);
    line[UTIL_PIN_MAX] = 'p';
    line[UTIL_PIN_MAX + 1] = '\n';
    assert_int_equal(util_write_file_atomic(path, line, UTIL_PIN_MAX + 2, 0600, &e), HSMCA_OK);
    char big[2 * UTIL_PIN_MAX];
    assert_int_equal(util_read_secret(path, big, sizeof(big), &e), HSMCA_EINVAL);
    assert_non_null(strstr(e.msg, "1-255 bytes"));
    unlink(path);
    rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_roundtrip_both_alphabets),
        cmocka_unit_test(test_b64url_strict),
        cmocka_unit_test(test_b64_std_strict),
        cmocka_unit_test(test_b64_encode_to),
        cmocka_unit_test(test_b64_span),
        cmocka_unit_test(test_printable_copies_plain_text),
        cmocka_unit_test(test_printable_masks_the_rest),
        cmocka_unit_test(test_printable_cap_is_visible),
        cmocka_unit_test(test_unhex),
        cmocka_unit_test(test_write_out_refuses_a_link),
        cmocka_unit_test(test_write_modes),
        cmocka_unit_test(test_pin_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
