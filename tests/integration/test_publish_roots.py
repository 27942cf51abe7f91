#!/usr/bin/python3
"""`hsmca k8s publish-roots` (issue 21 item 3) against k8s_api_standin.py, an in-memory
Kubernetes API server that enforces resourceVersion conflicts and records who wrote
what: the ConfigMaps istio-ca-root-cert (every namespace the label selector matches,
none being deleted) and istio-ca-crl (once crl.path exists) and the ClusterTrustBundle
istio.io:istiod-ca:root-cert are created and then updated when the files change; an
update that conflicts is read again and retried; of two instances only the Lease's
holder writes; killing the holder hands the Lease over within its duration; a root
bundle with a certificate that is not a CA, or one twice, is not put into the
ClusterTrustBundle."""
import datetime
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hsmca_harness import BIN, TMP
from k8s_api_standin import Standin
from pki_fixture import make_server_pki

LEASE_S = 3  # publish.lease_duration: a round every second
CM, KEY = "istio-ca-root-cert", "root-cert.pem"
CTB = "istio.io:istiod-ca:root-cert"
LEASE = ("leases", "istio-system", "hsmca-publish-roots")


def wait_for(cond, deadline_s, what):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("not within %ss: %s" % (deadline_s, what))


def pem_certs(path):
    """The certificates of a PEM file, each re-encoded (ending in a newline), as the
    bundle hsmca publishes."""
    with open(path) as f:
        blocks = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", f.read(), re.S)
    certs = [x509.load_pem_x509_certificate(b.encode()) for b in blocks]
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def micro(t):
    """A Kubernetes MicroTime (2026-11-27T20:42:27.684128Z) in seconds."""
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def make_crl(path):
    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "crl-test")])
    crl = (x509.CertificateRevocationListBuilder().issuer_name(name).last_update(now)
           .next_update(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    with open(path, "wb") as f:
        f.write(crl.public_bytes(serialization.Encoding.PEM))
    with open(path) as f:
        return f.read()


class PublishRootsTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="publish-roots.", dir=TMP)
        self.api = Standin(self.dir)
        self.api.tokens = {"tok-a": "a", "tok-b": "b"}
        self.api.add_namespace("default")
        self.api.add_namespace("app", {"istio-injection": "enabled"})
        self.api.add_namespace("shop", {"istio-injection": "enabled", "team": "x"})
        self.api.add_namespace("old", {"istio-injection": "enabled"}, terminating=True)
        self.root1 = make_server_pki(self.dir, ("root1.pem", "leaf1.pem", "leaf1-key.pem"),
                                     "root-1", "leaf-1")
        self.root2 = make_server_pki(self.dir, ("root2.pem", "leaf2.pem", "leaf2-key.pem"),
                                     "root-2", "leaf-2")
        self.bundle = os.path.join(self.dir, "roots.pem")
        self.set_roots(self.root1[0])
        self.crl = os.path.join(self.dir, "ca-crl.pem")
        self.procs = []
        self.addCleanup(self.api.stop)
        self.addCleanup(self.stop_all)

    def set_roots(self, *paths):
        data = b"".join(open(p, "rb").read() for p in paths)
        with open(self.bundle + ".tmp", "wb") as f:
            f.write(data)
        os.rename(self.bundle + ".tmp", self.bundle)

    def config(self, ctb=True, selector="istio-injection=enabled", interval="1h"):
        path = os.path.join(self.dir, "hsmca.yaml")
        with open(path, "w") as f:
            f.write("ca:\n  cert: %s\n  root_bundle: %s\ncrl:\n  path: %s\n"
                    "publish:\n  namespace_selector: \"%s\"\n  cluster_trust_bundle: %s\n"
                    "  lease_duration: %ds\n  interval: %s\n  timeout: 5s\n"
                    % (self.root1[0], self.bundle, self.crl, selector,
                       "true" if ctb else "false", LEASE_S, interval))
        return path

    def args(self, who, *extra):
        kc = self.api.kubeconfig(os.path.join(self.dir, "kc-" + who), "tok-" + who)
        return [BIN, "k8s", "publish-roots", "--config", os.path.join(self.dir, "hsmca.yaml"),
                "--kubeconfig", kc, "--identity", "replica-" + who] + list(extra)

    def once(self, who="a"):
        return subprocess.run(self.args(who, "--once"), capture_output=True, text=True, timeout=60)

    def start(self, who):
        log = open(os.path.join(self.dir, "log-" + who), "w")
        p = subprocess.Popen(self.args(who), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(p)
        return p

    def log(self, who):
        with open(os.path.join(self.dir, "log-" + who)) as f:
            return f.read()

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def cm(self, ns, name=CM, key=KEY):
        o = self.api.get("configmaps", ns, name)
        return o and o["data"].get(key)

    def holder(self):
        o = self.api.get(*LEASE)
        return o and o["spec"].get("holderIdentity")

    # ---- one instance ----

    def test_creates_then_updates_in_selected_namespaces(self):
        self.config()
        r = self.once()
        self.assertEqual(r.returncode, 0, r.stderr)
        want = pem_certs(self.root1[0])
        self.assertTrue(want.endswith("-----END CERTIFICATE-----\n"))
        self.assertEqual(self.cm("app"), want)
        self.assertEqual(self.cm("shop"), want)
        self.assertIsNone(self.api.get("configmaps", "default", CM), "not selected")
        self.assertIsNone(self.api.get("configmaps", "old", CM), "being deleted")
        ctb = self.api.get("clustertrustbundles", "", CTB)
        self.assertEqual(ctb["spec"], {"signerName": "istio.io/istiod-ca", "trustBundle": want})
        self.assertIsNone(self.api.get("configmaps", "app", "istio-ca-crl"), "no CRL yet")
        self.assertIn('"msg":"published","kind":"ConfigMap","namespace":"app"', r.stderr)
        # Nothing changed: nothing written again.
        before = len(self.api.writes_of("ConfigMap")) + len(self.api.writes_of("ClusterTrustBundle"))
        self.assertEqual(self.once().returncode, 0)
        self.assertEqual(len(self.api.writes_of("ConfigMap")) +
                         len(self.api.writes_of("ClusterTrustBundle")), before)
        # Two roots and a CRL: both ConfigMaps and the bundle updated, other keys kept.
        with self.api.lock:
            self.api.objects[("configmaps", "app", CM)]["data"]["other"] = "kept"
        self.set_roots(self.root1[0], self.root2[0])
        crl = make_crl(self.crl)
        r = self.once()
        self.assertEqual(r.returncode, 0, r.stderr)
        want2 = pem_certs(self.bundle)
        self.assertEqual(want2.count("BEGIN CERTIFICATE"), 2)
        self.assertEqual(self.cm("app"), want2)
        self.assertEqual(self.api.get("configmaps", "app", CM)["data"]["other"], "kept")
        self.assertEqual(self.api.get("clustertrustbundles", "", CTB)["spec"]["trustBundle"], want2)
        self.assertEqual(self.cm("shop", "istio-ca-crl", "ca-crl.pem"), crl)
        self.assertIn('"op":"updated"', r.stderr)

    def test_conflict_is_read_again_and_retried(self):
        self.config(ctb=False)
        self.assertEqual(self.once().returncode, 0)
        self.set_roots(self.root2[0])
        self.api.conflict_next("configmaps", "app", CM)
        r = self.once()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("write conflicted: reading it again", r.stderr)
        self.assertEqual(self.cm("app"), pem_certs(self.root2[0]))

    def test_ctb_refuses_a_bundle_with_a_leaf_or_a_duplicate(self):
        self.config()
        for paths, why in (((self.root1[0], self.root1[1]), "is not a CA"),
                           ((self.root1[0], self.root1[0]), "again")):
            self.set_roots(*paths)
            r = self.once()
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("ClusterTrustBundle %s not written" % CTB, r.stderr)
            self.assertIn(why, r.stderr)
            self.assertEqual(self.api.writes_of("ClusterTrustBundle"), [])
        self.assertEqual(self.cm("app"), pem_certs(self.bundle), "the ConfigMaps are still written")
        # In the loop it is said once per pass, not at every round (Lease renewal).
        self.start("a")
        wait_for(lambda: "not written" in self.log("a"), 15, "the refusal")
        renewals = len(self.api.writes_of("Lease"))
        wait_for(lambda: len(self.api.writes_of("Lease")) >= renewals + 2, 10, "two more rounds")
        self.assertEqual(self.log("a").count("not written"), 1)

    def test_config_errors_exit_78(self):
        self.config()
        r = subprocess.run([BIN, "k8s", "publish-roots", "--config", os.path.join(self.dir, "hsmca.yaml"),
                            "--kubeconfig", os.path.join(self.dir, "missing"), "--once"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("--kubeconfig", r.stderr)
        env = dict(os.environ)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        r = subprocess.run([BIN, "k8s", "publish-roots", "--config", os.path.join(self.dir, "hsmca.yaml"),
                            "--in-cluster", "--once"], capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("KUBERNETES_SERVICE_HOST", r.stderr)
        self.assertEqual(self.api.writes, [])

    # ---- a loop, and two replicas ----

    def test_loop_publishes_a_changed_bundle_and_the_crl(self):
        self.config(ctb=False)
        self.start("a")
        wait_for(lambda: self.cm("app") == pem_certs(self.root1[0]), 15, "first publish")
        self.set_roots(self.root2[0])
        wait_for(lambda: self.cm("shop") == pem_certs(self.root2[0]), 10, "changed roots published")
        crl = make_crl(self.crl)
        wait_for(lambda: self.cm("app", "istio-ca-crl", "ca-crl.pem") == crl, 10, "the CRL")

    def test_two_replicas_write_only_under_the_lease_and_hand_over(self):
        self.config()
        a, b = self.start("a"), self.start("b")
        wait_for(lambda: self.cm("app") == pem_certs(self.root1[0]), 15, "first publish")
        first = self.holder()
        self.assertIn(first, ("replica-a", "replica-b"))
        self.set_roots(self.root2[0])
        wait_for(lambda: self.cm("shop") == pem_certs(self.root2[0]), 10, "update")
        objs = [w for w in self.api.writes_of() if w[2] != "Lease"]
        self.assertTrue(objs)
        self.assertEqual({"replica-" + w[0] for w in objs}, {first}, objs)
        # The holder dies without releasing: the other takes over once the Lease has not
        # been renewed for its duration (plus one round and slack for a loaded machine).
        dead, alive = (a, "replica-b") if first == "replica-a" else (b, "replica-a")
        transitions = self.api.get(*LEASE)["spec"]["leaseTransitions"]
        dead.kill()
        dead.wait()
        last = self.api.get(*LEASE)["spec"]
        self.assertEqual(last["holderIdentity"], first)
        wait_for(lambda: self.holder() == alive, LEASE_S + 1 + 3, "hand-over")
        lease = self.api.get(*LEASE)["spec"]
        self.assertEqual(lease["leaseTransitions"], transitions + 1)
        self.assertEqual(lease["leaseDurationSeconds"], LEASE_S)
        # Not before the Lease expired: a full duration after the dead holder's last
        # renewal (both times from this machine's clock).
        gap = micro(lease["acquireTime"]) - micro(last["renewTime"])
        self.assertGreaterEqual(gap, LEASE_S, (last, lease))
        mark = len(self.api.writes_of())
        self.set_roots(self.root1[0], self.root2[0])
        want = pem_certs(self.bundle)
        wait_for(lambda: self.cm("app") == want and
                 (self.api.get("clustertrustbundles", "", CTB) or {}).get("spec", {}).get("trustBundle") == want,
                 10, "the new holder publishes")
        after = [w for w in self.api.writes_of()[mark:] if w[2] != "Lease"]
        self.assertEqual({"replica-" + w[0] for w in after}, {alive}, after)

    def test_a_holder_that_cannot_renew_stops_writing(self):
        self.config(ctb=False)
        self.start("a")
        wait_for(lambda: self.cm("app") == pem_certs(self.root1[0]), 15, "first publish")
        with self.api.lock:
            self.api.lease_down.add("a")
        wait_for(lambda: "lease lost: writes stopped" in self.log("a"), 10, "the lease lost")
        mark = len(self.api.writes_of())
        self.set_roots(self.root2[0])
        # Two more failed rounds after the change: nothing written meanwhile.
        fails = self.log("a").count("cannot read the Lease")
        wait_for(lambda: self.log("a").count("cannot read the Lease") >= fails + 2, 10, "two rounds")
        self.assertEqual(self.api.writes_of()[mark:], [])
        self.assertEqual(self.cm("app"), pem_certs(self.root1[0]))
        with self.api.lock:
            self.api.lease_down.discard("a")
        wait_for(lambda: self.cm("app") == pem_certs(self.root2[0]), 10, "published once renewed")

    def test_a_stopped_holder_releases_the_lease(self):
        self.config(ctb=False)
        a = self.start("a")
        wait_for(lambda: self.holder() == "replica-a", 15, "a holds the Lease")
        self.start("b")
        wait_for(lambda: "publish-roots started" in self.log("b"), 10, "b started")
        a.send_signal(signal.SIGTERM)
        self.assertEqual(a.wait(timeout=15), 0)
        self.assertIn("lease released", self.log("a"))
        wait_for(lambda: self.holder() == "replica-b", LEASE_S + 1 + 3, "b takes the released Lease")
        wait_for(lambda: "lease acquired" in self.log("b"), 5, "b says so")


if __name__ == "__main__":
    unittest.main()
