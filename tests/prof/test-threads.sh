#!/bin/sh
# test-threads.sh -- 8 threads allocating and freeing across threads with
# every allocation sampled (rate 1): runs clean, and the in-use estimate of
# the threads' allocation site returns to zero once everything is freed.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
need_readers
out=$(MIALLOC_PROFILE=$tmp/th MIALLOC_PROFILE_SAMPLE_RATE=1 MIALLOC_PROFILE_ALLOC_INTERVAL=0 \
      "$b/tests/prof/prof-threads" 2>"$tmp/err")
ok $? "8 threads with rate 1 run clean"
[ ! -s "$tmp/err" ]; ok $? "nothing on stderr"; [ -s "$tmp/err" ] && diag "$(head -5 "$tmp/err")"
set -- $(echo "$out" | awk '$1 == "before" { print $2 }') $(echo "$out" | awk '$1 == "after" { print $2 }') \
       $(echo "$out" | awk '$1 == "requested" { print $2 }')
before=$1 after=$2 req=$3
d=$((after - before)); [ $d -lt 0 ] && d=$((-d))
[ $d -le 65536 ]; ok $? "process in-use estimate back to its level before the threads ($before -> $after B)"
f=$(ls "$tmp"/th.*.0.pb.gz 2>/dev/null)
set -- $(raw_values "$f" thread_alloc)
[ "$3" = 0 ] && [ "$4" = 0 ]; ok $? "thread_alloc: 0 objects, 0 bytes in use in the profile ($3, $4)"
[ "$2" = "$req" ]; ok $? "thread_alloc: allocated bytes exact at rate 1 ($2 = $req)"
[ "$1" = 160000 ]; ok $? "thread_alloc: 160000 allocations ($1)"
done_tap
