#!/usr/bin/python3
"""The command line as a newcomer meets it: `hsmca dev`'s banner commands work when
pasted into a shell, `hsmca request` reports refusals by name, and every
subcommand explains itself with --help."""
import hashlib
import json
import os
import re
import subprocess
import unittest

from cryptography import x509

from hsmca_harness import BIN, DevServer


class CliTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="cli")
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_banner_commands_work_when_pasted(self):
        log = self.server.logtext(tail=None)  # the banner comes first
        for what in ("127.0.0.1:%d" % self.server.port, self.server.dir + "/root-cert.pem",
                     self.server.dir + "/pin"):
            self.assertIn(what, log)
        m = re.search(r"^  (TOKEN=.*)\n  (.* request .*\\\n.*)$", log, re.M)
        self.assertIsNotNone(m, log)
        script = m.group(1) + "\n" + m.group(2) + "\n"
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("-----BEGIN CERTIFICATE-----"), 2)
        self.assertIn("issued: serial", r.stderr)

    def test_readme_quickstart_commands_work(self):
        """The README's first-certificate commands, as written: every fenced sh block after
        a `<!-- quickstart` comment, run in order in one directory with only the dev CA's
        directory, address and binary put in (a README command that does not work as
        written fails here)."""
        with open(os.path.join(SRC, "README.md")) as f:
            readme = f.read()
        blocks = re.findall(r"^<!-- quickstart[^\n]*-->\n```sh\n(.*?)^```$", readme, re.M | re.S)
        self.assertGreaterEqual(len(blocks), 2, "README.md: no marked quickstart blocks")
        for needed in ("./build/hsmca ", "hsmca-dev/", "localhost:15012"):
            self.assertIn(needed, blocks[0], "README quickstart no longer says %r: update this "
                          "test's substitutions" % needed)
        work = os.path.join(self.server.dir, "quickstart")
        os.makedirs(work, exist_ok=True)
        for block in blocks:
            script = (block.replace("./build/hsmca ", BIN + " ")
                      .replace("hsmca-dev/", self.server.dir + "/")
                      .replace("--dir hsmca-dev ", "--dir %s " % self.server.dir)
                      .replace("localhost:15012", self.server.addr))
            self.assertNotIn("hsmca-dev", script)
            r = subprocess.run(["bash", "-e", "-c", script], cwd=work, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, block + r.stderr)
            self.assertEqual(r.stdout.count("-----BEGIN CERTIFICATE-----"), 2, r.stdout)
            self.assertIn("issued: serial", r.stderr)
        self.assertTrue(os.path.exists(os.path.join(work, "w-chain.pem")))

    def test_request_writes_key_and_chain(self):
        prefix = os.path.join(self.server.dir, "out")
        r = subprocess.run([BIN, "request", "--addr", self.server.addr, "--root",
                            os.path.join(self.server.dir, "root-cert.pem"), "--token",
                            self.server.token(), "--id", "spiffe://cluster.local/ns/default/sa/sleep",
                            "--key", "rsa-2048", "--out", prefix], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.stat(prefix + "-key.pem").st_mode & 0o777, 0o600)
        # The serial as `ca revoke` takes it and the signer's log line spells it: hex of
        # the DER INTEGER's content octets, not decimal.
        with open(prefix + "-chain.pem", "rb") as f:
            leaf = x509.load_pem_x509_certificate(f.read())
        n = leaf.serial_number
        octets = n.to_bytes((n.bit_length() + 8) // 8, "big")  # room for a sign bit
        serial = (octets[1:] if octets[0] == 0 and not octets[1] & 0x80 else octets).hex()
        self.assertIn("issued: serial %s, " % serial, r.stderr)
        self.assertTrue(any('"serial":"%s"' % serial in ln for ln in
                            self.server.logtext(tail=None).splitlines()
                            if "signed workload certificate" in ln), serial)
        v = subprocess.run(["openssl", "verify", "-CAfile",
                            os.path.join(self.server.dir, "root-cert.pem"), prefix + "-chain.pem"],
                           capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)

    def test_request_out_refuses_a_planted_link(self):
        """A link planted at PREFIX-key.pem (to a file elsewhere) is refused, naming it; the
        file it names is untouched and no key is written through it."""
        prefix = os.path.join(self.server.dir, "planted")
        victim = os.path.join(self.server.dir, "victim.txt")
        with open(victim, "w") as f:
            f.write("precious\n")
        os.symlink(victim, prefix + "-key.pem")
        r = subprocess.run([BIN, "request", "--addr", self.server.addr, "--root",
                            os.path.join(self.server.dir, "root-cert.pem"), "--token",
                            self.server.token(), "--id", "spiffe://cluster.local/ns/default/sa/sleep",
                            "--out", prefix], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("planted-key.pem: it is a symbolic link", r.stderr)
        self.assertTrue(os.path.islink(prefix + "-key.pem"))
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")

    def test_request_refusal_is_named(self):
        r = subprocess.run([BIN, "request", "--addr", self.server.addr, "--root",
                            os.path.join(self.server.dir, "root-cert.pem"), "--token",
                            self.server.token(), "--id", "spiffe://cluster.local/ns/default/sa/admin"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("PERMISSION_DENIED: SAN policy", r.stderr)

    def test_token_inspectable_and_keys_sign_only(self):
        """What docs/OPERATIONS.md ("Looking into the token") promises an operator sees with pkcs11-tool: the CA key and the
        Ed25519 audit key, both sign-only, sensitive and never extractable; and the
        signer's log names the audit key's fingerprint."""
        with open(os.path.join(self.server.dir, "pin")) as f:
            pin = f.read().strip()
        self.assertEqual(os.stat(os.path.join(self.server.dir, "pin")).st_mode & 0o777, 0o600)
        env = dict(os.environ, SOFTHSM2_CONF=os.path.join(self.server.dir, "softhsm2.conf"))
        out = subprocess.run(["pkcs11-tool", "--module", "/usr/lib/softhsm/libsofthsm2.so",
                              "--login", "--pin", pin, "-O"], capture_output=True, text=True,
                             env=env, timeout=30).stdout
        # One block per object, in the token's own order: a header line, then
        # indented attribute lines.
        blocks = [b + "\n" for b in re.split(r"\n(?=\S)", out)]
        private = {re.search(r"label:\s+(\S+)", b).group(1): b for b in blocks
                   if b.startswith("Private Key Object")}
        self.assertEqual(sorted(private), ["audit-key", "ca-key"], out)
        self.assertTrue(private["ca-key"].startswith("Private Key Object; EC\n"), out)
        self.assertTrue(private["audit-key"].startswith("Private Key Object; EC_EDWARDS\n"), out)
        for label, b in private.items():
            self.assertRegex(b, r"Usage:\s+sign\n", label)  # sign only: no unwrap, decrypt, derive
            self.assertIn("Access:     sensitive, always sensitive, never extractable, local", b,
                          label)
        public = [b for b in blocks if b.startswith("Public Key Object; EC_EDWARDS")]
        self.assertEqual(len(public), 1, out)
        self.assertIn("EC_PARAMS:  06032b6570 (OID 1.3.101.112)", public[0])
        point = re.search(r"EC_POINT:\s+0420([0-9a-f]{64})\n", public[0]).group(1)
        # The signer's line at start: SHA-256 of the DER SubjectPublicKeyInfo (RFC 8410).
        spki = bytes.fromhex("302a300506032b6570032100" + point)
        with open(self.server.log_path, errors="replace") as f:
            ready = [json.loads(line) for line in f if '"audit key ready"' in line]
        self.assertTrue(ready, "no 'audit key ready' line in %s" % self.server.log_path)
        self.assertEqual(ready[0]["proc"], "signer")
        self.assertEqual(ready[0]["public_key"], point)
        self.assertEqual(ready[0]["sha256"], hashlib.sha256(spki).hexdigest())

    def handshake(self, *flags):
        r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.server.port,
                            "-alpn", "h2", "-servername", "localhost"] + list(flags),
                           input=b"", capture_output=True, timeout=20)
        return r.stdout.decode(errors="replace")

    def test_tls_1_2_and_1_3_only(self):
        self.assertIn("New, TLSv1.3,", self.handshake("-tls1_3"))
        self.assertIn("New, TLSv1.2,", self.handshake("-tls1_2"))
        # A client willing to speak TLS 1.1 (security level lowered on its side) is refused.
        out = self.handshake("-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0")
        self.assertIn("Cipher is (NONE)", out)

    def test_help_on_every_subcommand(self):
        for argv in (["--help"], ["dev", "--help"], ["dev", "init", "--help"],
                     ["dev", "token", "--help"], ["serve", "--help"], ["request", "--help"]):
            r = subprocess.run([BIN] + argv, capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 0, argv)
            self.assertIn("usage: hsmca", r.stdout, argv)
        for prog in ("hsmca-signer", "hsmca-frontend", "hsmca-supervisor"):
            path = os.path.join(os.path.dirname(BIN), prog)
            r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 0, prog)
            self.assertIn("usage: " + prog, r.stdout, prog)

    def test_unknown_command_and_flag(self):
        r = subprocess.run([BIN, "frobnicate"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)
        r = subprocess.run([BIN, "dev", "--nope"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def main_commands():
    """The first words of the rows of main.c's command table: what `hsmca` dispatches."""
    with open(os.path.join(SRC, "cli", "main.c")) as f:
        src = f.read()
    table = src[src.index("commands[] = {"):]
    return set(re.findall(r'\{"([a-z][a-z0-9-]*)[ "]', table[:table.index("};")]))


class HelpVersionTests(unittest.TestCase):
    def test_help_lists_every_command(self):
        """Every command main.c dispatches, and each subcommand a user runs, is in
        `hsmca --help`'s list."""
        dispatched = main_commands()
        dispatched -= {"help"}
        self.assertGreaterEqual(len(dispatched), 10, dispatched)
        r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0)
        listed = set(re.findall(r"^  ([a-z][a-z0-9]*)\b", r.stdout, re.M))
        self.assertEqual(dispatched - listed, set(), r.stdout)
        for sub in ("admin status", "ca init", "ca import", "ca show", "config check", "dev init",
                    "dev token", "token check", "token keygen"):
            self.assertRegex(r.stdout, r"(?m)^  %s\b" % sub)

    def test_readme_lists_every_command_of_help(self):
        """README.md's command list names every command `hsmca --help` lists, and each
        command it names is one main.c dispatches."""
        r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0)
        listed = re.findall(r"^  ([a-z][a-z0-9]*(?: [a-z][a-z-]*)?)  ", r.stdout, re.M)
        self.assertGreaterEqual(len(listed), 10, r.stdout)
        with open(os.path.join(SRC, "README.md")) as f:
            readme = f.read()
        in_readme = re.findall(r"^    hsmca ([a-z][a-z0-9]*(?: [a-z|-]+)?)", readme, re.M)
        self.assertGreaterEqual(len(in_readme), 10, "README.md: no command list")
        for cmd in listed:
            self.assertTrue(any(c == cmd or c.startswith(cmd + " ") for c in in_readme),
                            "README.md's command list lacks `hsmca %s`" % cmd)
        dispatched = main_commands()
        for c in in_readme:
            self.assertIn(c.split()[0], dispatched, "README.md lists `hsmca %s`" % c)

    def test_version_names_commit_and_libraries(self):
        r = subprocess.run([BIN, "version"], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0)
        lines = r.stdout.splitlines()
        m = re.fullmatch(r"hsmca (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}|unknown)\)", lines[0])
        self.assertIsNotNone(m, r.stdout)
        if m.group(2) != "unknown":
            g = subprocess.run(["git", "-C", SRC, "cat-file", "-e", m.group(2) + "^{commit}"],
                               capture_output=True)
            self.assertEqual(g.returncode, 0, "commit %s is not in %s" % (m.group(2), SRC))
        libs = {}
        for line in lines[1:]:
            lm = re.fullmatch(r"(.+) (\d+\.\d+(?:\.\d+)?) \(built with (\d+\.\d+(?:\.\d+)?)\)",
                              line)
            self.assertIsNotNone(lm, line)
            libs[lm.group(1)] = lm.group(2)
        self.assertEqual(sorted(libs), ["grpc core", "jansson", "libseccomp", "libyaml", "openssl",
                                        "protobuf-c"])
        # What runs is what the system has: the same libcrypto as Python's ssl module.
        import ssl
        self.assertIn("OpenSSL %s " % libs["openssl"], ssl.OPENSSL_VERSION + " ")
        self.assertEqual(
            subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout, r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
