/* main.c - `hsmca-publish`, the root-distribution program: `hsmca k8s publish-roots`
 * execs it with the operator's flags, and the supervisor of `hsmca serve` runs it as a
 * child when publish.enabled is set. It holds the API server's credentials and nothing
 * of the CA's: it links the publish, k8s, http and common modules only, no gRPC and no
 * PKCS#11 code. */
#include "k8s_publish.h"

int main(int argc, char **argv)
{
    return kp_main(argc, argv);
}
