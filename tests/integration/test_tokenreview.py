#!/usr/bin/python3
"""The Kubernetes TokenReview authenticator (issue 7 item 2) against k8s_stub.py, a local
HTTPS stand-in for the API server, named by a kubeconfig (auth.tokenreview.kubeconfig):
a token the JWT authenticator refuses goes to TokenReview; a good review yields the
certificate of spiffe://cluster.local/ns/<ns>/sa/<sa>; the refused shapes are
UNAUTHENTICATED with the reason; the API server slow, failing or down is UNAVAILABLE
within the timeout (+ slack), while JWT callers are served meanwhile (a TokenReview holds
no completion-queue thread); a second request with the same token makes no call; the
cache is bounded in entries and by the token's own exp. The front end's seccomp filter
is on throughout (it would refuse the socket otherwise)."""
import base64
import json
import os
import shutil
import tempfile
import threading
import time
import unittest

import grpc
from cryptography import x509

import hsmca_client as hc
from hsmca_harness import TMP, DevServer
from k8s_stub import Stub, make_pki
from test_audit_log import wait_log

TIMEOUT_S = 2
CACHE_ENTRIES = 4
MAX_CONCURRENT = 2
SLACK_S = 1.5


def uris(pem):
    cert = x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.UniformResourceIdentifier)


def fake_jwt(exp):
    """A JWT-shaped token (unsigned: only the API server judges it) with an exp claim."""
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return "%s.%s.c2ln" % (enc({"alg": "RS256", "kid": "k8s"}), enc({"exp": exp, "sub": "x"}))


class TokenReviewTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stubdir = tempfile.mkdtemp(prefix="k8s-stub.", dir=TMP)
        cls.stub = Stub(cls.stubdir)
        kubeconfig = cls.stub.kubeconfig(os.path.join(cls.stubdir, "kubeconfig"))
        os.chmod(cls.stubdir, 0o755)

        def edit(text):
            return text.replace("auth:\n", "auth:\n  chain: [client_cert, jwt, tokenreview]\n  tokenreview:\n    kubeconfig: %s\n"
                                "    timeout: %ds\n    cache_entries: %d\n    max_concurrent: %d\n"
                                % (kubeconfig, TIMEOUT_S, CACHE_ENTRIES, MAX_CONCURRENT), 1)
        cls.server = DevServer("ec-p256", name="tokenreview", edit_config=edit)
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.stub.stop()
        shutil.rmtree(cls.stubdir, ignore_errors=True)

    def create(self, token, ns="default", sa="sleep", timeout=20):
        csr = hc.make_csr(hc.make_key(), uris=["spiffe://cluster.local/ns/%s/sa/%s" % (ns, sa)])
        return self.server.client.create(csr, token, timeout=timeout)

    def refused(self, token, ns="default", sa="sleep"):
        with self.assertRaises(grpc.RpcError) as cm:
            self.create(token, ns, sa)
        self.assertNotIn(token, cm.exception.details() or "")
        return cm.exception

    def test_good_token_then_cache_hit(self):
        tok = "tr-good-opaque-token"
        self.stub.set(tok, "good", ns="prod", sa="web", pod_name="web-7d9f", pod_uid="1f2e")
        chain = self.create(tok, "prod", "web")
        self.assertEqual(uris(chain[0]), ["spiffe://cluster.local/ns/prod/sa/web"])
        self.assertEqual(self.stub.count(tok), 1)
        chain = self.create(tok, "prod", "web")  # from the cache: no call
        self.assertEqual(uris(chain[0]), ["spiffe://cluster.local/ns/prod/sa/web"])
        self.assertEqual(self.stub.count(tok), 1)

    def test_identity_is_the_reviews(self):
        tok = "tr-good-other-csr"
        self.stub.set(tok, "good", ns="prod", sa="web")
        e = self.refused(tok, "prod", "admin")  # the CSR asks for another account
        self.assertEqual(e.code(), grpc.StatusCode.PERMISSION_DENIED, e.details())

    def test_refused_shapes(self):
        cases = [("tr-unauth", "unauthenticated", {}, "tokenreview: not authenticated"),
                 ("tr-group", "wrong_group", {}, "system:serviceaccounts"),
                 ("tr-user", "bad_username", {}, "username is not system:serviceaccount"),
                 ("tr-user2", "bad_username", {"username": "system:serviceaccount:Bad_NS:x"},
                  "username is not system:serviceaccount"),
                 ("tr-aud", "no_audiences", {}, "status.audiences")]
        for tok, kind, kw, why in cases:
            with self.subTest(kind=kind, kw=kw):
                self.stub.set(tok, kind, **kw)
                e = self.refused(tok)
                self.assertEqual(e.code(), grpc.StatusCode.UNAUTHENTICATED, e.details())
                self.assertIn(why, e.details())
                self.assertEqual(self.stub.count(tok), 1)
        # Refusals are not cached, and the signing log names the authenticator.
        self.refused("tr-unauth")
        self.assertEqual(self.stub.count("tr-unauth"), 2)
        def denied(es):
            return [e for e in es if e.get("kind") == "frontend-deny"
                    and e.get("authenticator") == "tokenreview" and e.get("code") == "UNAUTHENTICATED"]
        self.assertGreaterEqual(len(denied(wait_log(self.server, lambda es: len(denied(es)) >= 6))), 6)

    def test_server_error_is_unavailable(self):
        for tok, kind in (("tr-500", "http500"), ("tr-garbage", "garbage")):
            with self.subTest(kind=kind):
                self.stub.set(tok, kind)
                e = self.refused(tok)
                self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())

    def test_own_credentials_refused_is_unavailable(self):
        """The API server refusing hsmca's own token (401) is not the caller's fault."""
        self.stub.set("tr-own", "good")
        self.stub.reviewer_token = "rotated-away"
        try:
            e = self.refused("tr-own")
        finally:
            self.stub.reviewer_token = "hsmca-reviewer-token"
        self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        self.assertIn("refused hsmca's own credentials (HTTP 401)", e.details())
        self.create("tr-own")  # and works again, not cached as a refusal

    def test_slow_api_server_unavailable_and_jwt_callers_served(self):
        results = {}

        def slow(i):
            tok = "tr-slow-%d" % i
            self.stub.set(tok, "slow", delay=TIMEOUT_S + 8)
            t0 = time.monotonic()
            try:
                self.create(tok, timeout=30)
                results[i] = ("OK", time.monotonic() - t0, "")
            except grpc.RpcError as e:
                results[i] = (e.code(), time.monotonic() - t0, e.details())

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(MAX_CONCURRENT)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        self.server.issue()  # a JWT caller while every TokenReview thread waits
        jwt_took = time.monotonic() - t0
        for t in threads:
            t.join()
        print("slow API server: %s; a JWT caller meanwhile: %.2f s" % (results, jwt_took))
        self.assertLess(jwt_took, TIMEOUT_S)
        for code, took, details in results.values():
            self.assertEqual(code, grpc.StatusCode.UNAVAILABLE, details)
            self.assertIn("did not answer within", details)
            self.assertLess(took, TIMEOUT_S + SLACK_S)

    def test_queue_full_is_unavailable_at_once(self):
        """max_concurrent threads and 4 waiting per thread: the calls beyond are refused
        at once; every answer comes within twice the timeout (+ slack)."""
        n = MAX_CONCURRENT * 5 + 3
        results = []
        lock = threading.Lock()

        def one(i):
            tok = "tr-flood-%d" % i
            self.stub.set(tok, "slow", delay=TIMEOUT_S + 8)
            t0 = time.monotonic()
            try:
                self.create(tok, timeout=30)
                r = ("OK", 0, "")
            except grpc.RpcError as e:
                r = (e.code(), time.monotonic() - t0, e.details())
            with lock:
                results.append(r)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertTrue(all(r[0] == grpc.StatusCode.UNAVAILABLE for r in results), results)
        at_once = [r for r in results if "too many calls waiting" in r[2]]
        self.assertGreaterEqual(len(at_once), 1, results)
        self.assertTrue(all(r[1] < 1.0 for r in at_once), at_once)
        self.assertTrue(all(r[1] < 2 * TIMEOUT_S + SLACK_S for r in results), results)
        calls = sum(self.stub.count("tr-flood-%d" % i) for i in range(n))
        self.assertLessEqual(calls, MAX_CONCURRENT * 5)  # the refused ones were never sent

    def test_cache_bounded_in_entries(self):
        toks = ["tr-bound-%d" % i for i in range(CACHE_ENTRIES + 2)]
        for t in toks:
            self.stub.set(t, "good")
            self.create(t)
        before = sum(self.stub.count(t) for t in toks)
        self.assertEqual(before, len(toks))
        for t in toks:
            self.create(t)
        again = sum(self.stub.count(t) for t in toks) - before
        # At most CACHE_ENTRIES were held: at least two of them were reviewed again.
        self.assertGreaterEqual(again, 2)

    def test_cache_ends_at_token_exp(self):
        tok = fake_jwt(int(time.time()) + 3)
        self.stub.set(tok, "good")
        self.create(tok)
        self.create(tok)
        self.assertEqual(self.stub.count(tok), 1)
        time.sleep(4.2)
        self.create(tok)  # the cached answer ended at the token's exp
        self.assertEqual(self.stub.count(tok), 2)

    def test_zz_api_server_down(self):
        """Last (it stops the stub): connection refused is UNAVAILABLE, at once."""
        self.stub.stop()
        t0 = time.monotonic()
        e = self.refused("tr-down")
        took = time.monotonic() - t0
        self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        self.assertIn("tokenreview", e.details())
        self.assertLess(took, TIMEOUT_S + SLACK_S)
        self.stub.stop = lambda: None
        self.server.issue()  # JWT callers are unaffected


class WrongCATests(unittest.TestCase):
    """A kubeconfig whose CA did not issue the API server's certificate: nothing is
    sent (the TLS handshake fails), the caller gets UNAVAILABLE."""

    @classmethod
    def setUpClass(cls):
        cls.stubdir = tempfile.mkdtemp(prefix="k8s-stub-ca.", dir=TMP)
        cls.stub = Stub(cls.stubdir)
        other = tempfile.mkdtemp(prefix="other-ca.", dir=cls.stubdir)
        cls.stub.ca = make_pki(other)[0]  # the kubeconfig names another CA
        kubeconfig = cls.stub.kubeconfig(os.path.join(cls.stubdir, "kubeconfig"))
        os.chmod(cls.stubdir, 0o755)
        cls.server = DevServer("ec-p256", name="tokenreview-ca", edit_config=lambda t: t.replace(
            "auth:\n", "auth:\n  chain: [client_cert, jwt, tokenreview]\n  tokenreview:\n    kubeconfig: %s\n    timeout: %ds\n"
            % (kubeconfig, TIMEOUT_S), 1))
        cls.server.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.stub.stop()
        shutil.rmtree(cls.stubdir, ignore_errors=True)

    def test_wrong_ca_is_unavailable_and_sends_nothing(self):
        self.stub.set("tr-ca", "good")
        csr = hc.make_csr(hc.make_key(), uris=["spiffe://cluster.local/ns/default/sa/sleep"])
        with self.assertRaises(grpc.RpcError) as cm:
            self.server.client.create(csr, "tr-ca")
        e = cm.exception
        self.assertEqual(e.code(), grpc.StatusCode.UNAVAILABLE, e.details())
        self.assertIn("TLS with the API server failed", e.details())
        self.assertEqual(self.stub.count("tr-ca"), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
