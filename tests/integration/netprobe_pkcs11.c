/* netprobe_pkcs11.c - a PKCS#11 module for test_sandbox.py that stands in for a
 * network HSM's client library: it forwards every call to SoftHSM, and in each
 * C_Sign first tries to open a TCP socket, as such a library would to reach its
 * appliance, and writes what happened to stderr ("netprobe: socket ...").
 *
 * It lets the test watch the signer's real seccomp filter refuse (or, with
 * signer.seccomp_allow_network, permit) the network from inside the module,
 * without a test-only path in the signer. Never used outside tests. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pkcs11.h>

#define REAL_MODULE "/usr/lib/softhsm/libsofthsm2.so"

static CK_FUNCTION_LIST probe_list;
static CK_C_Sign real_sign;

static void probe_network(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err = errno;
    char line[128];
    int n = snprintf(line, sizeof(line), "netprobe: socket(AF_INET) in C_Sign: %s\n",
                     fd >= 0 ? "allowed" : strerror(err));
    if (fd >= 0)
        close(fd);
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

static CK_RV probe_sign(CK_SESSION_HANDLE s, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig,
                        CK_ULONG_PTR sig_len)
{
    if (sig) /* the signing call, not a length query */
        probe_network();
    return real_sign(s, data, len, sig, sig_len);
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR out)
{
    if (!out)
        return CKR_ARGUMENTS_BAD;
    if (!real_sign) {
        void *h = dlopen(REAL_MODULE, RTLD_NOW | RTLD_LOCAL);
        CK_C_GetFunctionList get = h ? (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList") : NULL;
        CK_FUNCTION_LIST_PTR real = NULL;
        if (!get || get(&real) != CKR_OK || !real)
            return CKR_GENERAL_ERROR;
        probe_list = *real;
        real_sign = real->C_Sign;
        probe_list.C_Sign = probe_sign;
    }
    *out = &probe_list;
    return CKR_OK;
}
