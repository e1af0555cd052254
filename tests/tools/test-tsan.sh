#!/bin/sh
# test-tsan.sh -- in an --enable-tsan build (the library and the tests are
# built with -fsanitize=thread), ThreadSanitizer watches the allocator
# while threads mix the mi_ API and free each other's blocks
# (tests/stress/test-api-handoff): no data race may be reported, with the
# defaults, with thinning and purging at once, and with guarded sampling;
# nor while profilers are attached and detached under load
# (tests/stress/test-profile-detach); nor while the purge thread purges
# the free slices of threads that went idle (tests/stress/test-idle-purge),
# nor while it serves other sub-processes and one is destroyed under it
# (tests/stress/test-subproc-purge), nor while scans free the pages of
# exited threads that other threads' frees empty (tests/stress/test-abandoned-race).
# Other builds: skipped (the plan says why).
b=${MIALLOC_BUILDDIR:-.}
if ! grep -q '^#define MIALLOC_TSAN 1' "$b/config.h" 2>/dev/null; then
  echo "1..0 # SKIP not a ThreadSanitizer build (configure --enable-tsan)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog="$b/tests/stress/test-api-handoff"
n=0
# run ENV...: the stress program under ThreadSanitizer.  Kernels that place
# mappings where this runtime does not expect them make it stop at once
# ("unexpected memory mapping"); it runs again without address
# randomisation then.
run() {
  env "$@" "$prog" >"$tmp/out" 2>"$tmp/err"; rc=$?
  if grep -q 'unexpected memory mapping' "$tmp/err"; then
    env "$@" setarch "$(uname -m)" -R "$prog" >"$tmp/out" 2>"$tmp/err"; rc=$?
  fi
}
check() {  # check DESCRIPTION ENV...
  desc=$1; shift
  run "$@"
  n=$((n + 1))
  if [ "$rc" = 0 ] && ! grep -q 'ThreadSanitizer' "$tmp/err" && ! grep -q '^not ok' "$tmp/out"; then
    echo "ok $n - $desc"
  else
    echo "not ok $n - $desc"; echo "#   exit status $rc"
    grep -h -A12 -m3 'WARNING: ThreadSanitizer\|^not ok' "$tmp/err" "$tmp/out" | head -40 | sed 's/^/#   /'
  fi
}
check "threads handing mi_ blocks to each other, profiled: no data race reported" TSAN_OPTIONS=exitcode=66
check "the same with thinning and purges due at once" MIALLOC_PAGE_THIN=1 MIALLOC_PURGE_DELAY=0
check "the same with guarded sampling of 1 in 20" MIALLOC_GUARDED_SAMPLE_RATE=20
prog="$b/tests/stress/test-profile-detach"
check "profilers attached and detached while threads sample: no data race reported" TSAN_OPTIONS=exitcode=66
prog="$b/tests/stress/test-idle-purge"
check "the purge thread purging idle threads' free slices while they come back: no data race reported" TSAN_OPTIONS=exitcode=66
prog="$b/tests/stress/test-subproc-purge"
check "the purge thread serving every sub-process while one is destroyed: no data race reported" TSAN_OPTIONS=exitcode=66
prog="$b/tests/stress/test-abandoned-race"
check "scans freeing exited threads' emptied pages while others free into them and adopt them: no data race reported" TSAN_OPTIONS=exitcode=66
echo "1..$n"
