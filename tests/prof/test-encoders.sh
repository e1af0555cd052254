#!/bin/sh
# test-encoders.sh -- the protobuf and text encoders, driven with a synthetic
# profile through the internal API (prof-unit --write), read by the real
# readers: go tool pprof (both formats) and google-pprof (text).
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
need_readers
out=$("$b/tests/prof/prof-unit" --write "$tmp" 2>&1); ok $? "a synthetic profile is written ($out)"
pid=${out%% *}; bid=${out#* }
pb=$tmp/synth.$pid.0.pb.gz; txt=$tmp/synth.$pid.0.heap
gzip -t "$pb" 2>/dev/null; ok $? "the protobuf profile is a valid gzip stream"
raw=$(go tool pprof -raw "$pb" 2>&1); ok $? "go tool pprof -raw reads the protobuf profile"
echo "$raw" | grep -q "^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"; ok $? "four sample types in pprof's order"
echo "$raw" | grep -q "^PeriodType: space bytes" && echo "$raw" | grep -q "^Period: 524288"; ok $? "period type space/bytes, period = rate"
echo "$raw" | grep -q "^1: .*prof-unit $bid"; ok $? "mapping 1 is the program, with its build id"
echo "$raw" | grep -q "thread_id:\[11\]"; ok $? "samples carry the thread id label"
top=$(go tool pprof -top -unit=B -sample_index=inuse_space "$pb" 2>&1); ok $? "go tool pprof -top reads it"
# expected: alpha 4 samples of 100 B -> 400/q, beta 10 of 1 MiB -> 10 MiB/q
ea=$(awk 'BEGIN { printf "%.0f", 400 / (1 - exp(-100 / 524288)) }')
eb=$(awk 'BEGIN { printf "%.0f", 10 * 1048576 / (1 - exp(-2)) }')
ga=$(echo "$top" | awk '$6 == "site_alpha" { sub("B", "", $1); print $1 }')
gb=$(echo "$top" | awk '$6 == "site_beta" { sub("B", "", $1); print $1 }')
within "${ga:-0}" "$ea" 0.01; ok $? "site_alpha in use: $ga B (expected $ea)"
within "${gb:-0}" "$eb" 0.01; ok $? "site_beta in use: $gb B (expected $eb)"
rv=$(raw_values "$pb" site_beta); set -- $rv
within "$1" "$(awk 'BEGIN { printf "%.0f", 20 / (1 - exp(-2)) }')" 3; ok $? "site_beta allocated objects: $1"
traw=$(go tool pprof -raw "$txt" 2>&1); ok $? "go tool pprof reads the text profile"
echo "$traw" | grep -q "^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"; ok $? "text profile: four sample types"
head -1 "$txt" | grep -q "@ heap_v2/524288$"; ok $? "text header names heap_v2 and the rate"
grep -q "^MAPPED_LIBRARIES:" "$txt"; ok $? "text profile has MAPPED_LIBRARIES"
ttop=$(go tool pprof -top -unit=B -sample_index=inuse_space "$txt" 2>&1)
ta=$(echo "$ttop" | awk '$6 == "site_alpha" { sub("B", "", $1); print $1 }')
tb=$(echo "$ttop" | awk '$6 == "site_beta" { sub("B", "", $1); print $1 }')
within "${ta:-0}" "$ea" 1 && within "${tb:-0}" "$eb" 1; ok $? "text profile unsampled by go pprof: $ta B, $tb B"
gp=$(google-pprof --text "$b/tests/prof/prof-unit" "$txt" 2>&1); ok $? "google-pprof --text reads the text profile"
echo "$gp" | grep -q "site_alpha" && echo "$gp" | grep -q "site_beta"; ok $? "google-pprof names both sites"
gt=$(echo "$gp" | awk '/^Total:/ { print $2 * 1048576 }')
within "${gt:-0}" "$((ea + eb))" 1; ok $? "google-pprof total $gt B (expected $((ea + eb)))"
done_tap
