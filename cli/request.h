/* request.h - `hsmca request`: a CreateCertificate client on gRPC core. */
#ifndef HSMCA_REQUEST_H
#define HSMCA_REQUEST_H

/* Generates a key and a CSR for --id, asks the CA at --addr over TLS (trusting
 * --root) with the bearer --token, prints the chain. Returns an exit code. */
int request_main(int argc, char **argv);

#endif
