"""The signing log's RFC 9162 tree recomputed in Python, apart from audit/: the lines
of audit.dir/log, their leaf hashes and the tree head over them, so a test checks a
published root against a second implementation."""
import hashlib
import os


def log_lines(audit):
    """The entries of audit/log, each without its newline."""
    with open(os.path.join(audit, "log"), "rb") as f:
        return f.read().split(b"\n")[:-1]


def leaf(line):
    return hashlib.sha256(b"\x00" + line).digest()


def mth(hashes):
    """RFC 9162 MTH over leaf hashes."""
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while k * 2 < len(hashes):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(hashes[:k]) + mth(hashes[k:])).digest()
