/* intermediate_cmd.h - `hsmca intermediate request|list|show|approve|deny|fetch`: istiod
 * intermediate CAs through the signer's admin socket (signer/signer_ica.h). */
#ifndef HSMCA_INTERMEDIATE_CMD_H
#define HSMCA_INTERMEDIATE_CMD_H

int intermediate_main(int argc, char **argv);

#endif
