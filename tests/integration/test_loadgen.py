#!/usr/bin/python3
"""The load generator (tests/bench/loadgen) works against a real `hsmca dev`: 100
requests from 20 pods (own key, CSR and dev token) over 2 TLS connections, 16 in
flight, all OK, and the server's children found from the supervisor's pid; with
--retry against a front end that keeps 2 calls (server.max_queued_requests: 2), the
refused calls are retried until every request has its certificate, and the backoff
the client slept and the storm target (--max-rate) are reported. Its behaviour only:
the figures it prints are never checked (a benchmark, not a test)."""
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
                      r" .* errors=(\d+)( |$)", r.stdout, re.M)
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


class LoadgenRetryTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = DevServer("ec-p256", name="loadgen-retry",
                               server_settings=["max_queued_requests: 2"])
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_refused_calls_retried_and_backoff_reported(self):
        r = subprocess.run([LOADGEN, "--dir", self.server.dir, "--addr", self.server.addr,
                            "--server-pid", str(self.server.proc.pid), "--requests", "60",
                            "--connections", "2", "--concurrency", "60", "--pods", "20",
                            "--retry", "--max-rate", "1000"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        res = dict(kv.split("=", 1) for kv in
                   re.search(r"^result (.*)$", r.stdout, re.M).group(1).split())
        self.assertEqual((res["ok"], res["requests"], res["errors"]), ("60", "60", "0"),
                         r.stdout)
        self.assertIn("outcomes by status    OK=60\n", r.stdout)
        retries = int(re.search(r"(\d+) retries\)", r.stdout).group(1))
        self.assertGreater(retries, 0, "60 calls at once, 2 kept: some must be refused")
        # Every retry slept at least half the first backoff (500 ms, jittered x0.5-1.5).
        self.assertGreaterEqual(float(res["backoff_mean_s"]) * 60, 0.25 * retries * 0.99,
                                r.stdout)
        self.assertGreaterEqual(float(res["backoff_max_s"]), 0.25, r.stdout)
        # target = 1.3 x 60 / 1000 + the backoff of the request answered last
        self.assertAlmostEqual(float(res["target_s"]),
                               0.078 + float(res["backoff_last_s"]), delta=0.011)
        self.assertRegex(r.stdout, r"storm target +last answer at [0-9.]+ s; target 1\.3 x 60 "
                                   r"/ 1000\.0/s = 0\.08 s \+ its backoff")


if __name__ == "__main__":
    unittest.main()
