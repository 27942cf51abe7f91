#!/usr/bin/python3
"""Sizes a reader can hold: every production C file at most 600 lines, every function
in them at most 80, counted from the line that opens its body to the line that
closes it. Prints each file or function over its bound and exits 1 if any is.

The production folders are read from CMakeLists.txt: every module
(`hsmca_module(NAME DIR ...)`) and every program's folder
(`add_executable(NAME DIR/main.c)`). A top-level folder that holds C files and is
neither is refused unless NOT_PRODUCTION names it, so a new folder cannot escape.

A function body is a line that is exactly "{" after a declarator, up to the next
line that is exactly "}": the layout clang-format gives this tree."""
import os
import re
import sys

# Top-level folders with C files that no program is built from (build trees, which
# hold a CMakeCache.txt, are skipped too).
NOT_PRODUCTION = {"tests"}
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


def production_dirs(root):
    """The folders CMakeLists.txt builds modules and programs from, in its order."""
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        text = f.read()
    found = re.findall(r"^\s*hsmca_module\(\s*\S+\s+([\w-]+)", text, re.M)
    found += re.findall(r"^\s*add_executable\(\s*\S+\s+([\w-]+)/main\.c\s*\)", text, re.M)
    return list(dict.fromkeys(found))


def stray_dirs(root, dirs):
    """Top-level folders holding C files that are neither production nor NOT_PRODUCTION."""
    out = []
    for d in sorted(os.listdir(root)):
        top = os.path.join(root, d)
        if d.startswith(".") or not os.path.isdir(top) or d in dirs or d in NOT_PRODUCTION:
            continue
        if os.path.exists(os.path.join(top, "CMakeCache.txt")):
            continue  # a build tree in the source tree: generated code
        for _, _, files in os.walk(top):
            if any(f.endswith((".c", ".h")) for f in files):
                out.append(d)
                break
    return out


def main(root):
    dirs = production_dirs(root)
    bad = 0
    if not dirs:
        print("check_sizes: no hsmca_module or program in %s/CMakeLists.txt" % root)
        return 1
    for d in stray_dirs(root, dirs):
        print("%s/: holds C files but is no module or program of CMakeLists.txt "
              "(add it there, or to NOT_PRODUCTION in %s)" % (d, os.path.basename(__file__)))
        bad += 1
    for d in dirs:
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
    print("check_sizes: %s: %d over the bounds" % (" ".join(d + "/" for d in dirs), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
