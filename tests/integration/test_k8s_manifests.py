#!/usr/bin/python3
"""deploy/kubernetes: `kubectl kustomize` renders every overlay; every object validates
offline against the Kubernetes API schema of its kind (k8s_schema.py); the
security-relevant fields are what docs/SECURITY.md says each Pod Security variant has;
the hsmca.yaml each overlay ships passes `hsmca config check` (its in-pod paths moved
under a scratch root that holds the files the pod would); the demo's init container
makes a token `hsmca token check` accepts; and hsmca serves a certificate with exactly
the privileges each variant's manifest grants (as root: the baseline capabilities
only; as a non-root uid with none and no_new_privs)."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import yaml

import k8s_schema
from hsmca_harness import BIN, TMP, free_port

# LeakSanitizer needs ptrace, which the sandboxed children's seccomp filters forbid (the
# harness turns it off for its servers the same way); ASan itself stays on.
os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OVERLAYS = os.path.join(SRC, "deploy", "kubernetes", "overlays")
VARIANTS = {"demo": "baseline", "network-hsm": "baseline", "restricted": "restricted"}
# What the supervisor, started as root, needs (docs/SECURITY.md): the uid switch, the
# front end's chroot, the signer's audit log and admin socket, which it creates and
# opens, still root, owned by signer.user, and signals to its children (other users).
BASELINE_CAPS = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID", "SYS_CHROOT"}
# Pod Security "baseline": the capabilities a container may add.
PSS_BASELINE_ADD = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                    "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                    "SYS_CHROOT"}
# Pod Security "restricted": the volume types a pod may have.
PSS_RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                          "persistentVolumeClaim", "projected", "secret"}
# The pod's paths a config names, moved under the scratch root for config check.
POD_PREFIXES = ("/etc/hsmca/", "/var/lib/hsmca/", "/run/hsmca/", "/var/run/secrets/",
                "/opt/hsm-client/", "/etc/hsm-client")


def render(overlay):
    r = subprocess.run(["kubectl", "kustomize", os.path.join(OVERLAYS, overlay)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("kubectl kustomize %s: %s" % (overlay, r.stderr))
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def one(docs, kind, name_prefix=""):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(name_prefix)]
    if len(found) != 1:
        raise AssertionError("%d %s objects named %s*" % (len(found), kind, name_prefix))
    return found[0]


def metrics_key_known():
    """Whether this build's parser has metrics.listen (docs/CONFIG.md is checked against
    the parser's table by build.config_doc)."""
    with open(os.path.join(SRC, "docs", "CONFIG.md")) as f:
        return "`metrics.listen`" in f.read()


def remap(text, root):
    return re.sub(r"(?<![\w/.])(%s)" % "|".join(re.escape(p) for p in POD_PREFIXES),
                  lambda m: root + m.group(1), text)


def user_exists(name):
    return subprocess.run(["getent", "passwd", name], capture_output=True).returncode == 0


def host_config(text, root):
    """The overlay's hsmca.yaml for this host: pod paths under root; the image's front-end
    user replaced by nobody where the host has no such user; the metrics section left
    out where this build's parser does not know it yet."""
    text = remap(text, root)
    if not user_exists("hsmca-frontend"):
        text = text.replace("user: hsmca-frontend", "user: nobody")
    if not metrics_key_known():
        text = re.sub(r"^metrics:\n(?:[ #].*\n)*", "", text, flags=re.M)
    return text


class ManifestTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = {o: render(o) for o in VARIANTS}

    def test_every_overlay_renders_the_objects(self):
        kinds = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                 "RoleBinding", "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget",
                 "NetworkPolicy"}
        for overlay, docs in self.docs.items():
            self.assertEqual({d["kind"] for d in docs}, kinds, overlay)
            for d in docs:
                if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
                    self.assertEqual(d["metadata"].get("namespace"), "hsmca",
                                     (overlay, d["kind"], d["metadata"]["name"]))
            one(docs, "ConfigMap", "hsmca-config")
            one(docs, "ConfigMap", "hsmca-policy")

    def test_every_object_validates_against_its_kind(self):
        for overlay, docs in self.docs.items():
            for d in docs:
                self.assertEqual(k8s_schema.validate(d), [], overlay)

    def test_the_validator_catches_what_it_must(self):
        """An unknown field, deep down; a wrong type; a missing required field."""
        sts = one(self.docs["demo"], "StatefulSet")
        import copy
        bad = copy.deepcopy(sts)
        bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privilegd"] = True
        self.assertIn("privilegd", " ".join(k8s_schema.validate(bad)))
        bad = copy.deepcopy(sts)
        bad["spec"]["replicas"] = "2"
        self.assertIn("not an integer", " ".join(k8s_schema.validate(bad)))
        bad = copy.deepcopy(sts)
        del bad["spec"]["template"]["spec"]["containers"][0]["name"]
        self.assertIn("required field", " ".join(k8s_schema.validate(bad)))

    def pod(self, overlay):
        return one(self.docs[overlay], "StatefulSet")["spec"]["template"]["spec"]

    def test_security_fields(self):
        for overlay, variant in VARIANTS.items():
            pod = self.pod(overlay)
            for host in ("hostNetwork", "hostPID", "hostIPC"):
                self.assertFalse(pod.get(host, False), (overlay, host))
            self.assertEqual(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
            for v in pod["volumes"]:
                kind = [k for k in v if k != "name"]
                self.assertNotIn("hostPath", kind, overlay)
                if variant == "restricted":
                    self.assertTrue(set(kind) <= PSS_RESTRICTED_VOLUMES, (overlay, v))
            for c in pod.get("initContainers", []) + pod["containers"]:
                where = (overlay, c["name"])
                sc = c["securityContext"]
                self.assertFalse(sc.get("privileged", False), where)
                self.assertIs(sc.get("allowPrivilegeEscalation"), False, where)
                self.assertIs(sc.get("readOnlyRootFilesystem"), True, where)
                self.assertEqual(sc["capabilities"]["drop"], ["ALL"], where)
                self.assertEqual(sc.get("seccompProfile"), {"type": "RuntimeDefault"}, where)
                for p in c.get("ports", []):
                    self.assertNotIn("hostPort", p, where)
                adds = set(sc["capabilities"].get("add") or [])
                self.assertTrue(adds <= PSS_BASELINE_ADD, where)
                if variant == "restricted":
                    self.assertEqual(adds, set(), where)
                    self.assertIs(sc.get("runAsNonRoot", pod["securityContext"].get(
                        "runAsNonRoot")), True, where)
                    self.assertNotEqual(sc.get("runAsUser", pod["securityContext"].get(
                        "runAsUser")), 0, where)
                elif c["name"] == "hsmca":
                    self.assertEqual(adds, BASELINE_CAPS, where)
                res = c["resources"]
                self.assertIn("memory", res["limits"], where)
                self.assertIn("memory", res["requests"], where)
                self.assertIn("cpu", res["requests"], where)
            ns = one(self.docs[overlay], "Namespace")
            self.assertEqual(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
                             variant, overlay)

    def test_probes_and_ports(self):
        for overlay in VARIANTS:
            c = [c for c in self.pod(overlay)["containers"] if c["name"] == "hsmca"][0]
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            self.assertEqual(ports, {"grpc-ca": 15012, "http-metrics": 15014})
            for probe, path in (("startupProbe", "/readyz"), ("readinessProbe", "/readyz"),
                                ("livenessProbe", "/healthz")):
                self.assertEqual(c[probe]["httpGet"], {"path": path, "port": "http-metrics"},
                                 (overlay, probe))
            svc = [d for d in self.docs[overlay] if d["kind"] == "Service"
                   and d["metadata"]["name"] == "hsmca"][0]
            self.assertEqual(sorted(p["port"] for p in svc["spec"]["ports"]), [15012, 15014])
            cfg = yaml.safe_load(one(self.docs[overlay], "ConfigMap", "hsmca-config")
                                 ["data"]["hsmca.yaml"])
            self.assertEqual(cfg["metrics"]["listen"], "0.0.0.0:15014")
            self.assertEqual(cfg["server"]["listen"], "0.0.0.0:15012")
            self.assertIn("hsmca.hsmca.svc", cfg["server"]["dns_names"])

    def test_network_policy(self):
        for overlay in VARIANTS:
            np = one(self.docs[overlay], "NetworkPolicy")["spec"]
            self.assertEqual(set(np["policyTypes"]), {"Ingress", "Egress"})
            self.assertEqual(sorted(p["port"] for r in np["ingress"] for p in r["ports"]),
                             [15012, 15014])
            for r in np["ingress"]:
                self.assertTrue(r.get("from"), overlay)  # never "from anywhere"
            out = sorted({p["port"] for r in np["egress"] for p in r["ports"]})
            want = sorted([53, 443, 6443] + ([] if overlay == "demo" else [1792]))
            self.assertEqual(out, want, overlay)
            for r in np["egress"]:
                self.assertTrue(r.get("to"), overlay)

    def test_rbac(self):
        docs = self.docs["network-hsm"]
        rules = one(docs, "ClusterRole")["rules"] + one(docs, "Role")["rules"]
        granted = {(g, r, v) for rule in rules for g in rule["apiGroups"]
                   for r in rule["resources"] for v in rule["verbs"]}
        for need in (("authentication.k8s.io", "tokenreviews", "create"),
                     ("", "pods", "get"), ("", "pods", "list"),
                     ("", "configmaps", "create"), ("", "configmaps", "update"),
                     ("coordination.k8s.io", "leases", "update"),
                     ("certificates.k8s.io", "clustertrustbundles", "create"),
                     ("certificates.k8s.io", "signers", "attest")):
            self.assertIn(need, granted)
        for rule in rules:
            for field in ("apiGroups", "resources", "verbs"):
                self.assertNotIn("*", rule[field])
        attest = [r for r in rules if "attest" in r["verbs"]][0]
        self.assertEqual(attest["resourceNames"], ["istio.io/istiod-ca"])
        self.assertEqual(one(docs, "StatefulSet")["spec"]["template"]["spec"]
                         ["serviceAccountName"], "hsmca")

    def test_audit_volume_per_replica(self):
        for overlay in VARIANTS:
            sts = one(self.docs[overlay], "StatefulSet")
            claims = sts["spec"]["volumeClaimTemplates"]
            self.assertEqual([c["metadata"]["name"] for c in claims], ["audit"])
            cfg = yaml.safe_load(one(self.docs[overlay], "ConfigMap", "hsmca-config")
                                 ["data"]["hsmca.yaml"])
            mounts = {m["name"]: m["mountPath"] for m in sts["spec"]["template"]["spec"]
                      ["containers"][0]["volumeMounts"]}
            self.assertTrue(cfg["audit"]["dir"].startswith(mounts["audit"] + "/"), overlay)
            self.assertNotIn("origin", cfg["audit"])  # the stable hostname gives it


class ConfigInPodTests(unittest.TestCase):
    """The overlays' hsmca.yaml against `hsmca config check`, with the pod's files."""

    @classmethod
    def setUpClass(cls):
        cls.docs = {o: render(o) for o in ("demo", "network-hsm")}
        os.makedirs(TMP, exist_ok=True)
        cls.root = tempfile.mkdtemp(prefix="k8s.", dir=TMP)
        os.chmod(cls.root, 0o711)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def pod_files(self, overlay, root):
        """The directories the overlay's containers mount, the policy ConfigMap and the
        service account's token (its CA bundle is the caller's)."""
        docs = self.docs[overlay]
        pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
        for c in pod.get("initContainers", []) + pod["containers"]:
            for m in c.get("volumeMounts", []):
                if (m["mountPath"] + "/").startswith(POD_PREFIXES):
                    os.makedirs(remap(m["mountPath"] + "/", root), exist_ok=True)
        os.makedirs(os.path.join(root, "var/run/secrets/kubernetes.io/serviceaccount"))
        policy = one(docs, "ConfigMap", "hsmca-policy")["data"]["policy.yaml"]
        with open(os.path.join(root, "etc/hsmca/policy/policy.yaml"), "w") as f:
            f.write(policy)
        sa = os.path.join(root, "var/run/secrets/kubernetes.io/serviceaccount")
        with open(os.path.join(sa, "token"), "w") as f:
            f.write("a-service-account-token\n")
        return sa

    def check(self, overlay, root):
        text = one(self.docs[overlay], "ConfigMap", "hsmca-config")["data"]["hsmca.yaml"]
        path = os.path.join(root, "etc/hsmca/config/hsmca.yaml")
        with open(path, "w") as f:
            f.write(host_config(text, root))
        r = subprocess.run([BIN, "config", "check", path], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, overlay + ": " + r.stdout + r.stderr)
        self.assertIn("config check: OK", r.stdout + r.stderr)
        return path

    def run_init(self, overlay, root):
        """The demo's init container, as the manifest writes it, under root."""
        init = self.pod_init(overlay)
        self.assertEqual(init["command"][0], "hsmca")
        argv = [BIN] + [remap(a, root) for a in init["command"][1:]]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def pod_init(self, overlay):
        return one(self.docs[overlay], "StatefulSet")["spec"]["template"]["spec"][
            "initContainers"][0]

    def test_demo_config_and_token(self):
        root = os.path.join(self.root, "demo")
        sa = self.pod_files("demo", root)
        self.run_init("demo", root)
        shutil.copy(os.path.join(root, "var/lib/hsmca/token/demo/root-cert.pem"),
                    os.path.join(sa, "ca.crt"))
        path = self.check("demo", root)
        r = subprocess.run([BIN, "token", "check", "--config", path], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_network_hsm_config(self):
        root = os.path.join(self.root, "net")
        sa = self.pod_files("network-hsm", root)
        dev = os.path.join(root, "dev")
        subprocess.run([BIN, "dev", "init", "--dir", dev], check=True, capture_output=True,
                       timeout=120)
        ca = os.path.join(root, "etc/hsmca/ca")
        for name in ("ca-cert.pem", "root-bundle.pem"):
            shutil.copy(os.path.join(dev, "root-cert.pem"), os.path.join(ca, name))
        shutil.copy(os.path.join(dev, "root-cert.pem"), os.path.join(sa, "ca.crt"))
        shutil.copy(os.path.join(dev, "pin"), os.path.join(root, "etc/hsmca/pin/pin"))
        lib = os.path.join(root, "opt/hsm-client/lib")
        os.makedirs(lib)  # what the hsm-client init container copies
        shutil.copy("/usr/lib/softhsm/libsofthsm2.so", os.path.join(lib, "libCryptoki2_64.so"))
        self.check("network-hsm", root)


def wait_for_line(path, proc, pattern, deadline_s=60):
    """The first line of the log at path that matches pattern, waited for until the
    deadline or the process's exit (then None)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with open(path, errors="replace") as f:
            for line in f:
                if re.search(pattern, line):
                    return line
        if proc.poll() is not None:
            return None
        time.sleep(0.1)
    return None


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"),
                     "needs root and setpriv to start hsmca with a pod's privileges")
class PodPrivilegeTests(unittest.TestCase):
    """hsmca serve, started with exactly what each variant's container gets: the
    capability bounding set (and nothing inheritable), no_new_privs
    (allowPrivilegeEscalation: false), the uid and groups."""

    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        cls.root = tempfile.mkdtemp(prefix="k8spriv.", dir=TMP)
        os.chmod(cls.root, 0o711)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def container(self, overlay):
        docs = render(overlay)
        pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
        c = [c for c in pod["containers"] if c["name"] == "hsmca"][0]
        return pod, c

    def serve(self, name, setpriv, dev):
        """Starts hsmca serve on dev's config under setpriv; returns (process, log path)."""
        cfg = os.path.join(dev, "hsmca.yaml")
        with open(cfg) as f:
            text = f.read()
        with open(cfg, "w") as f:
            f.write(re.sub(r'listen: "127.0.0.1:\d+"', 'listen: "127.0.0.1:%d"' % free_port(),
                           text))
        log = os.path.join(self.root, name + ".log")
        out = open(log, "w")
        proc = subprocess.Popen(setpriv + [BIN, "serve", "--config", cfg], stdout=out,
                                stderr=subprocess.STDOUT)
        out.close()
        self.addCleanup(self.stop, proc)
        return proc, log

    @staticmethod
    def stop(proc):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def caps_setpriv(self, caps):
        bounding = "-all" + "".join(",+" + c.lower() for c in sorted(caps))
        return ["setpriv", "--bounding-set", bounding, "--inh-caps", "-all", "--no-new-privs"]

    def test_baseline_serves_with_its_capabilities_and_no_more(self):
        _, c = self.container("network-hsm")
        caps = set(c["securityContext"]["capabilities"]["add"])
        dev = os.path.join(self.root, "baseline")
        subprocess.run([BIN, "dev", "init", "--dir", dev], check=True, capture_output=True,
                       timeout=120)
        # Without CHOWN, DAC_OVERRIDE and FOWNER the signer cannot make the audit log.
        proc, log = self.serve("too-few", self.caps_setpriv({"SETUID", "SETGID", "SYS_CHROOT"}),
                               dev)
        line = wait_for_line(log, proc, r"audit log.*Operation not permitted|issued by the signer")
        self.assertIsNotNone(line, open(log).read())
        self.assertIn("Operation not permitted", line)
        self.stop(proc)
        proc, log = self.serve("baseline", self.caps_setpriv(caps), dev)
        line = wait_for_line(log, proc, r'"msg":"serving certificate issued by the signer"')
        self.assertIsNotNone(line, open(log).read())
        text = open(log).read()
        self.assertRegex(text, r'"msg":"sandbox: switched user","user":"nobody",.*'
                               r'"chroot":"/var/empty"')
        self.assertRegex(text, r'"msg":"sandbox: switched user","user":"hsmca-signer",.*'
                               r'"chroot":"none"')
        self.assert_stops(proc, log)

    def assert_stops(self, proc, log):
        """SIGTERM (the kubelet's) stops the supervisor and its children well within the
        grace period: the supervisor may signal them (CAP_KILL across uids)."""
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.fail("hsmca serve still running 10 s after SIGTERM: " + open(log).read())
        self.assertNotIn("did not stop within", open(log).read())

    def test_demo_init_container_with_its_capabilities(self):
        """The demo's init container, as the manifest writes it and with exactly its
        capabilities, makes the token, and again over the kept emptyDir (a restarted
        pod); with CHOWN alone (what it once had) it fails."""
        docs = render("demo")
        init = one(docs, "StatefulSet")["spec"]["template"]["spec"]["initContainers"][0]
        caps = set(init["securityContext"]["capabilities"]["add"])
        root = os.path.join(self.root, "init")
        os.makedirs(os.path.join(root, "var/lib/hsmca/token"))
        argv = [BIN] + [remap(a, root) for a in init["command"][1:]]
        for attempt in ("first start", "restart"):
            r = subprocess.run(self.caps_setpriv(caps) + argv, capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 0, attempt + ": " + r.stdout + r.stderr)
        shutil.rmtree(os.path.join(root, "var/lib/hsmca/token/demo"))
        r = subprocess.run(self.caps_setpriv({"CHOWN"}) + argv, capture_output=True, text=True,
                           timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_restricted_serves_as_one_non_root_uid(self):
        pod, c = self.container("restricted")
        sc = c["securityContext"]
        uid, gid = sc["runAsUser"], sc["runAsGroup"]
        fs_group = pod["securityContext"]["fsGroup"]
        self.assertEqual(c["securityContext"]["capabilities"].get("add"), None)
        setpriv = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid,
                   "--groups=%d" % fs_group] + self.caps_setpriv(set())
        dev = os.path.join(self.root, "restricted")
        os.makedirs(dev)
        os.chown(dev, uid, gid)
        subprocess.run(setpriv + [BIN, "dev", "init", "--dir", dev], check=True,
                       capture_output=True, timeout=120)
        # The audit volume as the kubelet hands it over with fsGroup: root's, group
        # fsGroup, 2775; the signer makes its log directory in it through the group.
        pvc = os.path.join(self.root, "audit-volume")
        os.makedirs(pvc)
        os.chown(pvc, 0, fs_group)
        os.chmod(pvc, 0o2775)
        cfg = os.path.join(dev, "hsmca.yaml")
        with open(cfg) as f:
            text = f.read()
        self.assertIn("\n  dir: audit\n", text)
        with open(cfg, "w") as f:
            f.write(text.replace("\n  dir: audit\n", "\n  dir: %s/log\n" % pvc))
        proc, log = self.serve("restricted", setpriv, dev)
        line = wait_for_line(log, proc, r'"msg":"serving certificate issued by the signer"')
        self.assertIsNotNone(line, open(log).read())
        text = open(log).read()
        self.assertIn('"msg":"sandbox: not started as root: keeping the uid, no chroot",'
                      '"uid":"%d"' % uid, text)
        self.assertEqual(os.stat(os.path.join(pvc, "log")).st_uid, uid)
        self.assertRegex(text, r'"proc":"signer".*seccomp filter installed')
        self.assert_stops(proc, log)


if __name__ == "__main__":
    unittest.main()
