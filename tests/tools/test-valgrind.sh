#!/bin/sh
# test-valgrind.sh -- in an --enable-valgrind build, memcheck understands
# blocks of the mi_ API (mialloc describes them with client requests):
# a clean program is clean, a seeded leak is "definitely lost", seeded
# invalid reads (after free, past the end) are reported; and programs that
# use the mi_ API widely (the fuzz target) run clean.  Other
# builds: skipped (the plan says why).  The programs link libmialloc directly: memcheck replaces
# glibc's malloc by itself, mialloc's own entry points only through the
# client requests tested here.
b=${MIALLOC_BUILDDIR:-.}
if ! grep -q '^#define MIALLOC_VALGRIND 1' "$b/config.h" 2>/dev/null; then
  echo "1..0 # SKIP not a valgrind build (configure --enable-valgrind)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() {
  n=$((n + 1)); echo "not ok $n - $1"; shift
  for l in "$@"; do echo "#   $l"; done
  grep -E '==[0-9]+== ' "$tmp/vg" | head -25 | sed 's/^/#   /'
}
if ! command -v valgrind >/dev/null; then
  echo "not ok 1 - valgrind is installed (tools/deps.sh installs it)"; echo "1..1"; exit 0
fi
# vg PROGRAM ARGS...: memcheck on a built program (through libtool, which
# runs the real binary, not its wrapper script); sets $rc, output in $tmp/vg
vg() {
  prog=$1; shift
  "$b/libtool" --mode=execute valgrind -q --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite --log-file="$tmp/vg" \
    "$b/$prog" "$@" >"$tmp/out" 2>&1
  rc=$?
}
summary() { sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$tmp/vg" | tail -1; }

# -q: memcheck prints only errors; ask for the summary explicitly instead
vg tests/tools/vg-clean
if [ $rc = 0 ] && ! grep -qE 'Invalid|uninitiali|definitely lost' "$tmp/vg"; then
  ok "a clean program using the mi_ API: no memcheck errors, no leak"
else notok "a clean program using the mi_ API: no memcheck errors, no leak" "exit status $rc"; fi

vg tests/tools/vg-leak
if [ $rc = 99 ] && grep -qE '100 bytes in 1 blocks are definitely lost' "$tmp/vg"; then
  ok "a seeded leak of one mi_malloc(100) block: definitely lost: 100 bytes in 1 blocks"
else notok "a seeded leak of one mi_malloc(100) block: definitely lost: 100 bytes in 1 blocks" "exit status $rc (want 99)"; fi
if grep -A8 'definitely lost in loss record' "$tmp/vg" | grep -q 'mi_malloc'; then
  ok "the leak's allocation stack names mi_malloc"
else notok "the leak's allocation stack names mi_malloc"; fi

vg tests/tools/vg-invalid-read uaf
if [ $rc = 99 ] && grep -q 'Invalid read of size 1' "$tmp/vg"; then
  ok "a read of a freed mi_ block: Invalid read"
else notok "a read of a freed mi_ block: Invalid read" "exit status $rc (want 99)"; fi
if grep -A12 'Invalid read of size 1' "$tmp/vg" | grep -qE "inside a block of size 64 free'd"; then
  ok "memcheck knows the block was freed (inside a block of size 64 free'd)"
else notok "memcheck knows the block was freed (inside a block of size 64 free'd)"; fi

vg tests/tools/vg-invalid-read overflow
if [ $rc = 99 ] && grep -q 'Invalid read of size 1' "$tmp/vg"; then
  ok "a read just past an mi_malloc(100) block: Invalid read"
else notok "a read just past an mi_malloc(100) block: Invalid read" "exit status $rc (want 99)"; fi
if grep -A12 'Invalid read of size 1' "$tmp/vg" | grep -qE "0 bytes after a block of size 100 alloc'd"; then
  ok "memcheck knows the block's size (0 bytes after a block of size 100 alloc'd)"
else notok "memcheck knows the block's size (0 bytes after a block of size 100 alloc'd)"; fi

# a program that uses the mi_ API widely (the API tests also call plain
# malloc, which memcheck takes for itself): its own checks pass and memcheck
# finds nothing -- the fuzz target's corpus and 200 pseudo-random inputs
MIALLOC_FUZZ_RUNS=200; export MIALLOC_FUZZ_RUNS
for t in tests/fuzz/fuzz-api-standalone; do
  vg $t
  if [ $rc = 0 ] && ! grep -q 'not ok' "$tmp/out"; then
    ok "$t under memcheck: passes, no errors"
  else notok "$t under memcheck: passes, no errors" "exit status $rc" "$(grep 'not ok' "$tmp/out" | head -3 | tr '\n' ' ')"; fi
done
echo "1..$n"
