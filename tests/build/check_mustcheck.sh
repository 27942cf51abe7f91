#!/bin/sh
# The build refuses a dropped hsmca_code result: the control (result checked)
# compiles, the same file with the result dropped does not, and the compiler
# says why. Usage: check_mustcheck.sh CC FILE -I... (include flags)
set -u
cc=$1 file=$2
shift 2
if ! "$cc" -std=gnu11 -Werror -c -o /dev/null "$@" "$file"; then
    echo "FAIL: the control (result checked) does not compile"
    exit 1
fi
out=$("$cc" -std=gnu11 -Werror -c -o /dev/null -DDROP "$@" "$file" 2>&1)
if [ $? -eq 0 ]; then
    echo "FAIL: a dropped hsmca_code result compiles"
    exit 1
fi
case "$out" in
*unused-result* | *warn_unused_result* | *unused_result*)
    echo "ok: a dropped hsmca_code result fails the build:"
    echo "$out" | grep -m1 -i "unused"
    ;;
*)
    echo "FAIL: the dropped result failed for another reason:"
    echo "$out"
    exit 1
    ;;
esac
