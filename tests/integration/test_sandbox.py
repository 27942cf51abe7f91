#!/usr/bin/python3
"""The front end is confined: no PKCS#11 module mapped, no_new_privs, a seccomp
filter, and the PIN nowhere in its memory. The signer is checked alongside as the
positive control, so that a test that looks in the wrong place fails."""
import os
import re
import unittest

from hsmca_harness import DevServer

SOFTHSM = "libsofthsm2.so"


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def maps(pid):
    with open("/proc/%d/maps" % pid) as f:
        return f.read()


def memory_contains(pid, needle):
    """Scans every readable private mapping of pid for needle."""
    found = False
    with open("/proc/%d/maps" % pid) as m, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in m:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5] if len(fields) > 5 else ""
            if "r" not in fields[1] or path.startswith("[v") or hi - lo > (1 << 30):
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            if needle in chunk:
                found = True
                break
    return found


class SandboxTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="sandbox")
        cls.server.wait_ready()
        cls.kids = cls.server.wait_children()
        with open(os.path.join(cls.server.dir, "pin"), "rb") as f:
            cls.pin = f.read().strip()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_frontend_has_no_pkcs11_module(self):
        self.assertNotIn(SOFTHSM, maps(self.kids["frontend"]))
        self.assertNotIn("libp11", maps(self.kids["frontend"]))
        self.assertIn(SOFTHSM, maps(self.kids["signer"]))  # control

    def test_frontend_no_new_privs_and_seccomp(self):
        st = status(self.kids["frontend"])
        self.assertEqual(st["NoNewPrivs"].strip(), "1")
        self.assertEqual(st["Seccomp"].strip(), "2")  # 2 = filter mode
        # Every thread is filtered (TSYNC), not only the main one.
        for tid in os.listdir("/proc/%d/task" % self.kids["frontend"]):
            with open("/proc/%d/task/%s/status" % (self.kids["frontend"], tid)) as f:
                self.assertRegex(f.read(), re.compile(r"^Seccomp:\s+2$", re.M))
        self.assertEqual(status(self.kids["signer"])["Seccomp"].strip(), "0")  # control

    def test_pin_not_in_frontend_memory(self):
        self.server.issue()  # after real traffic, not only at start-up
        self.assertEqual(len(self.pin), 32)
        self.assertFalse(memory_contains(self.kids["frontend"], self.pin))
        # Control: the scan does find what the front end holds (its JWKS key id).
        with open(os.path.join(self.server.dir, "dev-jwks.json"), "rb") as f:
            kid = re.search(rb'"kid"\s*:\s*"([^"]+)"', f.read()).group(1)
        self.assertTrue(memory_contains(self.kids["frontend"], kid))

    def test_pin_not_in_logs(self):
        self.server.issue()
        self.assertNotIn(self.pin.decode(), self.server.logtext())

    @unittest.skipUnless(os.geteuid() == 0, "the uid switch and chroot happen only as root")
    def test_frontend_dropped_root_and_chrooted(self):
        st = status(self.kids["frontend"])
        self.assertNotEqual(st["Uid"].split()[0], "0")
        self.assertEqual(st["CapEff"].strip(), "0000000000000000")
        self.assertEqual(os.readlink("/proc/%d/root" % self.kids["frontend"]), "/var/empty")


if __name__ == "__main__":
    unittest.main(verbosity=2)
