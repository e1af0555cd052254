#!/bin/sh
# test-memcheck-preload.sh -- Valgrind's memcheck on a program run with
# mialloc preloaded, as on a system with mialloc in /etc/ld.so.preload:
# memcheck must replace mialloc's malloc as it does glibc's, so a seeded
# use after free and a seeded leak of plain malloc blocks are reported;
# and mialloc must say when memcheck cannot see its blocks (a program
# calling the mi_ API, which memcheck does not replace).  A library
# Valgrind cannot read the symbols of (as a 64 KiB-aligned .bss made it)
# leaves memcheck blind: the first check fails then.  Builds for Valgrind
# and ASan: skipped (test-valgrind.sh, test-asan.sh).
b=${MIALLOC_BUILDDIR:-.}
if grep -qE '^#define MIALLOC_(VALGRIND|ASAN) 1' "$b/config.h" 2>/dev/null; then
  echo "1..0 # SKIP a Valgrind or ASan build (see test-valgrind.sh, test-asan.sh)"
  exit 0
fi
if ! command -v valgrind >/dev/null; then
  echo "not ok 1 - valgrind is installed (tools/deps.sh installs it)"; echo "1..1"; exit 0
fi
lib=${MIALLOC_LIB:?MIALLOC_LIB is not set}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
check() {
  n=$((n + 1))
  if [ "$2" = yes ]; then echo "ok $n - $1"; else
    echo "not ok $n - $1"; grep -E '==[0-9]+== |mialloc:' "$tmp/vg" | head -25 | sed 's/^/#   /'; fi
}
# vg PROGRAM: memcheck with mialloc preloaded, the real binary (libtool)
vg() {
  "$b/libtool" --mode=execute env LD_PRELOAD="$lib" valgrind --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite "$b/$1" >"$tmp/out" 2>"$tmp/vg"
  rc=$?
}
vg tests/tools/vg-libc-api
ok=no
[ $rc = 99 ] && grep -A12 'Invalid read of size 1' "$tmp/vg" | grep -q "inside a block of size 64 free'd" && ok=yes
check "preloaded: memcheck reports a read of a freed malloc block (it replaced mialloc's malloc)" $ok
ok=no
grep -q '100 bytes in 1 blocks are definitely lost' "$tmp/vg" && ok=yes
check "preloaded: memcheck reports a leaked malloc block" $ok
ok=no
grep -q '^done' "$tmp/out" && ! grep -q 'mialloc: warning: Valgrind' "$tmp/vg" && ok=yes
check "preloaded: the program runs, and mialloc does not warn (memcheck sees every block)" $ok
vg tests/tools/vg-leak
ok=no
grep -q "mialloc: warning: Valgrind's memcheck does not see mialloc's blocks" "$tmp/vg" && ok=yes
check "a program calling mi_malloc under memcheck: mialloc warns that memcheck does not see its blocks" $ok
echo "1..$n"
