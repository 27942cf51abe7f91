#!/usr/bin/python3
"""check_sizes.py covers every production folder: the ones CMakeLists.txt builds a module
or a program from, whatever they are called, and refuses a folder of C files that is
neither. Run on a made-up tree (a module and a program of new names, each over a bound,
a stray folder, tests/ left alone) and on this tree (every module folder named, metrics/
among them). Usage: test_check_sizes.py SOURCE_DIR"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_sizes.py")
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..")


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(root):
    r = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


class CheckSizesTests(unittest.TestCase):
    def test_new_folders_are_found_from_cmakelists(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "CMakeLists.txt",
                  "hsmca_module(hsmca_newmod newmod hsmca_common)\n"
                  "add_executable(hsmca-newprog newprog/main.c)\n")
            write(root, "newmod/big.c", "int x;\n" * 601)
            write(root, "newprog/main.c",
                  "int main(void)\n{\n" + "    ;\n" * 79 + "}\n")
            write(root, "stray/s.c", "int y;\n")
            write(root, "tests/t.c", "int z;\n" * 700)
            rc, out = run(root)
        self.assertEqual(rc, 1, out)
        self.assertIn("newmod/big.c: 601 lines", out)
        self.assertIn("newprog/main.c:1: main is 81 lines", out)
        self.assertIn("stray/: holds C files", out)
        self.assertNotIn("tests/", out)

    def test_this_tree_every_module_folder(self):
        with open(os.path.join(SRC, "CMakeLists.txt")) as f:
            modules = re.findall(r"^hsmca_module\(\S+ (\S+)", f.read(), re.M)
        self.assertIn("metrics", modules)  # control: the CMakeLists was read
        rc, out = run(SRC)
        summary = out.strip().splitlines()[-1]
        for d in modules:
            self.assertIn(" %s/" % d, summary)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
