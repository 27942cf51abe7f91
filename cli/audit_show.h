/* audit_show.h - `hsmca audit show`. */
#ifndef HSMCA_AUDIT_SHOW_H
#define HSMCA_AUDIT_SHOW_H

/* `hsmca audit show ...` (argv[0] is "show"); exit code as audit_main's. */
int audit_show_main(int argc, char **argv);

#endif
