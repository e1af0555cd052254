#!/bin/sh
# test-fork.sh -- after fork the child writes its own files under its own
# pid, numbered from 0, and the parent's sequence is unaffected.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
out=$(MIALLOC_PROFILE=$tmp/f MIALLOC_PROFILE_SAMPLE_RATE=64K MIALLOC_PROFILE_TIME_INTERVAL=100 \
      "$b/tests/prof/prof-sites" fork 2>&1)
ok $? "prof-sites fork runs"
child=$(echo "$out" | awk '$1 == "child" { print $2 }')
parent=$(echo "$out" | awk '$1 == "parent" { print $2 }')
[ -n "$child" ] && [ -n "$parent" ] && [ "$child" != "$parent" ]; ok $? "parent $parent, child $child"
[ -f "$tmp/f.$parent.0.pb.gz" ] && [ -f "$tmp/f.$parent.1.pb.gz" ] && [ ! -e "$tmp/f.$parent.2.pb.gz" ]
ok $? "parent: explicit + exit snapshots, seq 0 and 1"
[ -f "$tmp/f.$child.0.pb.gz" ] && [ -f "$tmp/f.$child.1.pb.gz" ] && [ ! -e "$tmp/f.$child.2.pb.gz" ]
ok $? "child: its own explicit + exit snapshots, seq from 0"
if [ $have_go = 1 ]; then
  set -- $(raw_values "$tmp/f.$child.0.pb.gz" site_huge1m)
  [ "${4:-0}" -gt 0 ]; ok $? "the child's profile has the child's allocations ($4 B in use)"
  set -- $(raw_values "$tmp/f.$parent.0.pb.gz" site_huge1m)
  [ "${4:-0}" = 0 ]; ok $? "the parent's does not"
fi
done_tap
