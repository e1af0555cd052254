#!/bin/sh
# test-asan.sh -- in an --enable-asan build (the library and the tests are
# built with -fsanitize=address, and mialloc poisons memory that is not in
# a live block), AddressSanitizer reports misuse of mi_ blocks: a read after
# mi_free and a read past the end of a block; a correct program runs clean.
# Other builds: skipped (the plan says why).
b=${MIALLOC_BUILDDIR:-.}
if ! grep -q '^#define MIALLOC_ASAN 1' "$b/config.h" 2>/dev/null; then
  echo "1..0 # SKIP not an AddressSanitizer build (configure --enable-asan)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
result() {  # result OK? DESCRIPTION
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"
  else echo "not ok $n - $2"; echo "#   exit status $rc"; head -20 "$tmp/err" | sed 's/^/#   /'; fi
}
run() { "$b/$1" ${2:+"$2"} >"$tmp/out" 2>"$tmp/err"; rc=$?; }

run tests/tools/vg-clean
[ $rc = 0 ] && ! grep -q 'ERROR: AddressSanitizer' "$tmp/err"
result $? "a clean program using the mi_ API: no AddressSanitizer report"

run tests/tools/vg-invalid-read uaf
[ $rc != 0 ] && grep -qE 'ERROR: AddressSanitizer: (heap-use-after-free|use-after-poison)' "$tmp/err"
result $? "a read of a freed mi_ block: AddressSanitizer reports it"
grep -qE 'READ of size 1' "$tmp/err" && grep -q 'vg-invalid-read.c' "$tmp/err"
result $? "the report is the 1-byte read in vg-invalid-read.c"

run tests/tools/vg-invalid-read overflow
[ $rc != 0 ] && grep -qE 'ERROR: AddressSanitizer: (heap-buffer-overflow|use-after-poison)' "$tmp/err"
result $? "a read just past an mi_malloc(100) block: AddressSanitizer reports it"

# a write into a freed block (the misuse battery's program); an overflow
# into the next block cannot be seen without redzones, so it is not tested
run tests/misuse/uaf-write middle
[ $rc != 0 ] && grep -qE 'ERROR: AddressSanitizer: (heap-use-after-free|use-after-poison)' "$tmp/err"
result $? "a write into a freed block is stopped by AddressSanitizer"
echo "1..$n"
