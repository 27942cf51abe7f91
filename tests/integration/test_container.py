#!/usr/bin/python3
"""The container image (deploy/container/build.sh --demo): built from Debian packages
with no registry, `hsmca dev` inside it under podman serves a certificate to this
host's `hsmca request` that verifies against the container's root, with only the
capabilities the supervisor's user switch and chroot use and a read-only root file
system; the image holds no compiler, no apt lists or caches, no private key or PIN.
The container and the image are removed at the end. Runs in the gcc build only: the image holds release programs."""
import io
import os
import re
import subprocess
import tarfile
import tempfile
import time
import unittest

from hsmca_harness import BIN, TMP, free_port

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_SH = os.path.join(SRC, "deploy", "container", "build.sh")
BUILD_DIR = os.path.dirname(os.path.abspath(BIN))
TAG = "localhost/hsmca-citest:%d" % os.getpid()
PODMAN_RUN = ["podman", "--runtime", "runc", "run", "--network=host",
              "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
# What the supervisor and its children use before they drop root (deploy/README.md):
# the user switch, the front end's chroot, signalling children, and owning, chmodding
# and reaching files that belong to the signer's user.
CAPS = "SETUID,SETGID,SYS_CHROOT,KILL,CHOWN,FOWNER,DAC_READ_SEARCH,DAC_OVERRIDE"
DEV_DIR = "/var/lib/hsmca/dev"
SA_ID = "spiffe://cluster.local/ns/default/sa/sleep"
# A compiler, assembler or linker by its program name (gcc-12, x86_64-linux-gnu-gcc, cc1).
COMPILER = re.compile(r"^(?:[\w.]+-)?(?:gcc|g\+\+|cc|c\+\+|cpp|clang|clang\+\+|tcc|cc1|"
                      r"ld|ld\.bfd|ld\.gold|as|make)(?:-[\d.]+)?$")
SANITIZED = b"AddressSanitizer" in open(BIN, "rb").read() if os.path.exists(BIN) else False


def podman_works():
    """None if podman runs here, else why not."""
    try:
        r = subprocess.run(["podman", "--runtime", "runc", "info"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if r.returncode == 0 else r.stderr.strip()[-500:]


@unittest.skipIf(SANITIZED, "sanitizer build: the image is built from and tested with the gcc "
                 "release build's programs (this test runs there, once per CI)")
class ContainerTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = podman_works()
        if why:
            raise unittest.SkipTest("podman cannot run here: %s" % why)
        cls.work = tempfile.mkdtemp(prefix="container.", dir=TMP)
        cls.ctr = None
        t0 = time.time()
        try:
            r = subprocess.run(["sh", BUILD_SH, "--demo", "--tag", TAG, "--build-dir", BUILD_DIR],
                               capture_output=True, text=True, timeout=900)
            size = re.search(r"^build.sh: image .*$", r.stdout, re.M)
            if r.returncode != 0 or not size:
                raise AssertionError("build.sh failed (%d):\n%s" % (r.returncode,
                                     (r.stdout + r.stderr)[-4000:]))
        except BaseException:
            cls.tearDownClass()  # unittest does not when setUpClass fails
            raise
        print("image build: %.0f s; %s" % (time.time() - t0, size.group(0)), flush=True)

    @classmethod
    def tearDownClass(cls):
        if cls.ctr:
            subprocess.run(["podman", "rm", "-f", "-t", "5", cls.ctr], capture_output=True)
        subprocess.run(["podman", "image", "rm", "-f", TAG], capture_output=True)

    def image_files(self):
        """(name, TarInfo, content or None) of every file of the image, from
        `podman export` of a container created from it and never started."""
        ctr = "hsmca-citest-files-%d" % os.getpid()
        subprocess.run(["podman", "create", "--name", ctr, TAG], check=True, capture_output=True)
        try:
            data = subprocess.run(["podman", "export", ctr], check=True,
                                  capture_output=True).stdout
        finally:
            subprocess.run(["podman", "rm", "-f", ctr], capture_output=True)
        out = []
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                body = tar.extractfile(m).read() if m.isfile() and m.size < (4 << 20) else None
                out.append((m.name.lstrip("./"), m, body))
        return out

    def test_image_contents(self):
        files = self.image_files()
        names = {n for n, _, _ in files}
        self.assertIn("usr/bin/hsmca", names)
        for child in ("hsmca-signer", "hsmca-frontend", "hsmca-publish"):
            self.assertIn("usr/libexec/hsmca/" + child, names)
        self.assertIn("usr/lib/softhsm/libsofthsm2.so", names)  # --demo
        bad = []
        for name, m, body in files:
            base = os.path.basename(name)
            if re.match(r"^(usr/)?(s?bin|libexec)/|^usr/lib/gcc/", name) and COMPILER.match(base):
                bad.append("compiler: " + name)
            if re.match(r"^(usr/)?s?bin/(apt|apt-get|apt-cache)$", name):
                bad.append("package manager: " + name)
            if (name.startswith(("var/lib/apt/", "var/cache/apt/", "etc/apt/", "var/log/apt/"))
                    or re.match(r"^var/(lib/dpkg|cache/debconf)/.*-old$", name)
                    or re.match(r"^var/log/.*\.log$", name)):
                bad.append("package manager cache or log: " + name)
            if name.startswith("usr/share/doc/") and m.isfile() and base != "copyright":
                bad.append("documentation: " + name)
            if name.startswith(("usr/share/man/", "usr/share/info/")) and m.isfile():
                bad.append("documentation: " + name)
            if base in ("pin", "so-pin") or base.endswith((".key", "-key.pem")):
                bad.append("secret by its name: " + name)
            if (name.startswith(("var/lib/hsmca/", "var/lib/softhsm/tokens/", "etc/ssl/private/",
                                 "etc/hsmca/")) and not m.isdir()):
                bad.append("state or secret in the image: " + name)
            if body and not body.startswith(b"\x7fELF") and b"PRIVATE KEY-----" in body:
                bad.append("private key: " + name)
        self.assertEqual(bad, [])
        passwd = dict((line.split(":")[0], line.split(":"))
                      for line in next(b for n, _, b in files if n == "etc/passwd").decode().splitlines())
        for user in ("hsmca-frontend", "hsmca-signer"):
            self.assertIn(user, passwd)
            self.assertNotEqual(passwd[user][2], "0")
            self.assertEqual(passwd[user][6], "/usr/sbin/nologin")

    def test_image_config(self):
        fmt = "{{json .Config.Entrypoint}}|{{json .Config.Cmd}}|{{.Config.User}}|{{json .Config.Env}}"
        out = subprocess.check_output(["podman", "image", "inspect", "--format", fmt, TAG],
                                      text=True).strip()
        entry, cmd, user, env = out.split("|")
        self.assertEqual(entry, '["/usr/bin/hsmca"]')
        self.assertIn('"dev"', cmd)
        self.assertEqual(user, "0:0")
        self.assertNotRegex(env.upper(), r"PIN|SECRET|PASSWORD|TOKEN")

    def test_dev_in_container_serves_host_client(self):
        port = free_port()
        name = "hsmca-citest-%d" % os.getpid()
        type(self).ctr = name
        # A read-only root file system, the state on a volume (readOnlyRootFilesystem
        # and an emptyDir in Kubernetes).
        subprocess.run(PODMAN_RUN + ["-d", "--name", name, "--cap-drop=all", "--cap-add=" + CAPS,
                                     "--read-only", "--tmpfs", "/var/lib/hsmca:rw",
                                     TAG, "dev", "--dir", DEV_DIR, "--listen",
                                     "127.0.0.1:%d" % port],
                       check=True, capture_output=True, timeout=120)
        root = os.path.join(self.work, "root-cert.pem")
        prefix = os.path.join(self.work, "w")
        deadline, last = time.time() + 120, ""
        while time.time() < deadline:
            state = subprocess.run(["podman", "inspect", "--format", "{{.State.Running}}", name],
                                   capture_output=True, text=True).stdout.strip()
            if state != "true":
                self.fail("container stopped:\n" + self.logs(name))
            got = subprocess.run(["podman", "cp", name + ":" + DEV_DIR + "/root-cert.pem", root],
                                 capture_output=True, text=True)
            token = subprocess.run(["podman", "exec", name, "hsmca", "dev", "token", "--dir",
                                    DEV_DIR, "--ns", "default", "--sa", "sleep"],
                                   capture_output=True, text=True)
            if got.returncode == 0 and token.returncode == 0:
                r = subprocess.run([BIN, "request", "--addr", "localhost:%d" % port, "--root", root,
                                    "--token", token.stdout.strip(), "--id", SA_ID, "--out", prefix],
                                   capture_output=True, text=True, timeout=60)
                if r.returncode == 0:
                    break
                last = r.stderr
            else:
                last = got.stderr + token.stderr
            time.sleep(0.5)
        else:
            self.fail("no certificate within 120 s: %s\n%s" % (last, self.logs(name)))
        v = subprocess.run(["openssl", "verify", "-CAfile", root, prefix + "-chain.pem"],
                           capture_output=True, text=True)
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        leaf = subprocess.check_output(["openssl", "x509", "-noout", "-ext", "subjectAltName",
                                        "-in", prefix + "-chain.pem"], text=True)
        self.assertIn("URI:" + SA_ID, leaf)
        logs = self.logs(name)
        # Each child runs as its own user inside the container, as on a host.
        self.assertIn('"msg":"sandbox: switched user","user":"hsmca-signer"', logs)
        self.assertIn('"chroot":"/var/empty"', logs)

    @staticmethod
    def logs(name):
        r = subprocess.run(["podman", "logs", name], capture_output=True, text=True)
        return (r.stdout + r.stderr)[-12000:]


if __name__ == "__main__":
    unittest.main(verbosity=2)
