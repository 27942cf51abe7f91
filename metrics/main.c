/* main.c - `hsmca-metrics`, the metrics and health listener (docs/ARCHITECTURE.md §1): the supervisor
 * execs it when metrics.listen is set. It holds no secret and links no gRPC or PKCS#11
 * code: it serves HTTP and asks the front end for every answer. */
#include "metrics.h"

int main(int argc, char **argv)
{
    return metrics_main(argc, argv);
}
