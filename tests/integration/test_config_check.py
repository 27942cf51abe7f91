#!/usr/bin/python3
"""`hsmca config check`: the dev CA's config passes; each broken config is refused with
its file, line and key, every problem of a config listed at once; warnings do not fail;
and the check binds no port, opens no socket to the network and loads no module."""
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hsmca_harness import BIN, TMP


def make_cert(path, ca=True, days=(-10, 365)):
    """A self-signed EC certificate with a subjectKeyIdentifier, valid from now+days[0] to
    now+days[1] (days), CA or not."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "config check test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(days=days[0]))
            .not_valid_after(now + datetime.timedelta(days=days[1]))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))


class ConfigCheckTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        cls.dir = tempfile.mkdtemp(prefix="cfgcheck.", dir=TMP)
        subprocess.run([BIN, "dev", "init", "--dir", cls.dir], check=True, capture_output=True,
                       timeout=120)
        with open(os.path.join(cls.dir, "hsmca.yaml")) as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def edited(self, name, *pairs):
        """The dev config with each (old, new) replaced once, as DIR/name."""
        text = self.text
        for old, new in pairs:
            self.assertIn(old, text)
            text = text.replace(old, new, 1)
        return self.write(name, text)

    @staticmethod
    def line_of(path, fragment):
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if fragment in line:
                    return i
        raise AssertionError("%s not in %s" % (fragment, path))

    def check(self, path, want_rc, *argv_extra):
        r = subprocess.run([BIN, "config", "check"] + list(argv_extra) + [path],
                           capture_output=True, text=True, timeout=60)
        print(r.stdout, end="")
        self.assertEqual(r.returncode, want_rc, r.stdout + r.stderr)
        return r.stdout

    def refused(self, path, fragment, key, *pieces):
        """path fails with one problem on the line holding fragment, naming key and pieces."""
        out = self.check(path, 1)
        line = "%s:%d: %s" % (path, self.line_of(path, fragment), key)
        hits = [l for l in out.splitlines() if l.startswith(line)]
        self.assertTrue(hits, out)
        for p in pieces:
            self.assertIn(p, hits[0])
        self.assertTrue(out.rstrip().endswith("config check: 1 problem"), out)
        return hits[0]

    def test_dev_config_passes(self):
        config = os.path.join(self.dir, "hsmca.yaml")
        out = self.check(config, 0)
        self.assertEqual(out.strip().splitlines()[-1], "config check: OK")
        self.assertEqual(self.check(config, 0, "--config").strip().splitlines()[-1],
                         "config check: OK")

    def test_usage(self):
        for argv in (["config"], ["config", "check"], ["config", "check", "a", "b"],
                     ["config", "frob"], ["config", "check", "--nope", "x"]):
            r = subprocess.run([BIN] + argv, capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 2, argv)
        r = subprocess.run([BIN, "config", "check", "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: hsmca config check", r.stdout)

    def test_unknown_key(self):
        p = self.edited("unknown.yaml", ("  sessions: 2\n", "  sessions: 2\n  sesions: 3\n"))
        self.refused(p, "sesions:", "pkcs11.sesions", "unknown key 'sesions' in 'pkcs11'")

    def test_bad_type(self):
        p = self.edited("badtype.yaml", ("  sessions: 2\n", "  sessions: [2]\n"))
        self.refused(p, "sessions:", "pkcs11.sessions", "must be a positive integer")

    def test_missing_pin_file(self):
        p = self.edited("nopin.yaml", ("pin_file: pin\n", "pin_file: no-such-pin\n"))
        self.refused(p, "pin_file:", "pkcs11.pin_file: ",
                     os.path.join(self.dir, "no-such-pin") + ": No such file or directory")

    def test_ca_cert_not_a_ca_expired_missing(self):
        make_cert(os.path.join(self.dir, "leaf.pem"), ca=False)
        make_cert(os.path.join(self.dir, "expired.pem"), days=(-30, -1))
        for name, want in (("leaf.pem", "is not a CA certificate"), ("expired.pem", "has expired"),
                           ("missing.pem", "missing.pem")):
            p = self.edited("ca-%s.yaml" % name, ("  cert: root-cert.pem\n", "  cert: %s\n" % name),
                            ("  root_bundle: root-cert.pem\n", ""))
            self.refused(p, "  cert:", "ca.cert: ", want)

    def test_rotation_keys(self):
        make_cert(os.path.join(self.dir, "next-leaf.pem"), ca=False)
        nk = '  next_key: "pkcs11:token=hsmca;object=ca-key-2;type=private"\n'
        for name, want in (("next-leaf.pem", "is not a CA certificate"),
                           ("root-cert.pem", "certifies the key of ca.cert"),
                           ("next-missing.pem", "next-missing.pem")):
            p = self.edited("next-%s.yaml" % name, ("  cert: root-cert.pem\n",
                            "  cert: root-cert.pem\n%s  next_cert: %s\n" % (nk, name)))
            self.refused(p, "next_cert:", "ca.next_cert: ", want)
        # ca.previous_key without ca.previous_cert: the key the file does not write.
        p = self.edited("prev.yaml", ("  cert: root-cert.pem\n", "  cert: root-cert.pem\n"
                        '  previous_key: "pkcs11:token=hsmca;object=ca-key-0;type=private"\n'))
        out = self.check(p, 1)
        self.assertIn("%s: ca.previous_cert: not set, but ca.previous_key is" % p, out)

    def test_root_bundle_that_does_not_link(self):
        make_cert(os.path.join(self.dir, "other-root.pem"))
        p = self.edited("nolink.yaml", ("root_bundle: root-cert.pem", "root_bundle: other-root.pem"))
        self.refused(p, "root_bundle:", "ca.root_bundle: ", "does not chain to a root")

    def test_policy_file_with_a_bad_rule(self):
        self.write("policy.yaml", "service_dns: true\ndns_names:\n  sleep.default: ['*.example.com']\n")
        p = self.edited("policy-cfg.yaml", ("issuance:\n", "issuance:\n  policy_file: policy.yaml\n"))
        self.refused(p, "policy_file:", "issuance.policy_file: ",
                     os.path.join(self.dir, "policy.yaml") + ":3: key 'dns_names': "
                     "'*.example.com' is not a lowercase DNS name")

    def test_jwks_without_a_usable_key(self):
        self.write("oct.json", '{"keys":[{"kty":"oct","k":"AAAA"}]}')
        p = self.edited("jwks.yaml", ("jwks_file: dev-jwks.json", "jwks_file: oct.json"))
        self.refused(p, "jwks_file:", "auth.jwt.jwks_file: ", "no usable")

    def test_kubeconfig_and_a_clusters_files(self):
        self.write("kc.yaml", "apiVersion: v1\nclusters: []\n")
        p = self.edited("kc-cfg.yaml", (
            "auth:\n  jwt:\n",
            "auth:\n  chain: [jwt, tokenreview]\n  tokenreview:\n    kubeconfig: kc.yaml\n"
            "  clusters:\n    - id: west\n      jwt:\n        issuer: https://west.example\n"
            "        jwks_file: west-missing.json\n  jwt:\n"))
        out = self.check(p, 1)
        self.assertIn("%s:%d: auth.tokenreview.kubeconfig: " % (p, self.line_of(p, "kubeconfig:")),
                      out)
        self.assertIn("current-context", out)
        self.assertIn("%s:%d: auth.clusters[0].jwt.jwks_file: " % (p, self.line_of(p, "west-missing")),
                      out)
        self.assertTrue(out.rstrip().endswith("config check: 2 problems"), out)

    def test_unknown_signer_group(self):
        p = self.edited("groups.yaml", ("  # groups: [tss]\n", "  groups: [hsmca-no-such-group]\n"))
        self.refused(p, "groups:", "signer.groups: ", "'hsmca-no-such-group' does not exist")

    def test_bad_listen_address(self):
        p = self.edited("listen1.yaml", ('listen: "127.0.0.1:15012"', 'listen: "127.0.0.1"'))
        self.refused(p, "listen:", "server.listen", "must be host:port")
        p = self.edited("listen2.yaml", ('listen: "127.0.0.1:15012"', 'listen: "127.0.0.300:15012"'))
        self.refused(p, "listen:", "server.listen: ", "127.0.0.300 is not an IPv4 address")

    def test_several_problems_all_listed(self):
        make_cert(os.path.join(self.dir, "expired2.pem"), days=(-30, -1))
        self.write("oct2.json", '{"keys":[]}')
        p = self.edited("many.yaml", ("pin_file: pin\n", "pin_file: no-such-pin\n"),
                        ('listen: "127.0.0.1:15012"', 'listen: "127.0.0.1:0"'),
                        ("  cert: root-cert.pem\n", "  cert: expired2.pem\n"),
                        ("jwks_file: dev-jwks.json", "jwks_file: oct2.json"),
                        ("  # groups: [tss]\n", "  groups: [hsmca-no-such-group]\n"))
        out = self.check(p, 1)
        for fragment, key in (("listen:", "server.listen"), ("pin_file:", "pkcs11.pin_file"),
                              ("  cert:", "ca.cert"), ("jwks_file:", "auth.jwt.jwks_file"),
                              ("groups:", "signer.groups")):
            self.assertIn("%s:%d: %s" % (p, self.line_of(p, fragment), key), out)
        # The expired ca.cert is not reported again as a chain that does not verify.
        self.assertNotIn("ca.root_bundle", out)
        self.assertTrue(out.rstrip().endswith("config check: 5 problems"), out)

    def test_warnings_do_not_fail(self):
        self.write("open-pin", "1234\n")
        os.chmod(os.path.join(self.dir, "open-pin"), 0o644)
        os.makedirs(os.path.join(self.dir, "audit-of-root"), exist_ok=True)
        p = self.edited("warn.yaml", ("pin_file: pin\n", "pin_file: open-pin\n"),
                        ("  dir: audit\n", "  dir: audit-of-root\n"))
        out = self.check(p, 0)
        self.assertRegex(out, r"warn\.yaml:\d+: pkcs11\.pin_file: warning: .*readable by every user")
        if os.geteuid() == 0:  # the directory is root's: the signer, switched, cannot write it
            self.assertRegex(out, r"warn\.yaml:%d: audit\.dir: warning: .*owned by root"
                             % self.line_of(p, "audit-of-root"))
        self.assertEqual(out.strip().splitlines()[-1], "config check: OK (with warnings)")

    def test_no_port_no_socket_no_module_loaded(self):
        """Under strace: no bind, no IP socket, and the module (a real PKCS#11 library that
        would probe the network, then a file that is no library at all) is never opened."""
        netprobe = os.environ.get("HSMCA_NETPROBE")
        not_a_library = self.write("not-a-library.so", "not an ELF file\n")
        for module in [m for m in (netprobe, not_a_library) if m]:
            p = self.edited("module.yaml", ("module: /usr/lib/softhsm/libsofthsm2.so",
                                            "module: %s" % module))
            trace = os.path.join(self.dir, "strace.out")
            # LeakSanitizer cannot run under ptrace (the ASan build): the other tests
            # check for leaks.
            env = dict(os.environ,
                       ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
            r = subprocess.run(["strace", "-f", "-o", trace, "-e",
                                "trace=socket,bind,listen,connect,openat,open", BIN, "config",
                                "check", p], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("config check: OK", r.stdout)
            with open(trace) as f:
                calls = f.read()
            self.assertIn("openat(", calls)  # strace saw the process's calls
            self.assertNotRegex(calls, r"\bbind\(|\blisten\(|socket\(AF_INET")
            self.assertNotIn(module, "".join(l for l in calls.splitlines(True)
                                             if re.search(r"\bopen(at)?\(", l)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
