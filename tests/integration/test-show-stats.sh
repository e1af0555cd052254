#!/bin/sh
# test-show-stats.sh -- MIALLOC_SHOW_STATS=1 prints the report on stderr at
# exit (also for a program that does not call mialloc itself, under
# LD_PRELOAD), and mi_stats_get_json is JSON that python3 accepts.
b=${MIALLOC_BUILDDIR:-.}
prog=$b/tests/api/test-stats
tmp=${TMPDIR:-/tmp}/test-show-stats.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..6"
n=0
check() {
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}

MIALLOC_SHOW_STATS=1 "$prog" json >"$tmp/out" 2>"$tmp/err"
check $? "the program runs with MIALLOC_SHOW_STATS=1"
grep -q '^mialloc statistics (version ' "$tmp/err"
check $? "the report is on stderr at exit"
grep -q 'in use' "$tmp/err" && grep -q '^process: rss' "$tmp/err"
check $? "with the memory lines"
if grep -q statistics "$tmp/out"; then check 1 "nothing of it on stdout"; else check 0 "nothing of it on stdout"; fi
python3 -m json.tool <"$tmp/out" >"$tmp/pretty" 2>"$tmp/jerr"
rc=$?
check $rc "python3 -m json.tool accepts mi_stats_get_json"
[ $rc = 0 ] || sed 's/^/# /' "$tmp/jerr"

MIALLOC_SHOW_STATS=1 LD_PRELOAD=$MIALLOC_LIB /bin/true 2>"$tmp/err2"
grep -q '^mialloc statistics (version ' "$tmp/err2"
check $? "a preloaded program prints the report too"
