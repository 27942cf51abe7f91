/* frontend.h - the unprivileged, sandboxed front end process (docs/ARCHITECTURE.md §1, §4). */
#ifndef HSMCA_FRONTEND_H
#define HSMCA_FRONTEND_H

/* `hsmca-frontend --config FILE --ipc-fd N --ctl-fd M`. Returns an exit code. */
int frontend_main(int argc, char **argv);

#endif
