#!/bin/sh
# Prints the privileged code's reading list: every source file of ours compiled
# into the signer program (its DWARF compilation units, so exactly what the
# linker took, not what a module directory holds), with its line count, grouped
# by module, and the total. docs/SECURITY.md §1.1 holds its output.
#   sh scripts/signer-reading-list.sh [build/hsmca-signer]
set -eu
bin=${1:-build/hsmca-signer}
root=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$bin" ] || { echo "signer-reading-list: $bin missing: cmake --build build" >&2; exit 2; }
objdump --dwarf=info "$bin" 2>/dev/null |
    awk '/DW_TAG_compile_unit/ {cu = 1; next} cu && /DW_AT_name/ {print $NF; cu = 0}' |
    sort -u | while read -r f; do
        case $f in "$root"/*) ;; *) continue ;; esac
        [ -f "$f" ] || continue
        h=${f%.c}.h
        n=$(wc -l <"$f")
        [ -f "$h" ] && n=$((n + $(wc -l <"$h")))
        # Generated from proto/signer.proto in the build tree.
        rel=$(printf '%s' "${f#"$root"/}" | sed 's|^.*/proto/|proto/|')
        printf '%s %s\n' "$rel" "$n"
    done | awk '
    { split($1, p, "/"); mod = p[1]; files[mod] = files[mod] " " substr($1, length(mod) + 2) " " $2;
      lines[mod] += $2; total += $2 }
    END { for (m in lines) printf "| `%s/` | %d |%s |\n", m, lines[m], files[m];
          printf "| total | %d | |\n", total }' | sort
