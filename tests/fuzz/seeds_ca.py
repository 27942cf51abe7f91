#!/usr/bin/python3
"""Writes the seed corpora of fuzz_admin and fuzz_replay (docs/DEVELOPMENT.md "Fuzzing")
from a recorded real run (capture_ca_run.py OUT) and a few programs written here.

  python3 tests/fuzz/seeds_ca.py OUT     # into tests/fuzz/corpus/{admin,replay}/

admin: each distinct request the `hsmca` commands sent (run-*), the same with its "id"
and "serial" pointed at fuzz_admin.c's requests (1 issued, 7 and 9 pending) and its
intermediate's serial (state-*), and hand-written ones for each op and its bad fields.

replay: each recorded signing log, its lines as raw-line steps (log-*: 0x0f, a 2-byte
length, the line), and step programs in fuzz_replay.c's vocabulary (prog-*)."""
import base64
import glob
import json
import os
import re
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HERE = os.path.dirname(os.path.abspath(__file__))
ICA_SERIAL = "5e7a1110c0ffee01"  # FUZZ_ICA_SERIAL of fuzz_admin.c


def admin_seeds(capture):
    out, seen = {}, set()
    for f in sorted(glob.glob(os.path.join(capture, "admin", "*.json"))):
        data = open(f, "rb").read()
        if data in seen:
            continue
        seen.add(data)
        out["run-%03d" % len(seen)] = data
        req = json.loads(data)
        for i, rid in enumerate((1, 7, 9)):
            if "id" in req:
                req["id"] = rid
            elif i:
                break
            if "serial" in req:
                req["serial"] = ICA_SERIAL
            out["state-%03d-%d" % (len(seen), rid)] = json.dumps(req, separators=(",", ":")).encode()
    hand = {
        "fetch-issued": {"op": "ica-fetch", "id": 1},
        "approve-completes": {"op": "ica-approve", "id": 7},
        "approve-first": {"op": "ica-approve", "id": 9},
        "deny": {"op": "ica-deny", "id": 9, "reason": "not our cluster"},
        "deny-issued": {"op": "ica-deny", "id": 1, "reason": "late"},
        "deny-no-reason": {"op": "ica-deny", "id": 7},
        "show": {"op": "ica-show", "id": 9},
        "list": {"op": "ica-list"},
        "revoke-ica": {"op": "ca-revoke", "serial": ICA_SERIAL, "reason": "keyCompromise",
                       "force_unknown": False},
        "revoke-unknown": {"op": "ca-revoke", "serial": "0badc0de", "reason": "superseded",
                           "force_unknown": True},
        "revoke-bad-reason": {"op": "ca-revoke", "serial": "0badc0de", "reason": "certificateHold"},
        "crl-get": {"op": "crl-get"},
        "id-negative": {"op": "ica-approve", "id": -1},
        "id-string": {"op": "ica-approve", "id": "7"},
        "id-huge": {"op": "ica-fetch", "id": 18446744073709551615},
        "ttl-too-long": {"op": "ica-request", "cluster": "west", "ttl_s": 99999999999, "csr": ""},
        "unknown-op": {"op": "ica-sign"},
        "op-not-string": {"op": 1},
    }
    hand.update(renewal_seeds())
    for name, req in hand.items():
        out["hand-" + name] = json.dumps(req, separators=(",", ":")).encode()
    j = lambda req: json.dumps(req, separators=(",", ":")).encode()
    # Sequences (NUL between requests): revoke the current intermediate, then renew it;
    # approve and deny one request; approve twice as the same caller.
    out["seq-revoke-then-renew"] = j(hand["revoke-ica"]) + b"\0" + j(hand["renew-same-key"])
    out["seq-approve-then-deny"] = j(hand["approve-completes"]) + b"\0" + j(
        {"op": "ica-deny", "id": 7, "reason": "changed my mind"}) + b"\0" + j(hand["fetch-issued"])
    out["seq-approve-twice"] = j(hand["approve-first"]) + b"\0" + j(hand["approve-first"])
    out["hand-not-json"] = b'{"op":"ica-list",'
    out["hand-array"] = b'["ica-list"]'
    out["hand-duplicate-key"] = b'{"op":"ica-list","op":"crl-get"}'
    return out


def istiod_keys():
    """fuzz_ca.c's fixed istiod keys."""
    with open(os.path.join(HERE, "fuzz_ca.c")) as f:
        text = f.read()
    body = re.search(r"istiod_keys\[FUZZ_CA_ISTIOD_KEYS\] = \{(.*?)\};", text, re.S).group(1)
    pem = "".join(re.findall(r'"([^"]*)"', body)).replace("\\n", "\n")
    return [serialization.load_pem_private_key(p.encode(), None) for p in
            re.findall(r"-----BEGIN PRIVATE KEY-----.*?-----END PRIVATE KEY-----\n", pem, re.S)]


def renewal_seeds():
    """Renewals of fuzz_admin's issued request 1 (west, key 0): a CSR with key 0; one with
    key 2 and a proof signed by key 0 (audit_ica_renewal_message); the same proof for east."""
    keys = istiod_keys()

    def csr(k):
        b = x509.CertificateSigningRequestBuilder().subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "istiod renewal")]))
        return b.sign(k, hashes.SHA256())
    same, other = csr(keys[0]), csr(keys[2])
    der = other.public_bytes(serialization.Encoding.DER)
    proof = keys[0].sign(b"hsmca intermediate renewal\0west\0" + der, ec.ECDSA(hashes.SHA256()))
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM).decode()
    return {
        "renew-same-key": {"op": "ica-request", "cluster": "west", "csr": pem(same)},
        "renew-proof": {"op": "ica-request", "cluster": "west", "csr": pem(other),
                        "renew_proof": base64.b64encode(proof).decode()},
        "renew-proof-other-cluster": {"op": "ica-request", "cluster": "east", "csr": pem(other),
                                      "renew_proof": base64.b64encode(proof).decode()},
        "renew-proof-not-base64": {"op": "ica-request", "cluster": "west", "csr": pem(other),
                                   "renew_proof": "%%%"},
    }


def raw_lines(path):
    out = b""
    for line in open(path, "rb").read().split(b"\n"):
        if line:
            out += bytes([0x0f]) + len(line).to_bytes(2, "big") + line
    return out


# fuzz_replay.c's steps (see its fill()): op byte, the user byte, then the kind's bytes.
ALICE, BOB, CAROL, DAVE, ROOT = range(5)
ISSUED = [
    [13, 0, ROOT],               # start (a log's seq 0)
    [0, ALICE, 0x10, 0x20],      # request: key 0, 2 approvals, cluster west, expires +20 min
    [2, BOB, 0], [2, CAROL, 0],  # two approvals of the newest request
    [5, ROOT, 0, 0x23],          # its intermediate intent (a serial of its own), 2 h
    [6, ROOT, 0],                # the result, a certificate
    [7, ROOT, 0, 0x01],          # intermediate-cert with its key's certificate
    [8, DAVE, 0],                # fetched
]
PROGRAMS = {
    "issue-revoke-crl": ISSUED + [[10, ALICE, 0x01], [11, ROOT, 0x00], [12, ROOT, 1], [13, 0, ROOT]],
    "renew-same-key": ISSUED + [[14, 20], [0, ALICE, 0x10, 0x20], [9, ALICE, 0, 1, 0x00],
                                [5, ROOT, 0, 0x23], [6, ROOT, 0], [7, ROOT, 0, 0x01]],
    "renew-proof": ISSUED + [[0, ALICE, 0x11, 0x20], [9, ALICE, 0, 1, 0x03],
                             [5, ROOT, 0, 0x23], [6, ROOT, 0], [7, ROOT, 0, 0x01]],
    "deny-while-signing": ISSUED[:5] + [[4, DAVE, 0], [6, ROOT, 0], [7, ROOT, 0, 0x01]],
    "approve-own-last": [[13, 0, ROOT], [0, ALICE, 0x20, 0x30], [2, BOB, 0], [2, CAROL, 0], [2, ALICE, 0]],
    "expired-approval": [[13, 0, ROOT], [0, ALICE, 0x10, 0x00], [14, 10], [2, BOB, 0]],
    "workload-serials": [[12, ROOT, 0], [5, ROOT, 0xff, 0x20], [6, ROOT, 0x40], [13, 0, ROOT],
                         [12, ROOT, 1], [5, ROOT, 0xff, 0x20], [6, ROOT, 0],
                         [5, ROOT, 0xff, 0x20]],
}


def replay_seeds(capture):
    out = {}
    for f in sorted(glob.glob(os.path.join(capture, "logs", "*.log"))):
        out["log-" + os.path.basename(f).split(".")[0]] = raw_lines(f)
    for name, steps in PROGRAMS.items():
        out["prog-" + name] = bytes(b for s in steps for b in s)
    return out


def main():
    capture = sys.argv[1] if len(sys.argv) > 1 else "ca-run"
    for target, seeds in (("admin", admin_seeds(capture)), ("replay", replay_seeds(capture))):
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print("%s: %d seeds" % (target, len(seeds)))


if __name__ == "__main__":
    main()
