/* audit_pubfs.h - the file operations of the checkpoint publisher (audit_publish.c), all
 * relative to the audit directory's descriptor: files replaced by write-temp + fsync +
 * rename, new files that never replace an old one, reads for comparison, and byte ranges
 * of DIR/log. Not part of the module's API. */
#ifndef HSMCA_AUDIT_PUBFS_H
#define HSMCA_AUDIT_PUBFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hsmca_err.h"

/* Who owns what the publisher creates: when the signer starts as root it creates files for
 * the user it then runs as (owner (uid_t)-1: leave them to the creator). */
typedef struct {
    int root; /* the audit directory */
    uid_t owner;
    gid_t group;
} pubfs;

/* Replaces root/rel with data[0..len) (a temp file in root/.tmp/ written and renamed over
 * rel: readers see the old bytes or the new, never a part), making missing directories
 * (0755). With durable, the file is fsynced before the rename and its directory after, so
 * the new bytes survive a power loss; tiles go without (a power loss may lose one, the next
 * start rewrites it from the log, and a client checks every tile against a checkpoint). */
HSMCA_MUSTCHECK hsmca_code pubfs_replace(const pubfs *fs, const char *rel, const void *data,
                                         size_t len, int durable, hsmca_err *e);

/* Creates root/rel with data[0..len) atomically (a temp file renamed without replacing),
 * fsyncs it and its directory. *existed is 1, and nothing is written, when rel already
 * exists (the caller compares its bytes). */
HSMCA_MUSTCHECK hsmca_code pubfs_create(const pubfs *fs, const char *rel, const void *data,
                                        size_t len, int *existed, hsmca_err *e);

/* Reads root/rel (at most max bytes) into a new buffer (caller frees *out); HSMCA_ENOTFOUND
 * when it does not exist. A file longer than max is HSMCA_EINVAL. */
HSMCA_MUSTCHECK hsmca_code pubfs_read(const pubfs *fs, const char *rel, size_t max, uint8_t **out,
                                      size_t *len, hsmca_err *e);

/* 1 when root/rel holds exactly data[0..len). */
int pubfs_same(const pubfs *fs, const char *rel, const void *data, size_t len);

/* Reads bytes [off, off + len) of fd into buf (the caller's, len bytes). */
HSMCA_MUSTCHECK hsmca_code pubfs_pread(int fd, uint64_t off, size_t len, uint8_t *buf,
                                       hsmca_err *e);

#endif
