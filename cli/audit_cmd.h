/* audit_cmd.h - `hsmca audit ...`: the auditor's commands over a signing-log directory
 * (audit/audit_verify.h), offline: no token, no server. */
#ifndef HSMCA_AUDIT_CMD_H
#define HSMCA_AUDIT_CMD_H

/* `hsmca audit verify|prove|consistency|show|vkey ...` (argv[0] is "audit"). Exit code:
 * 0 verified / done, 1 does not verify (or not found), 2 bad usage. */
int audit_main(int argc, char **argv);

#endif
