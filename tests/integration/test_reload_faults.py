#!/usr/bin/python3
"""SIGHUP's reload when it fails (docs/OPERATIONS.md "Reload"), on real processes.

(a) A FIFO as the policy file: the supervisor refuses it at once ("not a regular file",
    naming the file) instead of waiting in open() for a writer: a child that dies is
    still restarted and SIGTERM still stops `serve` with status 0.
(b) A failed reload is visible without taking the replica out of its Service: /readyz
    stays 200 with a `warning:` line naming the failure, the metrics count it
    (hsmca_policy_reload_failures_total, hsmca_policy_reload_failed), `hsmca admin
    status` shows it; a good reload clears the warning and the gauge."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from hsmca_harness import BIN, DevServer, TMP

POLICY_GOOD = """\
dns_names:
  sleep.default: [a.example.com]
"""
POLICY_BROKEN = """\
dns_names:
  sleep.default: [a.example.com]
no_such_rule: true
"""


def with_policy(path):
    def edit(text):
        assert "issuance:\n" in text
        return text.replace("issuance:\n", "issuance:\n  policy_file: %s\n" % path, 1)
    return edit


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(pred, what, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError("timed out waiting for: %s" % what)


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def metrics_when(url, name, value):
    """The exposition once name shows value (a scrape may be served from the front end's
    last rendering, up to a second old)."""
    def ok():
        code, text = get(url + "/metrics")
        return text if code == 200 and metric(text, name) == value else None
    return wait_for(ok, "%s %s in /metrics" % (name, value))


class ReloadFaultBase(unittest.TestCase):
    name = "reloadf"

    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        fd, cls.policy_path = tempfile.mkstemp(prefix="policy.", suffix=".yaml", dir=TMP)
        with os.fdopen(fd, "w") as f:
            f.write(POLICY_GOOD)
        cls.server = DevServer("ec-p256", name=cls.name, edit_config=with_policy(cls.policy_path))
        cls.server.wait_ready()
        cls.config = os.path.join(cls.server.dir, "hsmca.yaml")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        os.unlink(cls.policy_path)

    def write_policy(self, text):
        tmp = self.policy_path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.policy_path)

    def log_has(self, pred):
        for ln in self.server.logtext(tail=None).splitlines():
            try:
                o = json.loads(ln)
            except ValueError:
                continue
            if pred(o):
                return o
        return None


class FifoPolicyTests(ReloadFaultBase):
    name = "reloadfifo"

    def test_fifo_policy_file_does_not_wedge_the_supervisor(self):
        children = self.server.all_children()
        self.assertIn("metrics", children)
        os.unlink(self.policy_path)
        os.mkfifo(self.policy_path, 0o600)
        try:
            self.server.proc.send_signal(signal.SIGHUP)
            refused = wait_for(lambda: self.log_has(
                lambda o: o.get("proc") == "supervisor" and
                "policy file not reloaded" in o.get("msg", "") and
                self.policy_path in o.get("error", "") and
                "not a regular file" in o.get("error", "")),
                "the supervisor refuses the FIFO, naming it")
            print("refused: %s" % refused["error"])
            # Its loop goes on: a child that dies is started again.
            os.kill(children["metrics"], signal.SIGKILL)
            wait_for(lambda: self.server.all_children().get("metrics") not in
                     (None, children["metrics"]), "the metrics child restarted")
            # And SIGTERM stops serve.
            self.server.proc.send_signal(signal.SIGTERM)
            self.assertEqual(self.server.proc.wait(60), 0, self.server.logtext())
        finally:
            if self.server.proc.poll() is None:
                # The old supervisor waits in open() for a writer: give it one, then stop it.
                try:
                    fd = os.open(self.policy_path, os.O_WRONLY | os.O_NONBLOCK)
                    os.close(fd)
                except OSError:
                    pass
            os.unlink(self.policy_path)
            with open(self.policy_path, "w") as f:
                f.write(POLICY_GOOD)


class FailedReloadVisibleTests(ReloadFaultBase):
    name = "reloadvis"

    def admin_status(self):
        out = subprocess.run([BIN, "admin", "status", "--config", self.config, "--json"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def admin_status_text(self):
        out = subprocess.run([BIN, "admin", "status", "--config", self.config],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def test_failed_reload_shows_and_clears(self):
        url = self.server.metrics_url
        code, body = get(url + "/readyz")
        self.assertEqual(code, 200, body)
        self.assertNotIn("warning:", body)
        code, text = get(url + "/metrics")
        self.assertEqual(metric(text, "hsmca_policy_reload_failures_total"), 0.0, text)
        self.assertEqual(metric(text, "hsmca_policy_reload_failed"), 0.0, text)
        first_ok = metric(text, "hsmca_policy_reload_last_success_timestamp_seconds")
        self.assertGreater(first_ok, 0)
        st = self.admin_status()
        self.assertEqual(st["policy_reload"], "ok", st)
        self.assertEqual(st["policy_reload_failures"], 0, st)

        # A broken file: refused by the supervisor, naming its line.
        self.write_policy(POLICY_BROKEN)
        self.server.proc.send_signal(signal.SIGHUP)
        line3 = re.escape(self.policy_path) + r":3\b"
        code, body = wait_for(lambda: (lambda r: r if "warning:" in r[1] else None)(
            get(url + "/readyz")), "a warning line in /readyz")
        self.assertEqual(code, 200, body)
        warn = [ln for ln in body.splitlines() if ln.startswith("warning:")]
        self.assertEqual(len(warn), 1, body)
        self.assertIn("last reload failed", warn[0])
        self.assertRegex(warn[0], line3)
        self.assertIn("no_such_rule", warn[0])
        text = metrics_when(url, "hsmca_policy_reload_failed", 1.0)
        self.assertEqual(metric(text, "hsmca_policy_reload_failures_total"), 1.0, text)
        self.assertEqual(metric(text, "hsmca_policy_reload_last_success_timestamp_seconds"),
                         first_ok)
        st = wait_for(lambda: (lambda s: s if s["policy_reload"] != "ok" else None)(
            self.admin_status()), "admin status shows the failed reload")
        self.assertTrue(st["policy_reload"].startswith("failed: "), st)
        self.assertRegex(st["policy_reload"], line3)
        self.assertEqual(st["policy_reload_failures"], 1, st)
        self.assertIn("policy_reload", self.admin_status_text())

        # A good reload clears the warning and the gauge; the counter stays.
        time.sleep(1.1)  # a later second for the success time
        self.write_policy(POLICY_GOOD.replace("a.example.com", "b.example.com"))
        self.server.proc.send_signal(signal.SIGHUP)
        code, body = wait_for(lambda: (lambda r: r if "warning:" not in r[1] else None)(
            get(url + "/readyz")), "the warning cleared")
        self.assertEqual(code, 200, body)
        text = metrics_when(url, "hsmca_policy_reload_failed", 0.0)
        self.assertEqual(metric(text, "hsmca_policy_reload_failures_total"), 1.0, text)
        self.assertGreater(metric(text, "hsmca_policy_reload_last_success_timestamp_seconds"),
                           first_ok)
        st = self.admin_status()
        self.assertEqual(st["policy_reload"], "ok", st)
        self.assertEqual(st["policy_reload_failures"], 1, st)


if __name__ == "__main__":
    unittest.main()
