/* bench_proc.c - CPU and memory figures of processes, for the benchmarks
 * (bench_proc.h). */
#include "bench_proc.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

double bench_self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* utime + stime: fields 14 and 15 of /proc/PID/stat. */
double bench_proc_cpu(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = pid > 0 ? fopen(path, "r") : NULL;
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A "Key:   N kB" line of /proc/PID/status, in MiB. */
static double status_mib(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = pid > 0 ? fopen(path, "r") : NULL;
    if (!f)
        return -1;
    double mib = -1;
    unsigned long kb;
    size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':' &&
            sscanf(line + klen + 1, "%lu kB", &kb) == 1)
            mib = kb / 1024.0;
    fclose(f);
    return mib;
}

double bench_proc_hwm_mib(pid_t pid)
{
    return status_mib(pid, "VmHWM");
}

double bench_proc_rss_mib(pid_t pid)
{
    return status_mib(pid, "VmRSS");
}
