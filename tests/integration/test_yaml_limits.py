#!/usr/bin/python3
"""The limits of every YAML file hsmca reads (common/yaml_strict.h: yaml_strict_check;
docs/CONFIG.md): an alias bomb and a deeply nested file, as the config, as the policy
file and as a kubeconfig, are refused with a message naming the limit, by `hsmca config
check` and by `hsmca serve` (exit 78), never parsed for minutes. Each run has a generous
timeout only so that a reader that hangs fails the test instead of the suite."""
import os
import shutil
import subprocess
import tempfile
import unittest

from hsmca_harness import BIN, TMP

HANG_GUARD_S = 120  # not a measurement: the fixed readers answer at once

ALIASES = "anchors and aliases are not allowed"
DEPTH = "nested deeper than 16 levels (the limit of every hsmca YAML file)"


def alias_bomb():
    """Nine levels of nine aliases of the level below: ~800 bytes, 9^9 mappings when
    followed."""
    lines = ["a0: &a0 {k: v}"]
    for i in range(1, 10):
        lines.append("a%d: &a%d {%s}" % (i, i, ", ".join("k%d: *a%d" % (j, i - 1)
                                                        for j in range(9))))
    return "\n".join(lines) + "\n"


def deep(key="a", depth=200000):
    """400 KB of nested flow sequences under key."""
    return "%s: %s%s\n" % (key, "[" * depth, "]" * depth)


class YamlLimitTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        cls.dir = tempfile.mkdtemp(prefix="yamllim.", dir=TMP)
        subprocess.run([BIN, "dev", "init", "--dir", cls.dir], check=True, capture_output=True,
                       timeout=HANG_GUARD_S)
        with open(os.path.join(cls.dir, "hsmca.yaml")) as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_hsmca(self, *args):
        r = subprocess.run([BIN] + list(args), capture_output=True, text=True,
                           timeout=HANG_GUARD_S, stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout + r.stderr

    def config_with(self, name, old, new):
        assert old in self.text, old
        return self.write(name, self.text.replace(old, new, 1))

    def assert_refused(self, config, path, message):
        rc, out = self.run_hsmca("config", "check", config)
        self.assertEqual(rc, 1, out)
        self.assertIn(message, out)
        self.assertIn(path, out)
        rc, out = self.run_hsmca("serve", "--config", config)
        self.assertEqual(rc, 78, out)
        self.assertIn(message, out)
        self.assertIn(path, out)

    def test_config_bombs(self):
        path = self.write("alias.yaml", alias_bomb())
        self.assert_refused(path, path + ":1: ", ALIASES + " in the config")
        path = self.write("deep.yaml", deep())
        self.assert_refused(path, path + ":1: ", DEPTH)

    def test_policy_file_bombs(self):
        for name, text, message in (("policy-alias.yaml", alias_bomb(), ALIASES),
                                    ("policy-deep.yaml", deep("dns_names"), DEPTH)):
            pol = self.write(name, text)
            config = self.config_with("hsmca-" + name, "issuance:\n",
                                      "issuance:\n  policy_file: %s\n" % pol)
            self.assert_refused(config, pol, message)

    def test_kubeconfig_bombs(self):
        for name, text, message in (("kube-alias.yaml", alias_bomb(), ALIASES),
                                    ("kube-deep.yaml", deep("clusters"), DEPTH)):
            kc = self.write(name, text)
            config = self.write("hsmca-" + name,
                                self.text + "publish:\n  enabled: true\n  kubeconfig: %s\n" % kc)
            rc, out = self.run_hsmca("config", "check", config)
            self.assertEqual(rc, 1, out)
            self.assertIn(message, out)
            self.assertIn(kc, out)

    def test_shallow_files_pass(self):
        """The limits leave the dev config and a policy file alone."""
        pol = self.write("policy-ok.yaml", "dns_names:\n  sleep.default: [a.example.com]\n")
        config = self.config_with("hsmca-ok.yaml", "issuance:\n",
                                  "issuance:\n  policy_file: %s\n" % pol)
        rc, out = self.run_hsmca("config", "check", config)
        self.assertNotIn(DEPTH, out)
        self.assertNotIn(ALIASES, out)
        self.assertIn("config check: OK", out)


if __name__ == "__main__":
    unittest.main()
