#!/usr/bin/python3
"""Citations of the architecture page hold: no file of the project cites the old design
document outside the project (by its file name, or its name and a section sign), and
every `ARCHITECTURE.md §N` (or §N.M; lists such as "§1, §3" and "§3 and §5" and a list
continued on the next comment line) names a section docs/ARCHITECTURE.md has: one of its
headings "## N. Title" or "### N.M Title". The page's own bare references (§N without a
file name before them) are checked the same way. Prints each bad citation as
path:line and exits 1 if there is one.

Every text file under ROOT is read, but .git and build trees (a directory holding
CMakeCache.txt). `--planted` checks the checker: it copies the page into a scratch
tree, plants one citation of each bad kind and fails unless each is reported."""
import os
import re
import shutil
import sys
import tempfile

DOC = os.path.join("docs", "ARCHITECTURE.md")
# The old document's name, spelled in two pieces so this file does not cite it.
OLD = "DESI" + "GN"
# The page's name as a citation, spelled so the planted cases below do not cite it here.
PAGE = "docs/ARCHITECTURE" + ".md"
OLD_CITE = re.compile(OLD + r"(?:\.md\b|\s+§)")
SECTION = r"§\s?\d+(?:\.\d+)*"
# A citation: the page's name, then one or more section numbers joined by commas, "and",
# or a line break inside a comment (" * ", "# ", "// ").
CITE = re.compile(r"ARCHITECTURE\.md((?:[\s,*#/]*(?:and\s+)?" + SECTION + r")+)")
NUMBER = re.compile(r"§\s?(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s")
MAX_BYTES = 4 << 20


def sections(root):
    """The section numbers of docs/ARCHITECTURE.md's headings."""
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        return {m.group(1) for m in map(HEADING.match, f) if m}


def text_files(root):
    """(relative path, text) of every UTF-8 file under root outside .git and build trees."""
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git" and
                         not os.path.exists(os.path.join(top, d, "CMakeCache.txt")))
        for name in sorted(files):
            path = os.path.join(top, name)
            try:
                if os.path.islink(path) or os.path.getsize(path) > MAX_BYTES:
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                if b"\0" in data:
                    continue
                yield os.path.relpath(path, root), data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def check(root):
    """The bad citations under root, as 'path:line: why' strings."""
    have = sections(root)
    bad = []
    for rel, text in text_files(root):
        for m in OLD_CITE.finditer(text):
            bad.append("%s:%d: cites %s; cite docs/ARCHITECTURE.md §N instead"
                       % (rel, line_of(text, m.start()), m.group(0)))
        cites = [(m.start(1), m.group(1)) for m in CITE.finditer(text)]
        if rel == DOC:  # the page's own references: a section sign not after another file
            cites += [(m.start(), m.group(0)) for m in re.finditer(SECTION, text)
                      if not re.search(r"\.md\s*$", text[max(0, m.start() - 40):m.start()])]
        for pos, run in cites:
            for n in NUMBER.findall(run):
                if n not in have:
                    bad.append("%s:%d: docs/ARCHITECTURE.md has no section %s"
                               % (rel, line_of(text, pos), n))
    return sorted(set(bad))


def planted(root):
    """0 when a citation of each bad kind, planted in a scratch tree, is reported."""
    scratch = tempfile.mkdtemp(prefix="citations.")
    try:
        os.makedirs(os.path.join(scratch, "docs"))
        shutil.copy(os.path.join(root, DOC), os.path.join(scratch, DOC))
        good = "/* good.c - the signer (docs/ARCHITECTURE.md §1, §3.1). */\n"
        with open(os.path.join(scratch, "good.c"), "w") as f:
            f.write(good)
        if check(scratch):
            print("planted: a good citation was reported: %s" % check(scratch))
            return 1
        cases = {
            "old_name.c": "/* see %s.md */\n" % OLD,
            "old_section.c": "/* the request path (%s §3) */\n" % OLD,
            "missing.c": "/* the log (%s §99) */\n" % PAGE,
            "missing_sub.h": "/* tokens (%s §6.42) */\n" % PAGE,
            "listed.py": "# processes (%s §1, §77)\n" % PAGE,
            "wrapped.c": "/* both (%s §1,\n * §88) */\n" % PAGE,
        }
        failed = 0
        for name, text in cases.items():
            path = os.path.join(scratch, name)
            with open(path, "w") as f:
                f.write(text)
            found = check(scratch)
            os.remove(path)
            if not any(b.startswith(name + ":") for b in found):
                print("planted: %s not reported: %r" % (name, text))
                failed += 1
            else:
                print("planted: %s" % found[0])
        print("check_citations --planted: %d of %d planted citations missed"
              % (failed, len(cases)))
        return 1 if failed else 0
    finally:
        shutil.rmtree(scratch)


def main(argv):
    args = [a for a in argv if a != "--planted"]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "..")
    if "--planted" in argv:
        return planted(root)
    bad = check(root)
    for b in bad:
        print(b)
    print("check_citations: %d bad citations" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
