/* serve.c - see serve.h. */
#include "serve.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "sup_exec.h"

extern char **environ;

int serve_exec(const char *config)
{
    char self[PATH_MAX], prog[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot find our own executable",
                  LOG_STR("error", strerror(errno)));
        return EXIT_CONFIG;
    }
    self[n] = '\0';
    hsmca_err e;
    if (sup_exec_find(self, "supervisor", prog, sizeof(prog), &e) != HSMCA_OK) {
        LOG_EVENT(LOG_LVL_ERROR, "cannot find hsmca-supervisor", LOG_STR("error", e.msg));
        return EXIT_CONFIG;
    }
    char *argv[] = {prog, "--config", (char *)config, "--hsmca", self, NULL};
    fflush(NULL);
    execve(prog, argv, environ);
    LOG_EVENT(LOG_LVL_ERROR, "cannot run the supervisor", LOG_STR("path", prog),
              LOG_STR("error", strerror(errno)));
    return EXIT_CONFIG;
}
