#!/usr/bin/python3
"""`hsmca serve` with publish.enabled runs hsmca-publish (what `hsmca k8s publish-roots`
runs) as one more child (supervisor/sup_publish.h), against k8s_api_standin.py: the
program, found beside hsmca as the other children are, is checked at start (missing: 78
naming it, from serve and from `hsmca k8s publish-roots`); the roots reach the selected
namespaces under the Lease; the child runs as frontend.user (started as root) with no_new_privs and
the few variables it reads; killed, it is restarted and takes the Lease again; SIGTERM
of serve releases the Lease; a publish.kubeconfig that does not load stops serve at
start with 78 naming the key, and so does one the child's user cannot read (the child's
own 78)."""
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from hsmca_harness import BIN, TMP, DevServer
from k8s_api_standin import Standin
from test_publish_roots import LEASE, pem_certs, wait_for

CM, KEY = "istio-ca-root-cert", "root-cert.pem"
ROOT = os.geteuid() == 0


def publish_config(kubeconfig):
    """An edit_config for DevServer: publish.enabled with kubeconfig; the dev directory
    made searchable, since the child (frontend.user, nobody) reads the config, the
    root bundle and the CRL there."""
    def edit(text):
        dev_dir = re.search(r"serve --config (/\S+)/hsmca\.yaml", text).group(1)
        os.chmod(dev_dir, 0o711)
        return text + ("publish:\n  enabled: true\n  kubeconfig: %s\n"
                       "  namespace_selector: \"istio-injection=enabled\"\n"
                       "  lease_duration: 3s\n  interval: 1h\n  timeout: 5s\n" % kubeconfig)
    return edit


class PublishServeTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="publish-serve.", dir=TMP)
        os.chmod(self.dir, 0o711)
        self.api = Standin(self.dir)
        self.api.tokens = {"tok-s": "s"}
        self.api.add_namespace("default")
        self.api.add_namespace("app", {"istio-injection": "enabled"})
        self.api.add_namespace("shop", {"istio-injection": "enabled"})
        self.addCleanup(self.api.stop)
        self.srv = None

    def tearDown(self):
        if self.srv:
            self.srv.stop()

    def kubeconfig(self, owner_reads=True):
        """The stand-in's kubeconfig, a secret: 0600, owned by the child's user (nobody,
        when root) unless owner_reads is False (then root's only)."""
        path = self.api.kubeconfig(os.path.join(self.dir, "kc"), "tok-s")
        os.chmod(path, 0o600)
        if ROOT and owner_reads:
            os.chown(path, pwd.getpwnam("nobody").pw_uid, -1)
        return path

    def serve(self, kubeconfig):
        self.srv = DevServer(name="pubserve", edit_config=publish_config(kubeconfig),
                             env_extra={"POD_NAME": "hsmca-0", "KUBERNETES_SERVICE_HOST": "10.0.0.1",
                                        "HSMCA_TEST_NOT_PASSED": "x"})
        return self.srv

    def publish_child(self):
        """The pid of the supervisor's publish-roots child, or None."""
        return self.srv.all_children().get("publish")

    def holder(self):
        o = self.api.get(*LEASE)
        return o and o["spec"].get("holderIdentity")

    def test_serve_publishes_restarts_the_child_and_releases_the_lease(self):
        srv = self.serve(self.kubeconfig())
        srv.wait_ready()
        want = pem_certs(os.path.join(srv.dir, "root-cert.pem"))
        wait_for(lambda: all((self.api.get("configmaps", ns, CM) or {}).get("data", {}).get(KEY) == want
                             for ns in ("app", "shop")), 30, "the roots published by serve")
        self.assertIsNone(self.api.get("configmaps", "default", CM), "not selected")
        self.assertEqual(self.holder(), "hsmca-0", "POD_NAME reaches the child")
        pid = wait_for(self.publish_child, 10, "the publish-roots child")
        self.assertEqual(os.path.realpath("/proc/%d/exe" % pid),
                         os.path.realpath(os.path.join(os.path.dirname(BIN), "hsmca-publish")))
        with open("/proc/%d/status" % pid) as f:
            status = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        if ROOT:
            nobody = pwd.getpwnam("nobody")
            self.assertEqual(status["Uid"].split(), [str(nobody.pw_uid)] * 4)
            self.assertEqual(status["Gid"].split(), [str(nobody.pw_gid)] * 4)
            self.assertEqual(status["Groups"].strip(), "")
        with open("/proc/%d/environ" % pid, "rb") as f:
            names = sorted(v.split(b"=", 1)[0].decode() for v in f.read().split(b"\0") if v)
        self.assertIn("POD_NAME", names)
        self.assertIn("KUBERNETES_SERVICE_HOST", names)
        self.assertNotIn("HSMCA_TEST_NOT_PASSED", names)
        self.assertNotIn("PATH", names)
        # Killed (no release): restarted, and the new child renews the same holder's Lease.
        acquired = srv.logtext(None).count("lease acquired")
        os.kill(pid, signal.SIGKILL)
        new = wait_for(lambda: (self.publish_child() or pid) != pid and self.publish_child(), 15,
                       "publish-roots restarted")
        self.assertNotEqual(new, pid)
        self.assertIn('"msg":"child killed by a signal","role":"publish-roots","child_pid":"%d",'
                      '"signal":"9"' % pid, srv.logtext(None))
        wait_for(lambda: srv.logtext(None).count("lease acquired") > acquired, 15,
                 "the new child takes the Lease")
        self.assertNotIn("lease released", srv.logtext(None))
        renewed = self.api.get(*LEASE)["spec"]["renewTime"]
        wait_for(lambda: self.api.get(*LEASE)["spec"]["renewTime"] != renewed, 10, "renewals go on")
        self.assertEqual(self.holder(), "hsmca-0")
        # SIGTERM of serve: the child releases the Lease before serve exits.
        srv.proc.send_signal(signal.SIGTERM)
        self.assertEqual(srv.proc.wait(timeout=30), 0, srv.logtext())
        self.assertIn("lease released", srv.logtext(None))
        self.assertEqual(self.holder(), "")
        self.assertIsNone(self.publish_child())

    def test_broken_kubeconfig_stops_serve_with_78(self):
        path = os.path.join(self.dir, "kc")
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters: []\n")
        srv = self.serve(path)
        self.assertEqual(srv.proc.wait(timeout=60), 78, srv.logtext())
        self.assertIn("publish.kubeconfig %s" % path, srv.logtext())
        self.assertEqual(self.api.writes, [])
        # config check says so too, on the key's line.
        config = os.path.join(srv.dir, "hsmca.yaml")
        r = subprocess.run([BIN, "config", "check", "--config", config], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout + r.stderr, r"hsmca\.yaml:\d+: publish\.kubeconfig: %s: " % re.escape(path))

    def test_a_missing_hsmca_publish_stops_serve_with_78(self):
        # hsmca and every child but hsmca-publish, copied: found neither beside it nor
        # in ../libexec/hsmca/.
        bindir = os.path.join(self.dir, "bin")
        os.mkdir(bindir)
        for prog in ("hsmca", "hsmca-supervisor", "hsmca-signer", "hsmca-frontend",
                     "hsmca-metrics"):
            shutil.copy(os.path.join(os.path.dirname(BIN), prog), bindir)
        hsmca = os.path.join(bindir, "hsmca")
        kc = self.kubeconfig()
        r = subprocess.run([hsmca, "k8s", "publish-roots", "--config", "/nonexistent",
                            "--kubeconfig", kc], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
        self.assertIn("cannot find the program hsmca-publish", r.stderr)
        dev = os.path.join(self.dir, "dev")
        subprocess.check_call([BIN, "dev", "init", "--dir", dev], stdout=subprocess.DEVNULL)
        config = os.path.join(dev, "hsmca.yaml")
        with open(config) as f:
            text = f.read()
        with open(config, "w") as f:
            f.write(publish_config(kc)(text))
        r = subprocess.run([hsmca, "serve", "--config", config], capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 78, r.stdout + r.stderr)
        self.assertIn("cannot find the program hsmca-publish", r.stdout + r.stderr)
        self.assertEqual(self.api.writes, [])

    @unittest.skipUnless(ROOT, "the child switches users only when serve starts as root")
    def test_kubeconfig_the_child_cannot_read_stops_serve_with_78(self):
        # The supervisor (root) reads it; the child (nobody) cannot: its own exit 78
        # stops serve as the signer's or the front end's would.
        srv = self.serve(self.kubeconfig(owner_reads=False))
        self.assertEqual(srv.proc.wait(timeout=60), 78, srv.logtext())
        log = srv.logtext(None)
        self.assertIn("publish.kubeconfig", log)
        self.assertRegex(log, r'"msg":"child cannot start: a configuration[^"]*",'
                              r'"role":"publish-roots"')
        self.assertEqual(self.api.writes, [])


if __name__ == "__main__":
    unittest.main()
