/* dev.h - the embedded default: `hsmca dev` (docs/ARCHITECTURE.md §9). */
#ifndef HSMCA_DEV_H
#define HSMCA_DEV_H

/* `hsmca dev [init|token] ...`. Returns an exit code. */
int dev_main(int argc, char **argv);

#endif
