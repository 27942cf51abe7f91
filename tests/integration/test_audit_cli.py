#!/usr/bin/python3
"""`hsmca audit ...`, the real binary, on a fixture directory written by
tests/audit_fixture (tests/unit/audit_fx.h: log, vkey, checkpoints, tiles, signed with a
software Ed25519 key): verify passes and fails naming the place, prove's inclusion proof
checks out under an independent RFC 9162 verifier written here, consistency, show's
filters and JSON, vkey, and --help for each. No server, no token."""
import base64
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.x509.oid import NameOID

from hsmca_harness import BIN

FIXTURE = os.environ.get("AUDIT_FIXTURE") or os.path.join(os.path.dirname(BIN), "tests",
                                                          "audit_fixture")
TIME0 = 1790000000  # audit_fx.h: entry seq s has time TIME0 + s
SIZES = ["0", "100", "256", "300", "580"]


def audit(*args):
    return subprocess.run([BIN, "audit"] + list(args), capture_output=True, text=True,
                          timeout=120)


def h(b):
    return hashlib.sha256(b).digest()


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162 §2.1.3.2, independently of audit/."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = h(b"\x01" + p + r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = h(b"\x01" + r + p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def make_cert(path):
    key = ed25519.Ed25519PrivateKey.generate()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "audit-cli-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=1))
            .sign(key, None))
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()


class AuditCliTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = os.environ.get("HSMCA_TEST_TMP", "/tmp")
        os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="audit-cli-", dir=base)
        cls.cert = os.path.join(cls.tmp, "cert.pem")
        cls.cert_sha = make_cert(cls.cert)
        cls.dir = os.path.join(cls.tmp, "good")
        subprocess.run([FIXTURE, cls.dir, "600"] + SIZES + ["--cert-sha256", cls.cert_sha],
                       check=True, timeout=120)
        with open(os.path.join(cls.dir, "log"), "rb") as f:
            cls.lines = f.read().split(b"\n")[:-1]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy(self, name):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.dir, d)
        return d

    def test_verify_good(self):
        r = audit("verify", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^OK: 600 entries \(\d+ certificates, \d+ failed, \d+ denies\), "
                         r"5 checkpoints, latest size 580 root [A-Za-z0-9+/]{43}=\n$")
        self.assertIn("1 intent(s) without a result yet (first at seq 599)", r.stderr)
        vkey = audit("vkey", self.dir)
        self.assertEqual(vkey.returncode, 0, vkey.stderr)
        with open(os.path.join(self.dir, "vkey")) as f:
            self.assertEqual(vkey.stdout, f.read())
        self.assertTrue(vkey.stdout.startswith("hsmca.test/verify+"))
        r = audit("verify", self.dir, "--vkey", vkey.stdout.strip())
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_verify_other_key(self):
        # a well-formed vkey of the same name and another key: no checkpoint verifies
        name, pub = "hsmca.test/verify", b"\x07" * 32
        kid = h(name.encode() + b"\n\x01" + pub)[:4].hex()
        other = "%s+%s+%s" % (name, kid, base64.b64encode(b"\x01" + pub).decode())
        r = audit("verify", self.dir, "--vkey", other)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED: checkpoints/580: ", r.stderr)
        self.assertIn("no signature by", r.stderr)

    def test_verify_state(self):
        state = os.path.join(self.tmp, "auditor.state")
        r = audit("verify", self.dir, "--state", state)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("state created", r.stdout)
        with open(state) as f:
            self.assertTrue(f.read().startswith("hsmca.test/verify\n580\n"))
        r = audit("verify", self.dir, "--state", state)
        self.assertIn("state advanced from size 580", r.stdout)
        with open(state, "w") as f:
            f.write("hsmca.test/verify\n580\n" + base64.b64encode(b"\0" * 32).decode() + "\n")
        r = audit("verify", self.dir, "--state", state)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED: state %s: the log's root at size 580" % state, r.stderr)

    NOT_CHECKED = "checkpoint signatures: NOT checked (no vkey: give --vkey FILE)\n"

    def unkeyed(self, name):
        """A copy of the fixture without DIR/vkey, and the vkey string it held."""
        d = self.copy(name)
        with open(os.path.join(d, "vkey")) as f:
            vkey = f.read().strip()
        os.unlink(os.path.join(d, "vkey"))
        return d, vkey

    def test_verify_without_vkey(self):
        d, vkey = self.unkeyed("unkeyed")
        r = audit("verify", d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^OK: 600 entries .*, 5 checkpoints, latest size 580 root "
                         r"[A-Za-z0-9+/]{43}=\n" + re.escape(self.NOT_CHECKED) + "$")
        self.assertIn("warning: no verifier key", r.stderr)
        # the auditor's flag: no key is a failure, and nothing is printed as verified
        r = audit("verify", d, "--require-vkey")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(r.stdout, "")
        self.assertIn("FAILED: no verifier key: %s/vkey does not exist" % d, r.stderr)
        # with the key given, the signatures are checked and the line is gone
        r = audit("verify", d, "--require-vkey", "--vkey", vkey)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("NOT checked", r.stdout)
        # a --vkey that names nothing is an error, never a silent run without a key
        r = audit("verify", d, "--vkey", os.path.join(d, "no-such-vkey"))
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("vkey: ", r.stderr)
        # the state is checked but not created or advanced by a run without a key
        state = os.path.join(self.tmp, "unkeyed.state")
        r = audit("verify", d, "--state", state)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("state not created (no signature checked)", r.stdout)
        self.assertFalse(os.path.exists(state))
        with open(state, "w") as f:
            f.write("hsmca.test/verify\n580\n" + base64.b64encode(b"\0" * 32).decode() + "\n")
        r = audit("verify", d, "--state", state)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED: state %s: the log's root at size 580" % state, r.stderr)

    def test_verify_without_vkey_finds_tampering(self):
        d, _ = self.unkeyed("unkeyed-flip")
        lines = list(self.lines)
        # one flipped bit in an entry covered by a checkpoint: still canonical JSON, so
        # only what the checkpoints cover can tell (the first met: the entry bundle)
        i = lines[200].index(b"/sa/") + 4
        flipped = bytearray(lines[200])
        flipped[i] ^= 0x01
        lines[200] = bytes(flipped)
        with open(os.path.join(d, "log"), "wb") as f:
            f.write(b"".join(l + b"\n" for l in lines))
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(r.stdout, "")
        self.assertIn("FAILED: log seq 200 (byte %d): differs from entry 200 of "
                      "tile/entries/000" % sum(len(l) + 1 for l in lines[:200]), r.stderr)
        # a checkpoint whose root is not the log's (its signature no longer matters)
        d, _ = self.unkeyed("unkeyed-root")
        p = os.path.join(d, "checkpoints", "100")
        with open(p, "rb") as f:
            note = f.read().split(b"\n")
        note[2] = base64.b64encode(b"\1" * 32)
        with open(p, "wb") as f:
            f.write(b"\n".join(note))
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED: checkpoints/100: its root is not the log's root over seq 0..99",
                      r.stderr)
        # a dropped line: the seq rule
        d, _ = self.unkeyed("unkeyed-drop")
        lines = list(self.lines)
        del lines[420]
        with open(os.path.join(d, "log"), "wb") as f:
            f.write(b"".join(l + b"\n" for l in lines))
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED: log seq 420 (byte ", r.stderr)
        self.assertIn("says seq 421", r.stderr)
        # a last line without its newline: framing
        d, _ = self.unkeyed("unkeyed-frame")
        with open(os.path.join(d, "log"), "rb+") as f:
            f.truncate(os.path.getsize(os.path.join(d, "log")) - 1)
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED: ", r.stderr)
        # a checkpoint of another origin among them (two logs mixed)
        d, _ = self.unkeyed("unkeyed-origin")
        p = os.path.join(d, "checkpoints", "100")
        with open(p, "rb") as f:
            note = f.read()
        with open(p, "wb") as f:
            f.write(note.replace(b"hsmca.test/verify\n", b"hsmca.test/other\n", 1))
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED: checkpoints/100: origin hsmca.test/other is not the latest", r.stderr)

    def test_verify_names_the_edited_entry(self):
        d = self.copy("edited")
        lines = list(self.lines)
        lines[150] = lines[150].replace(b"/sa/sa", b"/sa/xa", 1)
        with open(os.path.join(d, "log"), "wb") as f:
            f.write(b"".join(l + b"\n" for l in lines))
        off = sum(len(l) + 1 for l in lines[:150])
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED: log seq 150 (byte %d)" % off, r.stderr)
        self.assertEqual(r.stdout, "")

    def test_verify_names_the_swapped_checkpoint(self):
        d = self.copy("swapped")
        a, b = os.path.join(d, "checkpoints", "100"), os.path.join(d, "checkpoints", "256")
        os.rename(a, a + ".x")
        os.rename(b, a)
        os.rename(a + ".x", b)
        r = audit("verify", d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED: checkpoints/100: holds the checkpoint of size 256", r.stderr)

    def test_prove(self):
        r = audit("prove", "--cert", self.cert, self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("cert_sha256: %s\n" % self.cert_sha, out)
        idx = int(re.search(r"^leaf_index: (\d+)$", out, re.M).group(1))
        size = int(re.search(r"^tree_size: (\d+)$", out, re.M).group(1))
        root = base64.b64decode(re.search(r"^root: (\S+)$", out, re.M).group(1))
        proof = [base64.b64decode(p) for p in re.findall(r"^  (\S+)$", out, re.M)]
        self.assertEqual(size, 580)
        entry = json.loads(self.lines[idx])
        self.assertEqual(entry["kind"], "issue-result")
        self.assertEqual(entry["cert_sha256"], self.cert_sha)
        self.assertIn("intent: seq %d serial " % entry["intent_seq"], out)
        with open(os.path.join(self.dir, "checkpoint")) as f:
            self.assertEqual(f.read().split("\n")[2], base64.b64encode(root).decode())
        leaf = h(b"\x00" + self.lines[idx])
        self.assertTrue(verify_inclusion(idx, size, leaf, proof, root))
        self.assertFalse(verify_inclusion(idx + 1, size, leaf, proof, root))
        self.assertRegex(out, r"verified: entries %d \(issue-result\)" % idx)

        other = os.path.join(self.tmp, "other.pem")
        make_cert(other)
        r = audit("prove", "--cert", other, self.dir)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no issue-result with cert_sha256", r.stderr)

    def test_consistency(self):
        old = os.path.join(self.dir, "checkpoints", "100")
        new = os.path.join(self.dir, "checkpoint")
        r = audit("consistency", old, new)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("old: hsmca.test/verify size 100 root ", r.stdout)
        self.assertIn("new: hsmca.test/verify size 580 root ", r.stdout)
        self.assertIn("verified: the tree of size 100 is a prefix of the tree of size 580",
                      r.stdout)
        # NEW in checkpoints/: DIR is its parent
        r = audit("consistency", old, os.path.join(self.dir, "checkpoints", "300"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = audit("consistency", new, old)
        self.assertEqual(r.returncode, 1)
        self.assertIn("OLD has size 580, NEW only 100", r.stderr)
        d = self.copy("badnote")
        with open(os.path.join(d, "checkpoints", "256"), "r+b") as f:
            f.seek(20)
            c = f.read(1)
            f.seek(20)
            f.write(b"B" if c != b"B" else b"C")
        r = audit("consistency", os.path.join(d, "checkpoints", "256"),
                  os.path.join(d, "checkpoint"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("checkpoints/256", r.stderr)

    def test_show(self):
        r = audit("show", self.dir, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [json.loads(l) for l in r.stdout.splitlines()]
        self.assertEqual(len(rows), 600)
        self.assertEqual(r.stdout.encode(), b"".join(l + b"\n" for l in self.lines))

        r = audit("show", self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        table = r.stdout.splitlines()
        self.assertTrue(table[0].startswith("TIME (UTC)"))
        self.assertEqual(len(table), 601)
        self.assertRegex(table[1], r"^2026-09-21T14:13:20Z +0 +start ")

        # which workloads in prod got certificates between T1 and T2
        t1 = datetime.datetime.fromtimestamp(TIME0 + 100, datetime.timezone.utc)
        r = audit("show", self.dir, "--kind", "issue-result", "--namespace", "prod", "--since",
                  t1.strftime("%Y-%m-%dT%H:%M:%SZ"), "--until", str(TIME0 + 300), "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(l) for l in r.stdout.splitlines()]
        intents = {e["seq"]: e for e in map(json.loads, self.lines) if e["kind"] == "issue-intent"}
        want = [e for e in map(json.loads, self.lines)
                if e["kind"] == "issue-result" and 100 <= e["seq"] <= 300
                and "/ns/prod/" in intents[e["intent_seq"]]["requester"]]
        self.assertGreater(len(want), 10)
        self.assertEqual(got, want)

        intent = intents[min(intents)]
        r = audit("show", self.dir, "--serial", intent["serial"].upper())
        rows = r.stdout.splitlines()[1:]
        self.assertEqual(len(rows), 2, r.stdout)  # the intent and its result
        self.assertIn("issue-intent", rows[0])
        self.assertIn("issue-result", rows[1])
        r = audit("show", self.dir, "--identity", intent["requester"], "--kind", "issue-intent",
                  "--json")
        self.assertTrue(all(json.loads(l)["requester"] == intent["requester"]
                            for l in r.stdout.splitlines()))
        self.assertEqual(audit("show", self.dir, "--since", "yesterday").returncode, 2)

    def test_help(self):
        for cmd in ("verify", "prove", "consistency", "show", "vkey"):
            r = audit(cmd, "--help")
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn("usage: hsmca audit " + cmd, r.stdout)
        r = audit("--help")
        self.assertEqual(r.returncode, 0)
        for cmd in ("verify", "prove", "consistency", "show", "vkey"):
            self.assertIn("  " + cmd, r.stdout)
        self.assertEqual(audit("nonsense").returncode, 2)


if __name__ == "__main__":
    unittest.main()
