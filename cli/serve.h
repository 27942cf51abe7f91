/* serve.h - how `hsmca serve` and `hsmca dev` become the supervisor: by exec'ing the
 * program hsmca-supervisor (supervisor/main.c) in this same process, so that its pid,
 * the signals it is sent and its exit status are the service's. */
#ifndef HSMCA_SERVE_H
#define HSMCA_SERVE_H

/* Execs hsmca-supervisor --config config --hsmca SELF, where SELF is this program and the
 * supervisor's program is found beside it or in ../libexec/hsmca/ (sup_exec_find, never
 * PATH), with this process's environment. Stdio is flushed first. Returns only when that
 * fails: EXIT_CONFIG, after logging why (an installation error no restart cures). */
int serve_exec(const char *config);

#endif
