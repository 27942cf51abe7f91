#!/usr/bin/python3
"""bench_scrape.py - what a /metrics scrape flood costs issuance.

Starts a dev CA (the integration harness's DevServer, `hsmca dev` with a metrics
listener), then issues --n certificates one after another twice: quiet, and while
--threads clients scrape /metrics as fast as they are answered. Prints per phase the
median and p90 latency of an issuance, the scrapes answered, the expositions the front
end rendered (hsmca_metrics_renders_total) and the front end's CPU seconds.

A benchmark, not a test: nothing here asserts a timing. Run with /usr/bin/python3 (gRPC
and cryptography from Debian):

    HSMCA_BIN=build/hsmca /usr/bin/python3 tests/bench/bench_scrape.py
"""
import argparse
import os
import statistics
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from hsmca_harness import DevServer  # noqa: E402
from test_metrics import sample  # noqa: E402


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return r.read().decode()


def phase(srv, n, threads):
    fe = srv.children()["frontend"]
    stop = threading.Event()
    scrapes = [0]

    def flood():
        while not stop.is_set():
            try:
                scrape(srv.metrics_url)
                scrapes[0] += 1
            except OSError:
                pass

    r0 = sample(scrape(srv.metrics_url), "hsmca_metrics_renders_total") or 0
    cpu0 = cpu_seconds(fe)
    workers = [threading.Thread(target=flood, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    t0 = time.monotonic()
    lat = []
    for _ in range(n):
        t = time.monotonic()
        srv.issue()
        lat.append(time.monotonic() - t)
    wall = time.monotonic() - t0
    stop.set()
    for w in workers:
        w.join()
    cpu = cpu_seconds(fe) - cpu0
    renders = (sample(scrape(srv.metrics_url), "hsmca_metrics_renders_total") or 0) - r0
    lat.sort()
    return {"median": statistics.median(lat), "p90": lat[int(0.9 * (len(lat) - 1))],
            "scrapes": scrapes[0], "renders": renders, "fe_cpu": cpu, "wall": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="certificates per phase")
    ap.add_argument("--threads", type=int, default=16, help="scraping clients")
    a = ap.parse_args()
    srv = DevServer(name="benchscrape")
    try:
        srv.wait_ready()
        srv.issue()  # warm
        print("%-8s %9s %9s %9s %9s %9s %8s" % ("phase", "median_s", "p90_s", "scrapes",
                                                "renders", "fe_cpu_s", "wall_s"))
        for name, threads in (("quiet", 0), ("flood", a.threads), ("quiet", 0)):
            r = phase(srv, a.n, threads)
            print("%-8s %9.4f %9.4f %9d %9d %9.2f %8.1f" % (
                name, r["median"], r["p90"], r["scrapes"], r["renders"], r["fe_cpu"],
                r["wall"]))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
