#!/usr/bin/python3
"""`hsmca serve` refuses to start, with a message naming the failed check and a
non-zero exit, when the config, the PIN, the CA certificate or the CA key is
wrong; it does not retry a wrong PIN (an HSM would lock it)."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import hsmca_harness
from hsmca_harness import BIN, TMP, DevServer, free_port

SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"
DEV_CRL = "crl:\n  path: crl/ca-crl.pem\n"  # hsmca dev's CRL (it needs audit.dir)


def dev_init(name, ca_key="ec-p256"):
    os.makedirs(TMP, exist_ok=True)
    d = tempfile.mkdtemp(prefix=name + ".", dir=TMP)
    subprocess.run([BIN, "dev", "init", "--dir", d, "--ca-key", ca_key], check=True,
                   capture_output=True)
    return d


def set_listen(d, port):
    path = os.path.join(d, "hsmca.yaml")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(re.sub(r'listen: "[^"]*"', 'listen: "127.0.0.1:%d"' % port, text))
    return path


def serve(config, timeout=60):
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    r = subprocess.run([BIN, "serve", "--config", config], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    return r.returncode, r.stdout + r.stderr


class StartupErrorTests(unittest.TestCase):
    def test_unknown_config_key_names_its_line(self):
        d = tempfile.mkdtemp(prefix="badcfg.", dir=TMP)
        path = os.path.join(d, "bad.yaml")
        with open(path, "w") as f:
            f.write("server:\n  listen: \"127.0.0.1:1\"\npkcs11:\n  modul: /x.so\n")
        code, out = serve(path)
        self.assertEqual(code, 78, out)
        self.assertIn("bad.yaml:4: unknown key 'modul' in 'pkcs11'", out)
        self.assertNotIn('"msg":"child started","role":"signer"', out)

    def test_wrong_type_names_its_line(self):
        d = tempfile.mkdtemp(prefix="badcfg.", dir=TMP)
        path = os.path.join(d, "bad.yaml")
        with open(path, "w") as f:
            f.write("pkcs11:\n  sessions: [1, 2]\n")
        code, out = serve(path)
        self.assertNotEqual(code, 0)
        self.assertRegex(out, r"bad\.yaml:2: 'sessions' must be")

    def test_wrong_pin_tried_once(self):
        d = dev_init("wrongpin")
        with open(os.path.join(d, "pin"), "w") as f:
            f.write("0000000000000000\n")
        t0 = time.monotonic()
        code, out = serve(set_listen(d, free_port()))
        print("wrong PIN at start: stopped in %.2f s" % (time.monotonic() - t0))
        # 78 (EXIT_CONFIG): the unit's RestartPreventExitStatus keeps systemd from
        # starting it again, which would try the wrong PIN again.
        self.assertEqual(code, 78, out)
        self.assertIn("CKR_PIN_INCORRECT", out)
        self.assertIn("stopping", out)
        self.assertEqual(out.count("CKR_PIN_INCORRECT"), 1, out)  # no retry loop
        # The message names what to fix: the config key and the file it names.
        self.assertIn("check pkcs11.pin_file, %s" % os.path.join(d, "pin"), out)
        # The front end, waiting for its serving certificate, stops on SIGTERM
        # instead of being killed after the supervisor's grace period.
        self.assertNotIn("of SIGTERM: killing it", out)

    def test_ca_certificate_of_another_key(self):
        d = dev_init("foreignca")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", os.path.join(d, "other.key"),
                        "-subj", "/CN=other", "-days", "30", "-addext",
                        "basicConstraints=critical,CA:TRUE", "-out", os.path.join(d, "root-cert.pem")],
                       check=True, capture_output=True)
        code, out = serve(set_listen(d, free_port()))
        self.assertNotEqual(code, 0)
        self.assertIn("is not the token's CA key", out)

    def test_extractable_key_refused(self):
        d = dev_init("extractable")
        env = dict(os.environ, SOFTHSM2_CONF=os.path.join(d, "softhsm2.conf"))
        with open(os.path.join(d, "pin")) as f:
            pin = f.read().strip()
        subprocess.run(["pkcs11-tool", "--module", SOFTHSM, "--token-label", "hsmca", "--login",
                        "--pin", pin, "--keypairgen", "--key-type", "EC:prime256v1", "--label",
                        "leaky", "--id", "99", "--extractable"],
                       check=True, capture_output=True, env=env)
        config = set_listen(d, free_port())
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(text.replace("object=ca-key", "object=leaky"))
        code, out = serve(config)
        self.assertNotEqual(code, 0)
        self.assertRegex(out, r"key check \(leaky\): (CKA_EXTRACTABLE is TRUE|CKA_SENSITIVE is FALSE)")

    def edit_config(self, d, old, new):
        config = set_listen(d, free_port())
        with open(config) as f:
            text = f.read()
        self.assertIn(old, text)
        with open(config, "w") as f:
            f.write(text.replace(old, new))
        return config

    def test_missing_audit_key_named(self):
        d = dev_init("noaudit")
        code, out = serve(self.edit_config(d, "object=audit-key", "object=no-such-key"))
        self.assertNotEqual(code, 0)
        self.assertIn("refusing to serve: audit key (pkcs11.audit_key): private key "
                      "'no-such-key' not found in token 'hsmca'", out)
        self.assertNotIn("signer ready", out)

    def test_rsa_key_as_audit_key_refused(self):
        """An RSA key named as the audit key: refused, naming the type (the audit key is
        Ed25519 or EC P-256/P-384: signed notes have no RSA type here)."""
        d = dev_init("rsaaudit")
        env = dict(os.environ, SOFTHSM2_CONF=os.path.join(d, "softhsm2.conf"))
        with open(os.path.join(d, "pin")) as f:
            pin = f.read().strip()
        subprocess.run(["pkcs11-tool", "--module", SOFTHSM, "--token-label", "hsmca", "--login",
                        "--pin", pin, "--keypairgen", "--key-type", "rsa:2048", "--label",
                        "rsa-audit", "--id", "98", "--usage-sign", "--sensitive"],
                       check=True, capture_output=True, env=env)
        code, out = serve(self.edit_config(d, "object=audit-key", "object=rsa-audit"))
        self.assertNotEqual(code, 0)
        self.assertIn("audit key (pkcs11.audit_key): key check (rsa-audit): CKA_KEY_TYPE is "
                      "CKK_RSA, not CKK_EC_EDWARDS (Ed25519) or CKK_EC (P-256, P-384)", out)

    def test_dev_dir_without_audit_key_gets_one(self):
        """A dev directory from before the audit key: the next start makes it and says so."""
        d = dev_init("oldaudit")
        env = dict(os.environ, SOFTHSM2_CONF=os.path.join(d, "softhsm2.conf"))
        with open(os.path.join(d, "pin")) as f:
            pin = f.read().strip()
        tool = ["pkcs11-tool", "--module", SOFTHSM, "--token-label", "hsmca", "--login",
                "--pin", pin]
        for t in ("privkey", "pubkey"):
            subprocess.run(tool + ["--delete-object", "--type", t, "--label", "audit-key"],
                           check=True, capture_output=True, env=env)
        config = self.edit_config(d, '  audit_key: "pkcs11:token=hsmca;object=audit-key;type=private"\n',
                                  "")
        r = subprocess.run([BIN, "dev", "init", "--dir", d], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('"msg":"this dev directory has no audit key yet: generating the audit key '
                      'in the token","kind":"Ed25519","label":"audit-key"', r.stdout + r.stderr)
        with open(config) as f:
            self.assertIn('audit_key: "pkcs11:token=hsmca;object=audit-key;type=private"', f.read())
        listed = subprocess.run(tool + ["-O", "--type", "privkey"], capture_output=True, text=True,
                                env=env, timeout=30).stdout
        self.assertIn("label:      audit-key", listed)

    def test_no_audit_dir_refused(self):
        """A config without audit.dir (and without audit.disabled) stops before any child
        starts, naming the key and the way to run without a log."""
        d = dev_init("noauditdir")
        self.edit_config(d, DEV_CRL, "")  # crl.path needs audit.dir: its own refusal
        code, out = serve(self.edit_config(d, "  dir: audit\n", ""))
        self.assertEqual(code, 78, out)
        self.assertIn("config: audit.dir is required (the signing log's directory); to sign "
                      "without a log, say audit.disabled: true", out)
        self.assertNotIn('"msg":"child started","role":"signer"', out)
        self.assertFalse(os.path.exists(os.path.join(d, "audit")))

    def test_audit_dir_and_disabled_refused(self):
        d = dev_init("auditboth")
        code, out = serve(self.edit_config(d, "  dir: audit\n", "  dir: audit\n  disabled: true\n"))
        self.assertEqual(code, 78, out)
        self.assertIn("config: audit.dir and audit.disabled: true together: remove one", out)
        self.assertNotIn('"msg":"child started","role":"signer"', out)

    def test_audit_disabled_serves_and_warns(self):
        """audit.disabled: true serves, without a log, and both the supervisor and the
        signer say so at start."""
        server = DevServer("ec-p256", name="auditoff",
                           edit_config=lambda t: t.replace("  dir: audit\n", "  disabled: true\n")
                           .replace(DEV_CRL, ""))
        try:
            server.wait_ready()
            self.assertEqual(len(server.issue()), 2)
            server.log.flush()
            with open(server.log_path) as f:
                lines = [l for l in f if "the audit log is off (audit.disabled: true)" in l]
            procs = sorted(set(re.search(r'"proc":"(\w+)"', l).group(1) for l in lines))
            self.assertEqual(procs, ["signer", "supervisor"], lines)
            self.assertFalse(os.path.exists(os.path.join(server.dir, "audit")))
        finally:
            server.stop()

    def test_sixteen_dns_names_start(self):
        """The longest server.dns_names the config accepts: the front end asks for all
        of them plus localhost, and the signer allows exactly that set."""
        names = ", ".join("n%d.example" % i for i in range(16))
        server = DevServer("ec-p256", name="dnsnames",
                           server_settings=["dns_names: [%s]" % names])
        try:
            server.wait_ready(timeout=60)
            self.assertEqual(len(server.issue()), 2)
        finally:
            server.stop()

    def test_metrics_program_needed_only_when_metrics_listen(self):
        """A copy of the programs without hsmca-metrics: with metrics.listen "" serve
        starts and issues; with metrics.listen set it exits 78 naming the program."""
        copy = tempfile.mkdtemp(prefix="nometrics.", dir=TMP)
        os.chmod(copy, 0o755)  # the children exec it after their uid switch
        here = os.path.dirname(BIN)
        for prog in ("hsmca", "hsmca-supervisor", "hsmca-signer", "hsmca-frontend"):
            shutil.copy2(os.path.join(here, prog), os.path.join(copy, prog))
        no_metrics = lambda t: re.sub(r'metrics:\n  listen: "[^"]*"', 'metrics:\n  listen: ""', t)
        hsmca_harness.BIN = os.path.join(copy, "hsmca")
        try:
            server = DevServer("ec-p256", name="nometrics", edit_config=no_metrics)
        finally:
            hsmca_harness.BIN = BIN
        try:
            server.wait_ready()
            self.assertEqual(len(server.issue()), 2)
        finally:
            server.stop()
        config = os.path.join(server.dir, "hsmca.yaml")
        with open(config) as f:
            text = f.read()
        self.assertIn('metrics:\n  listen: ""', text)
        with open(config, "w") as f:
            f.write(text.replace('metrics:\n  listen: ""',
                                 'metrics:\n  listen: "127.0.0.1:%d"' % free_port()))
        r = subprocess.run([os.path.join(copy, "hsmca"), "serve", "--config", config],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
        self.assertIn("cannot find the program hsmca-metrics", r.stdout + r.stderr)

    def test_port_in_use(self):
        d = dev_init("portinuse")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            code, out = serve(set_listen(d, s.getsockname()[1]))
        finally:
            s.close()
        self.assertNotEqual(code, 0)
        self.assertIn("cannot serve on", out)

    def test_missing_key_fetcher_program_stops_the_start(self):
        """With an issuer's keys by discovery the supervisor runs hsmca-keyfetch: when that
        program is not installed beside hsmca (nor in ../libexec/hsmca/), serve stops at
        start with exit 78 naming it, rather than retrying a child that cannot start."""
        d = dev_init("nokeyfetch")
        path = set_listen(d, free_port())
        with open(path) as f:
            text = f.read()
        text = re.sub(r"(auth:\n  jwt:\n)(    .*\n)+",
                      "auth:\n  chain: [jwt]\n  jwt:\n    issuer: \"https://127.0.0.1:1\"\n"
                      "    discovery: true\n", text, count=1)
        with open(path, "w") as f:
            f.write(text)
        bindir = tempfile.mkdtemp(prefix="bin.", dir=TMP)
        here = os.path.dirname(os.path.realpath(BIN))
        for prog in ("hsmca", "hsmca-supervisor", "hsmca-signer", "hsmca-frontend",
                     "hsmca-metrics"):
            shutil.copy2(os.path.join(here, prog), bindir)
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") +
                   ":detect_leaks=0")
        r = subprocess.run([os.path.join(bindir, "hsmca"), "serve", "--config", path],
                           capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL, env=env)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 78, out)
        self.assertIn("cannot find the program hsmca-keyfetch", out)
        self.assertNotIn('"msg":"child started","role":"signer"', out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
