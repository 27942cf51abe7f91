/* bench_proc.h - CPU and memory figures of processes, shared by the benchmarks
 * (bench_signer, loadgen). A pid of 0 or less is no process: -1. */
#ifndef HSMCA_BENCH_PROC_H
#define HSMCA_BENCH_PROC_H

#include <sys/types.h>

/* CPU seconds (user + system) of this process. */
double bench_self_cpu(void);
/* CPU seconds of pid from /proc/PID/stat, or -1. */
double bench_proc_cpu(pid_t pid);
/* Peak resident set (VmHWM) of pid in MiB, or -1. */
double bench_proc_hwm_mib(pid_t pid);
/* Resident set now (VmRSS) of pid in MiB, or -1. */
double bench_proc_rss_mib(pid_t pid);

#endif
