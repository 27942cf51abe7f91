#!/usr/bin/python3
"""Prints the reading list of each program named: every source file of ours compiled into
it (its DWARF compilation units, so exactly what the linker took, not what a module
directory holds), with its header's lines added, grouped by module, and the total, as the
Markdown docs/SECURITY.md §1.1 holds for each privileged program.

    python3 scripts/reading-list.py [--build DIR] PROGRAM...

A PROGRAM without a slash is looked up in the build directory (default: build); one with
a slash is a path to the binary. The build must carry debug information (the default
RelWithDebInfo, or Debug).

A compilation unit's name is relative when ccache rewrote the paths under its base_dir:
it is then resolved against the unit's compile directory (DW_AT_comp_dir). A cache hit
made by another checkout (ccache with hash_dir off shares objects between checkouts)
keeps that checkout's compile directory; the same relative name then names this tree's
file from this build's directory, since the relative path is part of the cache key."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTR = re.compile(r"DW_AT_(name|comp_dir)\s*:\s*(?:\([^)]*\):\s*)?(.*?)\s*$")


class ReadingListError(Exception):
    pass


def compile_units(binary):
    """(name, comp_dir) of every compilation unit in binary's DWARF."""
    try:
        out = subprocess.run(["objdump", "--dwarf=info", "--dwarf-depth=1", binary],
                             check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise ReadingListError(f"objdump {binary}: {e}") from e
    units, cur = [], None
    for line in out.splitlines():
        if "DW_TAG_compile_unit" in line or "DW_TAG_partial_unit" in line:
            cur = {}
            units.append(cur)
        elif cur is not None and "DW_AT_" in line:
            m = ATTR.search(line)
            if m and m.group(1) not in cur:
                cur[m.group(1)] = m.group(2)
    return [(u["name"], u.get("comp_dir", "")) for u in units if "name" in u]


def inside(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def our_file(name, comp_dir, build, root=ROOT):
    """The tree-relative label of a unit's source file (proto/x.pb-c.c for one generated
    in the build directory), or None for a file not of this tree."""
    if os.path.isabs(name):
        candidates = [name]
    else:
        candidates = [os.path.join(comp_dir, name), os.path.join(build, name)]
    for c in candidates:
        path = os.path.normpath(c)
        if inside(path, build) and os.path.isfile(path):
            return os.path.relpath(path, build)
        if inside(path, root) and os.path.isfile(path):
            return os.path.relpath(path, root)
    return None


def binary_of(program, build):
    return program if "/" in program else os.path.join(build, program)


def reading_list(binary, root=ROOT):
    """{tree-relative source file: its lines plus its header's} of binary."""
    binary, root = os.path.realpath(binary), os.path.realpath(root)
    if not os.access(binary, os.X_OK):
        raise ReadingListError(f"{binary} missing: cmake --build build")
    build = os.path.dirname(binary)
    units = compile_units(binary)
    if not units:
        raise ReadingListError(f"{binary} has no debug information: build with -g "
                               "(CMAKE_BUILD_TYPE RelWithDebInfo or Debug)")
    files = {}
    for name, comp_dir in units:
        rel = our_file(name, comp_dir, build, root)
        if rel is None:
            continue
        path = os.path.join(build if os.path.isfile(os.path.join(build, rel)) else root, rel)
        n = count_lines(path)
        header = path[:-2] + ".h" if path.endswith(".c") else None
        if header and os.path.isfile(header):
            n += count_lines(header)
        files[rel] = n
    if not files:
        raise ReadingListError(f"{binary}: no compilation unit of {root}")
    return files


def count_lines(path):
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def table(files):
    """The Markdown table of a reading list: one row per module, then the total."""
    mods = {}
    for rel, n in files.items():
        mod, _, base = rel.partition("/")
        mods.setdefault(mod, []).append((base, n))
    rows = ["| module | lines | files |", "|---|---|---|"]
    for mod in sorted(mods):
        entries = sorted(mods[mod])
        listed = " ".join(f"{b} {n}" for b, n in entries)
        rows.append(f"| `{mod}/` | {sum(n for _, n in entries)} | {listed} |")
    rows.append(f"| total | {sum(files.values())} | |")
    return "\n".join(rows)


def heading(program):
    return f"#### `{os.path.basename(program)}`"


def main(argv):
    args, build = list(argv), "build"
    if args[:1] == ["--build"] and len(args) >= 2:
        build, args = args[1], args[2:]
    if not args or any(a.startswith("-") for a in args):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = []
    for program in args:
        try:
            files = reading_list(binary_of(program, build))
        except ReadingListError as e:
            print(f"reading-list: {e}", file=sys.stderr)
            return 2
        out.append(f"{heading(program)}\n\n{table(files)}")
    print("\n\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
