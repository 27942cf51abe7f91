/* p11shim_tu.c - see p11shim_tu.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "p11shim_tu.h"
#include "testutil.h"

#define SOFTHSM "/usr/lib/softhsm/libsofthsm2.so"

st_globals st;

/* ---- control and counts files ---- */

void st_ctl_write(const char *text)
{
    int fd = open(st.ctl, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

size_t st_read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

/* The shim rewrites it in place after every call: a read may be torn. */
void st_counts_text(char *buf, size_t cap)
{
    char *again = malloc(cap);
    assert_non_null(again);
    for (int i = 0; i < 100; i++) {
        st_read_file(st.counts, buf, cap);
        st_read_file(st.counts, again, cap);
        if (!strcmp(buf, again) && strstr(buf, "hanging "))
            break;
        usleep(1000);
    }
    free(again);
}

st_counts st_count_of(const char *fn)
{
    char buf[8192], name[64];
    st_counts c = {0, 0};
    st_counts_text(buf, sizeof(buf));
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        unsigned long long a, b = 0;
        int n = sscanf(l, "%63s %llu %llu", name, &a, &b);
        if (n >= 2 && !strcmp(name, fn)) {
            c.calls = a;
            c.failed = b;
        }
    }
    return c;
}

st_counts st_delta(const char *fn, st_counts base)
{
    st_counts now = st_count_of(fn);
    return (st_counts){now.calls - base.calls, now.failed - base.failed};
}

double st_mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- raw PKCS#11 through the shim ---- */

void st_raw_init(void)
{
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof(args));
    args.flags = CKF_OS_LOCKING_OK;
    assert_int_equal(st.fl->C_Initialize(&args), CKR_OK);
}

CK_SLOT_ID st_raw_slot(void)
{
    CK_SLOT_ID slots[16];
    CK_ULONG n = 16;
    assert_int_equal(st.fl->C_GetSlotList(CK_TRUE, slots, &n), CKR_OK);
    for (CK_ULONG i = 0; i < n; i++) {
        CK_TOKEN_INFO ti;
        if (st.fl->C_GetTokenInfo(slots[i], &ti) == CKR_OK &&
            !memcmp(ti.label, ST_TOKEN " ", strlen(ST_TOKEN) + 1))
            return slots[i];
    }
    fail_msg("token '%s' not found", ST_TOKEN);
    return 0;
}

CK_SESSION_HANDLE st_raw_open(CK_SLOT_ID slot)
{
    CK_SESSION_HANDLE s;
    assert_int_equal(st.fl->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s), CKR_OK);
    return s;
}

CK_RV st_raw_login(CK_SESSION_HANDLE s)
{
    return st.fl->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)st.pin, strlen(st.pin));
}

CK_OBJECT_HANDLE st_raw_key(CK_SESSION_HANDLE s)
{
    CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
    CK_ATTRIBUTE t[] = {{CKA_CLASS, &cls, sizeof(cls)}, {CKA_LABEL, "ca-key", 6}};
    CK_OBJECT_HANDLE h = CK_INVALID_HANDLE;
    CK_ULONG n = 0;
    assert_int_equal(st.fl->C_FindObjectsInit(s, t, 2), CKR_OK);
    assert_int_equal(st.fl->C_FindObjects(s, &h, 1, &n), CKR_OK);
    assert_int_equal(st.fl->C_FindObjectsFinal(s), CKR_OK);
    assert_int_equal(n, 1);
    return h;
}

CK_RV st_raw_sign(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key)
{
    CK_MECHANISM mech = {CKM_ECDSA, NULL, 0};
    uint8_t d[32], sig[256];
    CK_ULONG len = sizeof(sig);
    RAND_bytes(d, sizeof(d));
    CK_RV rv = st.fl->C_SignInit(s, &mech, key);
    if (rv != CKR_OK)
        return rv;
    rv = st.fl->C_Sign(s, d, sizeof(d), sig, &len);
    if (rv == CKR_OK)
        assert_int_equal(len, 64); /* P-256 r||s */
    return rv;
}

CK_RV st_raw_sign_fresh(CK_SLOT_ID slot, CK_OBJECT_HANDLE key)
{
    CK_SESSION_HANDLE s = st_raw_open(slot);
    CK_RV rv = st_raw_sign(s, key);
    st.fl->C_CloseSession(s);
    return rv;
}

void st_raw_up(st_raw_env *r)
{
    st_raw_init();
    r->slot = st_raw_slot();
    r->anchor = st_raw_open(r->slot);
    assert_int_equal(st_raw_login(r->anchor), CKR_OK);
    r->key = st_raw_key(r->anchor);
}

void st_raw_down(void)
{
    st_ctl_write("");
    assert_int_equal(st.fl->C_Finalize(NULL), CKR_OK);
}

int st_setup(const char *p11shim_path)
{
    st.dir = tu_mkdtemp("p11shim");
    if (tu_dev_init(st.dir, "ec-p256") != 0)
        return -1;
    char path[1024];
    snprintf(path, sizeof(path), "%s/pin", st.dir);
    if (st_read_file(path, st.pin, sizeof(st.pin)) == 0)
        return -1;
    st.pin[strcspn(st.pin, "\r\n")] = '\0';
    snprintf(st.ctl, sizeof(st.ctl), "%s/control", st.dir);
    snprintf(st.counts, sizeof(st.counts), "%s/counts", st.dir);
    FILE *f = fopen(st.ctl, "w");
    if (!f)
        return -1;
    fclose(f);
    setenv("P11SHIM_MODULE", SOFTHSM, 1);
    setenv("P11SHIM_CONTROL", st.ctl, 1);
    setenv("P11SHIM_COUNTS", st.counts, 1);
    /* Loaded until exit: its state (counts, open files) is per process. */
    st.shim = dlopen(p11shim_path, RTLD_NOW | RTLD_LOCAL);
    if (!st.shim) {
        fprintf(stderr, "dlopen %s: %s\n", p11shim_path, dlerror());
        return -1;
    }
    CK_C_GetFunctionList get;
    *(void **)&get = dlsym(st.shim, "C_GetFunctionList");
    if (!get || get(&st.fl) != CKR_OK)
        return -1;
    return 0;
}
