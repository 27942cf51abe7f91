#!/usr/bin/python3
"""The audit log's publisher (docs/ARCHITECTURE.md §7.6, issue 6 items 3, 4 and 6) on a real `hsmca dev`:
after certificates are issued the audit directory holds vkey, checkpoint, checkpoints/ and
tile/; a signed checkpoint covering the new entries appears within about 2 s and grows; its
Ed25519 signature verifies under vkey, its root is the RFC 9162 root of the log's lines, and
the tiles and entry bundles hold those lines' hashes and bytes; a log changed under a signed
checkpoint makes the restarted signer refuse to start, naming the size and both roots."""
import base64
import hashlib
import os
import signal
import threading
import time
import unittest

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from audit_tree import leaf, log_lines, mth
from hsmca_harness import DevServer


def parse_vkey(text):
    name, keyid, b64 = text.strip().split("+", 2)
    raw = base64.b64decode(b64)
    assert raw[0] == 1 and len(raw) == 33, "an Ed25519 vkey"
    want = hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4]
    assert want.hex() == keyid, "the key ID is SHA-256(name || 0x0A || 0x01 || pub)[:4]"
    return name, bytes.fromhex(keyid), Ed25519PublicKey.from_public_bytes(raw[1:])


def open_checkpoint(note, vkey):
    """(origin, size, root) of a signed note that verifies under vkey (else AssertionError)."""
    name, keyid, pub = vkey
    text, sigs = note.split(b"\n\n", 1)
    text += b"\n"
    ok = False
    for line in sigs.decode().splitlines():
        assert line.startswith("\u2014 "), line
        sname, b64 = line[2:].split(" ")
        blob = base64.b64decode(b64)
        if sname == name and blob[:4] == keyid:
            pub.verify(blob[4:], text)  # raises InvalidSignature
            ok = True
    assert ok, "no signature by the vkey"
    origin, size, root = text.decode().split("\n")[:3]
    return origin, int(size), base64.b64decode(root)


class AuditPublishTests(unittest.TestCase):
    def setUp(self):
        self.server = DevServer("ec-p256", name="auditpub")
        self.server.wait_ready()
        self.audit = os.path.join(self.server.dir, "audit")

    def tearDown(self):
        self.server.stop()

    def read(self, rel):
        with open(os.path.join(self.audit, rel), "rb") as f:
            return f.read()

    def wait_checkpoint(self, size, timeout):
        """The checkpoint once it covers at least size entries, within timeout seconds."""
        deadline = time.time() + timeout
        vkey = parse_vkey(self.read("vkey").decode())
        while True:
            note = self.read("checkpoint")
            cp = open_checkpoint(note, vkey)
            if cp[1] >= size or time.time() > deadline:
                return note, cp
            time.sleep(0.05)

    def check_published(self, note, cp):
        origin, size, root = cp
        lines = log_lines(self.audit)[:size]
        self.assertEqual(len(lines), size)
        self.assertEqual(root, mth([leaf(l) for l in lines]), "root of the log's lines")
        self.assertEqual(self.read("checkpoints/%d" % size), note, "every checkpoint kept")
        # The tiles: a level-0 tile holds the leaf hashes; a bundle the lines, length-prefixed.
        self.assertLess(size, 256 * 256, "the test stays within one level-1 tile")
        for n in range((size + 255) // 256):
            part = lines[n * 256:(n + 1) * 256]
            path = "%03d" % n if len(part) == 256 else "%03d.p/%d" % (n, len(part))
            self.assertEqual(self.read("tile/0/" + path), b"".join(leaf(l) for l in part))
            bundle = b"".join(len(l).to_bytes(2, "big") + l for l in part)
            self.assertEqual(self.read("tile/entries/" + path), bundle)

    def test_checkpoints_tiles_and_growth(self):
        vkey_text = self.read("vkey").decode()
        self.assertTrue(vkey_text.endswith("\n"))
        name = parse_vkey(vkey_text)[0]
        for _ in range(3):
            self.server.issue()
        issued_at = time.time()
        n = len(log_lines(self.audit))
        note, cp = self.wait_checkpoint(n, 2.5)
        self.assertGreaterEqual(cp[1], n, "a checkpoint covers the new entries within ~2 s")
        self.assertLess(time.time() - issued_at, 3.0)
        self.assertEqual(cp[0], name, "the origin is the key name")
        for entry in ("vkey", "checkpoint", "checkpoints", "tile"):
            self.assertTrue(os.path.exists(os.path.join(self.audit, entry)), entry)
        self.check_published(note, cp)
        first = cp[1]
        for _ in range(4):
            self.server.issue()
        n = len(log_lines(self.audit))
        note, cp = self.wait_checkpoint(n, 2.5)
        self.assertGreater(cp[1], first, "the checkpoint grows")
        self.check_published(note, cp)
        self.assertGreaterEqual(len(os.listdir(os.path.join(self.audit, "checkpoints"))), 2)

    def test_kill_under_load(self):
        """kill -9 of the signer while it issues, twice: each new signer checks the log
        against the latest checkpoint, repairs what the kill cut short, and every checkpoint
        ever written is a signed prefix of the log."""
        stop = threading.Event()
        issued = []

        def load():
            while not stop.is_set():
                try:
                    self.server.issue()
                    issued.append(1)
                except Exception:  # UNAVAILABLE while the signer restarts
                    time.sleep(0.05)

        t = threading.Thread(target=load)
        t.start()
        try:
            for _ in range(2):
                time.sleep(1.2)
                signer = self.server.wait_children()["signer"]
                os.kill(signer, signal.SIGKILL)
                self.server.wait_children(exclude=(signer,))
            time.sleep(1.0)
        finally:
            stop.set()
            t.join()
        self.server.issue()
        self.assertGreater(len(issued), 5)
        n = len(log_lines(self.audit))
        note, cp = self.wait_checkpoint(n, 3.0)
        self.assertGreaterEqual(cp[1], n)
        self.check_published(note, cp)
        vkey = parse_vkey(self.read("vkey").decode())
        lines = log_lines(self.audit)
        for name in os.listdir(os.path.join(self.audit, "checkpoints")):
            _, size, root = open_checkpoint(self.read("checkpoints/" + name), vkey)
            self.assertEqual(name, str(size))
            self.assertEqual(root, mth([leaf(l) for l in lines[:size]]), name)
        self.assertNotIn("refusing", self.server.logtext())

    def test_changed_log_refuses_restart(self):
        self.server.verify_log_at_stop = False  # changed on purpose
        self.server.issue()
        n = len(log_lines(self.audit))
        _, cp = self.wait_checkpoint(n, 2.5)
        self.assertGreaterEqual(cp[1], 2)
        # One hex digit of the first intent's TBS hash, under the checkpoint: still a valid
        # entry, so only the root can tell.
        path = os.path.join(self.audit, "log")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        at = data.index(b'"tbs_sha256":"') + 14
        self.assertLess(data[:at].count(b"\n"), cp[1])
        data[at] = ord("a") if data[at] != ord("a") else ord("b")
        with open(path, "r+b") as f:
            f.write(data)
        signer = self.server.wait_children()["signer"]
        os.kill(signer, signal.SIGKILL)
        try:
            self.server.proc.wait(30)
        except Exception:
            self.fail("the server kept running on a changed log:\n" + self.server.logtext())
        text = self.server.logtext()
        self.assertRegex(text, r"refusing to start: root mismatch at size \d+: the log's root is "
                               r"[0-9a-f]{64}, checkpoint's is [0-9a-f]{64}")
        self.assertNotEqual(self.server.proc.returncode, 0)


if __name__ == "__main__":
    unittest.main()
