/* audit_publish_int.h - the publisher's state, shared by audit_publish.c (the right edge,
 * the checks, the rounds) and audit_publish_run.c (open, the latest checkpoint, the
 * thread). Private to audit/. */
#ifndef HSMCA_AUDIT_PUBLISH_INT_H
#define HSMCA_AUDIT_PUBLISH_INT_H

#include <pthread.h>

#include "audit_pubfs.h"
#include "audit_publish.h"
#include "audit_tiles.h"

/* Tree sizes stay below 2^63: tile levels 0..7. */
#define PUB_LEVELS 8

struct audit_publish {
    char dir[4096];
    char origin[AUDIT_NAME_MAX + 1];
    audit_vkey vk;
    audit_note_signer sign;
    void *sign_ctx;
    pubfs fs; /* fs.root is -1 until the directory is needed */
    int logfd;
    audit_log *log; /* not owned; set by attach */

    /* The latest checkpoint on disk (cp_* under mu once the thread runs). */
    int have_cp;
    uint64_t cp_size;
    audit_hash cp_root;
    char *cp_note; /* its bytes */
    size_t cp_note_len;
    char cp_file[32]; /* where it was read: "checkpoint" or "checkpoints/<n>" */
    int64_t cp_time;  /* Unix seconds it was signed (its file's mtime at start); 0: unknown */
    /* At start: whether the log's root at cp_size was checked and equal; tiles within the
     * checkpoint that differ are only counted (damaged) until it was, then rewritten. */
    int root_ok;
    uint64_t repaired, damaged;

    /* The right edge: lines [0, size) read, ending at byte `bytes` of DIR/log; the current
     * bundle starts at bundle_off; lv[L] holds the partial level-L tile's n hashes, of which
     * the first `published` are on disk as tile/L/<N>.p/<published>. */
    audit_tree tree;
    uint64_t size, bytes, bundle_off;
    struct {
        uint8_t h[AUDIT_TILE_BYTES];
        unsigned n, published;
    } lv[PUB_LEVELS];
    /* A full tile per level waiting to be written (a write failed; retried first), with its
     * index and, at level 0, its bundle's lines at [boff, bend) of DIR/log. */
    struct {
        uint8_t h[AUDIT_TILE_BYTES];
        uint64_t index, boff, bend;
        int pending;
    } full[PUB_LEVELS];
    int broken;    /* a hash of the edge could not be computed: no more rounds */
    uint8_t *rbuf; /* 2 * AUDIT_LINE_MAX, for reading new lines */

    /* The thread. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    pthread_t thread;
    int started, stopping, done;
    double interval;
    char last_err[sizeof(((hsmca_err *)0)->msg)];
};

/* The lines of DIR/log in [p->bytes, end), count of them, into the edge: new durable lines
 * (written as tiles complete), or with replay the existing ones again (a repair pass). */
HSMCA_MUSTCHECK hsmca_code pub_read_lines(audit_publish *p, uint64_t end, uint64_t count,
                                          int replay, hsmca_err *e);

/* HSMCA_OK (and root_ok set) when the tree's root (the empty root for a size-0 checkpoint)
 * is the latest checkpoint's; else HSMCA_EINVAL naming the size and both roots. */
HSMCA_MUSTCHECK hsmca_code pub_check_root(audit_publish *p, hsmca_err *e);

/* Opens the directory and DIR/log for reading, when not yet open. */
HSMCA_MUSTCHECK hsmca_code pub_ensure_open(audit_publish *p, hsmca_err *e);

/* How a tile reaches the disk: written (live); at start, compared and rewritten when
 * missing or different (repair), or only compared and counted in damaged (compare: before
 * the log's root was checked against the checkpoint, a tampered log must not overwrite the
 * tiles that still show the signed tree). */
typedef enum { PUT_WRITE, PUT_REPAIR, PUT_COMPARE } pub_put_mode;

#endif
