/* netprobe_pkcs11.c - a PKCS#11 module for test_sandbox.py that stands in for a
 * client library that reaches something outside the signer (a network HSM's
 * appliance, a TPM resource manager, a local HSM daemon, SysV shared memory): it
 * forwards every call to SoftHSM, and in each C_Sign first makes the attempts its
 * environment names, writing what happened to stderr ("netprobe: ... in C_Sign: ...").
 *
 *   NETPROBE_TRY   attempts only reported
 *   NETPROBE_NEED  attempts the module needs: when one fails, C_Sign answers
 *                  CKR_GENERAL_ERROR without signing, as tpm2-pkcs11 does when its
 *                  resource manager cannot be reached
 *
 * Each is a space-separated list of: socket (socket(AF_INET) only), unix:PATH
 * (connect to a unix socket), inet:PORT (connect to 127.0.0.1:PORT), shm (shmget of a
 * private segment, removed at once). With neither set: NETPROBE_TRY=socket.
 *
 * It lets the test watch the signer's real seccomp filter refuse or permit these from
 * inside the module, without a test-only path in the signer. Never used outside tests. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <pkcs11.h>

#define REAL_MODULE "/usr/lib/softhsm/libsofthsm2.so"
#define MAX_PROBES 8

typedef struct {
    char what[112]; /* "socket", "unix:/path", "inet:1234", "shm" */
    int needed;
} probe;

static CK_FUNCTION_LIST probe_list;
static CK_C_Sign real_sign;
static probe probes[MAX_PROBES];
static int n_probes;

static void add_probes(const char *list, int needed)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", list ? list : "");
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && n_probes < MAX_PROBES;
         t = strtok_r(NULL, " ", &save)) {
        snprintf(probes[n_probes].what, sizeof(probes[n_probes].what), "%s", t);
        probes[n_probes++].needed = needed;
    }
}

static void report(const char *what, int ok, int err)
{
    char line[200];
    int n = snprintf(line, sizeof(line), "netprobe: %s in C_Sign: %s\n", what,
                     ok ? "allowed" : strerror(err));
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

/* Connects a new socket of family af to addr; 0 or an errno. */
static int try_connect(int af, const struct sockaddr *addr, socklen_t len)
{
    int fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    int rc = connect(fd, addr, len) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

/* One attempt, reported; 1 when it worked. */
static int attempt(const probe *p)
{
    int err = 0;
    if (!strcmp(p->what, "socket")) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        err = fd >= 0 ? 0 : errno;
        if (fd >= 0)
            close(fd);
        report("socket(AF_INET)", !err, err);
    } else if (!strncmp(p->what, "unix:", 5)) {
        struct sockaddr_un un = {.sun_family = AF_UNIX};
        snprintf(un.sun_path, sizeof(un.sun_path), "%s", p->what + 5);
        err = try_connect(AF_UNIX, (const struct sockaddr *)&un, sizeof(un));
        report("connect(AF_UNIX)", !err, err);
    } else if (!strncmp(p->what, "inet:", 5)) {
        struct sockaddr_in in = {.sin_family = AF_INET,
                                 .sin_port = htons((unsigned short)atoi(p->what + 5)),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        err = try_connect(AF_INET, (const struct sockaddr *)&in, sizeof(in));
        report("connect(AF_INET)", !err, err);
    } else if (!strcmp(p->what, "shm")) {
        int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
        err = id >= 0 ? 0 : errno;
        if (id >= 0)
            shmctl(id, IPC_RMID, NULL);
        report("shmget", !err, err);
    } else {
        err = EINVAL;
        report(p->what, 0, err);
    }
    return !err;
}

static CK_RV probe_sign(CK_SESSION_HANDLE s, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig,
                        CK_ULONG_PTR sig_len)
{
    int failed = 0;
    if (sig) /* the signing call, not a length query */
        for (int i = 0; i < n_probes; i++)
            failed |= !attempt(&probes[i]) && probes[i].needed;
    if (failed)
        return CKR_GENERAL_ERROR;
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
        const char *try_list = getenv("NETPROBE_TRY"), *need_list = getenv("NETPROBE_NEED");
        add_probes(try_list || need_list ? try_list : "socket", 0);
        add_probes(need_list, 1);
        probe_list = *real;
        real_sign = real->C_Sign;
        probe_list.C_Sign = probe_sign;
    }
    *out = &probe_list;
    return CKR_OK;
}
