#!/usr/bin/python3
"""Each child runs with an explicit environment and explicit groups (supervisor/sup_env.h,
common/sandbox.h). The front end gets only the few variables it reads; the signer
the same few, SOFTHSM2_CONF from pkcs11.softhsm2_conf and pkcs11.env, and nothing
else of the supervisor's environment. As root, the signer keeps signer.groups as its
supplementary groups after switching to signer.user, the front end keeps none.

pkcs11.env names that would change the code the signer runs (LD_*, GCONV_PATH, ...)
or what hsmca sets itself are refused at load with their line; an unknown group in
signer.groups stops `hsmca serve` at start with a message naming the key and the
group.

Controls: the supervisor's own /proc/PID/environ holds the marker the children must
not have, so the check reads a place where the marker can be seen; the signer signs,
so SOFTHSM2_CONF reached SoftHSM through the explicit environment."""
import grp
import os
import re
import subprocess
import tempfile
import unittest

from hsmca_harness import BIN, TMP, DevServer

ROOT = os.geteuid() == 0
MARKER = "ENVTEST_SUPERVISOR_ONLY"
MODULE_ENV = {"ENVTEST_MODULE_VAR": "for-the-module secret-ish",
              "TPM2_PKCS11_TCTI": "tabrmd:bus_type=session",
              "ENVTEST_EMPTY": ""}
# What a child may get from the supervisor's environment (supervisor/sup_env.h).
PASSED_BOTH = {"HSMCA_LOG_LEVEL", "TZ", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
               "MSAN_OPTIONS", "TSAN_OPTIONS", "ASAN_SYMBOLIZER_PATH"}
PASSED_FRONTEND = {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}


def environ(pid):
    """The environment pid was started with, as a dict (root reads it whatever the
    process's dumpable flag)."""
    with open("/proc/%d/environ" % pid, "rb") as f:
        data = f.read()
    out = {}
    for item in data.split(b"\0"):
        if item:
            k, _, v = item.decode(errors="replace").partition("=")
            out[k] = v
    return out


def groups(pid):
    """The supplementary gids of pid (/proc/PID/status Groups:)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Groups:"):
                return sorted(int(g) for g in line.split()[1:])
    raise AssertionError("no Groups: line")


def serve(config, timeout=60):
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    r = subprocess.run([BIN, "serve", "--config", config], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    return r.returncode, r.stdout + r.stderr


def with_groups(names):
    def edit(text):
        items = ", ".join('"%s"' % n for n in names)
        return re.sub(r"(?m)^signer:\n", "signer:\n  groups: [%s]\n" % items, text, count=1)
    return edit


# Two groups no process of the test has: tss (a TPM's device group) when it exists,
# and daemon by its numeric gid, so both forms are resolved.
KEPT = [g for g in ("tss",) if g in {e.gr_name for e in grp.getgrall()}] + ["1"]


class EnvGroupsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="envgroups", edit_config=with_groups(KEPT),
                               pkcs11_env=MODULE_ENV,
                               env_extra={MARKER: "leak", "KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                          "KUBERNETES_SERVICE_PORT": "443"})
        cls.server.wait_ready()
        cls.kids = cls.server.wait_children()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_supervisor_has_the_marker(self):
        """The control: the marker is where the children's checks would see it."""
        self.assertEqual(environ(self.server.proc.pid).get(MARKER), "leak")

    def test_frontend_gets_only_what_it_reads(self):
        env = environ(self.kids["frontend"])
        self.assertNotIn(MARKER, env)
        for name in MODULE_ENV:
            self.assertNotIn(name, env)
        self.assertNotIn("SOFTHSM2_CONF", env)
        self.assertLessEqual(set(env), PASSED_BOTH | PASSED_FRONTEND, env)
        self.assertEqual(env.get("KUBERNETES_SERVICE_HOST"), "10.0.0.1")
        self.assertEqual(env.get("KUBERNETES_SERVICE_PORT"), "443")
        if "ASAN_OPTIONS" in os.environ:  # a sanitizer build keeps its settings
            self.assertIn("detect_leaks=0", env.get("ASAN_OPTIONS", ""))

    @unittest.skipUnless(ROOT, "the signer is not dumpable: only root reads its environ")
    def test_signer_gets_pkcs11_env(self):
        env = environ(self.kids["signer"])
        self.assertNotIn(MARKER, env)
        self.assertNotIn("KUBERNETES_SERVICE_HOST", env)
        for name, value in MODULE_ENV.items():
            self.assertEqual(env.get(name), value, name)
        self.assertEqual(env.get("SOFTHSM2_CONF"),
                         os.path.join(os.path.realpath(self.server.dir), "softhsm2.conf"))
        self.assertLessEqual(set(env), PASSED_BOTH | set(MODULE_ENV) | {"SOFTHSM2_CONF"}, env)

    def test_signer_signs_and_log_names_variables_not_values(self):
        self.server.issue()
        log = self.server.logtext(tail=None)  # the line is from the start
        self.assertIn('"msg":"signer environment","pkcs11_env":"ENVTEST_MODULE_VAR, '
                      'TPM2_PKCS11_TCTI, ENVTEST_EMPTY","pkcs11_softhsm2_conf":"SOFTHSM2_CONF"',
                      log)
        self.assertNotIn("secret-ish", log)
        self.assertNotIn("tabrmd", log)

    @unittest.skipUnless(ROOT, "supplementary groups are set only by a root supervisor")
    def test_signer_keeps_signer_groups_frontend_none(self):
        want = sorted(int(g) if g.isdigit() else grp.getgrnam(g).gr_gid for g in KEPT)
        self.assertEqual(groups(self.kids["signer"]), want)
        self.assertEqual(groups(self.kids["frontend"]), [])
        self.assertEqual(groups(self.server.proc.pid), sorted(os.getgroups()))  # control
        log = self.server.logtext()
        self.assertIn('"groups":"%s"' % ", ".join(
            "%s (gid %d)" % (g, w) for g, w in zip(KEPT, [int(g) if g.isdigit() else
                                                          grp.getgrnam(g).gr_gid for g in KEPT])),
                      log)
        self.assertRegex(log, r'"msg":"sandbox: switched user","user":"[^"]+","uid":"\d+",'
                              r'"gid":"\d+","chroot":"/var/empty","groups":"none"')


class ConfigRefusalTests(unittest.TestCase):
    """Refused before any child starts, exit status 78, with the line or the key."""

    def write(self, text):
        d = tempfile.mkdtemp(prefix="envcfg.", dir=TMP)
        path = os.path.join(d, "bad.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def refused(self, text, message):
        code, out = serve(self.write(text))
        self.assertEqual(code, 78, out)
        self.assertIn(message, out)
        self.assertNotIn('"msg":"child started","role":"signer"', out)
        return out

    def test_dangerous_names_refused_with_their_line(self):
        for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH",
                     "MALLOC_CHECK_", "GLIBC_TUNABLES", "OPENSSL_CONF", "HSMCA_LOG_LEVEL",
                     "ASAN_OPTIONS"):
            with self.subTest(name=name):
                self.refused("pkcs11:\n  sessions: 2\n  env:\n    OK_NAME: x\n    %s: /tmp/x\n"
                             % name, "bad.yaml:5: 'pkcs11.env' variable '%s' is refused" % name)

    def test_malformed_names_and_values_refused(self):
        self.refused("pkcs11:\n  env:\n    1ABC: x\n",
                     "bad.yaml:3: 'pkcs11.env' variable '1ABC' must be of A-Z a-z 0-9 _")
        self.refused("pkcs11:\n  env:\n    A-B: x\n", "variable 'A-B' must be of")
        self.refused("pkcs11:\n  env:\n    A: x\n    A: y\n",
                     "bad.yaml:4: 'pkcs11.env' names 'A' twice")
        self.refused("pkcs11:\n  env:\n    A:\n", "'pkcs11.env' A must be a string")
        self.refused("pkcs11:\n  env:\n    A: [x]\n", "'pkcs11.env' A must be a string")
        self.refused("pkcs11:\n  env: [A]\n", "'pkcs11.env' must be a mapping of NAME: value")
        many = "".join("    V%d: x\n" % i for i in range(33))
        self.refused("pkcs11:\n  env:\n" + many, "bad.yaml:35: 'pkcs11.env' has more than 32")
        self.refused("pkcs11:\n  env:\n    A: \"%s\"\n" % ("x" * 600), "A is longer than 511")

    def test_softhsm2_conf_twice_refused(self):
        d = tempfile.mkdtemp(prefix="envdup.", dir=TMP)
        subprocess.run([BIN, "dev", "init", "--dir", d], check=True, capture_output=True)
        path = os.path.join(d, "hsmca.yaml")
        with open(path) as f:
            text = f.read()
        self.assertIn("softhsm2_conf: softhsm2.conf", text)
        with open(path, "w") as f:
            f.write(text.replace("\npkcs11:\n", "\npkcs11:\n  env:\n    SOFTHSM2_CONF: /x\n", 1))
        code, out = serve(path)
        self.assertEqual(code, 78, out)
        self.assertIn("pkcs11.env names SOFTHSM2_CONF and pkcs11.softhsm2_conf is set too", out)

    def test_unknown_group_stops_start(self):
        d = tempfile.mkdtemp(prefix="envgrp.", dir=TMP)
        subprocess.run([BIN, "dev", "init", "--dir", d], check=True, capture_output=True)
        path = os.path.join(d, "hsmca.yaml")
        with open(path) as f:
            text = f.read()
        for names, message in ((["no-such-group-x"], "signer.groups: group 'no-such-group-x' "
                                                      "does not exist"),
                               (["root"], "signer.groups: group 'root' is gid 0")):
            with self.subTest(names=names):
                with open(path, "w") as f:
                    f.write(with_groups(names)(text))
                code, out = serve(path)
                self.assertEqual(code, 78, out)
                self.assertIn(message, out)
                self.assertNotIn('"msg":"child started","role":"signer"', out)


if __name__ == "__main__":
    unittest.main()
