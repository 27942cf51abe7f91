/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* 1 when every parent directory of path lets other users through. */
static int parents_searchable(const char *path)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s", path);
    for (char *slash = strrchr(p, '/'); slash && slash != p; slash = strrchr(p, '/')) {
        *slash = '\0';
        struct stat st;
        if (stat(p, &st) != 0 || !(st.st_mode & S_IXOTH))
            return 0;
    }
    return 1;
}

char *tu_mkdtemp(const char *prefix)
{
    const char *base = getenv("HSMCA_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    /* A signer started as root drops to hsmca-signer and must still reach the
     * token under this directory (as hsmca_harness.scratch_base does). */
    if (base[0] != '/' || !parents_searchable(base))
        base = "/tmp/hsmca-test";
    mkdir(base, 0711);
    if (geteuid() == 0 && strcmp(base, "/tmp") != 0)
        chmod(base, 0711);
    size_t n = strlen(base) + strlen(prefix) + 16;
    char *path = malloc(n);
    if (!path)
        abort();
    snprintf(path, n, "%s/%s.XXXXXX", base, prefix);
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

const char *tu_hsmca_bin(void)
{
    const char *b = getenv("HSMCA_BIN");
    return (b && *b) ? b : "hsmca";
}

int tu_system(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(cmd))
        return -1;
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int tu_dev_init(const char *dir, const char *keytype)
{
    int rc = tu_system("'%s' dev init --dir '%s' --ca-key %s >'%s/init.log' 2>&1",
                       tu_hsmca_bin(), dir, keytype, dir);
    if (rc != 0) {
        fprintf(stderr, "tu_dev_init: hsmca dev init failed (%d), see %s/init.log\n", rc, dir);
        return -1;
    }
    char conf[1024];
    snprintf(conf, sizeof(conf), "%s/softhsm2.conf", dir);
    setenv("SOFTHSM2_CONF", conf, 1);
    return 0;
}
