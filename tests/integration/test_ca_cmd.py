#!/usr/bin/python3
"""`hsmca ca init`, `ca import` and `ca show` on real SoftHSM tokens, cross-checked with
the tools operators trust: libp11's OpenSSL engine (Debian libengine-pkcs11-openssl) and
OpenSC's pkcs11-tool. The commands run here are the ones docs/CEREMONY.md shows.

(a) a root made by `ca init --self-signed` verifies with `openssl verify`, and its public
    key is what pkcs11-tool and the engine read for the token key;
(b) a CSR from `ca init --csr` verifies with `openssl req -verify`; an offline root in
    another token signs it through the engine (`openssl x509 -req -engine pkcs11
    -CAkeyform engine`), `ca import` installs the result and `hsmca token check` says
    serve would start with it;
(c) an extractable key, a certificate of another key, a certificate that is not a CA, one
    that does not chain to the root given, and a file that would be replaced are refused."""
import datetime
import hashlib
import json
import os
import re
import signal
import subprocess
import time
import unittest

import grpc

from cryptography import x509
from cryptography.hazmat.primitives import serialization

import hsmca_client as hc
from hsmca_harness import BIN, free_port
from test_token_cmd import ROOT, SOFTHSM, DevDir, check, run

ENGINE = "/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so"
# The cross-checks need libp11's engine (Debian libengine-pkcs11-openssl).
need_engine = unittest.skipUnless(os.path.exists(ENGINE), "no libp11 engine at %s: apt-get "
                                  "install libengine-pkcs11-openssl" % ENGINE)
EXT_CA = ("basicConstraints=critical,CA:TRUE,pathlen:0\n"
          "keyUsage=critical,keyCertSign,cRLSign,digitalSignature\n"
          "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")


class Ceremony:
    """A dev CA's SoftHSM with a fresh token 'fresh' for the CA key, a config naming it
    (ca.cert fresh-cert.pem, ca.root_bundle fresh-roots.pem) and an OpenSSL config that
    loads libp11's engine with SoftHSM (docs/CEREMONY.md, "The independent check")."""

    def __init__(self, name):
        self.dev = DevDir(name)
        self.dir = self.dev.dir
        self.token("fresh")
        self.cert = self.path("fresh-cert.pem")
        self.roots = self.path("fresh-roots.pem")
        self.cfg = self.dev.config(
            lambda t: t.replace("token=hsmca;object=ca-key", "token=fresh;object=ca-key")
            .replace("cert: root-cert.pem", "cert: fresh-cert.pem")
            .replace("root_bundle: root-cert.pem", "root_bundle: fresh-roots.pem"),
            "fresh.yaml")
        self.pin_file = os.path.join(self.dir, "pin")
        conf = self.path("engine.cnf")
        with open(conf, "w") as f:
            f.write("openssl_conf = openssl_init\n[openssl_init]\nengines = engines\n"
                    "[engines]\npkcs11 = pkcs11\n[pkcs11]\nengine_id = pkcs11\n"
                    "dynamic_path = %s\nMODULE_PATH = %s\ninit = 0\n" % (ENGINE, SOFTHSM))
        self.env = dict(self.dev.env, OPENSSL_CONF=conf)

    def path(self, name):
        return os.path.join(self.dir, name)

    def token(self, label):
        rc, out, err = run(["softhsm2-util", "--init-token", "--free", "--label", label,
                            "--pin", self.dev.pin, "--so-pin", self.dev.so_pin], self.dev.env)
        assert rc == 0, out + err

    def ca(self, *args):
        return run([BIN, "ca"] + list(args))

    def openssl(self, *args, engine=True):
        """openssl with the engine configured (engine=False: OpenSSL's own defaults, for
        keys in files); the PIN from the PIN file (-passin)."""
        rc, out, err = run(["openssl"] + list(args), self.env if engine else None)
        if rc != 0:
            raise AssertionError("openssl %s: %s%s" % (args, out, err))
        return out, err

    def engine_spki(self, token, label):
        """The key's DER SubjectPublicKeyInfo as libp11's engine reads it."""
        p = subprocess.run(["openssl", "pkey", "-engine", "pkcs11", "-inform", "engine",
                            "-pubin", "-in", "pkcs11:token=%s;object=%s;type=public"
                            % (token, label), "-outform", "DER"],
                           capture_output=True, env=dict(os.environ, **self.env), timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    def tool_spki(self, token, label):
        """The key's DER SubjectPublicKeyInfo as pkcs11-tool reads it."""
        p = subprocess.run(["pkcs11-tool", "--module", SOFTHSM, "--token-label", token,
                            "--read-object", "--type", "pubkey", "--label", label],
                           capture_output=True, env=dict(os.environ, **self.dev.env),
                           timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    def p11tool_spki(self, token, label):
        """The key's DER SubjectPublicKeyInfo as GnuTLS's p11tool reads it (the check
        docs/CEREMONY.md runs), logged in with the PIN in GNUTLS_PIN."""
        p = subprocess.run(["p11tool", "--provider", SOFTHSM, "--export-pubkey",
                            "pkcs11:token=%s;object=%s;type=public" % (token, label)],
                           capture_output=True, timeout=60,
                           env=dict(os.environ, GNUTLS_PIN=self.dev.pin, **self.dev.env))
        assert p.returncode == 0, p.stderr
        return serialization.load_pem_public_key(p.stdout).public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)

    def offline_root(self):
        """An offline root in its own token 'offroot' (pkcs11-tool's key, sensitive), its
        certificate made by the engine: returns (root.pem, the key's engine URI)."""
        self.token("offroot")
        self.dev.tool("offroot", "--keypairgen", "--key-type", "EC:secp384r1", "--label",
                      "root-key", "--id", "01", "--sensitive")
        key = "pkcs11:token=offroot;object=root-key;type=private"
        root = self.path("offroot.pem")
        self.openssl("req", "-x509", "-engine", "pkcs11", "-keyform", "engine", "-key", key,
                     "-passin", "file:" + self.pin_file, "-subj", "/O=Test/CN=Offline Root",
                     "-days", "3650", "-sha384",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", root)
        return root, key

    def engine_sign(self, csr, root, key, out, ext=EXT_CA):
        """The offline root signs the CSR through the engine."""
        extfile = self.path("ext.cnf")
        with open(extfile, "w") as f:
            f.write(ext)
        self.openssl("x509", "-req", "-in", csr, "-engine", "pkcs11", "-CAkeyform", "engine",
                     "-CAkey", key, "-passin", "file:" + self.pin_file, "-CA", root,
                     "-days", "365", "-sha384", "-extfile", extfile,
                     "-set_serial", "0x" + os.urandom(16).hex(), "-out", out)

    def cleanup(self):
        self.dev.cleanup()


def spki_of(pem_path):
    with open(pem_path, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    return cert, cert.public_key().public_bytes(serialization.Encoding.DER,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)


def spki_of_pem(pem):
    cert = x509.load_pem_x509_certificate(pem.encode())
    return cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)


def serve_and_issue(dev, config):
    """`hsmca serve --config CONFIG` on a free port, one certificate for a dev token; returns
    the response's cert_chain. The server is stopped before it returns."""
    with open(config) as f:
        text = f.read()
    port = free_port()
    text = re.sub(r'listen: "127\.0\.0\.1:\d+"', 'listen: "127.0.0.1:%d"' % port, text, count=1)
    text = re.sub(r'(?m)^(\s*)listen: "127\.0\.0\.1:15014"', r'\1listen: ""', text)
    served = config + ".serve.yaml"
    with open(served, "w") as f:
        f.write(text)
    env = dict(os.environ, SOFTHSM2_CONF=dev.env["SOFTHSM2_CONF"])
    env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    log = open(served + ".log", "wb")
    proc = subprocess.Popen([BIN, "serve", "--config", served], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        token = subprocess.check_output([BIN, "dev", "token", "--dir", dev.dir, "--ns",
                                         "default", "--sa", "sleep"]).decode().strip()
        key = hc.make_key("ec-p256")
        csr = hc.make_csr(key, uris=["spiffe://cluster.local/ns/default/sa/sleep"])
        deadline, last = time.time() + 60, None
        while time.time() < deadline:
            if proc.poll() is not None:
                with open(served + ".log") as f:
                    raise AssertionError("serve exited %d:\n%s" % (proc.returncode, f.read()))
            # The serving certificate chains to the roots through the issuing CA: a
            # client trusting only the roots must connect.
            with open(os.path.join(os.path.dirname(config), "fresh-roots.pem"), "rb") as f:
                client = hc.Client("localhost:%d" % port, f.read())
            try:
                return client.create(csr, token, 0, timeout=3)
            except grpc.RpcError as e:
                last = e
                time.sleep(0.3)
            finally:
                client.close()
        raise AssertionError("no certificate from serve: %s" % last)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def pipeline_sha256(first, env=None):
    """`FIRST | openssl pkey -pubin -outform DER | sha256sum`, as docs/CEREMONY.md has it."""
    p1 = subprocess.run(first, capture_output=True, check=True, timeout=60)
    p2 = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=p1.stdout,
                        capture_output=True, check=True, timeout=60)
    return hashlib.sha256(p2.stdout).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


@need_engine
class SelfSignedTests(unittest.TestCase):
    def setUp(self):
        self.c = Ceremony("caroot")

    def tearDown(self):
        self.c.cleanup()

    def test_self_signed_root(self):
        c = self.c
        rc, out, err = c.ca("init", "--config", c.cfg, "--self-signed", "--subject",
                            "/O=Test Org/CN=Test Root CA", "--ttl", "30d")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("made the CA key pkcs11:token=fresh;object=ca-key;type=private: EC P-256",
                      out)
        self.assertIn("key checked as serve checks it: EC P-256, sensitive, never extractable",
                      out)
        # (a) openssl verifies it; its key is the token's, as the engine and pkcs11-tool read it.
        c.openssl("verify", "-CAfile", c.cert, c.cert)
        cert, spki = spki_of(c.cert)
        self.assertEqual(spki, c.engine_spki("fresh", "ca-key"))
        self.assertEqual(spki, c.tool_spki("fresh", "ca-key"))
        self.assertEqual(spki, c.p11tool_spki("fresh", "ca-key"))
        self.assertIn("public key sha256: %s\n" % hashlib.sha256(spki).hexdigest(), out)
        self.assertEqual(pipeline_sha256(["openssl", "x509", "-in", c.cert, "-noout",
                                          "-pubkey"]), hashlib.sha256(spki).hexdigest())
        self.assertIn("certificate sha256: %s\n" % hashlib.sha256(
            cert.public_bytes(serialization.Encoding.DER)).hexdigest(), out)
        # The profile: a root CA, named as asked, valid 30 days.
        self.assertEqual(cert.subject.rfc4514_string(), "CN=Test Root CA,O=Test Org")
        self.assertEqual(cert.issuer, cert.subject)
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
        self.assertTrue(bc.critical and bc.value.ca)
        ku = cert.extensions.get_extension_for_class(x509.KeyUsage)
        self.assertTrue(ku.critical and ku.value.key_cert_sign and ku.value.crl_sign and
                        ku.value.digital_signature)
        self.assertFalse(ku.value.key_encipherment)
        ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
        self.assertEqual(ski.digest, aki.key_identifier)
        self.assertGreater(cert.serial_number.bit_length(), 120)
        life = cert.not_valid_after - cert.not_valid_before
        self.assertEqual(life, datetime.timedelta(days=30, minutes=5))
        # ca.root_bundle was absent: it holds the root now.
        self.assertEqual(read(c.roots), read(c.cert))
        # The key, as another tool lists it: sign only, never extractable.
        m = re.search(r"Private Key Object; EC\n  label:      ca-key\n  ID:[^\n]*\n"
                      r"  Usage:      ([^\n]*)\n  Access:     ([^\n]*)\n",
                      c.dev.tool("fresh", "-O"))
        self.assertEqual(m.groups(), ("sign", "sensitive, always sensitive, never extractable, "
                                              "local"))
        # ca show: the certificate, its root, the token key matches.
        rc, out, err = c.ca("show", "--config", c.cfg, "--json")
        self.assertEqual(rc, 0, out + err)
        doc = json.loads(out)
        self.assertEqual(doc["token_key"], "match")
        self.assertEqual(doc["cert"]["spki_sha256"], hashlib.sha256(spki).hexdigest())
        self.assertEqual(doc["cert"]["subject"], "O=Test Org, CN=Test Root CA")
        self.assertIn(doc["cert"]["days_left"], (29, 30))
        self.assertEqual(doc["chain"], [])
        self.assertEqual(len(doc["roots"]), 1)
        rc, out, err = c.ca("show", "--config", c.cfg)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("token key: matches the certificate", out)
        self.assertIn("  key          EC P-256\n", out)
        # serve would start with it.
        c.dev.give_tokens()
        rc, out, err = check(c.cfg)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("verdict: serve would start", out)

    def test_existing_key_and_files_are_not_replaced_by_accident(self):
        c = self.c
        args = ["init", "--config", c.cfg, "--self-signed", "--subject", "/CN=Root", "--type",
                "ec-p384"]
        rc, out, err = c.ca(*args)
        self.assertEqual(rc, 0, out + err)
        first = read(c.cert)
        # ca.cert is there: refused before anything is made.
        rc, out, err = c.ca(*args)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("fresh-cert.pem (ca.cert) exists: pass --force", err)
        # The key is there: refused unless --existing-key.
        rc, out, err = c.ca(*(args + ["--force"]))
        self.assertEqual(rc, 1, out + err)
        self.assertIn("the token already holds pkcs11:token=fresh;object=ca-key;type=private: "
                      "pass --existing-key", err)
        self.assertEqual(read(c.cert), first)
        # --existing-key of another type is refused; of its type, a new root of the same key.
        rc, out, err = c.ca("init", "--config", c.cfg, "--self-signed", "--subject", "/CN=R",
                            "--existing-key", "--force", "--type", "rsa-2048")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("the key is EC P-384, not RSA-2048 (--type)", err)
        rc, out, err = c.ca(*(args + ["--force", "--existing-key"]))
        self.assertEqual(rc, 0, out + err)
        self.assertIn("using the existing CA key", out)
        self.assertNotEqual(read(c.cert), first)
        # (pkcs11-tool 0.23 cannot read a P-384 public key back: the engine and p11tool can.)
        self.assertEqual(spki_of(c.cert)[1], c.engine_spki("fresh", "ca-key"))
        self.assertEqual(spki_of(c.cert)[1], c.p11tool_spki("fresh", "ca-key"))
        # ca.root_bundle existed: left alone, and said so.
        self.assertIn("fresh-roots.pem (ca.root_bundle) exists and was left as it is", out)
        self.assertEqual(read(c.roots), first)
        # --existing-key with no key there.
        c.token("empty")
        cfg = c.dev.config(lambda t: read(c.cfg).decode().replace("token=fresh", "token=empty"),
                           "empty.yaml")
        rc, out, err = c.ca("init", "--config", cfg, "--csr", c.path("e.csr"), "--subject",
                            "/CN=E", "--existing-key")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("pkcs11.ca_key: --existing-key, but", err)
        self.assertFalse(os.path.exists(c.path("e.csr")))
        # A PIN the token refuses, a token that is not there: named, nothing made.
        with open(c.path("wrong-pin"), "w") as f:
            f.write("not-the-pin\n")
        cfg = c.dev.config(lambda t: read(c.cfg).decode().replace(
            "pin_file: pin", "pin_file: wrong-pin"), "wrongpin.yaml")
        rc, out, err = c.ca("init", "--config", cfg, "--csr", c.path("e.csr"), "--subject",
                            "/CN=E")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("CKR_PIN_INCORRECT (the PIN in pkcs11.pin_file); nothing done", err)
        cfg = c.dev.config(lambda t: read(c.cfg).decode().replace("token=fresh", "token=nosuch"),
                           "nosuch.yaml")
        rc, out, err = c.ca("init", "--config", cfg, "--csr", c.path("e.csr"), "--subject",
                            "/CN=E")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("pkcs11.ca_key: token 'nosuch' not found; nothing done", err)
        self.assertFalse(os.path.exists(c.path("e.csr")))

    def test_rsa_4096(self):
        c = self.c
        rc, out, err = c.ca("init", "--config", c.cfg, "--self-signed", "--subject",
                            "/CN=RSA Root", "--ttl", "1y", "--type", "rsa-4096")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("RSA-4096", out)
        c.openssl("verify", "-CAfile", c.cert, c.cert)
        cert, spki = spki_of(c.cert)
        self.assertEqual(cert.public_key().key_size, 4096)
        self.assertEqual(spki, c.engine_spki("fresh", "ca-key"))
        self.assertEqual(cert.not_valid_after - cert.not_valid_before,
                         datetime.timedelta(days=365, minutes=5))


@need_engine
class CsrImportTests(unittest.TestCase):
    def setUp(self):
        self.c = Ceremony("cacsr")

    def tearDown(self):
        self.c.cleanup()

    def csr(self, typ="rsa-3072"):
        c = self.c
        csr = c.path("ca.csr")
        rc, out, err = c.ca("init", "--config", c.cfg, "--csr", csr, "--subject",
                            "/O=Mesh/CN=Mesh Intermediate CA", "--type", typ)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("wrote the CSR, signed in the token, to %s" % csr, out)
        return csr, out

    def test_csr_signed_by_engine_root_then_import(self):
        c = self.c
        csr, out = self.csr()
        # (b) openssl verifies the CSR; its key is the token's.
        _, err = c.openssl("req", "-in", csr, "-verify", "-noout")
        self.assertIn("verify OK", err)
        with open(csr, "rb") as f:
            req = x509.load_pem_x509_csr(f.read())
        spki = req.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)
        self.assertEqual(spki, c.tool_spki("fresh", "ca-key"))
        self.assertIn("public key sha256: %s" % hashlib.sha256(spki).hexdigest(), out)
        self.assertEqual(pipeline_sha256(["openssl", "req", "-in", csr, "-noout", "-pubkey"]),
                         hashlib.sha256(spki).hexdigest())
        self.assertTrue(req.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
        # The offline root, in its own token, signs it through libp11's engine.
        root, key = c.offline_root()
        ca_pem = c.path("ca.pem")
        c.engine_sign(csr, root, key, ca_pem)
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", ca_pem, "--root", root)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ok   key: %s certifies the token's CA key" % ca_pem, out)
        self.assertIn("ok   chain: 2 certificates up to the root /O=Test/CN=Offline Root", out)
        self.assertIn("installed %s (ca.cert)" % c.cert, out)
        self.assertIn("installed %s (ca.root_bundle)" % c.roots, out)
        self.assertEqual(spki_of(c.cert)[0], spki_of(ca_pem)[0])
        self.assertEqual(spki_of(c.roots)[0], spki_of(root)[0])
        # Again: nothing to change.
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", ca_pem, "--root", root)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("unchanged %s (ca.cert)" % c.cert, out)
        # ca show walks the chain to the offline root.
        rc, out, err = c.ca("show", "--config", c.cfg, "--json")
        self.assertEqual(rc, 0, out + err)
        doc = json.loads(out)
        self.assertEqual(doc["token_key"], "match")
        self.assertEqual(doc["cert"]["key_type"], "RSA-3072")
        self.assertEqual([x["subject"] for x in doc["chain"]], ["O=Test, CN=Offline Root"])
        # serve would start with the imported certificate.
        c.dev.give_tokens()
        rc, out, err = check(c.cfg)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("certifies the token's CA key", out)
        self.assertIn("verdict: serve would start", out)
        # And serves: every response carries the issuing CA between the leaf and the
        # roots, so a client that trusts only the offline root verifies the leaf.
        chain = serve_and_issue(c.dev, c.cfg)
        self.assertEqual(len(chain), 3, chain)
        self.assertEqual(spki_of_pem(chain[1]), spki_of(ca_pem)[1])
        with open(c.path("leaf.pem"), "w") as f:
            f.write(chain[0])
        with open(c.path("mid-sent.pem"), "w") as f:
            f.write(chain[1])
        c.openssl("verify", "-CAfile", root, "-untrusted", c.path("mid-sent.pem"),
                  c.path("leaf.pem"), engine=False)

    def test_import_through_a_chain(self):
        """offline root (engine) -> issuing CA (a file key) -> the token's CA: --chain."""
        c = self.c
        csr, _ = self.csr("ec-p256")
        root, key = c.offline_root()
        mid_csr, mid = c.path("mid.csr"), c.path("mid.pem")
        c.openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384",
                  "-nodes", "-keyout", c.path("mid.key"), "-subj", "/CN=Issuing CA",
                  "-out", mid_csr, engine=False)
        c.engine_sign(mid_csr, root, key, mid, EXT_CA.replace("pathlen:0", "pathlen:1"))
        ca_pem = c.path("ca.pem")
        with open(c.path("ext.cnf"), "w") as f:
            f.write(EXT_CA)
        c.openssl("x509", "-req", "-in", csr, "-CA", mid, "-CAkey", c.path("mid.key"),
                  "-days", "30", "-extfile", c.path("ext.cnf"), "-set_serial", "7",
                  "-out", ca_pem, engine=False)
        # Without the chain it does not verify; ca.chain must be set for --chain.
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", ca_pem, "--root", root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("unable to get local issuer certificate", err)
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", ca_pem, "--root", root,
                            "--chain", mid)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("--chain: ca.chain is not set", err)
        cfg = c.dev.config(lambda t: read(c.cfg).decode().replace(
            "  root_bundle: fresh-roots.pem\n",
            "  root_bundle: fresh-roots.pem\n  chain: fresh-chain.pem\n"), "chain.yaml")
        rc, out, err = c.ca("import", "--config", cfg, "--cert", ca_pem, "--root", root,
                            "--chain", mid)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ok   chain: 3 certificates up to the root /O=Test/CN=Offline Root", out)
        self.assertIn("installed %s (ca.chain)" % c.path("fresh-chain.pem"), out)
        c.openssl("verify", "-CAfile", c.roots, "-untrusted", c.path("fresh-chain.pem"), c.cert)
        rc, out, err = c.ca("show", "--config", cfg, "--json")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([x["subject"] for x in json.loads(out)["chain"]],
                         ["CN=Issuing CA", "O=Test, CN=Offline Root"])

    def test_import_refusals(self):
        c = self.c
        csr, _ = self.csr("ec-p256")
        root, key = c.offline_root()
        good = c.path("good.pem")
        c.engine_sign(csr, root, key, good)
        # A certificate of another key (the dev CA's root, key in token 'hsmca').
        other = os.path.join(c.dir, "root-cert.pem")
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", other)
        self.assertEqual(rc, 1, out + err)
        theirs = hashlib.sha256(spki_of(other)[1]).hexdigest()
        ours = hashlib.sha256(c.tool_spki("fresh", "ca-key")).hexdigest()
        self.assertIn("--cert does not certify the token's CA key (pkcs11.ca_key): its public key "
                      "sha256 is %s, the token key's is %s" % (theirs, ours), err)
        self.assertFalse(os.path.exists(c.cert))
        # Not a CA: the root signed the token key's CSR as a leaf.
        leaf = c.path("leaf.pem")
        c.engine_sign(csr, root, key, leaf, "basicConstraints=critical,CA:FALSE\n"
                      "keyUsage=critical,digitalSignature\nsubjectKeyIdentifier=hash\n")
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", leaf, "--root", root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("has no basicConstraints CA:TRUE", err)
        # Another root than the one that signed it.
        other_root = c.path("other-root.pem")
        c.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-nodes", "-keyout", c.path("other.key"), "-subj", "/CN=Other Root",
                  "-days", "30", "-out", other_root, engine=False)
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", good, "--root", other_root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("does not chain to %s: unable to get local issuer certificate" % other_root,
                      err)
        self.assertFalse(os.path.exists(c.cert))
        # ca.cert holds something else: replaced only with --force.
        with open(c.cert, "w") as f:
            f.write("placeholder\n")
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", good, "--root", root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("ca.cert: %s exists and holds something else: pass --force" % c.cert, err)
        self.assertFalse(os.path.exists(c.roots))  # nothing installed
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", good, "--root", root,
                            "--force")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(spki_of(c.cert)[0], spki_of(good)[0])


@need_engine
class ExtractableKeyTests(unittest.TestCase):
    """(c) a key made by pkcs11-tool --extractable: it may leave the token, so it is never
    a CA key."""

    def setUp(self):
        self.c = Ceremony("caextr")
        self.c.dev.tool("fresh", "--keypairgen", "--key-type", "EC:prime256v1", "--label",
                        "ca-key", "--id", "99", "--usage-sign", "--extractable")

    def tearDown(self):
        self.c.cleanup()

    def test_refused_by_init_and_import(self):
        c = self.c
        for extra in ([], ["--existing-key"]):
            rc, out, err = c.ca("init", "--config", c.cfg, "--self-signed", "--subject",
                                "/CN=Root", *extra)
            self.assertEqual(rc, 1, out + err)
            self.assertIn("pkcs11.ca_key: the key is there and fails serve's checks", err)
            self.assertIn("CKA_EXTRACTABLE is TRUE", err)
            self.assertFalse(os.path.exists(c.cert))
        # A root of that key, made by the engine, is refused by import as well.
        root = c.path("extr-root.pem")
        c.openssl("req", "-x509", "-engine", "pkcs11", "-keyform", "engine", "-key",
                  "pkcs11:token=fresh;object=ca-key;type=private", "-passin",
                  "file:" + c.pin_file, "-subj", "/CN=Extractable Root", "-days", "30",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", root)
        rc, out, err = c.ca("import", "--config", c.cfg, "--cert", root)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("hsmca ca import: pkcs11.ca_key:", err)
        self.assertIn("CKA_EXTRACTABLE is TRUE", err)
        self.assertFalse(os.path.exists(c.cert))
        rc, out, err = c.ca("show", "--config", c.cfg)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("hsmca ca show: ca.cert: ", err)  # nothing installed, nothing shown


class UsageTests(unittest.TestCase):
    def test_help(self):
        out = subprocess.check_output([BIN, "--help"], text=True)
        for cmd in ("ca init", "ca import", "ca show"):
            self.assertIn(cmd, out)
        out = subprocess.check_output([BIN, "ca", "--help"], text=True)
        self.assertIn("docs/CEREMONY.md", out)
        out = subprocess.check_output([BIN, "ca", "init", "--help"], text=True)
        self.assertIn("rsa-4096", out)
        self.assertIn("--existing-key", out)
        out = subprocess.check_output([BIN, "ca", "import", "--help"], text=True)
        self.assertIn("--force", out)

    def test_bad_usage(self):
        for args, msg in (
                (["init", "--config", "x.yaml", "--subject", "/CN=a"], "one of --self-signed"),
                (["init", "--config", "x.yaml", "--subject", "CN=a", "--self-signed"],
                 "--subject must look like"),
                (["init", "--config", "x.yaml", "--subject", "/CN=a", "--self-signed",
                  "--ttl", "0d"], "--ttl must be"),
                (["init", "--config", "x.yaml", "--subject", "/CN=a", "--csr", "o.csr",
                  "--ttl", "1y"], "--ttl goes with --self-signed"),
                (["init", "--config", "x.yaml", "--subject", "/CN=a", "--self-signed",
                  "--type", "ed25519"], "--type must be"),
                (["init", "--config", "x.yaml", "--subject", "/CN=a", "--self-signed",
                  "--pin", "1234"], "unexpected argument '--pin'"),
                (["import", "--config", "x.yaml"], "--cert FILE are required")):
            rc, out, err = run([BIN, "ca"] + args)
            self.assertEqual(rc, 2, (args, out, err))
            self.assertIn(msg, err)


if __name__ == "__main__":
    unittest.main()
