#!/usr/bin/python3
"""Bearer JWTs checked against keys the supervisor fetched (issue 7 items 1 and 4):
an OIDC issuer found by discovery (tests/integration/oidc_issuer.py, HTTPS with its
own CA), key rotation picked up on an unknown kid, cached keys kept while the issuer
is down, a JWKS file re-read when it is edited, both Kubernetes token shapes, every
refusal UNAUTHENTICATED with its reason, and the chain's refusal naming each
authenticator. Real `hsmca serve` (SoftHSM, signer, sandboxed front end)."""
import json
import os
import re
import time
import unittest

import grpc

import hsmca_client as hc
from hsmca_harness import DevServer
from oidc_issuer import OidcIssuer, SigningKey, legacy_claims, projected_claims, JWKS_PATH

SLEEP_ID = "spiffe://cluster.local/ns/default/sa/sleep"
AUTH_BLOCK = re.compile(r"auth:\n  jwt:\n(    .*\n)+")


def auth_config(lines):
    """A config edit replacing the dev auth section with lines (under auth:)."""
    def edit(text):
        new, n = AUTH_BLOCK.subn("auth:\n" + "".join("  %s\n" % l for l in lines), text, 1)
        assert n == 1, text
        return new
    return edit


def wait_issued(server, token_fn, timeout=60):
    """Issues with token_fn() until it works (the server coming up, keys arriving)."""
    root_path = os.path.join(server.dir, "root-cert.pem")
    deadline = time.time() + timeout
    while not os.path.exists(root_path) and time.time() < deadline:
        time.sleep(0.2)
    with open(root_path, "rb") as f:
        server.root = f.read()
    last = None
    while time.time() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError("hsmca exited:\n" + server.logtext())
        client = hc.Client(server.addr, server.root)
        try:
            issue(client, token_fn())
            server.client = client
            return client
        except grpc.RpcError as e:
            last = e
            client.close()
            time.sleep(0.3)
    raise RuntimeError("not issuing: %s\n%s" % (last, server.logtext()))


def issue(client, token, uri=SLEEP_ID, timeout=10):
    csr = hc.make_csr(hc.make_key("ec-p256"), uris=[uri])
    return client.create(csr, token, 0, timeout=timeout)


class OidcDiscoveryTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = None
        cls.issuer = OidcIssuer(os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"),
                                             "oidc-%d" % os.getpid()))
        cls.ec = cls.issuer.add_key("ec-1", "EC")
        cls.rsa = cls.issuer.add_key("rsa-1", "RSA")
        # Like a Kubernetes API server: discovery and JWKS only with a bearer token.
        cls.fetch_token = "fetch-token-%d" % os.getpid()
        cls.issuer.require_token = cls.fetch_token
        token_path = os.path.join(os.path.dirname(cls.issuer.ca_path), "token")
        with open(token_path, "w") as f:
            f.write(cls.fetch_token + "\n")
        cls.server = DevServer(name="oidc", edit_config=auth_config([
            "chain: [client_cert, jwt]",
            "jwt:",
            "  issuer: \"%s\"" % cls.issuer.url,
            "  audiences: [istio-ca]",
            "  discovery: true",
            "  ca_bundle: %s" % cls.issuer.ca_path,
            "  min_refresh: 1s",
            "  refresh: 1h",
            "  fetch_timeout: 3s",
            "  fetch_token_file: %s" % token_path]))
        wait_issued(cls.server, cls.good)

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            cls.server.stop()
        cls.issuer.stop()

    @classmethod
    def good(cls, key=None, **over):
        c = projected_claims(cls.issuer.url)
        c.update(over)
        return cls.issuer.token(c, key or cls.ec)

    def refused(self, token, fragment, code=grpc.StatusCode.UNAUTHENTICATED):
        with self.assertRaises(grpc.RpcError) as cm:
            issue(self.server.client, token)
        err = cm.exception
        self.assertEqual(err.code(), code, err.details())
        self.assertIn(fragment, err.details())
        if token and len(token) > 20:
            for part in token.split("."):
                if len(part) > 8:
                    self.assertNotIn(part, err.details())  # the token is never echoed
        return err.details()

    # --- accepted -------------------------------------------------------------------
    def test_projected_token_es256(self):
        chain = issue(self.server.client, self.good())
        self.assertGreaterEqual(len(chain), 2)

    def test_projected_token_rs256(self):
        issue(self.server.client, self.good(self.rsa))

    def test_projected_token_without_pod(self):
        c = projected_claims(self.issuer.url, pod=None)
        issue(self.server.client, self.issuer.token(c, self.ec))

    def test_legacy_token(self):
        issue(self.server.client, self.issuer.token(legacy_claims(self.issuer.url), self.ec))

    # --- refused ----------------------------------------------------------------------
    def test_expired(self):
        now = int(time.time())
        self.refused(self.good(exp=now - 3600, iat=now - 7200, nbf=now - 7200), "JWT expired")

    def test_not_yet_valid(self):
        now = int(time.time())
        self.refused(self.good(nbf=now + 3600, iat=now), "not yet valid")

    def test_wrong_issuer(self):
        self.refused(self.good(iss="https://evil.example"), "iss is not the configured issuer")

    def test_wrong_audience(self):
        self.refused(self.good(aud=["someone-else"]), "aud does not include istio-ca")

    def test_wrong_signature(self):
        forger = SigningKey("ec-1", "EC")  # same kid, another key
        self.refused(self.issuer.token(projected_claims(self.issuer.url), forger), "signature")

    def test_alg_none(self):
        from oidc_issuer import compact
        t = compact({"alg": "none", "typ": "JWT"}, projected_claims(self.issuer.url), None)
        self.refused(t, "alg 'none' not allowed")

    def test_hs256_with_the_public_key(self):
        t = OidcIssuer.hs256(projected_claims(self.issuer.url), self.rsa.public_pem(), "rsa-1")
        self.refused(t, "alg 'HS256' not allowed")

    def test_kid_confusion(self):
        # ES256 naming the RSA key's kid: the key type decides, not the token.
        t = self.issuer.token(projected_claims(self.issuer.url), self.ec,
                              header={"kid": "rsa-1"})
        self.refused(t, "names an RSA key")

    def test_sub_disagrees_with_claims(self):
        self.refused(self.good(sub="system:serviceaccount:kube-system:admin"),
                     "sub and kubernetes.io name different accounts")

    def test_oversized_token(self):
        c = projected_claims(self.issuer.url)
        c["pad"] = "x" * 7000
        self.refused(self.issuer.token(c, self.ec), "JWT must be 1-8192 bytes")

    def test_garbage_token(self):
        self.refused("garbage", "three dot-separated parts")
        self.refused("a.b.c", "JWT")

    def test_chain_refusal_names_each_authenticator(self):
        d = self.refused(None, "client_cert: ")
        self.assertIn("jwt: no 'authorization' metadata", d)
        self.assertLess(d.index("client_cert: "), d.index("jwt: "))  # in chain order
        d = self.refused(self.good(exp=int(time.time()) - 3600), "jwt: JWT expired")
        self.assertIn("client_cert: ", d)

    # --- keys from the issuer -------------------------------------------------------
    def test_fetches_carry_the_token(self):
        self.assertEqual(self.issuer.count("401"), 0)
        self.assertGreaterEqual(self.issuer.count(JWKS_PATH), 1)
        self.assertNotIn(self.fetch_token, self.server.logtext())

    def test_rotation_picked_up(self):
        fetches = self.issuer.count(JWKS_PATH)
        new = self.issuer.add_key("ec-rotated-%d" % time.time_ns(), "EC")
        tok = self.good(new)
        # The first call with the new kid may be refused (and asks for a refresh); within
        # min_refresh (1 s) plus a fetch the supervisor has pushed the new set.
        deadline = time.time() + 15
        while True:
            try:
                issue(self.server.client, tok)
                break
            except grpc.RpcError as e:
                self.assertEqual(e.code(), grpc.StatusCode.UNAUTHENTICATED, e.details())
                self.assertIn("not in JWKS", e.details())
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        self.assertGreater(self.issuer.count(JWKS_PATH), fetches)
        # The old keys are still published and still work.
        issue(self.server.client, self.good())

    def test_unknown_kids_do_not_flood_the_issuer(self):
        time.sleep(1.2)
        before = self.issuer.count(JWKS_PATH)
        stranger = SigningKey("never-published", "EC")
        for _ in range(20):
            with self.assertRaises(grpc.RpcError):
                issue(self.server.client, self.issuer.token(projected_claims(self.issuer.url),
                                                            stranger))
        time.sleep(1.5)
        # 20 unknown kids within ~1 s: at most two fetches (min_refresh 1 s), not 20.
        self.assertLessEqual(self.issuer.count(JWKS_PATH) - before, 3)


class OidcIssuerDownTests(unittest.TestCase):
    """A separate server: the issuer goes down for good here."""

    def test_issuer_down_keeps_cached_keys(self):
        issuer = OidcIssuer(os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"),
                                         "oidc-down-%d" % os.getpid()))
        key = issuer.add_key("ec-1", "EC")
        server = DevServer(name="oidc-down", edit_config=auth_config([
            "jwt:",
            "  issuer: \"%s\"" % issuer.url,
            "  discovery: true",
            "  ca_bundle: %s" % issuer.ca_path,
            "  min_refresh: 1s",
            "  refresh: 2s",
            "  fetch_timeout: 2s"]))
        try:
            tok = lambda: issuer.token(projected_claims(issuer.url), key)
            wait_issued(server, tok)
            issuer.stop()
            # Scheduled refreshes (every 2 s) and one asked for by an unknown kid fail ...
            stranger = SigningKey("unknown", "EC")
            with self.assertRaises(grpc.RpcError):
                issue(server.client, issuer.token(projected_claims(issuer.url), stranger))
            deadline = time.time() + 20
            while "keeping the last good keys" not in server.logtext():
                self.assertLess(time.time(), deadline, server.logtext())
                time.sleep(0.3)
            # ... and the cached keys still authenticate.
            issue(server.client, tok())
        finally:
            server.stop()
            issuer.stop()

    def no_keys_ever(self, issuer, key, server, log_fragment):
        """The supervisor logs log_fragment, fetches no JWKS, and the front end, once up,
        answers UNAVAILABLE (no keys) rather than trusting anything."""
        deadline = time.time() + 30
        while log_fragment not in server.logtext():
            self.assertLess(time.time(), deadline, server.logtext())
            time.sleep(0.3)
        self.assertEqual(issuer.count(JWKS_PATH), 0)  # the JWKS was never fetched
        while not os.path.exists(os.path.join(server.dir, "root-cert.pem")):
            time.sleep(0.2)
        with open(os.path.join(server.dir, "root-cert.pem"), "rb") as f:
            client = hc.Client(server.addr, f.read())
        server.client = client
        tok = issuer.token(projected_claims(issuer.url), key)
        deadline = time.time() + 30
        while True:  # the front end comes up; with no keys the answer is UNAVAILABLE
            try:
                issue(client, tok, timeout=3)
                self.fail("issued without keys from a trusted discovery")
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNAVAILABLE and "keys not loaded" in e.details():
                    break
                self.assertLess(time.time(), deadline, e.details())
                time.sleep(0.3)

    def test_wrong_issuer_in_discovery_is_refused(self):
        issuer = OidcIssuer(os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"),
                                         "oidc-lie-%d" % os.getpid()))
        key = issuer.add_key("ec-1", "EC")
        issuer.discovery_issuer = "https://someone-else.example"
        server = DevServer(name="oidc-lie", edit_config=auth_config([
            "jwt:",
            "  issuer: \"%s\"" % issuer.url,
            "  discovery: true",
            "  ca_bundle: %s" % issuer.ca_path,
            "  min_refresh: 1s"]))
        try:
            self.no_keys_ever(issuer, key, server, "issuer is not the configured issuer")
        finally:
            server.stop()
            issuer.stop()

    def test_untrusted_issuer_certificate_is_refused(self):
        base = os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"), "oidc-tls-%d" % os.getpid())
        issuer = OidcIssuer(base)
        other = OidcIssuer(base + "-other")  # only its CA is used: not the issuer's
        other.stop()
        key = issuer.add_key("ec-1", "EC")
        server = DevServer(name="oidc-tls", edit_config=auth_config([
            "jwt:",
            "  issuer: \"%s\"" % issuer.url,
            "  discovery: true",
            "  ca_bundle: %s" % other.ca_path,
            "  min_refresh: 1s"]))
        try:
            # Both CAs have one name: OpenSSL finds "the" issuer and its signature fails.
            self.no_keys_ever(issuer, key, server, "/.well-known/openid-configuration: ")
            self.assertEqual(issuer.count("/.well-known/openid-configuration"), 0)  # no HTTP
        finally:
            server.stop()
            issuer.stop()


class JwksFileReloadTests(unittest.TestCase):
    def test_file_edit_picked_up(self):
        issuer = OidcIssuer(os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"),
                                         "oidc-file-%d" % os.getpid()))
        issuer.stop()  # only its keys and tokens are used here
        k1 = issuer.add_key("file-1", "EC")
        path = os.path.join(os.environ.get("HSMCA_TEST_TMP", "/tmp"), "jwks-%d.json" % os.getpid())
        with open(path, "w") as f:
            json.dump(issuer.jwks(), f)
        iss = "https://file-issuer.example"
        server = DevServer(name="oidc-file", edit_config=auth_config([
            "chain: [jwt]",
            "jwt:",
            "  issuer: \"%s\"" % iss,
            "  jwks_file: %s" % path]))
        try:
            wait_issued(server, lambda: issuer.token(projected_claims(iss), k1))
            k2 = issuer.add_key("file-2", "RSA")
            t2 = issuer.token(projected_claims(iss), k2)
            with self.assertRaises(grpc.RpcError) as cm:
                issue(server.client, t2)
            self.assertIn("not in JWKS", cm.exception.details())
            self.assertNotIn("client_cert", cm.exception.details())  # not in this chain
            with open(path + ".new", "w") as f:
                json.dump(issuer.jwks(), f)
            os.rename(path + ".new", path)
            deadline = time.time() + 15
            while True:
                try:
                    issue(server.client, t2)
                    break
                except grpc.RpcError as e:
                    self.assertLess(time.time(), deadline, e.details())
                    time.sleep(0.3)
            # A broken edit keeps the keys that were loaded.
            with open(path, "w") as f:
                f.write("{not json")
            deadline = time.time() + 15
            while "keeping the last good keys" not in server.logtext():
                self.assertLess(time.time(), deadline, server.logtext())
                time.sleep(0.3)
            issue(server.client, t2)
            issue(server.client, issuer.token(projected_claims(iss), k1))
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
