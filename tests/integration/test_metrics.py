"""The metrics listener (docs/OPERATIONS.md "Metrics"): /metrics scraped from a running CA
passes `promtool check metrics`, and its counters move as requests are issued and refused;
the listener lives in its own sandboxed process, which survives the front end's restart."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest
import urllib.error
import urllib.request

import grpc

import hsmca_client as hc
from hsmca_harness import DevServer

PROMTOOL = shutil.which("promtool")


def get(url, timeout=5):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def sample(text, name, **labels):
    """The value of the series name{labels} in an exposition text (None when absent)."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


def wait_for(fn, timeout=20, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError("%s not met within %ss (last: %r)" % (what, timeout, last))


class MetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = DevServer(name="metrics")
        cls.srv.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def scrape(self):
        status, text = get(self.srv.metrics_url + "/metrics")
        self.assertEqual(status, 200, text)
        return text

    def test_1_promtool_accepts_the_exposition(self):
        self.assertIsNotNone(PROMTOOL, "promtool (Debian package prometheus) is not installed")
        self.srv.issue()  # every family with a sample, histograms with observations
        text = self.scrape()
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, "promtool: %s%s\n%s" % (r.stdout.decode(),
                                                                  r.stderr.decode(), text))
        self.assertEqual(sample(text, "hsmca_build_info"), 1.0)
        self.assertEqual(sample(text, "hsmca_signer_connected"), 1.0)
        self.assertGreater(sample(text, "hsmca_ca_not_after_timestamp_seconds"), time.time())
        self.assertGreater(sample(text, "hsmca_serving_cert_not_after_timestamp_seconds"),
                           time.time())
        self.assertIsNotNone(sample(text, "hsmca_issuer_keys_age_seconds", cluster="Kubernetes"))

    def test_2_counters_move_with_issued_and_refused_requests(self):
        before = self.scrape()
        issued0 = sample(before, "hsmca_certificates_issued_total", profile="workload",
                         ca_key="ec-p256")
        count0 = sample(before, "hsmca_request_duration_seconds_count")
        auth0 = sample(before, "hsmca_requests_refused_total", stage="authentication",
                       code="UNAUTHENTICATED") or 0
        pol0 = sample(before, "hsmca_requests_refused_total", stage="policy",
                      code="PERMISSION_DENIED") or 0
        for _ in range(3):
            self.srv.issue()
        k = hc.make_key("ec-p256")
        csr = hc.make_csr(k, uris=["spiffe://cluster.local/ns/default/sa/sleep"])
        with self.assertRaises(grpc.RpcError) as cm:
            self.srv.client.create(csr, "not-a-token")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        # A valid caller asking for another identity: the policy refuses it.
        other = hc.make_csr(k, uris=["spiffe://cluster.local/ns/default/sa/other"])
        with self.assertRaises(grpc.RpcError) as cm:
            self.srv.client.create(other, self.srv.token())
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        # An exposition is reused for up to a second: wait for one rendered after these.
        def fresh():
            text = self.scrape()
            return text if sample(text, "hsmca_request_duration_seconds_count") == count0 + 5 \
                else None
        after = wait_for(fresh, what="an exposition with the five requests")
        self.assertEqual(sample(after, "hsmca_certificates_issued_total", profile="workload",
                                ca_key="ec-p256"), issued0 + 3)
        # One spelling of the CA key's type in every label (the signer's).
        wait_for(lambda: sample(self.scrape(), "hsmca_signer_signatures_total",
                                profile="workload", ca_key="ec-p256"),
                 what="hsmca_signer_signatures_total{ca_key=\"ec-p256\"}")
        self.assertNotIn('ca_key="ecdsa', after)
        self.assertEqual(sample(after, "hsmca_requests_refused_total", stage="authentication",
                                code="UNAUTHENTICATED"), auth0 + 1)
        self.assertEqual(sample(after, "hsmca_requests_refused_total", stage="policy",
                                code="PERMISSION_DENIED"), pol0 + 1)
        self.assertEqual(sample(after, "hsmca_request_duration_seconds_count"), count0 + 5)
        self.assertNotIn("sleep", after, "a label names a caller")

    def test_3_unknown_path_and_method(self):
        status, _ = get(self.srv.metrics_url + "/nothing")
        self.assertEqual(status, 404)
        req = urllib.request.Request(self.srv.metrics_url + "/metrics", data=b"x", method="POST")
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(req, timeout=5)
        self.assertEqual(cm.exception.code, 405)

    def test_4_front_end_restart_keeps_the_listener(self):
        kids = self.srv.wait_children()
        metrics_pid = self.metrics_pid()
        os.kill(kids["frontend"], signal.SIGKILL)
        self.srv.wait_children(exclude=(kids["frontend"],))
        wait_for(lambda: get(self.srv.metrics_url + "/healthz")[0] == 200, what="healthz 200")
        self.assertEqual(self.metrics_pid(), metrics_pid, "the metrics process was restarted")
        # And a restarted metrics process finds the same front end.
        os.kill(metrics_pid, signal.SIGKILL)
        wait_for(lambda: self.metrics_pid() not in (None, metrics_pid), what="a new metrics")
        wait_for(lambda: self.try_scrape_ok(), what="a scrape from the new metrics process")

    def test_5_a_scrape_flood_renders_at_most_one_exposition_a_second(self):
        """Scrapes cost the front end one render a second however many come (an exposition
        is reused for a second), so a flood cannot take its CPU from renewals."""
        r0 = sample(self.scrape(), "hsmca_metrics_renders_total")
        self.assertIsNotNone(r0, "no hsmca_metrics_renders_total")
        errors = []

        def flood():
            for _ in range(40):
                try:
                    get(self.srv.metrics_url + "/metrics", timeout=10)
                except OSError as e:
                    errors.append(e)

        t0 = time.monotonic()
        threads = [threading.Thread(target=flood) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        renders = sample(self.scrape(), "hsmca_metrics_renders_total") - r0
        self.assertEqual(errors, [])
        # One a started second during the flood, plus the final scrape's.
        self.assertLessEqual(renders, elapsed + 2, "%d renders for 320 scrapes in %.1f s"
                             % (renders, elapsed))

    def try_scrape_ok(self):
        return self.try_scrape_ok_at(self.srv.metrics_url)

    @staticmethod
    def try_scrape_ok_at(url):
        try:
            return get(url + "/metrics", timeout=3)[0] == 200
        except OSError:
            return False

    def metrics_pid(self):
        return self.srv.all_children().get("metrics")


class PortInUse(unittest.TestCase):
    def test_port_in_use_costs_no_issuance_and_is_retried(self):
        """metrics.listen held by another process: the CA serves regardless, says why once,
        and the listener comes up once the port is free (no restart loop)."""
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        srv = DevServer(name="metricsport", edit_config=lambda t: re.sub(
            r'(?m)^(metrics:\n  listen: )"[^"]*"', r'\1"127.0.0.1:%d"' % port, t))
        self.addCleanup(srv.stop)
        try:
            srv.wait_ready()
        finally:
            holder.close()
        url = "http://127.0.0.1:%d" % port
        wait_for(lambda: MetricsTest.try_scrape_ok_at(url), timeout=20,
                 what="the listener once the port is free")
        log = srv.logtext(tail=None)
        self.assertEqual(log.count('"msg":"cannot serve metrics (metrics.listen; \\"\\" turns the '
                                   'listener off); trying again","listen":"127.0.0.1:%d"' % port),
                         1, log)
        self.assertNotIn('"msg":"restarting a child","role":"metrics"', log)


if __name__ == "__main__":
    unittest.main()
