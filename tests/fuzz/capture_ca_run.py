#!/usr/bin/python3
"""Records a real run of the CA lifecycle for the seeds of fuzz_admin and fuzz_replay
(docs/DEVELOPMENT.md "Fuzzing"): runs the integration tests test_auto_renew.py (requests,
approvals, auto-approved renewals with and without a proof, fetches, a revocation, the
refusals) and test_crl.py on a real `hsmca serve`, with every `hsmca` admin command run
under strace, and keeps

  OUT/admin/NNN.json    each JSON request an admin command sent to the signer's socket
  OUT/logs/NAME.log     the signing log of each server (its entries, in order)

  HSMCA_BIN=build/hsmca python3 tests/fuzz/capture_ca_run.py OUT     (as root, like the tests)

seeds_ca.py turns them into the corpora."""
import os
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import test_admin  # noqa: E402

OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "ca-run"
os.makedirs(os.path.join(OUT, "admin"), exist_ok=True)
os.makedirs(os.path.join(OUT, "logs"), exist_ok=True)
_plain = test_admin.hsmca_as
_n = [0]


def traced(who, args, check=True):
    """test_admin.hsmca_as under strace; the admin requests it sent are kept."""
    tdir = os.path.join(OUT, "traces")  # the test users' strace writes here
    os.makedirs(tdir, exist_ok=True)
    os.chmod(tdir, 0o1777)
    trace = os.path.join(tdir, "trace-%d" % _n[0])
    real_bin = test_admin.BIN
    test_admin.BIN = "strace"
    try:
        rc = _plain(who, ["-f", "-qq", "-s", "70000", "-xx", "-e", "trace=sendmsg,sendto,write",
                          "-o", trace, real_bin] + args, check=check)
    finally:
        test_admin.BIN = real_bin
    with open(trace) as f:
        for m in re.finditer(r'"((?:\\x[0-9a-f]{2})+)"', f.read()):
            data = bytes.fromhex(m.group(1).replace("\\x", ""))
            if data.startswith(b"{") and b'"op"' in data:
                _n[0] += 1
                with open(os.path.join(OUT, "admin", "%03d.json" % _n[0]), "wb") as o:
                    o.write(data)
    os.unlink(trace)
    return rc


def keep_log(srv, name):
    log = os.path.join(srv.dir, "audit", "log")
    if os.path.exists(log):
        shutil.copy(log, os.path.join(OUT, "logs", name + ".log"))


def main():
    test_admin.hsmca_as = traced
    import test_auto_renew
    import test_crl
    for mod in (test_auto_renew, test_crl):
        mod.hsmca_as = traced
    stop = test_admin.DevServer.stop

    def stop_keeping(srv, *a, **kw):
        keep_log(srv, "%s-%d" % (os.path.basename(srv.dir.rstrip("/")), os.getpid()))
        return stop(srv, *a, **kw)
    test_admin.DevServer.stop = stop_keeping
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    suite.addTests(loader.loadTestsFromModule(test_auto_renew))
    suite.addTests(loader.loadTestsFromModule(test_crl))
    unittest.TextTestRunner(verbosity=2).run(suite)
    print("%d admin requests, logs: %s" % (_n[0], os.listdir(os.path.join(OUT, "logs"))))


if __name__ == "__main__":
    main()
