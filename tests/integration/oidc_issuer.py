#!/usr/bin/python3
"""A stand-in OpenID Connect issuer for the tests: HTTPS with its own CA, the
discovery document, a JWK Set whose keys the test rotates, and tokens of both
Kubernetes shapes signed with those keys.

Shapes answered (what a real issuer, e.g. a Kubernetes API server's service
account issuer, serves):
- GET /.well-known/openid-configuration: the OpenID Provider Metadata of OpenID
  Connect Discovery 1.0 §3, served as §4 says (§4.2: a JSON object; §4.3: its
  "issuer" is exactly the issuer URL the configuration names). Kubernetes serves
  issuer, jwks_uri, response_types_supported, subject_types_supported and
  id_token_signing_alg_values_supported, as here.
- GET <jwks_uri>: a JWK Set, RFC 7517 §5 ({"keys": [JWK...]}), each JWK with
  kty/kid/use/alg and its public parameters (RFC 7518 §6.2 EC: crv, x, y;
  §6.3 RSA: n, e), all base64url without padding.

Usable in-process (OidcIssuer) or on its own for a manual try:
  /usr/bin/python3 oidc_issuer.py DIR   (writes DIR/ca.pem, prints the issuer URL)
"""
import base64
import hashlib
import hmac
import http.server
import json
import os
import socket
import ssl
import sys
import threading
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from pki_fixture import make_server_pki

DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"  # the Kubernetes API server's path


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _int_b64(n):
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def make_tls(dirpath):
    """A self-signed CA (DIR/ca.pem) and a server certificate for 127.0.0.1 and
    localhost signed by it. Returns (ca_path, cert_path, key_path)."""
    return make_server_pki(dirpath, ("ca.pem", "server.pem", "server-key.pem"),
                           "test OIDC issuer CA", "127.0.0.1")


class SigningKey:
    """One issuer key: kty "EC" (ES256) or "RSA" (RS256)."""

    def __init__(self, kid, kty="EC"):
        self.kid, self.kty = kid, kty
        if kty == "EC":
            self.key = ec.generate_private_key(ec.SECP256R1())
        else:
            self.key = rsa.generate_private_key(65537, 2048)
        self.alg = "ES256" if kty == "EC" else "RS256"

    def jwk(self):
        pub = self.key.public_key().public_numbers()
        if self.kty == "EC":
            return {"kty": "EC", "crv": "P-256", "x": b64url(pub.x.to_bytes(32, "big")),
                    "y": b64url(pub.y.to_bytes(32, "big")), "kid": self.kid, "use": "sig",
                    "alg": "ES256"}
        return {"kty": "RSA", "n": _int_b64(pub.n), "e": _int_b64(pub.e), "kid": self.kid,
                "use": "sig", "alg": "RS256"}

    def public_pem(self):
        return self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, data):
        if self.kty == "EC":
            r, s = decode_dss_signature(self.key.sign(data, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS: r || s (RFC 7518 §3.4)
        return self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def compact(header, claims, sign):
    """header.payload.signature with sign(signing_input) -> bytes (None: empty)."""
    h = b64url(json.dumps(header, separators=(",", ":")).encode())
    p = b64url(json.dumps(claims, separators=(",", ":")).encode())
    si = (h + "." + p).encode()
    sig = sign(si) if sign else b""
    return h + "." + p + "." + b64url(sig)


def projected_claims(iss, ns="default", sa="sleep", aud=("istio-ca",), ttl=600, now=None,
                     pod=("sleep-6d5f7c9b8-x2x9q", "5e1a2b3c-0000-4000-8000-00000000a001")):
    """A projected service account token's claims (Kubernetes TokenRequest API)."""
    now = int(time.time()) if now is None else now
    k8s = {"namespace": ns,
           "serviceaccount": {"name": sa, "uid": "7f3b1c2d-0000-4000-8000-00000000b002"}}
    if pod:
        k8s["pod"] = {"name": pod[0], "uid": pod[1]}
    return {"iss": iss, "aud": list(aud), "iat": now, "nbf": now, "exp": now + ttl,
            "sub": "system:serviceaccount:%s:%s" % (ns, sa), "kubernetes.io": k8s}


def legacy_claims(iss, ns="default", sa="sleep", aud=("istio-ca",), ttl=600):
    """A legacy (secret-based) service account token's claims, flat. Real ones have no
    aud and no exp; we require both, so the test's carry them."""
    now = int(time.time())
    return {"iss": iss, "aud": list(aud), "iat": now, "exp": now + ttl,
            "sub": "system:serviceaccount:%s:%s" % (ns, sa),
            "kubernetes.io/serviceaccount/namespace": ns,
            "kubernetes.io/serviceaccount/secret.name": sa + "-token-abcde",
            "kubernetes.io/serviceaccount/service-account.name": sa,
            "kubernetes.io/serviceaccount/service-account.uid":
                "7f3b1c2d-0000-4000-8000-00000000b002"}


class OidcIssuer:
    """The HTTPS issuer on 127.0.0.1:<free port>, on a thread of the test process."""

    def __init__(self, dirpath):
        os.makedirs(dirpath, exist_ok=True)
        self.ca_path, self.cert_path, self.key_path = make_tls(dirpath)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.url = "https://127.0.0.1:%d" % self.port
        self.keys = []          # published, in order
        self.hits = {}          # path -> GET count
        self.lock = threading.Lock()
        self.discovery_issuer = None  # None: self.url (a test may make it lie)
        self.require_token = None     # a bearer token both endpoints demand (like a
                                      # Kubernetes API server: 401 without one)
        self.httpd = None
        self.start()

    # --- keys and tokens ----------------------------------------------------------
    def add_key(self, kid, kty="EC"):
        k = SigningKey(kid, kty)
        with self.lock:
            self.keys.append(k)
        return k

    def unpublished_key(self, kid, kty="EC"):
        return SigningKey(kid, kty)

    def jwks(self):
        with self.lock:
            return {"keys": [k.jwk() for k in self.keys]}

    def token(self, claims, key=None, header=None):
        key = key or self.keys[-1]
        hdr = {"alg": key.alg, "typ": "JWT", "kid": key.kid}
        hdr.update(header or {})
        return compact(hdr, claims, key.sign)

    @staticmethod
    def hs256(claims, secret, kid):
        """HS256 with secret (e.g. the issuer's public key PEM: the classic confusion)."""
        return compact({"alg": "HS256", "typ": "JWT", "kid": kid}, claims,
                       lambda si: hmac.new(secret, si, hashlib.sha256).digest())

    def count(self, path):
        with self.lock:
            return self.hits.get(path, 0)

    # --- the server -------------------------------------------------------------
    def _handler(self):
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with issuer.lock:
                    issuer.hits[self.path] = issuer.hits.get(self.path, 0) + 1
                want = issuer.require_token
                if want and self.headers.get("Authorization") != "Bearer " + want:
                    with issuer.lock:
                        issuer.hits["401"] = issuer.hits.get("401", 0) + 1
                    self.send_error(401)
                    return
                if self.path == DISCOVERY_PATH:
                    body = {"issuer": issuer.discovery_issuer or issuer.url,
                            "jwks_uri": issuer.url + JWKS_PATH,
                            "response_types_supported": ["id_token"],
                            "subject_types_supported": ["public"],
                            "id_token_signing_alg_values_supported": ["ES256", "RS256"]}
                elif self.path == JWKS_PATH:
                    body = issuer.jwks()
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
        return Handler

    def start(self):
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_path, self.key_path)
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        httpd.daemon_threads = True
        self.httpd = httpd
        threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def stop(self):
        """Down: connections to the port are refused from now on."""
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


if __name__ == "__main__":
    iss = OidcIssuer(sys.argv[1] if len(sys.argv) > 1 else "oidc-issuer")
    k = iss.add_key("k1")
    print("issuer %s (CA %s)" % (iss.url, iss.ca_path))
    print("token:", iss.token(projected_claims(iss.url)))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        iss.stop()
