/* child_args.c - see child_args.h. */
#include "child_args.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>

/* A descriptor number: decimal digits only, no sign or space, above stdio (0-2). */
static int parse_fd(const char *s, int *fd)
{
    if (!s || *s < '0' || *s > '9')
        return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 3 || v > INT_MAX)
        return 0;
    *fd = (int)v;
    return 1;
}

int child_args_parse(int argc, char **argv, void (*usage)(FILE *), child_args *out)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"ipc-fd", required_argument, 0, 'i'},
                                         {"ctl-fd", required_argument, 0, 'k'},
                                         {"metrics-fd", required_argument, 0, 'm'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    *out = (child_args){NULL, -1, -1, -1};
    int c, ok = 1;
    optind = 0; /* a full reset, so the parser can run more than once per process */
    while ((c = getopt_long(argc, argv, "c:i:k:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': out->config = optarg; break;
        case 'i': ok &= parse_fd(optarg, &out->ipc_fd); break;
        case 'k': ok &= parse_fd(optarg, &out->ctl_fd); break;
        case 'm': ok &= parse_fd(optarg, &out->metrics_fd); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!ok || optind != argc || !out->config || !*out->config || out->ipc_fd < 0 ||
        out->ctl_fd < 0 || out->ipc_fd == out->ctl_fd || out->metrics_fd == out->ipc_fd ||
        out->metrics_fd == out->ctl_fd) {
        usage(stderr);
        return 2;
    }
    return -1;
}
