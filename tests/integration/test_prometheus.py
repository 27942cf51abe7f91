"""A real Prometheus server (Debian package prometheus) scrapes hsmca's metrics listener
and a counter is read back through Prometheus's HTTP API (/api/v1/query): the exposition is
what a real scraper accepts, and the scrape target reports up."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

from hsmca_harness import TMP, DevServer, free_port

PROMETHEUS = shutil.which("prometheus")


class PrometheusScrape(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not PROMETHEUS:
            raise AssertionError("prometheus (Debian package prometheus) is not installed")
        cls.srv = DevServer(name="prom")
        cls.srv.wait_ready()
        cls.dir = tempfile.mkdtemp(prefix="prometheus.", dir=TMP)
        cls.port = free_port()
        config = os.path.join(cls.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: hsmca\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % cls.srv.metrics_port)
        cls.log = open(os.path.join(cls.dir, "prometheus.log"), "wb")
        cls.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + cls.dir + "/data",
             "--web.listen-address=127.0.0.1:%d" % cls.port],
            stdout=cls.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        if cls.prom.poll() is None:
            cls.prom.terminate()
            try:
                cls.prom.wait(15)
            except subprocess.TimeoutExpired:
                cls.prom.kill()
                cls.prom.wait()
        cls.log.close()
        cls.srv.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def query(self, q):
        """The vector result of an instant query ([] while Prometheus is not up yet)."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": q}))
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                doc = json.load(r)
        except OSError:
            return []
        self.assertEqual(doc.get("status"), "success", doc)
        return doc["data"]["result"]

    def wait_value(self, q, want, timeout=60):
        deadline = time.time() + timeout
        got = None
        while time.time() < deadline:
            self.assertIsNone(self.prom.poll(), "prometheus exited: " + self.prom_log())
            res = self.query(q)
            got = [float(r["value"][1]) for r in res]
            if got and want(got[0]):
                return got[0]
            time.sleep(0.5)
        raise AssertionError("%s: %r within %ss\n%s" % (q, got, timeout, self.prom_log()))

    def prom_log(self):
        self.log.flush()
        with open(os.path.join(self.dir, "prometheus.log"), "rb") as f:
            return f.read().decode(errors="replace")[-3000:]

    def test_counter_read_back_through_prometheus(self):
        self.wait_value('up{job="hsmca"}', lambda v: v == 1)
        q = 'hsmca_certificates_issued_total{job="hsmca",profile="workload"}'
        before = self.wait_value(q, lambda v: v >= 1)  # wait_ready issued one
        for _ in range(4):
            self.srv.issue()
        after = self.wait_value(q, lambda v: v >= before + 4)
        self.assertEqual(after, before + 4)
        self.assertEqual(self.wait_value('hsmca_build_info{job="hsmca"}', lambda v: True), 1)
        # The scrape itself had no error and no sample dropped.
        self.assertEqual(self.wait_value('scrape_samples_post_metric_relabeling{job="hsmca"}',
                                         lambda v: v > 50),
                         self.wait_value('scrape_samples_scraped{job="hsmca"}', lambda v: v > 50))


if __name__ == "__main__":
    unittest.main()
