/* audit_lines.h - the one reader of the log's lines (docs/ARCHITECTURE.md §7.2), used by the writer's
 * replay at open (audit_log.c), the offline verifier (audit_verify.c) and `audit show`:
 * one fixed buffer, a line longer than AUDIT_LINE_MAX refused, never buffered, so memory
 * stays bounded whatever the file holds. */
#ifndef HSMCA_AUDIT_LINES_H
#define HSMCA_AUDIT_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "hsmca_err.h"

typedef struct audit_lines audit_lines;

/* Opens path for audit_lines_next (caller closes with audit_lines_close). */
HSMCA_MUSTCHECK hsmca_code audit_lines_open(const char *path, audit_lines **out, hsmca_err *e);

/* Reads fd, already open at its start (taken: audit_lines_close closes it). With
 * torn_ok, a last line without '\n' (shorter than AUDIT_LINE_MAX) ends the file instead
 * of failing, and audit_lines_torn gives its length: the writer's open cuts it, since a
 * crash in the middle of a write leaves one. On failure fd is closed. */
HSMCA_MUSTCHECK hsmca_code audit_lines_open_fd(int fd, int torn_ok, audit_lines **out,
                                               hsmca_err *e);

/* The next line into *line / *len (without its '\n', valid until the next call) and its
 * byte offset into *off; *eof = 1 (and nothing else set) at the end. HSMCA_EPERM naming
 * the offset for a line longer than AUDIT_LINE_MAX with its '\n', or (unless torn_ok) a
 * last line without '\n'; HSMCA_EIO when the file cannot be read. */
HSMCA_MUSTCHECK hsmca_code audit_lines_next(audit_lines *r, const char **line, size_t *len,
                                            uint64_t *off, int *eof, hsmca_err *e);

/* After *eof: the bytes of a torn last line (torn_ok), at the offset past the last line. */
uint64_t audit_lines_torn(const audit_lines *r);

void audit_lines_close(audit_lines *r);

#endif
