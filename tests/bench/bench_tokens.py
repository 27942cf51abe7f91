#!/usr/bin/python3
"""bench_tokens.py - end-to-end issuance on three PKCS#11 implementations in one run,
EC P-256 CA key, audit log on with an ECDSA P-256 audit key in the same token:
  softhsm  `hsmca serve` on the SoftHSM token of `hsmca dev init` (module loaded in the
           signer);
  p11kit   the same kind of token behind `p11-kit server`, the signer loading
           p11-kit-client.so (hsm-config/p11-kit-remote.yaml);
  tpm      a software TPM (swtpm) behind tpm2-abrmd, the signer loading tpm2-pkcs11
           (hsm-config/tpm2-abrmd.yaml).
Each the way integration.test_tpm and test_p11kit set it up (tests/integration/tokens_*.py),
with pkcs11.sessions 2 and the rate limit raised to 1,000,000/s; then tests/bench/loadgen
against it (its own figures: certs/s, latency, outcomes, front-end and signer CPU per
certificate), and the CPU of the token's daemon per certificate (p11-kit server's
per-client child; swtpm and tpm2-abrmd), read from /proc before and after. A benchmark:
it asserts nothing about timings. Run as root (the fixtures chown to hsmca-signer):

  HSMCA_BIN=build/hsmca python3 tests/bench/bench_tokens.py [--seconds S] [--tokens ...]
      [-- loadgen options]      (default: --connections 4 --concurrency 64 --pods 100)
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from hsmca_harness import BIN, DevServer  # noqa: E402
from test_p11kit import RemoteServer  # noqa: E402
from test_tpm import TpmServer  # noqa: E402
from tokens_p11kit import P11KitServer  # noqa: E402
from tokens_tpm import TpmToken  # noqa: E402

LOADGEN = os.environ.get("HSMCA_LOADGEN", os.path.join(os.path.dirname(BIN), "tests", "loadgen"))
TICK = os.sysconf("SC_CLK_TCK")


def raise_rate(text):
    """The rate limit out of the way: it would be the figure otherwise."""
    return text.replace("issuance:\n", "issuance:\n  rate_per_second: 1000000\n"
                        "  rate_burst: 1000000\n", 1)


def cpu_s(pids):
    """User + system CPU seconds of pids and their children that exited (utime, stime,
    cutime, cstime of /proc/PID/stat), for those still there."""
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            pass
    return total / TICK


def descendants(root):
    """root and every process below it."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def setup(kind):
    """(server, daemon pids function, things to stop) for one token kind."""
    if kind == "softhsm":
        s = DevServer("ec-p256", name="bench-softhsm", audit_key="ec-p256",
                      edit_config=raise_rate)
        return s, lambda: [], []
    if kind == "p11kit":
        k = P11KitServer("bench-p11kit")

        class Remote(RemoteServer):
            def remote_config(self, text):
                return raise_rate(super().remote_config(text))
        s = Remote(k)
        return s, lambda: descendants(k.procs.pids["server"]), [k]
    t = TpmToken("bench-tpm")
    t.start()
    t.make_token()

    class Tpm(TpmServer):
        def tpm_config(self, text):
            return raise_rate(super().tpm_config(text))
    s = Tpm(t)
    return s, lambda: [t.procs.pids["swtpm"], t.procs.pids["abrmd"]], [t]


def run(kind, seconds, lg_args):
    server, daemons, others = setup(kind)
    try:
        server.wait_ready(timeout=120)
        pids = daemons()
        before = cpu_s(pids)
        r = subprocess.run([LOADGEN, "--dir", server.dir, "--addr", server.addr, "--seconds",
                            str(seconds), "--csr-key", "ec-p256", "--server-pid",
                            str(server.proc.pid)] + lg_args,
                           capture_output=True, text=True, timeout=seconds + 300)
        after = cpu_s(daemons())  # p11-kit's child for the signer is there all along
        print("== %s" % kind)
        print(r.stdout.strip())
        m = re.search(r"^result ok=(\d+) .*certs_per_s=([0-9.]+).* p99_ms=([0-9.]+).*"
                      r"fe_cpu_us=(-?\d+) signer_cpu_us=(-?\d+)", r.stdout, re.M)
        if not m:
            return "%s: no result (loadgen exited %d): %s" % (kind, r.returncode, r.stderr)
        ok = int(m.group(1))
        daemon_us = (after - before) * 1e6 / ok if ok and pids else 0
        return ("%-8s %9s certs/s  p99 %8s ms  CPU/cert: front end %4s us, signer %5s us, "
                "token daemons %5.0f us" % (kind, m.group(2), m.group(3), m.group(4),
                                             m.group(5), daemon_us))
    finally:
        server.stop()
        for o in others:
            o.stop()
            o.remove()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--tokens", nargs="+", default=["softhsm", "p11kit", "tpm"])
    ap.add_argument("loadgen", nargs="*")
    a = ap.parse_args()
    lg = a.loadgen or ["--connections", "4", "--concurrency", "64", "--pods", "100"]
    lines = [run(k, a.seconds, lg) for k in a.tokens]
    print("\n".join(["== summary (loadgen %s, %d s each)" % (" ".join(lg), a.seconds)] + lines))


if __name__ == "__main__":
    main()
