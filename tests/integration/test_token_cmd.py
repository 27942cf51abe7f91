#!/usr/bin/python3
"""`hsmca token check` and `hsmca token keygen` on real SoftHSM tokens.

check runs the real hsmca-signer in its check mode (same user, sandbox and start-up
code as serve's signer): a good dev CA passes, and each way serve would refuse to
start is reported naming what to fix (an extractable CA key, a wrong PIN, tried
once, a missing key, a module the sandbox stops). keygen makes the CA and audit keys
of a config in a fresh token with hsmca's template, which pkcs11-tool then reads
back, and refuses to make one twice."""
import base64
import datetime
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils
from cryptography.x509.oid import NameOID

from hsmca_harness import BIN, TMP, with_pkcs11_env
from test_sandbox import NETPROBE, Daemons, use_sandbox

SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"
SHIM = os.environ.get("P11SHIM", "")
ROOT = os.geteuid() == 0
SIGNER_USER = "hsmca-signer"  # what `hsmca dev` writes as signer.user


def env_with(extra=None, no_leaks=False):
    env = dict(os.environ)
    # LeakSanitizer needs ptrace, which the signer's seccomp filter forbids: off for
    # what runs a signer (token check, dev init), on for keygen.
    if no_leaks:
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    env.update(extra or {})
    return env


def run(argv, extra_env=None, no_leaks=False):
    p = subprocess.run(argv, capture_output=True, text=True,
                       env=env_with(extra_env, no_leaks), stdin=subprocess.DEVNULL, timeout=120)
    return p.returncode, p.stdout, p.stderr


class DevDir:
    """A dev CA made by `hsmca dev init` (token 'hsmca', ca-key, audit-key, root-cert.pem,
    hsmca.yaml); config() writes an edited copy of its config."""

    def __init__(self, name):
        self.dir = tempfile.mkdtemp(prefix=name + ".", dir=TMP)
        subprocess.check_call([BIN, "dev", "init", "--dir", self.dir], stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, env=env_with(no_leaks=True))
        self.yaml = os.path.join(self.dir, "hsmca.yaml")
        with open(os.path.join(self.dir, "pin")) as f:
            self.pin = f.read().strip()
        with open(os.path.join(self.dir, "so-pin")) as f:
            self.so_pin = f.read().strip()
        self.env = {"SOFTHSM2_CONF": os.path.join(self.dir, "softhsm2.conf")}

    def config(self, edit, name="edited.yaml"):
        with open(self.yaml) as f:
            text = edit(f.read())
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def tool(self, token, *args):
        """pkcs11-tool logged in to token; returns its stdout."""
        rc, out, err = run(["pkcs11-tool", "--module", SOFTHSM, "--token-label", token,
                            "--login", "--pin", self.pin] + list(args), self.env)
        if rc != 0:
            raise AssertionError("pkcs11-tool %s: %s%s" % (args, out, err))
        return out

    def give_tokens(self):
        """As root, as hsmca dev does: the signer's user must read the token files once
        it has switched to it."""
        if ROOT:
            subprocess.check_call(["chown", "-R", SIGNER_USER, os.path.join(self.dir, "tokens")])

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def check(config, extra_env=None):
    return run([BIN, "token", "check", "--config", config], extra_env, no_leaks=True)


def fails(out):
    return [line for line in out.splitlines() if line.startswith("FAIL ")]


class TokenCheckTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dev = DevDir("tokcheck")

    @classmethod
    def tearDownClass(cls):
        cls.dev.cleanup()

    def test_good_dev_ca_would_start(self):
        rc, out, err = check(self.dev.yaml)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(fails(out), [])
        self.assertIn("verdict: serve would start", out)
        self.assertRegex(out, r"info pkcs11.module: slot \d+: token 'hsmca' manufacturer "
                              r"'SoftHSM project' model 'SoftHSM v2' serial '\w+' flags "
                              r"initialized,login-required,user-pin-set")
        for key in ("pkcs11.ca_key", "pkcs11.audit_key"):
            for line in ("CKA_SENSITIVE TRUE", "CKA_EXTRACTABLE FALSE", "CKA_SIGN TRUE",
                         "CKA_ALWAYS_SENSITIVE TRUE", "CKA_NEVER_EXTRACTABLE TRUE",
                         "CKA_DECRYPT FALSE", "CKA_UNWRAP FALSE", "CKA_DERIVE FALSE",
                         "public key found (by CKA_ID)", "opened as serve opens it"):
                self.assertIn("ok   %s: %s" % (key, line), out)
        self.assertIn("ok   pkcs11.ca_key: key type CKK_EC, curve P-256", out)
        self.assertIn("ok   pkcs11.audit_key: key type CKK_EC_EDWARDS, curve edwards25519", out)
        self.assertIn("certifies the token's CA key", out)
        self.assertIn("ok   signer.sandbox: as %s (signer.sandbox.network: none, "
                      "signer.sandbox.sysv_ipc: false): the CA key and the audit key signed and "
                      "verified inside the sandbox" % (SIGNER_USER if ROOT else
                                                       "the current user (not root)"), out)
        # The signer itself entered its sandbox (its own log line, on stderr).
        self.assertIn('"msg":"sandbox: signer network access","network":"denied"', err)

    def test_missing_key_names_the_uri(self):
        cfg = self.dev.config(lambda t: t.replace("object=ca-key", "object=no-such-key"),
                              "missing.yaml")
        rc, out, err = check(cfg)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("FAIL pkcs11.ca_key: no private key matches "
                      "pkcs11:token=hsmca;object=no-such-key;type=private in token 'hsmca'", out)
        self.assertIn("verdict: serve would not start", out)
        self.assertIn("ok   pkcs11.audit_key: CKA_EXTRACTABLE FALSE", out)  # the rest goes on

    def test_wrong_token_names_the_label(self):
        cfg = self.dev.config(lambda t: t.replace("token=hsmca;object=ca-key",
                                                  "token=nosuch;object=ca-key"), "tok.yaml")
        rc, out, err = check(cfg)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("FAIL pkcs11.ca_key: token 'nosuch' not found", out)

    @unittest.skipUnless(SHIM, "P11SHIM (the counting PKCS#11 module) is not set")
    def test_wrong_pin_is_named_and_tried_once(self):
        d = tempfile.mkdtemp(prefix="pinshim.", dir=TMP)
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        control, counts = os.path.join(d, "control"), os.path.join(d, "counts")
        open(control, "w").close()
        open(counts, "w").close()
        os.chmod(counts, 0o666)
        bad = os.path.join(self.dev.dir, "wrong-pin")
        with open(bad, "w") as f:
            f.write("not-the-pin\n")
        os.chmod(bad, 0o600)
        shim_env = {"P11SHIM_CONTROL": control, "P11SHIM_COUNTS": counts}
        cfg = self.dev.config(lambda t: with_pkcs11_env(
            re.sub(r"(?m)^  module: .*$", "  module: " + SHIM, t)
            .replace("pin_file: pin", "pin_file: wrong-pin"), shim_env), "pin.yaml")
        rc, out, err = check(cfg)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("FAIL pkcs11.pin_file: login refused", out)
        self.assertIn("CKR_PIN_INCORRECT", out)
        self.assertIn("info pkcs11.ca_key: not opened: the token refused the PIN", out)
        self.assertIn("  - pkcs11.pin_file: login refused", out)
        with open(counts) as f:
            logins = [line.split() for line in f if line.startswith("C_Login ")]
        self.assertEqual(logins, [["C_Login", "1", "0"]], "the PIN is tried once")
        # Control: the same shim counts a good check's logins (inspection, then the opens).
        good = self.dev.config(lambda t: with_pkcs11_env(
            re.sub(r"(?m)^  module: .*$", "  module: " + SHIM, t), shim_env), "pinok.yaml")
        open(counts, "w").close()
        rc, out, err = check(good)
        self.assertEqual(rc, 0, out + err)
        with open(counts) as f:
            self.assertTrue(any(line.startswith("C_Login ") and int(line.split()[1]) > 1
                                for line in f))

    def test_config_error_is_78(self):
        cfg = self.dev.config(lambda t: t + "bogus_section:\n  x: 1\n", "bad.yaml")
        rc, out, err = check(cfg)
        self.assertEqual(rc, 78, out + err)
        self.assertIn("FAIL config:", out)


class ExtractableKeyTests(unittest.TestCase):
    """A CA key made with pkcs11-tool --extractable (and decrypt/derive uses)."""

    def setUp(self):
        self.dev = DevDir("tokext")
        for t in ("privkey", "pubkey"):
            self.dev.tool("hsmca", "--delete-object", "--type", t, "--label", "ca-key")
        self.dev.tool("hsmca", "--keypairgen", "--key-type", "EC:prime256v1", "--label",
                      "ca-key", "--id", "0102", "--usage-sign", "--usage-derive", "--extractable")
        self.dev.give_tokens()

    def tearDown(self):
        self.dev.cleanup()

    def test_extractable_ca_key_stops_serve(self):
        rc, out, err = check(self.dev.yaml)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("FAIL pkcs11.ca_key: CKA_EXTRACTABLE TRUE", out)
        self.assertIn("WARN pkcs11.ca_key: CKA_NEVER_EXTRACTABLE FALSE", out)
        self.assertIn("WARN pkcs11.ca_key: CKA_DERIVE TRUE", out)
        self.assertIn("FAIL pkcs11.ca_key: serve would refuse it: key check (ca-key): "
                      "CKA_EXTRACTABLE is TRUE", out)
        self.assertIn("verdict: serve would not start", out)
        self.assertIn("  - pkcs11.ca_key: CKA_EXTRACTABLE TRUE", out)
        # The audit key, untouched, still passes.
        self.assertIn("ok   pkcs11.audit_key: opened as serve opens it", out)


@unittest.skipUnless(NETPROBE, "HSMCA_NETPROBE (the test PKCS#11 module) is not set")
class SandboxCheckTests(unittest.TestCase):
    """The probe module needs a daemon's unix socket in every C_Sign (test_sandbox.py)."""

    @classmethod
    def setUpClass(cls):
        cls.daemons = Daemons()
        cls.dev = DevDir("tokbox")
        cls.need = {"NETPROBE_NEED": "unix:" + cls.daemons.path, "NETPROBE_TRY": ""}

    @classmethod
    def tearDownClass(cls):
        cls.daemons.close()
        cls.dev.cleanup()

    def test_network_none_names_the_setting(self):
        cfg = self.dev.config(lambda t: with_pkcs11_env(use_sandbox(network="none")(t),
                                                        self.need), "none.yaml")
        rc, out, err = check(cfg)
        self.assertEqual(rc, 1, out + err)
        # Before the filter the keys open and sign: only the sandbox stops it.
        self.assertIn("ok   pkcs11.ca_key: opened as serve opens it", out)
        self.assertIn("FAIL signer.sandbox.network: the CA key (pkcs11.ca_key) failed its "
                      "signature inside the signer's sandbox (signer.sandbox.network: none, "
                      "signer.sandbox.sysv_ipc: false)", out)
        self.assertIn("CKR_GENERAL_ERROR", out)
        self.assertIn("needs signer.sandbox.network: unix", out)
        self.assertIn("  - signer.sandbox.network:", out)
        self.assertIn("netprobe: connect(AF_UNIX) in C_Sign: Operation not permitted", err)

    def test_network_unix_would_start(self):
        cfg = self.dev.config(lambda t: with_pkcs11_env(use_sandbox(network="unix")(t),
                                                        self.need), "unix.yaml")
        rc, out, err = check(cfg)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("signer.sandbox.network: unix", out)
        self.assertIn("verdict: serve would start", out)


def der(tag, body):
    n = len(body)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + length + body


def root_cert_for(dev, token, pub_pem, path):
    """A self-signed CA certificate of the token's EC P-256 key ca-key: the TBS is built
    here and signed in the token by pkcs11-tool (CKM_ECDSA over its SHA-256)."""
    pub = serialization.load_pem_public_key(pub_pem)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "token check test root")])
    now = datetime.datetime.utcnow()
    usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
    tbs = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(pub)
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(minutes=5))
           .not_valid_after(now + datetime.timedelta(days=30))
           .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
           .add_extension(usage, critical=True)
           .add_extension(x509.SubjectKeyIdentifier.from_public_key(pub), critical=False)
           .sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
           .tbs_certificate_bytes)
    digest = os.path.join(dev.dir, "tbs.sha256")
    sig_path = os.path.join(dev.dir, "tbs.sig")
    with open(digest, "wb") as f:
        f.write(hashlib.sha256(tbs).digest())
    # By CKA_ID: pkcs11-tool --sign takes the first private key, whatever --label says.
    key_id = re.search(r"Private Key Object; EC\n  label:      ca-key\n  ID:         (\w+)\n",
                       dev.tool(token, "-O")).group(1)
    dev.tool(token, "--sign", "-m", "ECDSA", "--id", key_id, "--input-file", digest,
             "--output-file", sig_path)
    with open(sig_path, "rb") as f:
        raw = f.read()
    sig = utils.encode_dss_signature(int.from_bytes(raw[:32], "big"),
                                     int.from_bytes(raw[32:], "big"))
    ecdsa_sha256 = bytes.fromhex("300a06082a8648ce3d040302")
    cert = x509.load_der_x509_certificate(der(0x30, tbs + ecdsa_sha256 +
                                              der(0x03, b"\x00" + sig)))
    pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


class KeygenTests(unittest.TestCase):
    """keygen on a fresh token ('fresh', beside the dev CA's, in its SoftHSM)."""

    def setUp(self):
        self.dev = DevDir("tokgen")
        run(["softhsm2-util", "--init-token", "--free", "--label", "fresh", "--pin",
             self.dev.pin, "--so-pin", self.dev.so_pin], self.dev.env)
        self.cert = os.path.join(self.dev.dir, "fresh-cert.pem")
        self.cfg = self.dev.config(lambda t: t.replace("token=hsmca;", "token=fresh;")
                                   .replace("cert: root-cert.pem", "cert: fresh-cert.pem"),
                                   "fresh.yaml")

    def tearDown(self):
        self.dev.cleanup()

    def keygen(self, *args):
        # SoftHSM 2.6.1 leaks in every Ed25519 C_SignInit (tests/lsan.supp), and keygen
        # unloads the module before exit, so LeakSanitizer can no longer tell the leak
        # is SoftHSM's: leaks are checked for every other key type.
        eddsa = "audit" in args and "--type" not in args
        return run([BIN, "token", "keygen", "--config", self.cfg] + list(args),
                   no_leaks=eddsa)

    def made(self, out):
        """The printed fingerprint is the SHA-256 of the printed public key's DER."""
        m = re.search(r"-----BEGIN PUBLIC KEY-----\n(.*?)-----END PUBLIC KEY-----\n", out, re.S)
        self.assertTrue(m, out)
        spki = base64.b64decode("".join(m.group(1).split()))
        self.assertIn("public key sha256: %s\n" % hashlib.sha256(spki).hexdigest(), out)
        return m.group(0).encode()

    def test_keygen_both_keys_then_check_passes(self):
        rc, out, err = self.keygen("--key", "ca")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("made the CA key pkcs11:token=fresh;object=ca-key;type=private: EC P-256",
                      out)
        self.assertIn("next: make the CA certificate of this key", out)
        ca_pub = self.made(out)
        rc, out, err = self.keygen("--key", "audit")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("object=audit-key;type=private: Ed25519", out)
        self.made(out)
        audit_out = out
        # What the token holds, read by another tool: sign only, never extractable.
        listing = self.dev.tool("fresh", "-O")
        for kind, label in (("EC", "ca-key"), ("EC_EDWARDS", "audit-key")):
            m = re.search(r"Private Key Object; %s\n  label:      %s\n  ID:[^\n]*\n"
                          r"  Usage:      ([^\n]*)\n  Access:     ([^\n]*)\n" % (kind, label),
                          listing)
            self.assertTrue(m, listing)
            self.assertEqual(m.group(1), "sign")
            self.assertEqual(m.group(2), "sensitive, always sensitive, never extractable, local")
        # A second keygen refuses, and makes nothing.
        rc, out, err = self.keygen("--key", "ca")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("refused, nothing made", err)
        self.assertIn("'ca-key' already exists", err)
        self.assertEqual(self.dev.tool("fresh", "-O").count("label:      ca-key"), 2)
        if ROOT:
            # The key's files are root's: the signer, switched to its user, cannot sign.
            self.assertIn("note: SoftHSM wrote the key's files as root", audit_out)
            rc, out, err = check(self.cfg)
            self.assertEqual(rc, 1, out + err)
            self.assertIn("ok   pkcs11.ca_key: opened as serve opens it", out)
            self.assertIn("as signer.user '%s', it cannot reach its token's files" % SIGNER_USER,
                          out)
        self.dev.give_tokens()
        # Without the CA certificate the token passes and ca.cert is what is left.
        rc, out, err = check(self.cfg)
        self.assertEqual(rc, 1, out + err)
        self.assertEqual([f.split(":")[0] for f in fails(out)], ["FAIL ca.cert"], out)
        root_cert_for(self.dev, "fresh", ca_pub, self.cert)
        rc, out, err = check(self.cfg)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("verdict: serve would start (0 warnings)", out)

    def test_keygen_types(self):
        rc, out, err = self.keygen("--key", "ca", "--type", "ec-p384")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("EC P-384", out)
        self.assertIn("06052b81040022", self.dev.tool("fresh", "-O"))  # secp384r1
        rc, out, err = self.keygen("--key", "audit", "--type", "rsa-2048")
        self.assertEqual(rc, 2, out + err)
        self.assertIn("--type for the audit key must be ed25519, ec-p256 or ec-p384", err)
        rc, out, err = self.keygen("--key", "audit", "--type", "ec-p256")
        self.assertEqual(rc, 0, out + err)
        self.dev.give_tokens()
        rc, out, err = check(self.cfg)
        self.assertIn("ok   pkcs11.ca_key: key type CKK_EC, curve P-384", out)
        self.assertIn("ok   pkcs11.audit_key: key type CKK_EC, curve P-256", out)

    def test_keygen_needs_a_configured_key(self):
        cfg = self.dev.config(lambda t: re.sub(r"(?m)^  audit_key: .*\n", "", t), "noaudit.yaml")
        rc, out, err = run([BIN, "token", "keygen", "--config", cfg, "--key", "audit"])
        self.assertEqual(rc, 78, out + err)
        self.assertIn("pkcs11.audit_key is not set", err)


class HelpTests(unittest.TestCase):
    def test_help_names_both(self):
        out = subprocess.check_output([BIN, "--help"], text=True)
        self.assertIn("token check", out)
        self.assertIn("token keygen", out)
        out = subprocess.check_output([BIN, "token", "--help"], text=True)
        self.assertIn("check", out)
        self.assertIn("keygen", out)
        out = subprocess.check_output([BIN, "token", "keygen", "--help"], text=True)
        self.assertIn("--type", out)
        self.assertIn("CKA_EXTRACTABLE false", out)
        out = subprocess.check_output([BIN, "token", "check", "--help"], text=True)
        self.assertIn("verdict: serve would start", out)


if __name__ == "__main__":
    unittest.main()
