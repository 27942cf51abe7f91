#!/usr/bin/python3
"""bench_e2e.py - CreateCertificate end to end: requests/s, latency, CPU, RSS.

Sets up a dev CA (`hsmca dev init`), raises its rate limit in DIR/hsmca.yaml
(`hsmca dev` would rewrite that file, `hsmca serve` does not) and runs
`hsmca serve --config DIR/hsmca.yaml` on loopback. P client processes, each
with its own gRPC channel, a pre-generated CSR and a pre-minted token, keep C
calls in flight for --seconds. Prints requests/s, p50/p99 latency, errors by
status, the front end's and signer's CPU seconds and peak RSS, the clients'
CPU, and the raw C_Sign rate of the same token (`bench_signer --raw-only`,
measured before the server starts) for comparison.

On one small machine the clients, the front end, the signer and SoftHSM share
the same cores: the report says which of them used the CPU.
A benchmark, not a test: nothing here asserts a timing.
Needs Debian's python3-grpcio and python3-cryptography: run with /usr/bin/python3.
"""
import argparse
import collections
import multiprocessing as mp
import os
import queue
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import hsmca_client as hc  # noqa: E402
import hsmca_harness as hh  # noqa: E402

RATE = 1000000
SPIFFE = "spiffe://cluster.local/ns/default/sa/sleep"


# ---- client processes -------------------------------------------------------------

def client_proc(addr, root, token, csr, conc, seconds, ready, go, out):
    """One client process: warm up its channel, wait for `go`, then keep `conc`
    calls in flight for `seconds`. Puts a dict of counts and latencies on out."""
    import grpc
    client = hc.Client(addr, root)
    md = [("authorization", "Bearer " + token)]
    body = hc.encode_request(csr)
    client.call(body, metadata=md, timeout=30)  # TLS handshake, HTTP/2 connection
    ready.put(os.getpid())
    go.wait(120)
    done = queue.Queue()

    def start():
        t = time.monotonic()
        f = client.call.future(body, metadata=md, timeout=30)
        f.add_done_callback(lambda fut, t=t: done.put((fut, t, time.monotonic())))

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    deadline = t0 + seconds
    res = {"ok": 0, "late": 0, "errors": collections.Counter(), "lat": []}
    for _ in range(conc):
        start()
    outstanding = conc
    while outstanding and time.monotonic() < deadline + 40:
        try:
            fut, ts, te = done.get(timeout=0.5)
        except queue.Empty:
            continue
        outstanding -= 1
        if te > deadline:
            res["late"] += 1
        elif fut.exception() is None:
            res["ok"] += 1
            res["lat"].append(te - ts)
        else:
            err = fut.exception()
            res["errors"][err.code().name if isinstance(err, grpc.RpcError) else repr(err)] += 1
        if time.monotonic() < deadline:
            start()
            outstanding += 1
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    res["wall"] = time.monotonic() - t0
    res["cpu"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    res["errors"] = dict(res["errors"])
    client.close()
    out.put(res)


# ---- the server -------------------------------------------------------------------

class ServeServer(hh.DevServer):
    """`hsmca serve --config DIR/hsmca.yaml` on a dir made by `hsmca dev init`.
    Reuses DevServer's wait_ready, token, children and stop; does not call its
    __init__, which would start `hsmca dev` (that rewrites hsmca.yaml)."""

    def __init__(self, d, port):
        self.dir, self.port = d, port
        self.addr = "localhost:%d" % port
        self.log_path = os.path.join(d, "server.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [hh.BIN, "serve", "--config", os.path.join(d, "hsmca.yaml")],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.root = None
        self.client = None


def set_yaml(path, settings):
    """Rewrites flat two-level YAML: for each (section, key), drops the key's
    line and puts `  key: value` right after the section header."""
    out, section = [], None
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines:
        if line and not line.startswith((" ", "#")) and ":" in line:
            section = line.split(":", 1)[0]
        if not any(section == s and line.startswith("  %s:" % k) for s, k, _ in settings):
            out.append(line)
        for s, k, v in settings:
            if line == s + ":":
                out.append("  %s: %s" % (k, v))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def proc_cpu(pid):
    """utime + stime of pid in seconds (fields 14, 15 of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_hwm_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return -1


def raw_rates(bench_signer, d, seconds):
    """{threads: (signs/s, cpu us/sign)} from `bench_signer --raw-only --dir d`."""
    if not os.access(bench_signer, os.X_OK):
        return {}
    out = subprocess.run([bench_signer, "--raw-only", "--dir", d, "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=120 + 4 * seconds).stdout
    rates = {}
    for m in re.finditer(r"^raw key=\S+ threads=(\d) signs_per_s=([\d.]+) cpu_us_per_sign=([\d.]+)",
                         out, re.M):
        rates[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return rates


# ---- the run ----------------------------------------------------------------------

def run_clients(a, server, token):
    """Starts the client processes, times the run, returns (results, server figures)."""
    ctx = mp.get_context("spawn")  # no fork after grpc has started threads
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = []
    for _ in range(a.procs):
        csr = hc.make_csr(hc.make_key(a.csr_key), uris=[SPIFFE])
        procs.append(ctx.Process(target=client_proc, args=(
            server.addr, server.root, token, csr, a.concurrency, a.seconds, ready, go, out)))
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    kids = server.children()
    cpu0 = {r: proc_cpu(pid) for r, pid in kids.items()}
    t0 = time.monotonic()
    go.set()
    time.sleep(a.seconds)
    srv = {r: {"cpu": proc_cpu(pid) - cpu0[r], "hwm": proc_hwm_mib(pid)}
           for r, pid in kids.items()}
    srv_wall = time.monotonic() - t0
    results = [out.get(timeout=a.seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
    return results, srv, srv_wall


def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))] if sorted_vals else 0


def report(a, results, srv, srv_wall, raw):
    ncpu = os.cpu_count() or 1
    ok = sum(r["ok"] for r in results)
    wall = max(r["wall"] for r in results)
    lat = sorted(x for r in results for x in r["lat"])
    errors = collections.Counter()
    for r in results:
        errors.update(r["errors"])
    client_cpu = sum(r["cpu"] for r in results)
    fe, sg = srv.get("frontend", {}), srv.get("signer", {})
    print("\n== bench_e2e: CreateCertificate over TLS; CA key %s, CSR key %s; %d s; %d client "
          "processes x %d in flight ==" % (a.key, a.csr_key, a.seconds, a.procs, a.concurrency))
    print("server: hsmca serve, dev config with sessions: 2 and the rate limit raised to %d/s "
          "(rate_per_second, rate_burst in hsmca.yaml)" % RATE)
    print("requests/s (OK)       %.1f   (%d OK in %.2f s; %d answered after the deadline, "
          "not counted)" % (ok / wall, ok, wall, sum(r["late"] for r in results)))
    print("latency p50 / p99     %.1f ms / %.1f ms" % (pct(lat, .5) * 1e3, pct(lat, .99) * 1e3))
    print("errors by status      %s" % (", ".join("%s=%d" % kv for kv in sorted(errors.items()))
                                          or "none"))
    print("CPU seconds (cores)   front end %.2f (%.2f), signer %.2f (%.2f), clients %.2f (%.2f); "
          "%d cores" % (fe.get("cpu", 0), fe.get("cpu", 0) / srv_wall, sg.get("cpu", 0),
                        sg.get("cpu", 0) / srv_wall, client_cpu, client_cpu / wall, ncpu))
    if ok:
        print("CPU per request       front end %.0f us, signer %.0f us, clients %.0f us" % (
            fe.get("cpu", 0) * 1e6 / ok, sg.get("cpu", 0) * 1e6 / ok, client_cpu * 1e6 / ok))
    print("peak RSS (VmHWM)      front end %.1f MiB, signer %.1f MiB" % (fe.get("hwm", -1),
                                                                        sg.get("hwm", -1)))
    if raw:
        r1, r2 = raw.get(1, (0, 0)), raw.get(2, (0, 0))
        print("raw C_Sign, same token %.0f/s (1 thread), %.0f/s (2 threads); e2e / raw(2) = %.2f"
              % (r1[0], r2[0], ok / wall / r2[0] if r2[0] else 0))
        if ok and sg.get("cpu"):
            share = 100 * ok * r1[1] / 1e6 / sg["cpu"]
            print("token share            about %.0f%% of the signer's CPU was C_Sign (OK x %.0f us"
                  " raw CPU per sign / signer CPU)" % (share, r1[1]))
    else:
        print("raw C_Sign             n/a (build bench_signer: cmake --build build --target "
              "bench_signer)")
    verdict(results, fe, sg, client_cpu, srv_wall, ncpu)


def verdict(results, fe, sg, client_cpu, wall, ncpu):
    shares = {"clients (Python)": client_cpu / wall, "front end": fe.get("cpu", 0) / wall,
              "signer (incl. SoftHSM)": sg.get("cpu", 0) / wall}
    total = sum(shares.values())
    top = max(shares, key=shares.get)
    print("verdict               %.2f of %d cores busy; largest CPU user: %s (%.2f cores)" % (
        total, ncpu, top, shares[top]))
    print("                      1-minute load average %.2f (other work on the machine counts)"
          % os.getloadavg()[0])
    busy = [r["cpu"] / r["wall"] for r in results if r["wall"] > 0]
    if total > 0.85 * ncpu:
        print("                      the machine is CPU-saturated: clients and server share "
              "the cores, so requests/s is a lower bound for the server")
    if busy and max(busy) > 0.9:
        print("                      a client process used %.2f cores: the Python clients are "
              "(part of) the bottleneck" % max(busy))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("HSMCA_BIN", "build/hsmca"),
                    help="the hsmca binary (default $HSMCA_BIN or build/hsmca)")
    ap.add_argument("--bench-signer", help="bench_signer binary (default: next to --bin, "
                    "tests/bench_signer)")
    ap.add_argument("--key", default="ec-p256", choices=["ec-p256", "rsa-2048"], help="CA key")
    ap.add_argument("--csr-key", default="ec-p256", choices=["ec-p256", "rsa-2048"])
    ap.add_argument("--seconds", type=int, default=10, choices=range(1, 121), metavar="1..120")
    ap.add_argument("--raw-seconds", type=int, default=3, choices=range(1, 61), metavar="1..60")
    ap.add_argument("--procs", type=int, default=2, choices=range(1, 33), metavar="1..32")
    ap.add_argument("--concurrency", type=int, default=8, choices=range(1, 257), metavar="1..256",
                    help="calls in flight per client process")
    ap.add_argument("--keep", action="store_true", help="keep the directory (server.log)")
    a = ap.parse_args()
    hh.BIN = os.path.abspath(a.bin)
    bench_signer = a.bench_signer or os.path.join(os.path.dirname(hh.BIN), "tests", "bench_signer")
    base = os.environ.get("HSMCA_TEST_TMP", "/tmp")
    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix="bench-e2e.", dir=base)
    port = hh.free_port()
    with open(os.path.join(d, "init.log"), "wb") as log:
        rc = subprocess.run([hh.BIN, "dev", "init", "--dir", d, "--ca-key", a.key, "--listen",
                             "127.0.0.1:%d" % port], stdout=log, stderr=log).returncode
    if rc != 0:
        sys.exit("bench_e2e: hsmca dev init failed (%d), see %s/init.log" % (rc, d))
    print("dev CA (%s) in %s; raw C_Sign for %d s per figure..." % (a.key, d, a.raw_seconds),
          flush=True)
    raw = raw_rates(bench_signer, d, a.raw_seconds)
    set_yaml(os.path.join(d, "hsmca.yaml"), [("pkcs11", "sessions", "2"),
                                             ("issuance", "rate_per_second", RATE),
                                             ("issuance", "rate_burst", RATE)])
    server = ServeServer(d, port)
    try:
        server.wait_ready()
        print("server up on %s; %d client processes x %d in flight for %d s..." % (
            server.addr, a.procs, a.concurrency, a.seconds), flush=True)
        results, srv, srv_wall = run_clients(a, server, server.token(ttl=3600))
    finally:
        server.stop()
    report(a, results, srv, srv_wall, raw)
    if a.keep:
        print("kept %s" % d)
    else:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
