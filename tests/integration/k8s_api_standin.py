#!/usr/bin/python3
"""A local HTTPS stand-in for the Kubernetes API server's object store, for
`hsmca k8s publish-roots`: objects kept in memory, with the API's optimistic concurrency.

Served, with the shapes of the API reference (https://kubernetes.io/docs/reference/kubernetes-api/):
  GET  /api/v1/namespaces?labelSelector=S&limit=N&continue=C   NamespaceList (paged)
  GET/POST/PUT /api/v1/namespaces/{ns}/configmaps[/{name}]     ConfigMap v1
  GET/POST/PUT /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]   Lease v1
  GET/POST/PUT /apis/certificates.k8s.io/v1beta1/clustertrustbundles[/{name}] ClusterTrustBundle
Rules kept (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions):
every write gives the object a new metadata.resourceVersion (one counter for the
store); a PUT whose resourceVersion is not the stored one, or has none, is 409 Conflict
(reason Conflict); a POST of an existing name is 409 AlreadyExists; a missing object is
404 NotFound; all as a meta/v1 Status. Label selectors
(https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/): terms joined
by ",": k=v, k==v, k!=v, k, !k, k in (a,b), k notin (a,b). A ClusterTrustBundle's
trustBundle is validated as the API server does: PEM certificates only, each a CA, none
twice (422 Invalid otherwise); signerName must match the name's prefix.

Test hooks: callers are told apart by their bearer token (tokens maps token -> who, an
unknown token is 401); writes lists (who, verb, kind, namespace, name) of every write
that succeeded; conflict_next(kind, ns, name) makes the next PUT of that object
conflict, as if someone else had written it just before (its resourceVersion bumped);
lease_down holds the callers whose Lease calls are answered 503 (an API server they
cannot renew through)."""
import base64
import http.server
import json
import re
import ssl
import threading
import urllib.parse

from cryptography import x509

from k8s_stub import make_pki, status_obj

NS_RE = re.compile(r"^/api/v1/namespaces/([^/]+)/(configmaps)(?:/([^/]+))?$")
LEASE_RE = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/(leases)(?:/([^/]+))?$")
CTB_RE = re.compile(r"^/apis/certificates\.k8s\.io/v1beta1/(clustertrustbundles)(?:/([^/]+))?$")
KINDS = {"configmaps": ("ConfigMap", "v1"), "leases": ("Lease", "coordination.k8s.io/v1"),
         "clustertrustbundles": ("ClusterTrustBundle", "certificates.k8s.io/v1beta1")}


def selector_match(sel, labels):
    """Whether labels match the label selector sel ("" matches all)."""
    terms = re.findall(r"[^,(]+(?:\([^)]*\))?", sel)
    for t in (x.strip() for x in terms):
        if not t:
            continue
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", t)
        if m:
            vals = {v.strip() for v in m.group(3).split(",")}
            has = m.group(1) in labels and labels[m.group(1)] in vals
            if has != (m.group(2) == "in"):
                return False
            continue
        m = re.fullmatch(r"([\w./-]+)\s*(!=|==|=)\s*([\w.-]*)", t)
        if m:
            eq = labels.get(m.group(1)) == m.group(3)
            if eq != (m.group(2) != "!="):
                return False
            continue
        if t.startswith("!"):
            if t[1:] in labels:
                return False
        elif t not in labels:
            return False
    return True


def ctb_problem(bundle):
    """Why the API server would refuse this trustBundle, or None."""
    blocks = re.findall(r"-----BEGIN ([A-Z ]+)-----\n(.*?)-----END \1-----", bundle, re.S)
    if not blocks:
        return "trustBundle holds no certificate"
    seen = set()
    for kind, body in blocks:
        if kind != "CERTIFICATE":
            return "trustBundle holds a %s block" % kind
        der = base64.b64decode(body)
        if der in seen:
            return "trustBundle holds a certificate twice"
        seen.add(der)
        cert = x509.load_der_x509_certificate(der)
        try:
            ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            ca = False
        if not ca:
            return "trustBundle holds a certificate that is not a CA"
    return None


class Standin:
    def __init__(self, directory, page_size=2):
        self.ca, cert, key = make_pki(directory)
        self.lock = threading.Lock()
        self.rv = 100
        self.objects = {}  # (resource, ns, name) -> object
        self.namespaces = {}  # name -> Namespace object
        self.tokens = {}
        self.writes = []
        self.conflicts = set()
        self.lease_down = set()  # callers whose Lease calls get 503
        self.page_size = page_size
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle_any(self, verb):
                n = int(self.headers.get("Content-Length", "0") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                auth = self.headers.get("Authorization", "")
                who = standin.tokens.get(auth[7:]) if auth.startswith("Bearer ") else None
                if who is None:
                    return self.reply(401, status_obj(401, "Unauthorized", "Unauthorized"))
                with standin.lock:
                    code, obj = standin.serve(who, verb, self.path, body)
                self.reply(code, obj)

            def do_GET(self):
                self.handle_any("GET")

            def do_POST(self):
                self.handle_any("POST")

            def do_PUT(self):
                self.handle_any("PUT")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.server_url = "https://localhost:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # ---- the test's side ----

    def add_namespace(self, name, labels=None, terminating=False):
        with self.lock:
            self.rv += 1
            md = {"name": name, "labels": labels or {}, "resourceVersion": str(self.rv),
                  "uid": "ns-" + name}
            if terminating:
                md["deletionTimestamp"] = "2026-11-27T00:00:00Z"
            self.namespaces[name] = {"metadata": md,
                                     "status": {"phase": "Terminating" if terminating else "Active"}}

    def get(self, resource, ns, name):
        with self.lock:
            o = self.objects.get((resource, ns, name))
            return json.loads(json.dumps(o)) if o else None

    def conflict_next(self, resource, ns, name):
        with self.lock:
            self.conflicts.add((resource, ns, name))

    def writes_of(self, kind=None):
        with self.lock:
            return [w for w in self.writes if kind is None or w[2] == kind]

    def kubeconfig(self, path, token):
        with open(self.ca, "rb") as f:
            ca_data = base64.b64encode(f.read()).decode()
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\n"
                    "clusters:\n- name: s\n  cluster:\n    server: %s\n"
                    "    certificate-authority-data: %s\n"
                    "contexts:\n- name: s\n  context:\n    cluster: s\n    user: u\n"
                    "current-context: s\n"
                    "users:\n- name: u\n  user:\n    token: %s\n" % (self.server_url, ca_data, token))
        return path

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- the server's side (under self.lock) ----

    def serve(self, who, verb, raw, body):
        u = urllib.parse.urlsplit(raw)
        q = urllib.parse.parse_qs(u.query)
        if u.path == "/api/v1/namespaces" and verb == "GET":
            return self.list_namespaces(q)
        if LEASE_RE.match(u.path) and who in self.lease_down:
            return 503, status_obj(503, "ServiceUnavailable", "the server is currently unable to handle the request")
        for rx in (NS_RE, LEASE_RE):
            m = rx.match(u.path)
            if m:
                return self.object_call(who, verb, m.group(2), m.group(1), m.group(3), body)
        m = CTB_RE.match(u.path)
        if m:
            return self.object_call(who, verb, m.group(1), "", m.group(2), body)
        return 404, status_obj(404, "NotFound", "the server could not find the requested resource")

    def list_namespaces(self, q):
        sel = q.get("labelSelector", [""])[0]
        names = sorted(n for n, o in self.namespaces.items()
                       if selector_match(sel, o["metadata"]["labels"]))
        start = int(q.get("continue", ["0"])[0])
        limit = min(int(q.get("limit", ["500"])[0]), self.page_size)
        page = names[start:start + limit]
        md = {"resourceVersion": str(self.rv)}
        if start + limit < len(names):
            md["continue"] = str(start + limit)
        return 200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": md,
                     "items": [self.namespaces[n] for n in page]}

    def object_call(self, who, verb, resource, ns, name, body):
        kind, api = KINDS[resource]
        key = (resource, ns, name)
        if verb == "GET":
            if name is None:
                return 405, status_obj(405, "MethodNotAllowed", "list is not served here")
            o = self.objects.get(key)
            if o is None:
                return 404, status_obj(404, "NotFound", '%s "%s" not found' % (resource, name))
            return 200, o
        if body is None or body.get("kind") != kind or body.get("apiVersion") != api:
            return 400, status_obj(400, "BadRequest", "body is not a %s %s" % (api, kind))
        if verb == "POST":
            name = body.get("metadata", {}).get("name")
            key = (resource, ns, name)
            if not name or (ns and body["metadata"].get("namespace", ns) != ns):
                return 400, status_obj(400, "BadRequest", "metadata.name/namespace")
            if key in self.objects:
                return 409, status_obj(409, "AlreadyExists", '%s "%s" already exists' % (resource, name))
        elif verb == "PUT":
            cur = self.objects.get(key)
            if cur is None:
                return 404, status_obj(404, "NotFound", '%s "%s" not found' % (resource, name))
            if key in self.conflicts:  # someone else wrote it just before
                self.conflicts.discard(key)
                self.rv += 1
                cur["metadata"]["resourceVersion"] = str(self.rv)
            if body.get("metadata", {}).get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                return 409, status_obj(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                                       "the object has been modified; please apply your changes "
                                       "to the latest version and try again" % (resource, name))
        if resource == "clustertrustbundles":
            spec = body.get("spec", {})
            problem = ctb_problem(spec.get("trustBundle", ""))
            if not problem and not name.startswith(spec.get("signerName", "").replace("/", ":") + ":"):
                problem = "name must be prefixed by signerName"
            if problem:
                return 422, status_obj(422, "Invalid", problem)
        self.rv += 1
        obj = json.loads(json.dumps(body))
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if ns:
            obj["metadata"]["namespace"] = ns
        self.objects[key] = obj
        self.writes.append((who, verb, kind, ns, name))
        return (201 if verb == "POST" else 200), obj
