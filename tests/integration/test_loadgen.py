#!/usr/bin/python3
"""The load generator (tests/bench/loadgen) works against a real `hsmca dev`: 100
requests from 20 pods (own key, CSR and dev token) over 2 TLS connections, 16 in
flight, all OK, and the server's children found from the supervisor's pid. Its
behaviour only: the figures it prints are never checked (a benchmark, not a test)."""
import os
import re
import subprocess
import unittest

from hsmca_harness import DevServer

LOADGEN = os.environ.get("HSMCA_LOADGEN", "build/tests/loadgen")


class LoadgenTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="loadgen")
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def run_loadgen(self, *args):
        return subprocess.run([LOADGEN, "--dir", self.server.dir, "--addr", self.server.addr,
                               "--server-pid", str(self.server.proc.pid)] + list(args),
                              capture_output=True, text=True, timeout=300)

    def test_100_requests_all_ok(self):
        r = self.run_loadgen("--requests", "100", "--connections", "2", "--concurrency", "16",
                             "--pods", "20")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = re.search(r"^result ok=(\d+) requests=(\d+) .* fe_cpu_us=(-?\d+) signer_cpu_us=(-?\d+)"
                      r" .* errors=(\d+)$", r.stdout, re.M)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(m.group(1, 2, 5), ("100", "100", "0"), r.stdout)
        self.assertIn("outcomes by status    OK=100\n", r.stdout)
        # the front end and the signer were found and measured (-1 when not)
        self.assertGreaterEqual(int(m.group(3)), 0, r.stdout)
        self.assertGreaterEqual(int(m.group(4)), 0, r.stdout)

    def test_untrusted_server_fails_setup(self):
        """Trusting other roots, no channel connects: the warm-up says so, exit 2, no
        result line (figures are never printed for a run that did not happen)."""
        r = self.run_loadgen("--requests", "5", "--root", "/etc/ssl/certs/ca-certificates.crt",
                             "--timeout", "3")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("warm-up", r.stderr)
        self.assertNotIn("result ok=", r.stdout)


if __name__ == "__main__":
    unittest.main()
