#!/usr/bin/python3
"""Multicluster (issue 7 item 5): the ClusterID metadata istio-agent sends (gRPC key
"ClusterID", lowercased on the wire) picks the cluster whose authenticators check the
token, as Istio's KubeJWTAuthenticator does. One `hsmca serve` with three clusters:

  east  (local, auth.cluster_id): the dev JWT issuer, TokenReview on stub A;
  west  (auth.clusters): an OIDC issuer found by discovery (oidc_issuer.py, its own keys
        and CA, fetched by the supervisor), TokenReview on stub B (k8s_stub.py);
  south (auth.clusters): a JWKS file whose issuer URL is the local one's (Kubernetes'
        default issuer is the same in every cluster) with keys of its own.

A token of one cluster passes only with that cluster's ClusterID; no ClusterID means the
local cluster; an unknown ClusterID is UNAUTHENTICATED naming it (never the token); a
TokenReview goes to the caller's cluster's API server only, and a cache entry of one
cluster is no hit for another; client-certificate renewals ignore ClusterID; the signer
binds a west token with west's keys (the intent says "bound":"jwt"). The front end's
seccomp filter is on throughout."""
import json
import os
import shutil
import tempfile
import unittest

import grpc
from cryptography import x509

import hsmca_client as hc
from hsmca_harness import TMP, DevServer
from k8s_stub import Stub
from oidc_issuer import OidcIssuer, SigningKey, compact, projected_claims
from test_audit_log import read_log, wait_log
from test_crash import audit_verify
from test_ztunnel import struct_string

DEV_ISSUER = "https://hsmca.dev.local"  # cli/dev_jwt.h DEV_JWT_ISSUER


def uris(pem):
    cert = x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.UniformResourceIdentifier)


class MulticlusterTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="multicluster.", dir=TMP)
        os.chmod(cls.tmp, 0o755)
        for d in ("stub-a", "stub-b"):
            os.mkdir(os.path.join(cls.tmp, d))
        cls.stub_a = Stub(os.path.join(cls.tmp, "stub-a"))
        cls.stub_b = Stub(os.path.join(cls.tmp, "stub-b"))
        kc_a = cls.stub_a.kubeconfig(os.path.join(cls.tmp, "kubeconfig-a"))
        kc_b = cls.stub_b.kubeconfig(os.path.join(cls.tmp, "kubeconfig-b"))
        cls.west = OidcIssuer(os.path.join(cls.tmp, "west-issuer"))
        cls.west.add_key("west-1")
        cls.south_key = SigningKey("south-1")
        south_jwks = os.path.join(cls.tmp, "south-jwks.json")
        with open(south_jwks, "w") as f:
            json.dump({"keys": [cls.south_key.jwk()]}, f)
        for d in ("stub-a", "stub-b", "west-issuer"):
            os.chmod(os.path.join(cls.tmp, d), 0o755)

        def edit(text):
            auth = ("auth:\n  chain: [client_cert, jwt, tokenreview]\n"
                    "  cluster_id: east\n"
                    "  trusted_node_accounts: [istio-system/ztunnel]\n"
                    "  clusters:\n"
                    "    - id: west\n"
                    "      jwt:\n"
                    "        issuer: %s\n"
                    "        discovery: true\n"
                    "        ca_bundle: %s\n"
                    "      tokenreview:\n"
                    "        kubeconfig: %s\n"
                    "    - id: south\n"
                    "      jwt: {issuer: \"%s\", jwks_file: %s}\n"
                    "  tokenreview:\n    kubeconfig: %s\n    timeout: 3s\n"
                    % (cls.west.url, cls.west.ca_path, kc_b, DEV_ISSUER, south_jwks, kc_a))
            assert "auth:\n" in text
            return text.replace("auth:\n", auth, 1)
        cls.server = DevServer("ec-p256", name="multicluster", edit_config=edit)
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.stub_a.stop()
        cls.stub_b.stop()
        cls.west.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def create(self, token, cluster=None, ns="default", sa="sleep", client=None,
               impersonate=None):
        csr = hc.make_csr(hc.make_key(), uris=["spiffe://cluster.local/ns/%s/sa/%s" % (ns, sa)])
        meta = struct_string("ImpersonatedIdentity", impersonate) if impersonate else None
        md = []
        if token is not None:
            md.append(("authorization", "Bearer " + token))
        if cluster is not None:
            md.append(("clusterid", cluster))
        c = client or self.server.client
        return hc.decode_response(c.call(hc.encode_request(csr, metadata=meta), metadata=md,
                                         timeout=20))

    def refused(self, token, cluster=None, ns="default", sa="sleep",
                code=grpc.StatusCode.UNAUTHENTICATED):
        with self.assertRaises(grpc.RpcError) as cm:
            self.create(token, cluster, ns, sa)
        e = cm.exception
        self.assertEqual(e.code(), code, e.details())
        self.assertNotIn(token, e.details() or "")
        return e.details()

    def west_token(self, ns="default", sa="sleep"):
        return self.west.token(projected_claims(self.west.url, ns=ns, sa=sa))

    def south_token(self, ns="default", sa="sleep"):
        key = self.south_key
        hdr = {"alg": key.alg, "typ": "JWT", "kid": key.kid}
        return compact(hdr, projected_claims(DEV_ISSUER, ns=ns, sa=sa), key.sign)

    def test_west_token_needs_west(self):
        tok = self.west_token("prod", "web")
        chain = self.create(tok, "west", "prod", "web")
        self.assertEqual(uris(chain[0]), ["spiffe://cluster.local/ns/prod/sa/web"])
        # The same token as the local cluster's (no ClusterID, or its id): refused.
        for cluster in (None, "east"):
            with self.subTest(cluster=cluster):
                why = self.refused(tok, cluster, "prod", "web")
                self.assertIn("jwt:", why)
        # The signer verified it again with west's keys (identity binding).
        serial = "%x" % x509.load_pem_x509_certificate(chain[0].encode()).serial_number
        intents = [e for e in read_log(self.server)
                   if e["kind"] == "issue-intent" and e["serial"].lstrip("0") == serial]
        self.assertEqual(len(intents), 1, intents)
        self.assertEqual(intents[0].get("bound"), "jwt", intents[0])
        self.assertEqual(intents[0].get("cluster"), "west", intents[0])
        # a local cluster's bound intent names no cluster, and the log verifies
        local = self.create(self.server.token(), "east")
        serial = "%x" % x509.load_pem_x509_certificate(local[0].encode()).serial_number
        intent = [e for e in read_log(self.server)
                  if e["kind"] == "issue-intent" and e["serial"].lstrip("0") == serial][0]
        self.assertEqual(intent.get("bound"), "jwt", intent)
        self.assertNotIn("cluster", intent)
        wait_log(self.server, lambda es: sum(e["kind"] == "issue-result" for e in es) >= 3)
        rc, out = audit_verify(os.path.join(self.server.dir, "audit"))
        self.assertEqual(rc, 0, out)

    def test_same_issuer_url_other_keys(self):
        """south's issuer URL is the local one's: only the keys tell them apart."""
        tok = self.south_token()
        chain = self.create(tok, "south")
        self.assertEqual(uris(chain[0]), ["spiffe://cluster.local/ns/default/sa/sleep"])
        self.refused(tok)  # as the local cluster's
        self.refused(tok, "west")
        # and the local cluster's token is not south's, nor west's
        local = self.server.token()
        self.create(local)
        self.create(local, "east")
        self.refused(local, "south")
        self.refused(local, "west")

    def test_unknown_cluster_refused_with_reason(self):
        tok = self.west_token()
        why = self.refused(tok, "nope")
        self.assertIn('client claims to be in cluster "nope"', why)
        self.assertIn('local cluster "east"', why)
        self.assertIn("[west south]", why)
        why = self.refused(tok, "no/pe")  # not a cluster name: not echoed
        self.assertIn("not a cluster name", why)
        self.assertNotIn("no/pe", why)
        # An unknown cluster asks no API server.
        self.stub_b.set("tr-unknown-cluster", "good", ns="prod", sa="web")
        self.refused("tr-unknown-cluster", "nope", "prod", "web")
        self.assertEqual(self.stub_a.count("tr-unknown-cluster"), 0)
        self.assertEqual(self.stub_b.count("tr-unknown-cluster"), 0)

    def test_tokenreview_goes_to_the_callers_cluster(self):
        tok = "tr-west-only"
        self.stub_b.set(tok, "good", ns="prod", sa="web")
        chain = self.create(tok, "west", "prod", "web")
        self.assertEqual(uris(chain[0]), ["spiffe://cluster.local/ns/prod/sa/web"])
        self.assertEqual(self.stub_b.count(tok), 1)
        self.assertEqual(self.stub_a.count(tok), 0)
        self.create(tok, "west", "prod", "web")  # west's cache: no call
        self.assertEqual(self.stub_b.count(tok), 1)
        # west's positive answer is no cache hit for the local cluster: A is asked, says no
        self.refused(tok, None, "prod", "web")
        self.assertEqual(self.stub_a.count(tok), 1)
        self.assertEqual(self.stub_b.count(tok), 1)
        # south has no tokenreview: its opaque token is refused without any call
        why = self.refused(tok, "south", "prod", "web")
        self.assertIn("no tokenreview authenticator", why)
        self.assertEqual(self.stub_a.count(tok) + self.stub_b.count(tok), 2)

    def test_local_cache_entry_is_no_hit_for_west(self):
        tok = "tr-east-only"
        self.stub_a.set(tok, "good", ns="prod", sa="api")
        self.create(tok, None, "prod", "api")
        self.create(tok, "east", "prod", "api")  # cached: the local cluster by name
        self.assertEqual(self.stub_a.count(tok), 1)
        self.refused(tok, "west", "prod", "api")  # B does not know it
        self.assertEqual(self.stub_b.count(tok), 1)
        self.assertEqual(self.stub_a.count(tok), 1)

    def test_ztunnel_pods_of_its_own_cluster(self):
        """ztunnel of west impersonates a pod on its node: the pods are read from west's
        API server (stub B) only; the same pods in the local cluster do not count."""
        tok = "zt-west-node-1"
        self.stub_b.set(tok, "good", ns="istio-system", sa="ztunnel", pod_name="zt-w1",
                        pod_uid="uid-zw1")
        self.stub_b.add_pod("istio-system", "zt-w1", "uid-zw1", "node-w1", "ztunnel")
        self.stub_b.add_pod("shop", "cart-1", "uid-c1", "node-w1", "cart")
        self.stub_a.add_pod("shop", "pay-1", "uid-p1", "node-w1", "pay")  # local only
        a_calls = self.stub_a.pod_calls
        want = "spiffe://cluster.local/ns/shop/sa/cart"
        chain = self.create(tok, "west", "shop", "cart", impersonate=want)
        self.assertEqual(uris(chain[0]), [want])
        self.assertEqual(self.stub_b.pod_calls, 2)
        with self.assertRaises(grpc.RpcError) as cm:
            self.create(tok, "west", "shop", "pay",
                        impersonate="spiffe://cluster.local/ns/shop/sa/pay")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn("no running pod of service account shop/pay on node node-w1",
                      cm.exception.details())
        self.assertEqual(self.stub_a.pod_calls, a_calls)

    def test_client_certificate_ignores_cluster_id(self):
        key = hc.make_key()
        chain = self.create(self.server.token(), None)
        chain = self.server.client.create(
            hc.make_csr(key, uris=["spiffe://cluster.local/ns/default/sa/sleep"]),
            self.server.token())
        renewer = hc.Client(self.server.addr, self.server.root,
                            "".join(chain[:-1]).encode(), hc.key_pem(key))
        self.addCleanup(renewer.close)
        got = self.create(None, "nope", client=renewer)
        self.assertEqual(uris(got[0]), ["spiffe://cluster.local/ns/default/sa/sleep"])


if __name__ == "__main__":
    unittest.main()
