#!/bin/sh
# test-preload.sh -- libmialloc put in front of glibc with LD_PRELOAD:
# programs run on it (it says so, and it is mapped) and behave the same.
lib=${MIALLOC_LIB:?MIALLOC_LIB not set}
n=0
fail=0
check() {  # check NAME CONDITION-RESULT
  n=$((n + 1))
  if [ "$2" = 0 ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; fail=$((fail + 1)); fi
}
echo "1..6"
err=$(LD_PRELOAD=$lib MIALLOC_VERBOSE=1 /bin/true 2>&1)
echo "$err" | grep -q "malloc is redirected to mialloc"; check "MIALLOC_VERBOSE=1 true: mialloc says it is active" $?
LD_PRELOAD=$lib cat /proc/self/maps | grep -qF "$lib"; check "the library is mapped in a preloaded process" $?
a=$(ls -la /usr/bin | sort); b=$(LD_PRELOAD=$lib ls -la /usr/bin | sort)
[ "$a" = "$b" ]; check "ls output is the same" $?
# (perl: coreutils close stderr before exit, so they cannot show it)
s=$(LD_PRELOAD=$lib MIALLOC_SHOW_STATS=1 perl -e 1 2>&1)
echo "$s" | grep -q "mialloc statistics"; check "MIALLOC_SHOW_STATS=1 prints statistics at exit" $?
a=$(seq 1 200000 | sort -r | md5sum); b=$(LD_PRELOAD=$lib sh -c 'seq 1 200000 | sort -r | md5sum')
[ "$a" = "$b" ]; check "sort of 200000 lines is the same" $?
# a privileged process ignores MIALLOC_* (the verbose line must not appear)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  tmp=$(mktemp -d); cp /bin/true "$tmp/true"; chown nobody "$tmp/true"; chmod 4755 "$tmp/true"
  err=$(LD_PRELOAD=$lib MIALLOC_VERBOSE=1 "$tmp/true" 2>&1); rm -rf "$tmp"
  # AT_SECURE also drops LD_PRELOAD of paths outside trusted dirs: either way
  # no mialloc output may appear
  ! echo "$err" | grep -q "mialloc:"; check "a setuid program ignores MIALLOC_VERBOSE" $?
else
  n=$((n + 1)); echo "not ok $n - setuid check needs root and setpriv"; fail=$((fail + 1))
fi
exit 0
