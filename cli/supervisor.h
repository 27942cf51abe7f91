/* supervisor.h - `hsmca serve`'s parent process (DESIGN.md §1). */
#ifndef HSMCA_SUPERVISOR_H
#define HSMCA_SUPERVISOR_H

/* Starts the signer and the front end from config_path (fork + exec of this
 * binary), connects them with a socketpair, restarts a child that dies (with
 * backoff) and hands the survivor a fresh connection. Returns on SIGTERM or
 * SIGINT after stopping both children. Holds no secret. */
int supervisor_run(const char *config_path);

#endif
