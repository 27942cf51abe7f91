/* sup_exec.c - see sup_exec.h. */
#include "sup_exec.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A regular file we may execute. */
static int is_program(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

hsmca_code sup_exec_find(const char *self, const char *role, char *out, size_t outsz,
                         hsmca_err *e)
{
    const char *slash = strrchr(self, '/');
    HSMCA_ENSURE(self[0] == '/' && slash, e, HSMCA_EINVAL,
                 "our own executable '%s' is not an absolute path", self);
    int dirlen = (int)(slash - self);
    char beside[4096], libexec[4096];
    int a = snprintf(beside, sizeof(beside), "%.*s/hsmca-%s", dirlen, self, role);
    int b = snprintf(libexec, sizeof(libexec), "%.*s/../libexec/hsmca/hsmca-%s", dirlen, self,
                     role);
    HSMCA_ENSURE(a > 0 && (size_t)a < sizeof(beside) && b > 0 && (size_t)b < sizeof(libexec), e,
                 HSMCA_EINVAL, "the path of hsmca-%s is too long", role);
    const char *found = is_program(beside) ? beside : is_program(libexec) ? libexec : NULL;
    HSMCA_ENSURE(found, e, HSMCA_ENOTFOUND,
                 "cannot find the program hsmca-%s: neither %s nor %s is an executable file "
                 "(install it with hsmca)",
                 role, beside, libexec);
    HSMCA_ENSURE(strlen(found) < outsz, e, HSMCA_EINVAL, "the path %s is too long", found);
    memcpy(out, found, strlen(found) + 1);
    return HSMCA_OK;
}
