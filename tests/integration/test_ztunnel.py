#!/usr/bin/python3
"""ztunnel impersonation (issue 7 item 6) against k8s_stub.py: a caller whose service
account is in auth.trusted_node_accounts (Istio's CA_TRUSTED_NODE_ACCOUNTS) asks, with
the request metadata's ImpersonatedIdentity, for another identity's certificate; it gets
it only when the API server shows the caller's pod (name and uid from its TokenReview)
on a node where a Running pod of the requested service account is. The CSR is shaped as
ztunnel's: no subject, one non-critical URI SAN of the impersonated identity."""
import shutil
import tempfile
import os
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import TMP, DevServer
from k8s_stub import Stub
from test_audit_log import wait_log
from test_tokenreview import uris

TD = "spiffe://cluster.local"
ZT = "zt-node-a-token"


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _ld(field, data):
    return bytes([(field << 3) | 2]) + _varint(len(data)) + data


def struct_string(key, value):
    """google.protobuf.Struct {fields: {key: Value{string_value: value}}} in wire format."""
    entry = _ld(1, key.encode()) + _ld(2, _ld(3, value.encode()))
    return _ld(1, entry)


class ZtunnelTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stubdir = tempfile.mkdtemp(prefix="k8s-stub.", dir=TMP)
        cls.stub = Stub(cls.stubdir)
        kubeconfig = cls.stub.kubeconfig(os.path.join(cls.stubdir, "kubeconfig"))
        os.chmod(cls.stubdir, 0o755)
        s = cls.stub
        s.set(ZT, "good", ns="istio-system", sa="ztunnel", pod_name="ztunnel-a", pod_uid="uid-za")
        s.set("zt-stale", "good", ns="istio-system", sa="ztunnel", pod_name="ztunnel-a",
              pod_uid="uid-old")
        s.set("zt-nopod", "good", ns="istio-system", sa="ztunnel")
        s.set("web-token", "good", ns="prod", sa="web", pod_name="web-1", pod_uid="uid-w1")
        s.add_pod("istio-system", "ztunnel-a", "uid-za", "node-a", "ztunnel")
        s.add_pod("prod", "web-1", "uid-w1", "node-a", "web")
        s.add_pod("prod", "db-1", "uid-d1", "node-b", "db")
        s.add_pod("prod", "job-1", "uid-j1", "node-a", "batch", phase="Succeeded")

        def edit(text):
            return text.replace("auth:\n", "auth:\n  chain: [client_cert, jwt, tokenreview]\n"
                                "  trusted_node_accounts: [istio-system/ztunnel]\n"
                                "  tokenreview:\n    kubeconfig: %s\n    timeout: 2s\n"
                                % kubeconfig, 1)
        cls.server = DevServer("ec-p256", name="ztunnel", edit_config=edit)
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.stub.stop()
        shutil.rmtree(cls.stubdir, ignore_errors=True)

    def impersonate(self, token, identity, csr_uri=None):
        csr = hc.make_csr(hc.make_key(), uris=[csr_uri or identity])
        body = hc.encode_request(csr, metadata=struct_string("ImpersonatedIdentity", identity))
        return self.server.client.create_raw(body, token)

    def refused(self, token, identity, code=grpc.StatusCode.PERMISSION_DENIED, csr_uri=None):
        with self.assertRaises(grpc.RpcError) as cm:
            self.impersonate(token, identity, csr_uri)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception.details()

    def test_right_node(self):
        want = TD + "/ns/prod/sa/web"
        chain = self.impersonate(ZT, want)
        self.assertEqual(uris(chain[0]), [want])
        who = TD + "/ns/istio-system/sa/ztunnel as " + want
        es = wait_log(self.server, lambda es: any(e.get("requester") == who for e in es))
        self.assertTrue(any(e.get("requester") == who for e in es), "no audit entry for " + who)
        # Reported under its own authenticator and unbound: the signer cannot check a
        # node's right to impersonate (frontend/fe_request.c, signer/signer_bind.c).
        intent = [e for e in es if e.get("requester") == who and e["kind"] == "issue-intent"][0]
        self.assertEqual(intent.get("authenticator"), "impersonation")
        self.assertNotIn("bound", intent)

    def test_own_identity_without_impersonation(self):
        csr = hc.make_csr(hc.make_key(), uris=[TD + "/ns/istio-system/sa/ztunnel"])
        chain = self.server.client.create(csr, ZT)
        self.assertEqual(uris(chain[0]), [TD + "/ns/istio-system/sa/ztunnel"])

    def test_wrong_node(self):
        why = self.refused(ZT, TD + "/ns/prod/sa/db")
        self.assertIn("no running pod of service account prod/db on node node-a", why)

    def test_not_running(self):
        why = self.refused(ZT, TD + "/ns/prod/sa/batch")
        self.assertIn("no running pod", why)

    def test_csr_must_ask_for_the_impersonated_identity(self):
        why = self.refused(ZT, TD + "/ns/prod/sa/web", csr_uri=TD + "/ns/prod/sa/db")
        self.assertNotIn("impersonation", why)

    def test_untrusted_caller(self):
        why = self.refused("web-token", TD + "/ns/prod/sa/db")
        self.assertIn("impersonation: caller %s/ns/prod/sa/web is not a trusted node account" % TD,
                      why)

    def test_not_spiffe(self):
        for bad in ("prod/web", "spiffe://other.td/ns/prod/sa/web", TD + "/ns/prod/sa/web/x",
                    TD + "/ns/Prod/sa/web"):
            with self.subTest(identity=bad):
                why = self.refused(ZT, bad, csr_uri=TD + "/ns/prod/sa/web")
                self.assertIn("not a SPIFFE ID", why)

    def test_recreated_or_podless_caller(self):
        self.assertIn("another uid", self.refused("zt-stale", TD + "/ns/prod/sa/web"))
        self.assertIn("names no pod", self.refused("zt-nopod", TD + "/ns/prod/sa/web"))

    def test_api_down_is_unavailable(self):
        self.impersonate(ZT, TD + "/ns/prod/sa/web")  # the TokenReview is cached
        before = self.stub.pod_calls
        self.stub.pods_error = 503
        try:
            why = self.refused(ZT, TD + "/ns/prod/sa/web", code=grpc.StatusCode.UNAVAILABLE)
        finally:
            self.stub.pods_error = None
        self.assertIn("HTTP 503", why)
        self.assertGreater(self.stub.pod_calls, before)


if __name__ == "__main__":
    unittest.main()
