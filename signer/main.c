/* main.c - `hsmca-signer`, the privileged signer program (docs/ARCHITECTURE.md §1, §3): the
 * supervisor (`hsmca serve`) execs it with the token's config and its two sockets.
 * It links only the signer's modules; docs/SECURITY.md lists them as the reading
 * list of the privileged code. */
#include "signer.h"

int main(int argc, char **argv)
{
    return signer_main(argc, argv);
}
