#!/usr/bin/python3
"""docs/CEREMONY.md's steps, as written: every fenced block after a
`<!-- ceremony-doc: NAME -->` comment runs here, in the document's order, on a fresh
SoftHSM token in a directory of its own, with only /etc/hsmca and /var/lib/hsmca moved
into that directory and `hsmca` the binary under test (a command in the guide that does
not work as written fails here). token: the token, its PINs and the signer's user made;
config: the YAML block is the config every later step reads, complete enough for
`config check` (the cluster's JWKS put where `kubectl get --raw /openid/v1/jwks` would
write it); ca-key: the CA key and its self-signed root; audit-key: the Ed25519 audit key
in the same token; check-root: the independent cross-check (the root's public key is
the token's, as GnuTLS's p11tool reads it with the Ed25519 key beside it), which must
print the fingerprint `ca init` printed, and must fail, loudly and without a hash of
nothing, when the token's key is another; before-serving: `ca show`, `config check`
and `token check` pass (serve would start)."""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from cryptography.hazmat.primitives.asymmetric import ec

from hsmca_harness import BIN, TMP
from test_istio_doc import with_bin

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ORDER = ["token", "config", "ca-key", "audit-key", "check-root", "before-serving"]
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def doc_blocks():
    """[(name, lang, text)] in the document's order."""
    with open(os.path.join(SRC, "docs", "CEREMONY.md")) as f:
        text = f.read()
    return re.findall(r"^<!-- ceremony-doc: ([a-z-]+) -->\n```(sh|yaml)\n(.*?)^```$", text,
                      re.M | re.S)


def jwks():
    """A JWKS with one ES256 key: what the cluster's /openid/v1/jwks would give."""
    pub = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()

    def b64(n):
        return base64.urlsafe_b64encode(n.to_bytes(32, "big")).rstrip(b"=").decode()
    return json.dumps({"keys": [{"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig",
                                 "kid": "ceremony", "x": b64(pub.x), "y": b64(pub.y)}]})


@unittest.skipUnless(os.geteuid() == 0, "needs root: the guide makes signer.user and gives it "
                     "the token, and token check switches to it")
class CeremonyDocTests(unittest.TestCase):
    def setUp(self):
        self.blocks = doc_blocks()
        self.work = tempfile.mkdtemp(prefix="ceremonydoc.", dir=TMP)
        self.addCleanup(shutil.rmtree, self.work, True)
        os.chmod(self.work, 0o755)  # signer.user reads the token and softhsm2.conf below it
        self.etc = os.path.join(self.work, "etc", "hsmca")
        self.var = os.path.join(self.work, "var", "lib", "hsmca")
        # The guide's shell: SOFTHSM2_CONF exported by its token step. LeakSanitizer off:
        # SoftHSM leaks in Ed25519 signing, and token check runs the sandboxed signer.
        self.env = dict(os.environ, SOFTHSM2_CONF=os.path.join(self.etc, "softhsm2.conf"),
                        ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")

    def moved(self, text):
        text = text.replace("/etc/hsmca", self.etc).replace("/var/lib/hsmca", self.var)
        return with_bin(text)

    def run_block(self, text, cwd):
        """As a reader's shell runs it: each command must succeed."""
        return subprocess.run(["bash", "-e", "-c", self.moved(text)], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)

    def test_the_marked_blocks_are_there_in_order(self):
        self.assertEqual([name for name, _, _ in self.blocks], ORDER)

    def test_the_ceremony_as_written(self):
        blocks = {name: (lang, text) for name, lang, text in self.blocks}
        self.assertEqual(sorted(blocks), sorted(ORDER))
        outs = {}
        for name in ORDER:
            lang, text = blocks[name]
            if lang == "yaml":
                self.assertEqual(name, "config")
                with open(os.path.join(self.etc, "hsmca.yaml"), "w") as f:
                    f.write(self.moved(text))
                # What `kubectl get --raw /openid/v1/jwks > .../cluster-jwks.json` writes.
                with open(os.path.join(self.etc, "cluster-jwks.json"), "w") as f:
                    f.write(jwks())
                continue
            r = self.run_block(text, self.work if name == "token" else self.etc)
            self.assertEqual(r.returncode, 0, "block %s:\n%s%s" % (name, r.stdout, r.stderr))
            outs[name] = r.stdout
        spki = re.search(r"^public key sha256: ([0-9a-f]{64})$", outs["ca-key"], re.M).group(1)
        # The audit key is Ed25519, in the CA key's token: the cross-check ran beside it.
        self.assertIn("Ed25519", outs["audit-key"])
        tool = subprocess.run(["pkcs11-tool", "--module", "/usr/lib/softhsm/libsofthsm2.so",
                               "--token-label", "mesh-ca", "-O"], env=self.env,
                              capture_output=True, text=True, timeout=60)
        self.assertIn("EC_EDWARDS", tool.stdout, tool.stdout + tool.stderr)
        self.assertIn("%s  cert-spki.der" % spki, outs["check-root"])
        self.assertNotIn(EMPTY_SHA256, outs["check-root"])
        serving = outs["before-serving"]
        self.assertIn("token key: matches the certificate", serving)
        self.assertIn("config check: OK", serving)
        self.assertIn("verdict: serve would start", serving)

        # The cross-check is a check: pointed at another key of the token (the audit
        # key's public half), it fails, and prints no fingerprint of empty input.
        _, text = blocks["check-root"]
        self.assertIn("object=ca-key;type=public", text)
        r = self.run_block(text.replace("object=ca-key;type=public",
                                        "object=audit-key;type=public"), self.etc)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("differ", r.stdout + r.stderr)
        self.assertNotIn(EMPTY_SHA256, r.stdout)
        # And with no key at that label at all (p11tool finds nothing): it fails too.
        r = self.run_block(text.replace("object=ca-key;type=public",
                                        "object=no-such-key;type=public"), self.etc)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn(EMPTY_SHA256, r.stdout)
        self.assertNotIn("cert-spki.der", r.stdout)


if __name__ == "__main__":
    unittest.main()
