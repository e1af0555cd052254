#!/bin/sh
# test-accuracy.sh -- at the default rate (512 KiB) the estimated in-use
# bytes of each site holding >= 5 % of the heap are within 10 % of the
# truth, and the total within 5 %.  The workload and the statistics behind
# these tolerances are in prof-sites.c (accuracy()); the seed is fixed.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
need_readers
# The core seeds each thread's first draws from the seed and the address of
# the thread's state: without address randomisation (setarch -R) a fixed
# seed gives the same samples every run.
# Guarded sampling (on by default in secure builds) draws from the same
# per-thread streams, seeded at random before the profiler attaches: off
# here, or the fixed seed would not fix the samples.
norand=""
setarch "$(uname -m)" -R true 2>/dev/null && norand="setarch $(uname -m) -R"
MIALLOC_GUARDED_SAMPLE_RATE=0 \
MIALLOC_PROFILE=$tmp/acc MIALLOC_PROFILE_SEED=20261130 MIALLOC_PROFILE_ALLOC_INTERVAL=0 \
  $norand "$b/tests/prof/prof-sites" accuracy >"$tmp/truth" 2>"$tmp/err"
ok $? "the accuracy workload runs"
f=$(ls "$tmp"/acc.*.0.pb.gz 2>/dev/null)
[ -f "$f" ]; ok $? "its explicit snapshot exists"
total_truth=$(awk '$1 == "truth" { t += $3 } END { print t }' "$tmp/truth")
heap_est=0
while read -r word site bytes rest; do
  [ "$word" = truth ] || continue
  set -- $(raw_values "$f" "$site")
  est=$4
  share=$(awk -v a="$bytes" -v t="$total_truth" 'BEGIN { printf "%.1f", 100 * a / t }')
  if awk -v s="$share" 'BEGIN { exit !(s >= 5) }'; then
    within "$est" "$bytes" 10; ok $? "$site ($share % of the heap): in use $est B, truth $bytes B (10 %)"
  else
    diag "$site ($share % of the heap, not checked): in use $est B, truth $bytes B"
  fi
  if [ "$site" = site_churn64k ]; then
    [ "$est" = 0 ]; ok $? "site_churn64k freed everything: in use $est B"
    alloc=${rest#alloc }
    within "$2" "$alloc" 10; ok $? "site_churn64k allocated $2 B, truth $alloc B (10 %)"
  fi
done <"$tmp/truth"
set -- $(total_values "$f")
within "$4" "$total_truth" 5; ok $? "total in use $4 B, truth $total_truth B (5 %)"
done_tap
