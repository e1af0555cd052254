#!/bin/sh
# run.sh -- the misuse battery: runs each program in tests/misuse/ in the
# mode of this build and checks the documented outcome (doc/secure.md):
# the message on stderr (naming the pointer and the kind of misuse), the
# errno-style code an error callback receives, the exit status or signal,
# MIALLOC_ABORT_ON_ERROR=1 turning a detection into SIGABRT, guarded
# sampling trapping with SIGSEGV, and -- always -- that no live block was
# silently corrupted.
#
# The mode comes from config.h in the build tree; MIALLOC_MISUSE_MODE
# (release, secure, debug or secure,debug) and MIALLOC_MISUSE_GUARDED
# (yes/no) override it, e.g. to run the battery against another build.
b=${MIALLOC_BUILDDIR:-.}
dir=$b/tests/misuse
cfg=$b/config.h

defined() { grep -q "^#define $1 1" "$cfg" 2>/dev/null; }
secure=no; debug=no; guarded=no; asan=no; valgrind=no
defined MIALLOC_SECURE && secure=yes
defined MIALLOC_VALGRIND && valgrind=yes
defined MIALLOC_DEBUG && debug=yes
defined MIALLOC_GUARDED && guarded=yes
defined MIALLOC_ASAN && asan=yes
if [ -n "${MIALLOC_MISUSE_MODE:-}" ]; then
  secure=no; debug=no
  case ",$MIALLOC_MISUSE_MODE," in *,secure,*) secure=yes ;; esac
  case ",$MIALLOC_MISUSE_MODE," in *,debug,*) debug=yes ;; esac
fi
[ -n "${MIALLOC_MISUSE_GUARDED:-}" ] && guarded=$MIALLOC_MISUSE_GUARDED
mode=release
[ $secure = yes ] && mode=secure
[ $debug = yes ] && mode=debug
[ $secure = yes ] && [ $debug = yes ] && mode=secure+debug
detect=no
[ $secure = yes ] || [ $debug = yes ] && detect=yes

launch=""   # a launcher to run the programs through (no-guard-markers)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ulimit -c 0 2>/dev/null
n=0
failed=0

# The environment of every run: no stray options from the caller, messages on.
# Guarded sampling off unless a run asks for it (secure builds default to
# 1 in 4096, which would make a victim trap now and then).
clean_env() {
  env -u MIALLOC_ABORT_ON_ERROR -u MIALLOC_GUARDED_MIN \
      -u MIALLOC_GUARDED_MAX -u MIALLOC_SHOW_ERRORS -u MIALLOC_VERBOSE -u LD_PRELOAD \
      MIALLOC_GUARDED_SAMPLE_RATE=0 "$@"
}

# run PROG [VAR=VALUE...] -- [ARGS...]: runs the program, sets $rc, $out, $err
run() {
  prog=$1; shift
  vars=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
  [ $# -gt 0 ] && shift
  out=$tmp/out; err=$tmp/err
  # shellcheck disable=SC2086
  clean_env $vars timeout 60 $launch "$dir/$prog" "$@" >"$out" 2>"$err"
  rc=$?
  desc_run="$prog $*${vars:+ with$vars}"
}

# result DESCRIPTION PROBLEMS: one TAP line; PROBLEMS empty means ok
result() {
  n=$((n + 1))
  if [ -z "$2" ]; then
    echo "ok $n - $1"
  else
    echo "not ok $n - $1"
    failed=$((failed + 1))
    printf '%s\n' "$2" | sed 's/^/#   /'
    echo "#   ran: $desc_run (exit status $rc)"
    sed 's/^/#   stdout: /' "$out" | head -20
    sed 's/^/#   stderr: /' "$err" | head -10
  fi
}

skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }

victim() { sed -n 's/^misuse: victim \(0x[0-9a-f]*\).*/\1/p' "$out" | head -1; }

signame() {
  case $1 in 0) echo "exit 0" ;; 134) echo "SIGABRT" ;; 139) echo "SIGSEGV" ;; 124) echo "timeout" ;;
    *) if [ "$1" -gt 128 ]; then echo "signal $(($1 - 128))"; else echo "exit $1"; fi ;; esac
}

# Problems with the run just done, one per line (empty: none).
#  want_rc WANT          exit status (0, 134 SIGABRT, 139 SIGSEGV)
#  intact                the program saw no corruption and got to the end
#  error_naming PTR KIND a "mialloc: error:" line names PTR and matches KIND
#  error_kind KIND       a "mialloc: error:" line matches KIND
#  code NAME             the error callback received NAME
problems=""
problem() { problems="$problems${problems:+
}$1"; }
want_rc() { [ "$rc" = "$1" ] || problem "expected $(signame "$1"), got $(signame "$rc")"; }
intact() {
  grep -q '^misuse: done, no corruption seen' "$out" || problem "the program saw corruption or did not finish"
  if grep -q '^misuse: CORRUPTION' "$out"; then problem "$(grep '^misuse: CORRUPTION' "$out" | head -3)"; fi
}
error_naming() {
  if [ -z "$1" ]; then problem "the program did not print its victim pointer"; return; fi
  line=$(grep '^mialloc: error:' "$err" | grep -F "$1" | head -1)
  if [ -z "$line" ]; then problem "no 'mialloc: error:' line names $1"; return; fi
  printf '%s\n' "$line" | grep -Eqi "$2" || problem "the error line does not say what happened (/$2/): $line"
}
error_kind() {
  grep '^mialloc: error:' "$err" | grep -Eqi "$1" || problem "no 'mialloc: error:' line matches /$1/"
}
code() {
  grep -q "^misuse: error-callback $1 " "$out" || problem "the error callback did not receive $1"
}
no_errors() {
  if grep -q '^mialloc: error:' "$err"; then problem "unexpected error: $(grep '^mialloc: error:' "$err" | head -1)"; fi
}
check() { result "$1" "$problems"; problems=""; }

# kernel_launch KERNEL DESCRIPTION: the runs that follow go through
# no-guard-markers when KERNEL is not empty (a kernel without guard
# markers); false, with DESCRIPTION skipped, where its filter cannot work
kernel_launch() {
  launch=""
  [ -z "$1" ] && return 0
  if ! "$dir/no-guard-markers" /bin/true 2>/dev/null; then
    skip "$2" "no-guard-markers cannot install its seccomp filter here"
    return 1
  fi
  launch="$dir/no-guard-markers"
}

echo "# mode: $mode, guarded sampling compiled in: $guarded, asan: $asan"

# --- the detected misuses: secure and debug builds --------------------------
# detected CASE PROG ARGS KIND CODE SIZE: three runs (plain, callback, abort)
detected() {
  name=$1 prog=$2 args=$3 kind=$4 want=$5 size=$6
  # shellcheck disable=SC2086
  run "$prog" -- $args
  p=$(victim)
  want_rc 0; intact; error_naming "$p" "$kind"
  [ -n "$size" ] && ! grep '^mialloc: error:' "$err" | grep -F "$p" | grep -q "$size bytes" &&
    problem "the error line does not name the size class ($size bytes)"
  check "$name ($mode): reported naming the block, ignored, nothing corrupted"
  # shellcheck disable=SC2086
  run "$prog" -- $args --callback
  want_rc 0; intact; code "$want"
  check "$name ($mode): the error callback receives $want"
  # shellcheck disable=SC2086
  run "$prog" MIALLOC_ABORT_ON_ERROR=1 -- $args
  want_rc 134; error_naming "$(victim)" "$kind"
  check "$name ($mode): MIALLOC_ABORT_ON_ERROR=1 aborts (SIGABRT) after the message"
}

kind_double='double'
kind_interior='interior|middle|not the start|not a block|invalid'
kind_overflow='overflow|canary|padding'
kind_uaf='use.after.free|modified|overwritten|written|corrupt'
kind_freed='freed already.*use after free'
kind_freelist='corrupt|free.list'

if [ $asan = yes ]; then
  for c in double-free free-interior overflow-1 overflow-64 uaf-write-first uaf-write-middle realloc-freed; do
    skip "$c ($mode)" "AddressSanitizer build: ASan reports misuse first (tests/tools/test-asan.sh)"
  done
elif [ $detect = yes ]; then
  detected "double free" double-free "" "$kind_double" EAGAIN 64
  detected "realloc of a freed block to its size" realloc-freed same "$kind_freed" EAGAIN 64
  detected "realloc of a freed block to a larger size" realloc-freed grow "$kind_freed" EAGAIN 64
  detected "realloc of an interior pointer" realloc-freed interior "$kind_interior" EINVAL ""
  detected "free of an interior pointer" free-interior "" "$kind_interior" EINVAL ""
  # the interior free left the block live: freeing it properly was silent
  run free-interior --
  cnt=$(grep -c '^mialloc: error:' "$err")
  [ "$cnt" = 1 ] || problem "expected exactly one error line (the interior free), got $cnt"
  check "free of an interior pointer ($mode): the real free of the block later is not an error"
  if [ $debug = yes ]; then
    detected "heap overflow by 1 byte" overflow 1 "$kind_overflow" EOVERFLOW 64
    detected "heap overflow by 64 bytes" overflow 64 "$kind_overflow" EOVERFLOW 64
  else
    # secure builds keep no padding record: an overflow into live memory
    # is not seen at free (one into a free block's link is, when the block
    # is handed out; guarded sampling, on by default, traps it: see below)
    for over in 1 64; do
      run overflow -- $over
      want_rc 0; intact
      check "heap overflow by $over byte(s) ($mode): not detectable without padding; the program goes on, nothing else corrupted"
    done
  fi
  # use after free: debug finds any changed byte, secure the first word
  if [ $debug = yes ]; then
    for where in first middle; do
      what="the first word"; [ $where = middle ] && what="a middle byte"
      run uaf-write -- $where
      want_rc 0; intact
      if grep -q 'mi_debug_check() is not in this library' "$out"; then
        problem "mi_debug_check() is missing from the library"
      else
        grep -q 'mi_debug_check() returned false' "$out" || problem "mi_debug_check() did not return false"
        error_naming "$(victim)" "$kind_uaf|$kind_freelist"
      fi
      check "use after free, write to $what ($mode): mi_debug_check() reports it, nothing corrupted"
      run uaf-write -- $where nocheck
      want_rc 0; intact; error_kind "$kind_uaf|$kind_freelist"
      check "use after free, write to $what ($mode): reported when the block is handed out again"
      run uaf-write MIALLOC_ABORT_ON_ERROR=1 -- $where nocheck
      want_rc 134; error_kind "$kind_uaf|$kind_freelist"
      check "use after free, write to $what ($mode): MIALLOC_ABORT_ON_ERROR=1 aborts"
    done
    run uaf-write -- first nocheck --callback
    grep -q '^misuse: error-callback ' "$out" || problem "the error callback was not called"
    check "use after free ($mode): the error callback is called"
  else
    run uaf-write -- first
    want_rc 0; intact; error_kind "$kind_freelist"
    check "use after free, write to the link word ($mode): corrupted free list reported, nothing corrupted"
    run uaf-write -- first --callback
    want_rc 0; intact; code EFAULT
    check "use after free, write to the link word ($mode): the error callback receives EFAULT"
    run uaf-write MIALLOC_ABORT_ON_ERROR=1 -- first
    want_rc 134; error_kind "$kind_freelist"
    check "use after free, write to the link word ($mode): MIALLOC_ABORT_ON_ERROR=1 aborts"
    run uaf-write -- middle
    want_rc 0; intact
    check "use after free, write to a middle byte ($mode): harmless, nothing corrupted"
  fi
else
  # release builds mark freed blocks (MIA_FREE_MARK): a second free of a
  # block not yet handed out again is reported; Valgrind builds leave it
  # to Valgrind
  if [ $valgrind = yes ]; then
    skip "double-free ($mode)" "Valgrind build: memcheck reports double frees (tests/tools)"
    skip "realloc-freed ($mode)" "Valgrind build: memcheck reports the use after free (tests/tools)"
  else
    detected "double free" double-free "" "$kind_double" EAGAIN 64
    detected "realloc of a freed block to its size" realloc-freed same "$kind_freed" EAGAIN 64
    detected "realloc of a freed block to a larger size" realloc-freed grow "$kind_freed" EAGAIN 64
  fi
  # no block starts off a 16-byte boundary: the free's range test catches
  # such a pointer too, and realloc checks for it on its slow path
  detected "free of a pointer 8 bytes into a block" free-interior 8 "$kind_interior" EINVAL ""
  run free-interior -- 8
  cnt=$(grep -c '^mialloc: error:' "$err")
  [ "$cnt" = 1 ] || problem "expected exactly one error line (the interior free), got $cnt"
  check "free of a pointer 8 bytes into a block ($mode): the real free of the block later is not an error"
  detected "realloc of a pointer 8 bytes into a block" realloc-freed "interior 8" "$kind_interior" EINVAL ""
  for c in free-interior realloc-interior overflow-1 overflow-64 uaf-write-first uaf-write-middle; do
    skip "$c ($mode)" "release build: this misuse is undefined behaviour (detected in secure and debug builds)"
  done
fi

# --- guard pages at the end of every page and huge span: secure builds -------
if [ $asan = yes ]; then
  skip "overflow off the end of a page ($mode)" "AddressSanitizer build: ASan owns SIGSEGV"
elif [ $secure = yes ]; then
  # guard markers where the kernel has them (Linux 6.13), PROT_NONE pages
  # before: both ways, the second through a seccomp filter that refuses the
  # markers as an older kernel does
  for kernel in "" "without guard markers, "; do
    kernel_launch "$kernel" "overflow off the end of a page ($mode): ${kernel}traps" || continue
    run overflow-page -- page
    want_rc 139
    grep -q '^misuse: wrote' "$out" && problem "the overflow off the page's last block did not trap"
    p=$(victim)
    grep '^mialloc: error: heap overflow off the end of a page' "$err" | grep -qF "last block $p (" ||
      problem "no 'mialloc: error: heap overflow off the end of a page' naming the last block $p"
    check "overflow off the last block of a page ($mode): ${kernel}the guard page after it traps (SIGSEGV) with a message"
    run overflow-page -- under
    want_rc 139
    grep -q '^misuse: wrote' "$out" && problem "the underflow below the page's first block did not trap"
    grep '^mialloc: error: heap underflow before the first block' "$err" | grep -qF "block $(victim) (" ||
      problem "no 'mialloc: error: heap underflow before the first block $(victim)'"
    check "underflow below the first block of a page ($mode): ${kernel}the guard page below it traps (SIGSEGV) with a message"
    run overflow-page -- huge
    if [ $debug = yes ]; then
      # the usable size is the size asked for: the canary after it is hit
      # long before the guard at the end of the span
      want_rc 0; error_naming "$(victim)" "$kind_overflow"
      check "overflow off the end of a huge block ($mode): ${kernel}the canary after it reports it at free"
    else
      want_rc 139
      grep -q '^misuse: wrote' "$out" && problem "the overflow off the huge block did not trap"
      grep -qF "mialloc: error: heap overflow past huge block $(victim) (" "$err" ||
        problem "no 'mialloc: error: heap overflow past huge block $(victim)'"
      check "overflow off the end of a huge block ($mode): ${kernel}the guard page after its span traps (SIGSEGV) with a message"
    fi
  done
  launch=""
else
  skip "overflow off the end of a page ($mode)" "guard pages after pages are a secure-build feature"
fi

# --- free of a pointer mialloc does not own: every build ---------------------
first_stack() { sed -n 's/^misuse: stack pointer \(0x[0-9a-f]*\).*/\1/p' "$out" | head -1; }
if [ $asan = yes ]; then
  skip "free of a stack address ($mode)" "AddressSanitizer build: ASan's free() reports it"
elif [ $detect = yes ]; then
  run free-stack --
  want_rc 0; intact
  grep -q '^misuse: stack buffer intact' "$out" || problem "the stack buffer was written"
  line=$(grep '^mialloc: error:' "$err" | grep -F "$(first_stack)" | head -1)
  [ -n "$line" ] || problem "no 'mialloc: error:' line names $(first_stack)"
  check "free of a stack address ($mode): reported as an error naming the pointer, stack untouched"
  run free-stack -- --callback
  want_rc 0; intact; code EFAULT
  check "free of a stack address ($mode): the error callback receives EFAULT"
  run free-stack MIALLOC_ABORT_ON_ERROR=1 --
  want_rc 134
  grep '^mialloc: error:' "$err" | grep -qF "$(first_stack)" || problem "no error line before the abort"
  check "free of a stack address ($mode): MIALLOC_ABORT_ON_ERROR=1 aborts (SIGABRT)"
else
  run free-stack --
  want_rc 0; intact; no_errors
  grep -q '^misuse: stack buffer intact' "$out" || problem "the stack buffer was written"
  cnt=$(grep -c '^mialloc: warning:' "$err")
  [ "$cnt" = 1 ] || problem "expected one warning for three foreign frees, got $cnt"
  grep '^mialloc: warning:' "$err" | grep -qF "$(first_stack)" || problem "the warning does not name $(first_stack)"
  check "free of a stack address ($mode): one warning naming the first pointer, ignored, stack untouched"
  run free-stack -- --callback
  want_rc 0; intact; code EFAULT
  check "free of a stack address ($mode): the error callback receives EFAULT"
fi

# --- guarded sampling: any build with it compiled in --------------------------
G="MIALLOC_GUARDED_SAMPLE_RATE=1 MIALLOC_GUARDED_MIN=16 MIALLOC_GUARDED_MAX=64KiB"
if [ $asan = yes ]; then
  skip "guarded sampling ($mode)" "AddressSanitizer build: ASan owns SIGSEGV"
elif [ $guarded = yes ]; then
  guarded_count() { sed -n 's/^misuse: guarded \([0-9]*\) of.*/\1/p' "$out"; }
  # traps PROG ARG WHAT KIND DESCRIPTION: PROG's misuse of its 64-byte
  # guarded victim must trap at once with "KIND guarded block VICTIM"
  traps() {
    # shellcheck disable=SC2086
    run "$1" $G -- "$2"
    want_rc 139
    grep -q '^misuse: wrote' "$out" && problem "$3 did not trap at once"
    p=$(victim)
    grep -qF "mialloc: error: $4 guarded block $p (64 bytes)" "$err" ||
      problem "no 'mialloc: error: $4 guarded block $p (64 bytes)'"
    check "$5"
  }
  # The slots' closed pages are guard markers where the kernel has them
  # (Linux 6.13), mprotect before: the traps are checked both ways, the
  # second through a seccomp filter that refuses the markers as an older
  # kernel does.
  for kernel in "" "without guard markers, "; do
    kernel_launch "$kernel" "guarded sampling, rate 1 ($mode): ${kernel}traps" || continue
    for over in 1 64; do
      traps overflow $over "the overflowing write" "heap overflow past" \
        "guarded sampling, rate 1 ($mode): ${kernel}a $over-byte overflow traps at once (SIGSEGV) with a message"
    done
    for where in first middle; do
      what="the first word"; [ $where = middle ] && what="a middle byte"
      traps uaf-write $where "the write into the freed block" "use after free of" \
        "guarded sampling, rate 1 ($mode): ${kernel}a write to $what of a freed block traps (SIGSEGV)"
    done
    traps exec-heap "" "the call into the block" "invalid access to live" \
      "guarded sampling, rate 1 ($mode): ${kernel}running code from a live guarded block is no use after free"
    run guarded-sample MIALLOC_GUARDED_SAMPLE_RATE=1 MIALLOC_GUARDED_MIN=16 MIALLOC_GUARDED_MAX=64KiB -- 64 200
    want_rc 0; g=$(guarded_count)
    [ "${g:-0}" = 200 ] || problem "expected all 200 blocks guarded, got ${g:-none}"
    check "guarded sampling, rate 1 ($mode): ${kernel}every eligible allocation sits against a guard page"
    # shellcheck disable=SC2086
    run guarded-reuse $G -- 5000 300
    want_rc 0
    grep -q '^misuse: reuse checked 6200, bad 0$' "$out" || problem "$(grep '^misuse: reuse' "$out" || echo 'no result line')"
    check "guarded sampling, rate 1 ($mode): ${kernel}slots are closed at free, kept closed, then reused sound (6200 blocks)"
  done
  launch=""
  run guarded-sample MIALLOC_GUARDED_SAMPLE_RATE=8 MIALLOC_GUARDED_MIN=16 MIALLOC_GUARDED_MAX=64KiB -- 48 4000
  want_rc 0; g=$(guarded_count)
  [ "${g:-0}" -ge 300 ] && [ "${g:-0}" -le 800 ] || problem "expected about 500 of 4000 guarded, got ${g:-none}"
  check "guarded sampling, rate 8 ($mode): about one in 8 allocations is guarded (${g:-?} of 4000)"
  run guarded-sample MIALLOC_GUARDED_SAMPLE_RATE=1 MIALLOC_GUARDED_MIN=1KiB MIALLOC_GUARDED_MAX=2KiB -- 48 2000
  want_rc 0; g=$(guarded_count)
  [ "${g:-99}" -le 20 ] || problem "expected no guarded blocks outside [MIN, MAX], got ${g:-none}"
  check "guarded sampling ($mode): sizes outside [MIALLOC_GUARDED_MIN, MIALLOC_GUARDED_MAX] are not sampled"
  run guarded-sample MIALLOC_GUARDED_SAMPLE_RATE=1 MIALLOC_GUARDED_MIN=1KiB MIALLOC_GUARDED_MAX=2KiB -- 1500 100
  want_rc 0; g=$(guarded_count)
  [ "${g:-0}" = 100 ] || problem "expected all 100 blocks of 1500 bytes guarded, got ${g:-none}"
  check "guarded sampling ($mode): sizes inside [MIN, MAX] are (1500 bytes in [1KiB, 2KiB])"
else
  skip "guarded sampling ($mode)" "not compiled in (MIALLOC_GUARDED is 0 in config.h: --disable-guarded)"
fi

echo "1..$n"
exit 0
