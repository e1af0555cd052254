#!/bin/sh
# test-dlopen.sh -- a program that does not link mialloc dlopen()s a library
# that does (the "cannot allocate memory in static TLS block" failure of
# other allocators).  Also with many other TLS-using libraries loaded first.
b=${MIALLOC_BUILDDIR:-.}
plugin=$b/tests/integration/.libs/libdlopen-plugin.so
host=$b/tests/integration/dlopen-host
echo "1..2"
out=$(LD_LIBRARY_PATH=$b/src/.libs "$host" "$plugin" 2>&1)
if [ "$out" = ok ]; then echo "ok 1 - dlopen of a library linked with libmialloc works"
else echo "not ok 1 - dlopen of a library linked with libmialloc works"; echo "# $out"; fi
# preload a few TLS-heavy system libraries to use up static TLS surplus
extra=""
for l in libstdc++.so.6 libgomp.so.1; do
  p=$(ldconfig -p | awk -v n="$l" '$1 == n && /x86-64/ { print $NF; exit }')
  [ -n "$p" ] && extra="$extra $p"
done
out=$(LD_PRELOAD="$extra" LD_LIBRARY_PATH=$b/src/.libs "$host" "$plugin" 2>&1 | grep -v '^==')
if [ "$out" = ok ]; then echo "ok 2 - and with other TLS-using libraries loaded first ($extra)"
else echo "not ok 2 - and with other TLS-using libraries loaded first ($extra)"; echo "# $out"; fi
