#!/usr/bin/python3
"""The audit key in another token than the CA key's (pkcs11.audit_key naming token
"audit", pkcs11.audit_pin_file its own PIN), and in another PKCS#11 module
(pkcs11.audit_module), on a real `hsmca serve` with real SoftHSM tokens.

The second token is made here with softhsm2-util and pkcs11-tool (not hsmca), with a PIN
other than the CA token's, and holds an ECDSA P-256 key while the CA token's own
audit-key (the Ed25519 key `hsmca dev init` made) stays unused: the published vkey must be
the second token's key as pkcs11-tool reads it, every checkpoint must verify under it, and
`hsmca audit verify --require-vkey` must pass.

One process holds one SOFTHSM2_CONF, so both tokens live in one SoftHSM token directory.
"Another module" is the p11shim (tests/p11shim) forwarding to a copy of libsofthsm2.so:
another file, so the dynamic loader maps a second, independent SoftHSM (the shim pointed
at libsofthsm2.so itself would share the CA module's instance: dlopen of one file gives
one handle, and its C_Initialize answers CKR_CRYPTOKI_ALREADY_INITIALIZED). The shim's
counts show the audit key's signatures going through it, and a device error injected
there is recovered by the audit key alone while the CA key keeps issuing."""
import base64
import json
import os
import re
import shutil
import subprocess
import time
import unittest

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from audit_tree import leaf, log_lines, mth, note_signatures
from hsmca_harness import BIN, SHIM, DevServer

SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"
AUDIT_PIN = "audit-pin-4321"


def make_audit_token(d):
    """Token "audit" with its own PINs and an EC P-256 key "audit-key" in d's SoftHSM; the
    token's files get the owner of d/tokens (the signer's user when run as root). Returns
    the key's DER SubjectPublicKeyInfo as pkcs11-tool reads it."""
    env = dict(os.environ, SOFTHSM2_CONF=os.path.join(d, "softhsm2.conf"))

    def run(*argv):
        r = subprocess.run(list(argv), capture_output=True, env=env, timeout=60)
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
        return r.stdout

    run("softhsm2-util", "--init-token", "--free", "--label", "audit", "--so-pin",
        "audit-so-8765", "--pin", AUDIT_PIN)
    p11 = ["pkcs11-tool", "--module", SOFTHSM, "--token-label", "audit", "--login", "--pin",
           AUDIT_PIN]
    run(*p11, "--keypairgen", "--key-type", "EC:prime256v1", "--label", "audit-key", "--id",
        "a1", "--usage-sign")
    spki = run(*p11, "--read-object", "--type", "pubkey", "--label", "audit-key")
    tokens = os.path.join(d, "tokens")
    st = os.stat(tokens)
    for root, dirs, files in os.walk(tokens):
        for n in dirs + files:
            os.chown(os.path.join(root, n), st.st_uid, st.st_gid)
    with open(os.path.join(d, "audit-pin"), "w") as f:
        f.write(AUDIT_PIN + "\n")
    os.chmod(os.path.join(d, "audit-pin"), 0o600)
    return serialization.load_der_public_key(spki).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


class TwoTokenServer(DevServer):
    """A dev CA whose config points the audit key at token "audit" (made before the
    start), with audit_pin_file unless pin_file is False, and audit_module when given."""

    def __init__(self, name, audit_module=None, pin_file=True, pkcs11_env=None):
        self.spki = None

        def edit(text):
            self.spki = make_audit_token(self.dir)
            old = '  audit_key: "pkcs11:token=hsmca;object=audit-key;type=private"\n'
            assert old in text, text
            new = '  audit_key: "pkcs11:token=audit;object=audit-key;type=private"\n'
            if pin_file:
                new += "  audit_pin_file: audit-pin\n"
            if audit_module:
                new += "  audit_module: %s\n" % audit_module
            return text.replace(old, new)

        super().__init__("ec-p256", name=name, edit_config=edit, pkcs11_env=pkcs11_env)

    def log_event(self, msg):
        """The last JSON log line with this msg."""
        with open(self.log_path) as f:
            found = [json.loads(l) for l in f if '"msg":"%s"' % msg in l]
        assert found, "no %r line in %s" % (msg, self.log_path)
        return found[-1]


def open_note(note, name, keyid, pub):
    """(size, root) of a checkpoint note whose ECDSA signature by the key verifies."""
    text, sigs = note_signatures(note, name, keyid)
    assert sigs, "no signature by the vkey"
    for sig in sigs:
        pub.verify(sig, text, ec.ECDSA(hashes.SHA256()))
    origin, size, root = text.decode().split("\n")[:3]
    assert origin == name
    return int(size), base64.b64decode(root)


class AuditModuleTests(unittest.TestCase):
    server = None

    def tearDown(self):
        if self.server:
            self.server.stop()

    def token_check(self):
        """`hsmca token check` on the running server's config: serve would start, and
        the audit key was opened where the config puts it. Returns the report."""
        config = os.path.join(self.server.dir, "hsmca.yaml")
        r = subprocess.run([BIN, "token", "check", "--config", config], capture_output=True,
                           text=True, timeout=120, env=self.server.env,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("verdict: serve would start", r.stdout)
        self.assertRegex(r.stdout, r"ok +pkcs11\.audit_key: opened as serve opens it: ecdsa-p256")
        return r.stdout

    def check_published(self, n):
        """Issues n certificates, waits for a checkpoint covering them, and checks it and
        the directory against the second token's key."""
        s = self.server
        audit = os.path.join(s.dir, "audit")
        for _ in range(n):
            s.issue()
        with open(os.path.join(audit, "vkey")) as f:
            vkey = f.read().strip()
        name, keyid, b64 = vkey.split("+", 2)
        raw = base64.b64decode(b64)
        self.assertEqual(raw[0], 2, "an ECDSA vkey")
        self.assertEqual(raw[1:], s.spki, "the vkey is the key in token 'audit'")
        pub = serialization.load_der_public_key(s.spki)
        want = len(log_lines(audit))
        deadline = time.time() + 10
        while True:
            with open(os.path.join(audit, "checkpoint"), "rb") as f:
                size, root = open_note(f.read(), name, bytes.fromhex(keyid), pub)
            if size >= want or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(size, want, "a checkpoint covers the new entries")
        self.assertEqual(root, mth([leaf(l) for l in log_lines(audit)[:size]]))
        r = subprocess.run([BIN, "audit", "verify", audit, "--vkey", vkey, "--require-vkey"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("NOT checked", r.stdout)
        return size

    def test_second_token_same_module(self):
        self.server = TwoTokenServer("auditmod1")
        self.server.wait_ready()
        ready = self.server.log_event("audit key ready")
        self.assertEqual(ready["key"], "pkcs11:token=audit;object=audit-key;type=private")
        self.assertEqual(ready["module"], SOFTHSM)
        self.assertEqual(ready["module_shared"], "true")
        self.assertEqual(ready["type"], "ECDSA P-256")
        self.assertEqual(self.server.log_event("CA key ready")["module"], SOFTHSM)
        self.check_published(3)
        self.assertNotIn("pkcs11.audit_module", self.token_check())

    def test_same_module_by_another_path_is_loaded_once(self):
        # A symlink to the CA key's module is that module: loaded once (a second
        # C_Initialize in one process would fail), the audit key in it.
        d = os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"), "auditmod-link")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        link = os.path.join(d, "softhsm-link.so")
        os.symlink(SOFTHSM, link)
        self.server = TwoTokenServer("auditmod4", audit_module=link)
        self.server.wait_ready()
        ready = self.server.log_event("audit key ready")
        self.assertEqual(ready["module"], SOFTHSM)
        self.assertEqual(ready["module_shared"], "true")
        self.check_published(1)

    def test_audit_pin_is_its_own(self):
        # Without audit_pin_file the CA token's PIN is tried on token "audit": refused,
        # naming the key and the PIN file, and the server does not serve.
        self.server = TwoTokenServer("auditmod2", pin_file=False)
        code = self.server.proc.wait(60)
        text = self.server.logtext()
        self.assertNotEqual(code, 0, text)
        self.assertRegex(text, r"refusing to serve: audit key \(pkcs11\.audit_key\): .*"
                         r"\(the PIN of [^ ]*/pin, pkcs11\.pin_file\)")
        self.assertNotIn("signer ready", text)

    @unittest.skipUnless(SHIM, "P11SHIM (the fault-injecting module) is not built")
    def test_audit_module_of_its_own(self):
        d = os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"), "auditmod-shim")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        copy = os.path.join(d, "libsofthsm2-copy.so")
        shutil.copy(SOFTHSM, copy)
        ctl, counts = os.path.join(d, "control"), os.path.join(d, "counts")
        open(ctl, "w").close()
        open(counts, "w").close()
        os.chmod(counts, 0o666)  # the signer may run as its own user
        os.chmod(d, 0o755)
        self.server = TwoTokenServer("auditmod3", audit_module=SHIM, pkcs11_env={
            "P11SHIM_MODULE": copy, "P11SHIM_CONTROL": ctl, "P11SHIM_COUNTS": counts})
        self.server.wait_ready()
        ready = self.server.log_event("audit key ready")
        self.assertEqual(ready["module"], SHIM)
        self.assertEqual(ready["module_shared"], "false")
        self.assertEqual(self.server.log_event("CA key ready")["module"], SOFTHSM)
        first = self.check_published(2)
        self.assertIn("ok   pkcs11.audit_module: %s loaded" % SHIM, self.token_check())

        def count(fn):
            with open(counts) as f:
                for line in f:
                    parts = line.split()
                    if parts and parts[0] == fn:
                        return int(parts[1]), int(parts[2])
            return 0, 0

        self.assertGreaterEqual(count("C_Sign")[0], 2,
                                "the audit key's signatures go through the shim")

        # A device error on the audit module: the CA key goes on issuing meanwhile, and
        # the audit key recovers by itself; checkpoints resume.
        with open(ctl, "r+") as f:
            f.truncate(0)
            f.write("fail C_Sign CKR_DEVICE_ERROR once\n")
        deadline = time.time() + 20
        while count("C_Sign")[1] < 1 and time.time() < deadline:
            self.server.issue()
            time.sleep(0.1)
        self.assertEqual(count("C_Sign")[1], 1, "the injected failure fired")
        for _ in range(3):
            self.server.issue()
        self.assertGreater(self.check_published(2), first)
        text = self.server.logtext()
        unavailable = '"msg":"pkcs11: token unavailable: reconnecting the key","token":"%s"'
        self.assertIn(unavailable % "audit" + ',"rv":"CKR_DEVICE_ERROR"', text)
        self.assertNotIn(unavailable % "hsmca", text)


class AuditModuleConfigTests(unittest.TestCase):
    def test_audit_module_needs_audit_key(self):
        d = os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"), "auditmod-cfg")
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([BIN, "dev", "init", "--dir", d], check=True, capture_output=True,
                       timeout=120)
        config = os.path.join(d, "hsmca.yaml")
        with open(config) as f:
            text = f.read()
        text = re.sub(r'(?m)^  audit_key: .*$', "  audit_module: %s" % SOFTHSM, text)
        with open(config, "w") as f:
            f.write(text)
        r = subprocess.run([BIN, "serve", "--config", config], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pkcs11.audit_module and pkcs11.audit_pin_file need pkcs11.audit_key",
                      r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
