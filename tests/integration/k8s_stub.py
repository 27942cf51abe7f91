#!/usr/bin/python3
"""A local HTTPS stand-in for the Kubernetes API server's TokenReview endpoint.

POST /apis/authentication.k8s.io/v1/tokenreviews answers with the exact shapes of the
real service, per the API reference, TokenReview v1
(https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-review-v1/):
201 Created with {"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1",
"metadata":{"creationTimestamp":null},"spec":<the request's spec>,"status":{...}}, where
status is TokenReviewStatus: authenticated (omitted when false: omitempty in the Go
types), user (UserInfo: username, uid, groups, extra with
authentication.kubernetes.io/pod-name and pod-uid as lists of strings), audiences (the
intersection of spec.audiences and the token's), error. A caller without the reviewer's
own bearer token gets 401 with a Status object, as the real server does.

Each token is configured with a behaviour (see Stub.set); calls are counted per token.
Runs in the test's process (a thread), or standalone: python3 k8s_stub.py DIR.
"""
import base64
import datetime
import http.server
import json
import os
import ssl
import sys
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
REVIEWER_TOKEN = "hsmca-reviewer-token"


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(directory):
    """A self-signed cluster CA and a serving certificate for localhost / 127.0.0.1;
    returns (ca_path, cert_path, key_path)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("k8s-stub-ca")).issuer_name(_name("k8s-stub-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(_name("kube-apiserver")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = [os.path.join(directory, n) for n in ("k8s-ca.pem", "k8s-server.pem", "k8s-server-key.pem")]
    with open(paths[0], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


class Stub:
    """Behaviours, set per token with set(token, kind, **kw):
    good (ns, sa, pod_name, pod_uid, audiences=None: echo spec.audiences),
    unauthenticated (error), wrong_group, bad_username (username), no_audiences,
    slow (delay s, then good), http500, garbage (a body that is not a TokenReview).
    Unknown tokens: unauthenticated. calls[token] counts reviews; stop() takes it down."""

    def __init__(self, directory, host="localhost"):
        self.dir = directory
        self.ca, cert, key = make_pki(directory)
        self.behaviours = {}
        self.calls = {}
        self.reviewer_token = REVIEWER_TOKEN  # hsmca's own token the stub accepts
        self.lock = threading.Lock()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def send_json(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                if self.path != PATH:
                    return self.send_json(404, status_obj(404, "NotFound", "the server could not find the requested resource"))
                if self.headers.get("Authorization") != "Bearer " + stub.reviewer_token:
                    return self.send_json(401, status_obj(401, "Unauthorized", "Unauthorized"))
                req = json.loads(body)
                assert req["apiVersion"] == "authentication.k8s.io/v1" and req["kind"] == "TokenReview", req
                spec = req["spec"]
                token = spec["token"]
                with stub.lock:
                    stub.calls[token] = stub.calls.get(token, 0) + 1
                    kind, kw = stub.behaviours.get(token, ("unauthenticated", {}))
                code, obj = stub.answer(kind, kw, spec)
                if code is None:
                    return
                self.send_json(code, obj)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.server_url = "https://%s:%d" % (host, self.port)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def set(self, token, kind, **kw):
        with self.lock:
            self.behaviours[token] = (kind, kw)

    def count(self, token):
        with self.lock:
            return self.calls.get(token, 0)

    def answer(self, kind, kw, spec):
        review = {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                  "metadata": {"creationTimestamp": None}, "spec": spec}
        if kind == "slow":
            time.sleep(kw.get("delay", 30))
            kind = "good"
        if kind == "http500":
            return 500, status_obj(500, "InternalError", "Internal error occurred: etcd timeout")
        if kind == "garbage":
            return 201, {"kind": "Status", "apiVersion": "v1"}
        if kind == "unauthenticated":
            review["status"] = {"user": {}, "error": kw.get("error", "[invalid bearer token, token lookup failed]")}
            return 201, review
        ns, sa = kw.get("ns", "default"), kw.get("sa", "sleep")
        user = {"username": kw.get("username", "system:serviceaccount:%s:%s" % (ns, sa)),
                "uid": "0b8c2a2c-7d3c-4bd2-9f56-5a3b2c1d0e9f",
                "groups": kw.get("groups", ["system:serviceaccounts", "system:serviceaccounts:" + ns,
                                            "system:authenticated"])}
        if kind == "wrong_group":
            user["groups"] = ["system:authenticated", "system:nodes"]
        if kind == "bad_username":
            user["username"] = kw.get("username", "system:node:worker-1")
        if kw.get("pod_name"):
            user["extra"] = {"authentication.kubernetes.io/pod-name": [kw["pod_name"]],
                             "authentication.kubernetes.io/pod-uid": [kw.get("pod_uid", "")],
                             "authentication.kubernetes.io/credential-id": ["JTI=5f1c"]}
        status = {"authenticated": True, "user": user,
                  "audiences": kw.get("audiences", spec.get("audiences", []))}
        if kind == "no_audiences":
            status["audiences"] = []
        review["status"] = status
        return 201, review

    def kubeconfig(self, path, token=REVIEWER_TOKEN, server=None):
        """A kubeconfig whose current context is this stub with the reviewer's token."""
        with open(self.ca, "rb") as f:
            ca_data = base64.b64encode(f.read()).decode()
        text = ("apiVersion: v1\nkind: Config\n"
                "clusters:\n- name: stub\n  cluster:\n    server: %s\n"
                "    certificate-authority-data: %s\n"
                "contexts:\n- name: stub\n  context:\n    cluster: stub\n    user: hsmca\n"
                "current-context: stub\n"
                "users:\n- name: hsmca\n  user:\n    token: %s\n") % (server or self.server_url, ca_data, token)
        with open(path, "w") as f:
            f.write(text)
        return path

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def status_obj(code, reason, message):
    """A meta/v1 Status, as the API server answers errors."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    s = Stub(d)
    s.set("good", "good", ns="default", sa="sleep", pod_name="sleep-1", pod_uid="uid-1")
    print("serving %s; kubeconfig %s" % (s.server_url, s.kubeconfig(os.path.join(d, "kubeconfig"))))
    s.thread.join()
