#!/usr/bin/python3
"""An ECDSA P-256 or P-384 audit key (`hsmca dev --audit-key ec-p256|ec-p384`, for tokens
without EdDSA) on a real `hsmca dev` with a real SoftHSM token: certificates are issued, a
checkpoint covering them appears, and `hsmca audit verify`, `audit prove` and `audit
consistency` pass on the directory, also after a restart that checks the log against the
latest checkpoint.

The checkpoint is also checked by two other implementations reading only the published
files: Python's `cryptography`, and the `openssl dgst` command line given the vkey's SPKI
as PEM, the note text and the DER signature as files. The vkey is name+hex8(key ID)+
base64(0x02 || DER SubjectPublicKeyInfo) with key ID = SHA-256(SPKI)[:4]
(c2sp.org/signed-note, type 0x02), and the signature line is key ID || a DER ECDSA
signature over SHA-256 of the note text, whatever the curve. The root is the RFC 9162
root of the log's lines, computed here."""
import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from audit_tree import leaf, log_lines, mth, note_signatures
from hsmca_harness import BIN, DevServer


CURVES = {"ec-p256": ec.SECP256R1, "ec-p384": ec.SECP384R1}


def parse_ec_vkey(text, curve="ec-p256"):
    """(name, key ID, public key, SPKI) of a type-0x02 vkey on curve, checked byte by byte."""
    name, keyid, b64 = text.strip().split("+", 2)
    raw = base64.b64decode(b64, validate=True)
    assert raw[0] == 2, "an ECDSA vkey starts with 0x02, not %#x" % raw[0]
    spki = raw[1:]
    pub = serialization.load_der_public_key(spki)
    assert isinstance(pub, ec.EllipticCurvePublicKey), type(pub)
    assert isinstance(pub.curve, CURVES[curve]), pub.curve.name
    assert pub.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo) == spki, \
        "the SPKI is DER with an uncompressed point"
    assert hashlib.sha256(spki).digest()[:4].hex() == keyid, "key ID = SHA-256(SPKI)[:4]"
    return name, bytes.fromhex(keyid), pub, spki


def open_checkpoint(note, vkey):
    """(origin, size, root) of a signed note whose ECDSA signature by vkey verifies."""
    name, keyid, pub, _ = vkey
    text, sigs = note_signatures(note, name, keyid)
    assert sigs, "no signature by the vkey"
    for sig in sigs:
        decode_dss_signature(sig)  # DER ECDSA-Sig-Value, not r||s
        pub.verify(sig, text, ec.ECDSA(hashes.SHA256()))  # raises InvalidSignature
    origin, size, root = text.decode().split("\n")[:3]
    return origin, int(size), base64.b64decode(root)


def openssl_verify(note, vkey, tmp):
    """1 when `openssl dgst -sha256 -verify` accepts vkey's signature line of note, 0 when it
    refuses it: the SPKI made PEM here (base64 in 64-column lines), no code of ours or of
    Python's verifier between."""
    name, keyid, _, spki = vkey
    text, sigs = note_signatures(note, name, keyid)
    assert sigs, "no signature line by the vkey"
    sig = sigs[-1]
    b64 = base64.b64encode(spki).decode()
    pem = "-----BEGIN PUBLIC KEY-----\n%s\n-----END PUBLIC KEY-----\n" % "\n".join(
        b64[j:j + 64] for j in range(0, len(b64), 64))
    files = {}
    for what, data in (("pub.pem", pem.encode()), ("note.txt", text), ("sig.der", sig)):
        files[what] = os.path.join(tmp, what)
        with open(files[what], "wb") as f:
            f.write(data)
    r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", files["pub.pem"],
                        "-signature", files["sig.der"], files["note.txt"]],
                       capture_output=True, text=True, timeout=30)
    if r.returncode == 0 and r.stdout.strip() == "Verified OK":
        return 1
    assert r.returncode == 1 and "Verification failure" in r.stdout, r.stdout + r.stderr
    return 0


def audit(*args):
    return subprocess.run([BIN, "audit"] + list(args), capture_output=True, text=True,
                          timeout=120)


class AuditEcdsaTests(unittest.TestCase):
    CURVE, TYPE, ALG = "ec-p256", "ECDSA P-256", "ecdsa-p256"

    def setUp(self):
        self.server = DevServer("ec-p256", name="audit" + self.CURVE[3:], audit_key=self.CURVE)
        self.server.wait_ready()
        self.audit = os.path.join(self.server.dir, "audit")
        self.tmp = tempfile.mkdtemp(prefix="auditec-cli.", dir=self.server.dir)

    def tearDown(self):
        self.server.stop()

    def read(self, rel):
        with open(os.path.join(self.audit, rel), "rb") as f:
            return f.read()

    def wait_checkpoint(self, size, timeout):
        deadline = time.time() + timeout
        vkey = parse_ec_vkey(self.read("vkey").decode(), self.CURVE)
        while True:
            note = self.read("checkpoint")
            cp = open_checkpoint(note, vkey)
            if cp[1] >= size or time.time() > deadline:
                return note, cp
            time.sleep(0.05)

    def issue_some(self, n):
        chain = None
        for _ in range(n):
            chain = self.server.issue()
        # The issue-result entry is written after the reply is released: count the
        # lines once the last certificate's result is among them.
        der = base64.b64decode("".join(chain[0].strip().splitlines()[1:-1]))
        digest = hashlib.sha256(der).hexdigest().encode()
        deadline = time.time() + 30
        while not any(digest in l for l in log_lines(self.audit)):
            self.assertLess(time.time(), deadline, "the last certificate's result is logged")
            time.sleep(0.05)
        count = len(log_lines(self.audit))
        note, cp = self.wait_checkpoint(count, 5)
        self.assertGreaterEqual(cp[1], count, "a checkpoint covers the new entries")
        lines = log_lines(self.audit)[:cp[1]]
        self.assertEqual(cp[2], mth([leaf(l) for l in lines]), "root of the log's lines")
        self.assertEqual(self.read("checkpoints/%d" % cp[1]), note)
        return chain, note, cp

    def check_cli(self, chain):
        r = audit("verify", self.audit)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = audit("vkey", self.audit)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), self.read("vkey").decode().strip())
        cert = os.path.join(self.tmp, "leaf.pem")
        with open(cert, "w") as f:
            f.write(chain[0])
        r = audit("prove", "--cert", cert, self.audit)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("verified: ", r.stdout)
        sizes = sorted(int(n) for n in os.listdir(os.path.join(self.audit, "checkpoints")))
        r = audit("consistency", os.path.join(self.audit, "checkpoints", str(sizes[0])),
                  os.path.join(self.audit, "checkpoint"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("verified: the tree of size %d is a prefix" % sizes[0], r.stdout)

    def check_token(self):
        """The EC audit key as pkcs11-tool sees it: sign only, sensitive, never extractable."""
        with open(os.path.join(self.server.dir, "pin")) as f:
            pin = f.read().strip()
        env = dict(os.environ, SOFTHSM2_CONF=os.path.join(self.server.dir, "softhsm2.conf"))
        out = subprocess.run(["pkcs11-tool", "--module", "/usr/lib/softhsm/libsofthsm2.so",
                              "--login", "--pin", pin, "-O"], capture_output=True, text=True,
                             env=env, timeout=30).stdout
        blocks = [b + "\n" for b in re.split(r"\n(?=\S)", out)]
        audit_key = [b for b in blocks if b.startswith("Private Key Object")
                     and re.search(r"label:\s+audit-key\n", b)]
        self.assertEqual(len(audit_key), 1, out)
        self.assertTrue(audit_key[0].startswith("Private Key Object; EC\n"), out)
        self.assertRegex(audit_key[0], r"Usage:\s+sign\n")
        self.assertIn("Access:     sensitive, always sensitive, never extractable, local",
                      audit_key[0])

    def test_ecdsa_checkpoints(self):
        self.check_token()
        vkey = parse_ec_vkey(self.read("vkey").decode(), self.CURVE)
        with open(self.server.log_path) as f:
            ready = [json.loads(l) for l in f if '"audit key ready"' in l]
        self.assertTrue(ready, "no 'audit key ready' line")
        self.assertEqual(ready[-1]["type"], self.TYPE)
        self.assertEqual(ready[-1]["public_key"], vkey[3].hex())

        chain, note, cp = self.issue_some(3)
        self.assertEqual(cp[0], vkey[0], "the origin is the key name")
        key = [json.loads(l) for l in log_lines(self.audit) if b'"kind":"key"' in l]
        self.assertEqual(key[-1]["audit_key_alg"], self.ALG)
        self.assertEqual(key[-1]["audit_public_key"], vkey[3].hex())

        # The check can fail: one bit of the signature, or of the text.
        i = note.rindex(b" ") + 1
        blob = bytearray(base64.b64decode(note[i:-1]))
        blob[-1] ^= 1
        bad = note[:i] + base64.b64encode(bytes(blob)) + b"\n"
        with self.assertRaises(InvalidSignature):
            open_checkpoint(bad, vkey)
        forged = note.replace(b"\n%d\n" % cp[1], b"\n%d\n" % (cp[1] + 1), 1)
        with self.assertRaises(InvalidSignature):
            open_checkpoint(forged, vkey)
        # The openssl command line agrees, both ways.
        self.assertEqual(openssl_verify(note, vkey, self.tmp), 1, "openssl verifies the note")
        self.assertEqual(openssl_verify(bad, vkey, self.tmp), 0)
        self.assertEqual(openssl_verify(forged, vkey, self.tmp), 0)

        self.check_cli(chain)
        # Ours refuses a tampered checkpoint too.
        with open(os.path.join(self.tmp, "bad-note"), "wb") as f:
            f.write(bad)
        r = audit("consistency", os.path.join(self.tmp, "bad-note"),
                  os.path.join(self.audit, "checkpoint"), "--dir", self.audit)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)

        # A restart (no --audit-key needed, but the same argv is fine) checks the log
        # against the ECDSA checkpoint before it serves, and goes on signing with it.
        first = cp[1]
        self.server.proc.send_signal(signal.SIGTERM)
        self.server.restart_supervisor()
        self.server.client.close()
        self.server.client = None
        self.server.wait_ready()
        chain, note, cp = self.issue_some(2)
        self.assertGreater(cp[1], first, "the checkpoint grows after the restart")
        self.assertEqual(parse_ec_vkey(self.read("vkey").decode(), self.CURVE)[3], vkey[3], "same key")
        self.assertEqual(openssl_verify(note, vkey, self.tmp), 1)
        self.check_cli(chain)


class AuditEcdsaP384Tests(AuditEcdsaTests):
    """The same with a P-384 key: its checkpoints still sign SHA-256 of the text."""
    CURVE, TYPE, ALG = "ec-p384", "ECDSA P-384", "ecdsa-p384"


class AuditKeyFlagTests(unittest.TestCase):
    def test_bad_audit_key_flag(self):
        r = subprocess.run([BIN, "dev", "init", "--audit-key", "rsa-2048"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--audit-key must be ed25519, ec-p256 or ec-p384", r.stderr)


if __name__ == "__main__":
    unittest.main()
