#!/usr/bin/python3
"""Sizes a reader can hold: every production C file (common/, token/, policy/,
audit/, pkcs11/, signer/, frontend/, supervisor/, cli/) at most 600 lines, every function in
them at most 80, counted from the line that opens its body to the line that
closes it. Prints each file or function over its bound and exits 1 if any is.

A function body is a line that is exactly "{" after a declarator, up to the next
line that is exactly "}": the layout clang-format gives this tree."""
import os
import sys

DIRS = ["common", "token", "policy", "audit", "pkcs11", "signer", "frontend", "supervisor", "cli"]
MAX_FILE_LINES = 600
MAX_FUNC_LINES = 80


def functions(lines):
    """Yields (name, first line number, length) of each top-level function body."""
    start = None
    for i, line in enumerate(lines):
        if line == "{" and start is None:
            start = i
        elif line == "}" and start is not None:
            # The declarator is the nearest line above with a "(": its name is
            # the identifier before the first "(".
            j = start - 1
            while j >= 0 and "(" not in lines[j]:
                j -= 1
            head = lines[j].split("(")[0].split() if j >= 0 else ["?"]
            name = head[-1].lstrip("*") if head else "?"
            yield name, j + 1, i - start + 1
            start = None


def main(root):
    bad = 0
    for d in DIRS:
        top = os.path.join(root, d)
        for f in sorted(os.listdir(top)):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(top, f)
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) > MAX_FILE_LINES:
                print("%s/%s: %d lines (at most %d)" % (d, f, len(lines), MAX_FILE_LINES))
                bad += 1
            for name, line, n in functions(lines):
                if n > MAX_FUNC_LINES:
                    print("%s/%s:%d: %s is %d lines (at most %d)"
                          % (d, f, line, name, n, MAX_FUNC_LINES))
                    bad += 1
    print("check_sizes: %d over the bounds" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
