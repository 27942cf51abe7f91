/* main.c - `hsmca-frontend`, the sandboxed gRPC front end program (docs/ARCHITECTURE.md §1,
 * §4): the supervisor (`hsmca serve`) execs it with the config and its two
 * sockets. It links no PKCS#11 code. */
#include "frontend.h"

int main(int argc, char **argv)
{
    return frontend_main(argc, argv);
}
