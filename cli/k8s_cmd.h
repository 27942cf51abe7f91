/* k8s_cmd.h - `hsmca k8s ...`: the commands that talk to a Kubernetes cluster, each a
 * program of its own that this one execs (publish-roots: hsmca-publish, publish/). */
#ifndef HSMCA_K8S_CMD_H
#define HSMCA_K8S_CMD_H

/* `hsmca k8s SUBCOMMAND ...`: execs the subcommand's program with the flags that follow
 * its name (it does not return then); else 2 (usage), 0 (--help) or 78 (EXIT_CONFIG:
 * the program is not installed beside hsmca). */
int k8s_main(int argc, char **argv);

#endif
