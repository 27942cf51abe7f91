"""The signing log's RFC 9162 tree recomputed in Python, apart from audit/: the lines
of audit.dir/log, their leaf hashes and the tree head over them, so a test checks a
published root against a second implementation."""
import base64
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


def note_signatures(note, name, keyid):
    """(text, sigs) of a C2SP signed note (bytes): the signed text, through its last
    newline, and the signatures (key ID stripped) of the lines by key `name` whose
    4-byte key ID is keyid. Every signature line must start with an em dash."""
    i = note.rindex(b"\n\n")
    text, sigs = note[:i + 1], []
    for line in note[i + 2:].decode().splitlines():
        assert line.startswith("\u2014 "), line
        sname, b64 = line[2:].split(" ")
        blob = base64.b64decode(b64, validate=True)
        if sname == name and blob[:4] == keyid:
            sigs.append(blob[4:])
    return text, sigs
