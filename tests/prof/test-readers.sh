#!/bin/sh
# test-readers.sh -- real profiles (protobuf and text) of prof-sites are read
# by go tool pprof (-raw, -top) and google-pprof (--text), and the test
# program's allocation sites are named.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
need_readers
bin=$b/tests/prof/prof-sites
MIALLOC_PROFILE=$tmp/p MIALLOC_PROFILE_SAMPLE_RATE=64K "$bin" explicit 2 >/dev/null 2>"$tmp/err"
ok $? "prof-sites runs with MIALLOC_PROFILE=$tmp/p"
set -- "$tmp"/p.*.pb.gz
[ $# -eq 3 ]; ok $? "three protobuf snapshots (2 explicit, 1 at exit): $#"
i=0
for f in "$@"; do
  [ -f "$f" ] || continue
  i=$((i + 1))
  go tool pprof -raw "$f" >"$tmp/raw" 2>&1; ok $? "go tool pprof -raw reads snapshot $i"
  go tool pprof -top -sample_index=inuse_space "$f" >/dev/null 2>&1; ok $? "go tool pprof -top reads snapshot $i"
  # (allocated space: at exit everything is freed already)
  go tool pprof -top -sample_index=alloc_space "$f" >"$tmp/top" 2>&1
  grep -q "site_page4k" "$tmp/top"; ok $? "snapshot $i names site_page4k"
done
grep -q "main" "$tmp/top" && ! grep -q "prof_stack_capture\|on_alloc\|mia_" "$tmp/top"
ok $? "the profiler's and allocator's own frames are not in the stacks"
MIALLOC_PROFILE=$tmp/t.heap MIALLOC_PROFILE_SAMPLE_RATE=64K "$bin" explicit 2 >/dev/null 2>&1
set -- "$tmp"/t.*.heap
[ $# -eq 3 ]; ok $? "three text snapshots with a .heap base: $#"
i=0
for f in "$@"; do
  [ -f "$f" ] || continue
  i=$((i + 1))
  google-pprof --text --alloc_space "$bin" "$f" >"$tmp/gp" 2>&1; ok $? "google-pprof --text reads text snapshot $i"
  grep -q "site_page4k" "$tmp/gp"; ok $? "google-pprof names site_page4k in snapshot $i"
  go tool pprof -top "$f" >/dev/null 2>&1; ok $? "go tool pprof reads text snapshot $i"
done
MIALLOC_PROFILE=$tmp/x.text MIALLOC_PROFILE_SAMPLE_RATE=64K "$bin" explicit 0 >/dev/null 2>&1
set -- "$tmp"/x.*.heap
[ -f "$1" ]; ok $? "a .text base also selects the text format (ext .heap)"
done_tap
