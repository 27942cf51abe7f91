#!/usr/bin/python3
"""docs/ISTIO.md's commands, as written: every fenced sh block after an
`<!-- istio-doc: NAME -->` comment runs here with only the CA's address, config path,
directories and user names put in (a command in the guide that does not work as
written fails here). render: the demo overlay's serving names; serving-san: openssl
checks a running hsmca's serving certificate for the name istio-agent checks (and a
name it lacks fails); istiod-csr, approve, fetch: istiod's intermediate requested,
approved by two other members of admin.group, fetched, its CRL made, verified, and
the cacerts Secret rendered offline."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from hsmca_harness import BIN, TMP, DevServer

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAMES = {"render", "serving-san", "istiod-csr", "approve", "fetch"}
CONFIGS = {"multicluster-config"}


def doc_blocks(lang="sh"):
    with open(os.path.join(SRC, "docs", "ISTIO.md")) as f:
        text = f.read()
    found = re.findall(r"^<!-- istio-doc: ([a-z-]+) -->\n```%s\n(.*?)^```$" % lang, text,
                       re.M | re.S)
    return dict(found)


def merged(base, extra):
    """base with extra's mappings merged in, key by key (extra's scalars and lists win)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merged(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) \
            else v
    return out


def run_block(script, cwd, timeout=120):
    """As a reader's shell runs it: each command must succeed; a pipeline's status is
    its last command's."""
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def with_bin(script):
    """`hsmca ` at the start of a command is the binary under test."""
    return re.sub(r"(^|\| |-- )hsmca ", lambda m: m.group(1) + BIN + " ", script, flags=re.M)


class IstioDocTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.blocks = doc_blocks()

    def test_the_marked_blocks_are_there(self):
        self.assertEqual(set(self.blocks), NAMES)
        self.assertEqual(set(doc_blocks("yaml")), CONFIGS)

    def test_multicluster_config(self):
        """The guide's multicluster keys over the dev CA's config pass config check, with
        the files they name (west's JWKS and kubeconfig) in place."""
        import base64
        import yaml
        block = doc_blocks("yaml")["multicluster-config"]
        work = tempfile.mkdtemp(prefix="istiodoc.", dir=TMP)
        self.addCleanup(shutil.rmtree, work, True)
        subprocess.run([BIN, "dev", "init", "--dir", work], check=True, capture_output=True,
                       timeout=120)
        clusters = os.path.join(work, "clusters")
        os.makedirs(clusters)
        shutil.copy(os.path.join(work, "dev-jwks.json"), os.path.join(clusters, "west-jwks.json"))
        with open(os.path.join(work, "root-cert.pem"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        with open(os.path.join(clusters, "west.kubeconfig"), "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: west\n"
                    "clusters:\n- name: west\n  cluster:\n    server: https://west.example:6443\n"
                    "    certificate-authority-data: %s\n"
                    "users:\n- name: hsmca\n  user:\n    token: a-token\n"
                    "contexts:\n- name: west\n  context: {cluster: west, user: hsmca}\n" % ca)
        with open(os.path.join(work, "hsmca.yaml")) as f:
            base = yaml.safe_load(f)
        extra = yaml.safe_load(block.replace("/etc/hsmca/clusters/", clusters + "/"))
        self.assertEqual(extra["auth"]["clusters"][0]["id"], "west")
        path = os.path.join(work, "multicluster.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(merged(base, extra), f)
        r = subprocess.run([BIN, "config", "check", path], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # The same keys with the remote cluster's id equal to the local one are refused.
        extra["auth"]["clusters"][0]["id"] = "east"
        with open(path, "w") as f:
            yaml.safe_dump(merged(base, extra), f)
        r = subprocess.run([BIN, "config", "check", path], capture_output=True, text=True,
                           timeout=60)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_render(self):
        r = run_block(self.blocks["render"], SRC)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dns_names: [hsmca.hsmca.svc", r.stdout)
        self.assertIn("trust_domain: cluster.local", r.stdout)

    def test_serving_san(self):
        block = self.blocks["serving-san"]
        self.assertIn("localhost:15012", block)
        srv = DevServer(name="istiodoc",
                        server_settings=["dns_names: [hsmca.hsmca.svc, hsmca.hsmca.svc.cluster.local]"])
        try:
            srv.wait_ready()
            work = tempfile.mkdtemp(prefix="istiodoc.", dir=TMP)
            self.addCleanup(shutil.rmtree, work, True)
            shutil.copy(os.path.join(srv.dir, "root-cert.pem"), work)
            script = block.replace("localhost:15012", srv.addr)
            r = run_block(script, work)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("Verification: OK", r.stdout)
            self.assertIn("Verified peername: hsmca.hsmca.svc", r.stdout)
            # A name the certificate does not have fails the same command.
            r = run_block(script.replace("hsmca.hsmca.svc", "istiod.istio-system.svc"), work)
            self.assertNotEqual(r.returncode, 0, r.stdout)
        finally:
            srv.stop()


@unittest.skipUnless(os.geteuid() == 0, "needs root: the approvers are unix users")
class IstioDocIntermediateTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import test_admin
        cls.admin = test_admin
        test_admin.make_users()
        try:
            cls.srv = test_admin.start_server("istiodocica")
        except Exception:
            test_admin.remove_users()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.admin.remove_users()

    def script(self, name):
        text = doc_blocks()[name]
        text = text.replace("--config hsmca.yaml", "--config " + self.srv.config)
        text = re.sub(r"sudo -u (\w+) hsmca ",
                      lambda m: "runuser -u %s -- hsmca " % self.admin.user(m.group(1)), text)
        return with_bin(text)

    def test_request_approve_fetch(self):
        work = tempfile.mkdtemp(prefix="istiodoc.", dir=TMP)
        self.addCleanup(shutil.rmtree, work, True)
        os.chmod(work, 0o1777)  # the approvers write cacerts/ here, as in a shared directory
        r = run_block(self.script("istiod-csr"), work)
        self.assertEqual(r.returncode, 0, r.stderr)
        os.chmod(os.path.join(work, "istiod.csr"), 0o644)
        r = run_block(self.script("approve"), work)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"request \d+: pending")
        r = run_block(self.script("fetch"), work)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cacerts/ca-cert.pem: OK", r.stdout)
        with open(os.path.join(work, "cacerts-secret.yaml")) as f:
            secret = f.read()
        for key in ("ca-cert.pem", "ca-key.pem", "root-cert.pem", "cert-chain.pem",
                    "ca-crl.pem"):
            self.assertRegex(secret, r"\n  %s: \S+" % re.escape(key))
        self.assertIn("namespace: istio-system", secret)


if __name__ == "__main__":
    unittest.main()
