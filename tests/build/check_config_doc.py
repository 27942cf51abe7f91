#!/usr/bin/python3
"""docs/CONFIG.md documents every configuration key and no other: the keys are read from
the parser's own table (common/config_fields.h, the F/FR/FC entries of fields[]; FC keys
are those of one auth.clusters item, written auth.clusters[].KEY), the documented ones
from the first column of CONFIG.md's tables whose header starts "| key |". Prints each
key the parser knows that CONFIG.md does not document, and each key CONFIG.md documents
that the parser does not know, and exits 1 if there is any.

The special entries are in the table too: pkcs11.env (CT_ENV, config_env.c: its keys are
environment variable names, not config keys) and auth.clusters (CT_CLUSTERS,
config_cluster.c: its items' keys are the FC entries)."""
import os
import re
import sys

# A table whose parse yields fewer keys than this has changed shape: this test would
# then pass without checking, so it fails instead.
MIN_KEYS = 50


def parser_keys(src):
    with open(os.path.join(src, "common", "config_fields.h")) as f:
        text = f.read()
    macros = dict(re.findall(r'#define\s+([A-Z_]+)\s+("[^"]*")', text))
    body = text[text.index("fields[] = {"):]
    body = body[:body.index("};")]
    keys = set()
    # An entry: F(SEC, "key", ...), FR(...) or FC(...); SEC is string literals and macro
    # names, concatenated as C does. S(...) entries open sections, which are not keys.
    for macro, sec, key in re.findall(r'\b(F|FR|FC)\(\s*((?:"[^"]*"|[A-Z_]+|\s)+?)\s*,\s*"([^"]+)"',
                                      body):
        parts = re.findall(r'"([^"]*)"|([A-Z_]+)', sec)
        section = "".join(lit if lit else macros.get(name, '"?' + name + '"').strip('"')
                          for lit, name in parts)
        keys.add(section + "." + key if section else key)
    return keys


def documented_keys(path):
    keys = {}
    in_key_table = False
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.startswith("|"):
                in_key_table = False
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "key":
                in_key_table = True
                continue
            if not in_key_table or set(cells[0]) <= set("-: "):
                continue
            m = re.fullmatch(r"`([^`]+)`", cells[0])
            if not m:
                print("%s:%d: first column is not one `key`: %s" % (path, n, cells[0]))
                keys.setdefault("", n)
                continue
            if m.group(1) in keys:
                print("%s:%d: %s documented twice (first at line %d)"
                      % (path, n, m.group(1), keys[m.group(1)]))
                keys.setdefault("", n)
            keys.setdefault(m.group(1), n)
    return keys


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    doc = os.path.join(src, "docs", "CONFIG.md")
    known = parser_keys(src)
    if len(known) < MIN_KEYS:
        print("common/config_fields.h: only %d keys parsed from fields[] (expected at least %d): "
              "update tests/build/check_config_doc.py to the table's shape" % (len(known), MIN_KEYS))
        return 1
    documented = documented_keys(doc)
    bad = "" in documented
    documented.pop("", None)
    for key in sorted(known - set(documented)):
        print("docs/CONFIG.md: %s is a config key (common/config_fields.h) but is not documented"
              % key)
        bad = True
    for key in sorted(set(documented) - known):
        print("docs/CONFIG.md:%d: %s is documented but the parser does not know it "
              "(common/config_fields.h)" % (documented[key], key))
        bad = True
    if not bad:
        print("docs/CONFIG.md documents all %d config keys" % len(known))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
