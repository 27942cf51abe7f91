#!/usr/bin/python3
"""docs/SECURITY.md's reading list of each program named still lists exactly the source
files of ours linked into it (scripts/reading-list.py reads them from the binary's DWARF):
a file linked in and not listed, or listed and no longer linked, is reported by name, and
the check exits 1.

    check_reading_list.py ROOT BINARY...
    check_reading_list.py --planted ROOT BINARY

Names only: the line counts move with every edit of a listed file, and a build that
failed on each would teach everyone to regenerate the table unread; what a reviewer of
the privileged code must not miss is a file entering or leaving the program.
`--planted` checks the checker: it drops one listed file from a copy of the page and
adds one that is not linked, and fails unless both are reported."""
import importlib.util
import os
import re
import sys

DOC = os.path.join("docs", "SECURITY.md")
ROW = re.compile(r"^\|\s*`([^`/]+)/`\s*\|\s*\d+\s*\|(.*)\|\s*$")


def load_script(root):
    spec = importlib.util.spec_from_file_location(
        "reading_list", os.path.join(root, "scripts", "reading-list.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def listed(text, heading):
    """The file names of the table under heading in text, or None without that heading."""
    lines = text.splitlines()
    try:
        i = lines.index(heading)
    except ValueError:
        return None
    names = set()
    for line in lines[i + 1:]:
        if line.startswith("#"):
            break
        m = ROW.match(line)
        if m:
            words = m.group(2).split()
            names.update(f"{m.group(1)}/{w}" for w in words[0::2])
        elif names and not line.startswith("|"):
            break
    return names


def problems(text, heading, linked):
    names = listed(text, heading)
    if names is None:
        return [f"{DOC}: no reading list headed {heading}"]
    out = [f"{DOC} {heading}: {n} is linked into the program but not listed"
           for n in sorted(linked - names)]
    out += [f"{DOC} {heading}: {n} is listed but not linked into the program"
            for n in sorted(names - linked)]
    return out


def planted(root, text, rl, binary):
    heading = rl.heading(binary)
    linked = set(rl.reading_list(binary, root))
    names = listed(text, heading)
    if not names:
        print(f"planted: {DOC} has no list headed {heading}")
        return 1
    drop = sorted(names)[0]
    mod, _, base = drop.partition("/")
    start = text.index(heading)
    doctored = text[:start] + re.sub(rf" {re.escape(base)} \d+ ", " planted_extra.c 1 ",
                                     text[start:], count=1)
    got = problems(doctored, heading, linked)
    want = [drop, f"{mod}/planted_extra.c"]
    missed = [w for w in want if not any(f" {w} " in p for p in got)]
    for w in missed:
        print(f"planted: the checker did not report {w}")
    return 1 if missed else 0


def main(argv):
    plant = argv[:1] == ["--planted"]
    args = argv[1:] if plant else argv
    if len(args) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root, binaries = os.path.realpath(args[0]), args[1:]
    rl = load_script(root)
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        text = f.read()
    try:
        if plant:
            return planted(root, text, rl, binaries[0])
        bad = []
        for b in binaries:
            bad += problems(text, rl.heading(b), set(rl.reading_list(b, root)))
    except rl.ReadingListError as e:
        print(f"check_reading_list: {e}")
        return 1
    for p in bad:
        print(p)
    if bad:
        print("regenerate it: python3 scripts/reading-list.py " +
              " ".join(os.path.basename(b) for b in binaries))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
