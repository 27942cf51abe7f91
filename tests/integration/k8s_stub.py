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

Pods (ztunnel impersonation), per the API reference, Pod v1
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/), "get"
and "list" operations:
  GET /api/v1/namespaces/{ns}/pods/{name}  -> 200 Pod, or 404 Status (reason NotFound)
  GET /api/v1/namespaces/{ns}/pods?fieldSelector=spec.nodeName=N,status.phase=P
                                          -> 200 PodList {"kind":"PodList","apiVersion":"v1",
                                             "metadata":{"resourceVersion"},"items":[Pod...]}
Field selectors: https://kubernetes.io/docs/concepts/overview/working-with-objects/field-selectors/
(pods: metadata.name, metadata.namespace, spec.nodeName, spec.serviceAccountName,
status.phase, ...; "=" / "==" / "!=" joined by ","). List items carry no kind/apiVersion.
The pod table is set with add_pod(); pod_calls counts the GETs; pods_error (an HTTP code)
makes every pod GET fail.

Each token is configured with a behaviour (see Stub.set); calls are counted per token.
Runs in the test's process (a thread), or standalone: python3 k8s_stub.py DIR.
"""
import base64
import http.server
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse

from pki_fixture import make_server_pki

PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
REVIEWER_TOKEN = "hsmca-reviewer-token"


def make_pki(directory):
    """The API server's CA (DIR/k8s-ca.pem) and its certificate for localhost and
    127.0.0.1 (k8s-server.pem, k8s-server-key.pem). Returns the three paths."""
    return make_server_pki(directory, ("k8s-ca.pem", "k8s-server.pem", "k8s-server-key.pem"),
                           "k8s-stub-ca", "kube-apiserver")


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
        self.pods = []
        self.pod_calls = 0
        self.pods_error = None
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

            def do_GET(self):
                if self.headers.get("Authorization") != "Bearer " + stub.reviewer_token:
                    return self.send_json(401, status_obj(401, "Unauthorized", "Unauthorized"))
                with stub.lock:
                    stub.pod_calls += 1
                    err = stub.pods_error
                if err:
                    return self.send_json(err, status_obj(err, "InternalError", "etcd timeout"))
                code, obj = stub.pod_answer(self.path)
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

    def add_pod(self, ns, name, uid, node, sa, phase="Running"):
        with self.lock:
            self.pods.append({"ns": ns, "name": name, "uid": uid, "node": node, "sa": sa,
                              "phase": phase})

    @staticmethod
    def pod_obj(p, with_kind=True):
        obj = {"metadata": {"name": p["name"], "namespace": p["ns"], "uid": p["uid"],
                            "resourceVersion": "1001", "creationTimestamp": "2026-11-24T08:00:00Z"},
               "spec": {"nodeName": p["node"], "serviceAccountName": p["sa"],
                        "serviceAccount": p["sa"], "containers": [{"name": "main", "image": "app"}]},
               "status": {"phase": p["phase"], "podIP": "10.0.0.7"}}
        if with_kind:
            obj = dict({"kind": "Pod", "apiVersion": "v1"}, **obj)
        return obj

    def pod_answer(self, raw):
        u = urllib.parse.urlsplit(raw)
        parts = u.path.split("/")
        # ['', 'api', 'v1', 'namespaces', ns, 'pods'(, name)]
        if len(parts) not in (6, 7) or parts[1:4] != ["api", "v1", "namespaces"] or parts[5] != "pods":
            return 404, status_obj(404, "NotFound", "the server could not find the requested resource")
        ns = parts[4]
        with self.lock:
            pods = [dict(p) for p in self.pods if p["ns"] == ns]
        if len(parts) == 7:
            for p in pods:
                if p["name"] == parts[6]:
                    return 200, self.pod_obj(p)
            return 404, status_obj(404, "NotFound", 'pods "%s" not found' % parts[6])
        sel = urllib.parse.parse_qs(u.query).get("fieldSelector", [""])[0]
        fields = {"spec.nodeName": "node", "status.phase": "phase", "spec.serviceAccountName": "sa",
                  "metadata.name": "name"}
        for term in filter(None, sel.split(",")):
            k, _, v = term.partition("=")
            v = v.lstrip("=")
            if k not in fields:
                return 400, status_obj(400, "BadRequest", 'field label not supported: %s' % k)
            pods = [p for p in pods if p[fields[k]] == v]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1001"},
                     "items": [self.pod_obj(p, False) for p in pods]}

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
