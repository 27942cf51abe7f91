/* version.h - `hsmca version`: what an operator or a bug report needs to know of a build. */
#ifndef HSMCA_VERSION_CMD_H
#define HSMCA_VERSION_CMD_H

/* Prints hsmca's version and commit, then each library's version as built against and as
 * running (they differ after a library update without a rebuild). Returns 0. */
int version_main(void);

#endif
