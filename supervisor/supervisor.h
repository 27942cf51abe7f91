/* supervisor.h - the supervisor, `hsmca serve`'s process once it has exec'd
 * hsmca-supervisor (supervisor/main.c; docs/ARCHITECTURE.md §1). */
#ifndef HSMCA_SUPERVISOR_H
#define HSMCA_SUPERVISOR_H

/* Starts the signer and the front end from config_path (fork + exec of their programs,
 * hsmca-ROLE, found from cli_path: the hsmca program, an absolute path, sup_exec.h),
 * connects them with a socketpair, restarts a child that dies (with
 * backoff) and hands the survivor a fresh connection. Returns on SIGTERM or
 * SIGINT after stopping its children (0), or with EXIT_CONFIG when the config is
 * bad or a child cannot start for a reason a restart will not cure (a wrong PIN:
 * a service manager must not retry it). With metrics.listen it also runs
 * hsmca-metrics, with publish.enabled hsmca-publish (sup_publish.h).
 * Holds no secret: publish.kubeconfig is loaded once at start to check it, then wiped. */
int supervisor_run(const char *config_path, const char *cli_path);

#endif
