/* main.c - `hsmca-keyfetch`, the key fetcher: the supervisor execs it when an issuer's
 * keys come by OpenID discovery (auth.jwt.discovery), so that the one root process
 * neither talks to the network nor parses what comes from it (keyfetch.h). */
#include "keyfetch.h"

int main(int argc, char **argv)
{
    return keyfetch_main(argc, argv);
}
