#!/usr/bin/python3
"""Writes the seed corpora of fuzz_kubeconfig and fuzz_k8sapi (docs/DEVELOPMENT.md "Fuzzing").

  python3 tests/fuzz/seeds_k8s.py            # into tests/fuzz/corpus/{kubeconfig,k8sapi}/

kubeconfig: the kubeconfigs the integration tests' stand-ins write (k8s_stub.Stub,
k8s_api_standin.Standin), and the shapes kubeadm, kind and a service account give.

k8sapi: the answers of the Kubernetes API stand-in (tests/integration/k8s_api_standin.py,
which keeps the API's objects, resourceVersions, paging and Status objects), to the
requests fuzz_k8sapi.c's calls make in its order: two Lease rounds, the namespace list,
the root ConfigMap of up to four namespaces, the ClusterTrustBundle, the Lease's release.
Each answer is written as fuzz_k8sapi.c reads it: a 2-byte status, a 2-byte length, the
body (status 0: no answer)."""
import base64
import json
import os
import re
import struct
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from k8s_api_standin import Standin  # noqa: E402
from k8s_stub import Stub, status_obj  # noqa: E402

ID = "publish-roots-0"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/hsmca-system/leases"
SELECTOR = "istio-injection=enabled,!hsmca.io/skip"
CTB = "/apis/certificates.k8s.io/v1beta1/clustertrustbundles"
CTB_NAME = "istio.io:istiod-ca:root-cert"


def roots_pem():
    """FUZZ_ROOTS of fuzz_k8sapi.c."""
    with open(os.path.join(HERE, "fuzz_k8sapi.c")) as f:
        text = f.read()
    m = re.search(r'#define FUZZ_ROOTS \\\n((?:\s*"[^"]*"\s*\\?\n)+)', text)
    return "".join(re.findall(r'"([^"]*)"', m.group(1))).replace("\\n", "\n")


class Client:
    """What fuzz_k8sapi.c's calls send, answered by the stand-in; records the answers."""

    def __init__(self, standin, who="a"):
        self.s, self.who, self.answers = standin, who, []
        self.observed, self.observed_at = None, 0


    def call(self, verb, path, body=None):
        with self.s.lock:
            code, obj = self.s.serve(self.who, verb, path, json.loads(json.dumps(body)) if body else None)
        self.answers.append((code, json.dumps(obj).encode()))
        return code, obj

    def lease_step(self, now, now_s):
        code, obj = self.call("GET", LEASE + "/hsmca-publish-roots")
        spec = obj.get("spec", {}) if code == 200 else {}
        holder = spec.get("holderIdentity", "")
        record = (holder, spec.get("renewTime", ""))
        if record != self.observed:
            self.observed, self.observed_at = record, now
        if holder and holder != ID and now - self.observed_at < (spec.get("leaseDurationSeconds") or 15):
            return  # another holder, not expired yet (on our clock)
        if code == 404:
            self.call("POST", LEASE, {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "hsmca-publish-roots", "namespace": "hsmca-system"},
                "spec": {"holderIdentity": ID, "leaseDurationSeconds": 15, "acquireTime": now_s,
                         "renewTime": now_s, "leaseTransitions": 0}})
        elif code == 200:
            spec = obj.setdefault("spec", {})
            spec.update({"holderIdentity": ID, "leaseDurationSeconds": 15, "renewTime": now_s})
            self.call("PUT", LEASE + "/hsmca-publish-roots", obj)

    def namespaces(self):
        names, cont = [], ""
        while True:
            path = "/api/v1/namespaces?limit=500&labelSelector=" + urllib.parse.quote(SELECTOR, safe="-._~")
            code, obj = self.call("GET", path + ("&continue=" + cont if cont else ""))
            if code != 200:
                return names
            for it in obj.get("items", []):
                md = it.get("metadata", {})
                if "deletionTimestamp" not in md and it.get("status", {}).get("phase") != "Terminating":
                    names.append(md["name"])
            cont = obj.get("metadata", {}).get("continue", "")
            if not cont:
                return names

    def put(self, path, coll, new_obj, edit):
        for _ in range(5):
            code, obj = self.call("GET", path)
            if code == 404:
                code, _ = self.call("POST", coll, new_obj)
            elif code == 200 and edit(obj):
                code, _ = self.call("PUT", path, obj)
            else:
                return
            if code != 409:
                return

    def configmap(self, ns, pem):
        def edit(o):
            if o.get("data", {}).get("root-cert.pem") == pem:
                return False
            o.setdefault("data", {})["root-cert.pem"] = pem
            return True
        coll = "/api/v1/namespaces/%s/configmaps" % ns
        self.put(coll + "/istio-ca-root-cert", coll, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "istio-ca-root-cert", "namespace": ns,
                         "labels": {"istio.io/config": "true"}},
            "data": {"root-cert.pem": pem}}, edit)

    def ctb(self, pem):
        def edit(o):
            if o.get("spec", {}).get("trustBundle") == pem:
                return False
            o.setdefault("spec", {}).update({"signerName": "istio.io/istiod-ca", "trustBundle": pem})
            return True
        self.put(CTB + "/" + CTB_NAME, CTB, {
            "apiVersion": "certificates.k8s.io/v1beta1", "kind": "ClusterTrustBundle",
            "metadata": {"name": CTB_NAME},
            "spec": {"signerName": "istio.io/istiod-ca", "trustBundle": pem}}, edit)

    def release(self):
        code, obj = self.call("GET", LEASE + "/hsmca-publish-roots")
        if code == 200 and obj.get("spec", {}).get("holderIdentity") == ID:
            obj["spec"].update({"holderIdentity": "", "leaseDurationSeconds": 1})
            self.call("PUT", LEASE + "/hsmca-publish-roots", obj)

    def run(self, pem):
        self.lease_step(1000, "2026-11-28T20:00:00.000000Z")
        self.lease_step(1020, "2026-11-28T20:00:20.000000Z")
        for ns in self.namespaces()[:4]:
            self.configmap(ns, pem)
        self.ctb(pem)
        self.release()
        return b"".join(struct.pack(">HH", c, len(b)) + b for c, b in self.answers)


def s_status(code, reason, message):
    return json.dumps(status_obj(code, reason, message)).encode()


def k8sapi_seeds(tmp, pem):
    out = {}
    os.makedirs(os.path.join(tmp, "standin"))
    s = Standin(os.path.join(tmp, "standin"), page_size=2)
    try:
        for ns, labels, dying in (("default", {"istio-injection": "enabled"}, False),
                                  ("prod", {"istio-injection": "enabled"}, False),
                                  ("shop", {"istio-injection": "enabled"}, False),
                                  ("leaving", {"istio-injection": "enabled"}, True),
                                  ("skipped", {"istio-injection": "enabled", "hsmca.io/skip": "1"}, False),
                                  ("kube-system", {}, False)):
            s.add_namespace(ns, labels, dying)
        out["first-pass"] = Client(s).run(pem)       # everything created
        out["second-pass"] = Client(s).run(pem)      # everything current: reads only
        s.objects[("configmaps", "prod", "istio-ca-root-cert")]["data"]["root-cert.pem"] = "old"
        s.objects[("clustertrustbundles", "", CTB_NAME)]["spec"]["trustBundle"] = "old"
        s.conflict_next("configmaps", "prod", "istio-ca-root-cert")
        out["update-conflict"] = Client(s).run(pem)  # a stale object, a 409, a retry
        lease = s.objects[("leases", "hsmca-system", "hsmca-publish-roots")]
        lease["spec"]["holderIdentity"] = "publish-roots-1"
        out["lease-other-holder"] = Client(s).run(pem)
        s.lease_down.add("down")
        out["lease-unavailable"] = Client(s, "down").run(pem)
    finally:
        s.stop()
    # Regression (fuzz_k8sapi, 2026-11-28): the Lease, held, is gone at the next round and
    # its create is refused; the holder must let go (k8s_lease_step returned held).
    nf = s_status(404, "NotFound", 'leases.coordination.k8s.io "hsmca-publish-roots" not found')
    lease = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": "hsmca-publish-roots", "namespace": "hsmca-system",
                                     "resourceVersion": "101"},
                        "spec": {"holderIdentity": ID, "leaseDurationSeconds": 15}}).encode()
    forbidden = s_status(403, "Forbidden", 'leases.coordination.k8s.io is forbidden: User '
                         '"system:serviceaccount:hsmca-system:publish-roots" cannot create resource')
    out["regress-lease-recreate-refused"] = b"".join(
        struct.pack(">HH", c, len(b)) + b for c, b in ((404, nf), (201, lease), (404, nf), (403, forbidden)))
    out["no-answers"] = b""
    out["reset"] = struct.pack(">HH", 0, 0)
    return out


def kubeconfig_seeds(tmp):
    out = {}
    os.makedirs(os.path.join(tmp, "stub"))
    os.makedirs(os.path.join(tmp, "standin-kc"))
    st = Stub(os.path.join(tmp, "stub"))
    try:
        with open(st.kubeconfig(os.path.join(tmp, "kc-stub"), server="https://localhost:6443")) as f:
            out["stub-token"] = f.read()
    finally:
        st.stop()
    sa = Standin(os.path.join(tmp, "standin-kc"))
    try:
        with open(sa.kubeconfig(os.path.join(tmp, "kc-standin"), "publisher-token")) as f:
            out["standin-token"] = re.sub(r"https://localhost:\d+", "https://10.96.0.1:443", f.read())
    finally:
        sa.stop()
    ca = base64.b64encode(open(os.path.join(tmp, "stub", "k8s-ca.pem"), "rb").read()).decode()
    cert = base64.b64encode(open(os.path.join(tmp, "stub", "k8s-server.pem"), "rb").read()).decode()
    key = base64.b64encode(open(os.path.join(tmp, "stub", "k8s-server-key.pem"), "rb").read()).decode()
    out["kind-client-cert"] = (
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: %s\n"
        "    server: https://127.0.0.1:41263\n  name: kind-kind\ncontexts:\n- context:\n"
        "    cluster: kind-kind\n    user: kind-kind\n  name: kind-kind\n"
        "current-context: kind-kind\nkind: Config\npreferences: {}\nusers:\n- name: kind-kind\n"
        "  user:\n    client-certificate-data: %s\n    client-key-data: %s\n") % (ca, cert, key)
    out["files-relative"] = (
        "apiVersion: v1\nkind: Config\ncurrent-context: hsmca@prod\nclusters:\n"
        "- name: prod\n  cluster:\n    server: https://api.prod.example:6443/\n"
        "    certificate-authority: ca.crt\n    insecure-skip-tls-verify: false\n"
        "contexts:\n- name: other\n  context: {cluster: none, user: none}\n"
        "- name: hsmca@prod\n  context:\n    cluster: prod\n    user: hsmca\n    namespace: hsmca-system\n"
        "users:\n- name: hsmca\n  user:\n    client-certificate: client.crt\n    client-key: client.key\n")
    out["token-file"] = (
        "apiVersion: v1\nkind: Config\ncurrent-context: sa\nclusters:\n- name: in-cluster\n"
        "  cluster: {server: 'https://kubernetes.default.svc', certificate-authority: ca.crt}\n"
        "contexts:\n- name: sa\n  context: {cluster: in-cluster, user: sa}\n"
        "users:\n- name: sa\n  user: {tokenFile: token}\n")
    out["anonymous-anchors"] = (
        "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster: &c\n"
        "    server: https://[::1]:6443\n    certificate-authority-data: %s\n"
        "contexts:\n- name: a\n  context: {cluster: c}\n- name: b\n  context: *c\n"
        "users: []\n") % ca
    out["exec-plugin"] = (
        "apiVersion: v1\nkind: Config\ncurrent-context: eks\nclusters:\n- name: eks\n  cluster:\n"
        "    server: https://ABCD.gr7.eu-west-1.eks.amazonaws.com\n    certificate-authority-data: %s\n"
        "contexts:\n- name: eks\n  context: {cluster: eks, user: eks}\nusers:\n- name: eks\n  user:\n"
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n"
        "      args: [eks, get-token, --cluster-name, prod]\n") % ca
    out["insecure"] = (
        "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: x\n  cluster:\n"
        "    server: https://10.0.0.1\n    insecure-skip-tls-verify: true\n"
        "contexts:\n- name: x\n  context: {cluster: x, user: x}\nusers:\n- name: x\n  user: {token: abc}\n")
    return {k: v.encode() for k, v in out.items()}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for target, seeds in (("kubeconfig", kubeconfig_seeds(tmp)),
                              ("k8sapi", k8sapi_seeds(tmp, roots_pem()))):
            d = os.path.join(HERE, "corpus", target)
            os.makedirs(d, exist_ok=True)
            for name, data in seeds.items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(data)
            print("%s: %d seeds" % (target, len(seeds)))


if __name__ == "__main__":
    main()
