#!/bin/sh
# test-wrapper.sh -- tools/mialloc-prof runs an unmodified program (one that
# does not link mialloc) under the preloaded profiler; the man page renders
# without warnings.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
w=$b/tools/mialloc-prof
[ -x "$w" ]; ok $? "the wrapper is built"
"$w" --help | grep -q "Usage: mialloc-prof"; ok $? "--help"
"$w" -x true 2>/dev/null; [ $? = 2 ]; ok $? "an unknown option is an error"
env -u MIALLOC_LIB -u MIALLOC_PROF_LIB "$w" --lib /nonexistent true 2>/dev/null; [ $? = 2 ]; ok $? "missing libraries are an error"
# python3 does not link mialloc: everything comes from the preload.  The
# interpreter itself, not a "python3" found first in PATH: a wrapper script
# there (pyenv's shims are bash scripts that start helpers) would leave
# profiles of its own helpers next to python's, and the glob below could
# pick one of those.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
cd "$tmp" || exit 1
"$w" -r 64K -- "$py" -c 'x = [bytes(1000) for i in range(20000)]' >"$tmp/out" 2>&1
ok $? "mialloc-prof python3 ... runs"
set -- "$tmp"/python3.*.0.pb.gz
[ -f "$1" ]; ok $? "the default base is ./PROGRAM: $(basename "$1")"
if [ $have_go = 1 ] && [ -f "$1" ]; then
  set -- $(total_values "$1")
  [ "${2:-0}" -gt 10000000 ]; ok $? "python's allocations are in the profile ($2 B allocated)"
fi
"$w" -o "$tmp/ls.heap" -- ls / >/dev/null 2>&1
set -- "$tmp"/ls.*.heap; [ -f "$1" ]; ok $? "-o BASE.heap gives a text profile of ls"
if command -v groff >/dev/null; then
  warn=$(groff -ww -man -Tutf8 "$s/doc/man/mialloc-prof.1" 2>&1 >/dev/null)
  [ -z "$warn" ]; ok $? "the man page renders without warnings"; [ -n "$warn" ] && diag "$warn"
fi
done_tap
