#!/bin/sh
# test-output-files.sh -- the profiler never follows a symlink planted at its
# output name and never overwrites an existing file (end to end; the unit
# test prof-unit checks the same on the writer directly).
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
bin=$b/tests/prof/prof-sites
# pids are not known in advance: plant at every name a short run can get by
# running the program through a shell whose pid we know and exec'ing
echo precious >"$tmp/victim"
sh -c 'echo $$ >"$1/pid"; while [ ! -e "$1/go" ]; do sleep 0.05; done; shift; exec "$@"' sh "$tmp" \
  env MIALLOC_PROFILE="$tmp/o" MIALLOC_PROFILE_SAMPLE_RATE=64K "$bin" explicit 1 >/dev/null 2>"$tmp/err" &
while [ ! -s "$tmp/pid" ]; do sleep 0.05; done
pid=$(cat "$tmp/pid")
ln -s "$tmp/victim" "$tmp/o.$pid.0.pb.gz"
echo existing >"$tmp/o.$pid.1.pb.gz"
touch "$tmp/go"
wait
[ "$(cat "$tmp/victim")" = precious ]; ok $? "the symlink's target is untouched"
[ -L "$tmp/o.$pid.0.pb.gz" ]; ok $? "the symlink is still a symlink"
[ "$(cat "$tmp/o.$pid.1.pb.gz")" = existing ]; ok $? "the existing file is not overwritten"
[ -f "$tmp/o.$pid.2.pb.gz" ] && [ -f "$tmp/o.$pid.3.pb.gz" ]; ok $? "the two snapshots went to the next free names"
grep -q "not overwriting" "$tmp/err"; ok $? "a warning says so"
m=$(stat -c %a "$tmp/o.$pid.2.pb.gz"); [ "$m" = 600 ]; ok $? "profiles have mode 0600 ($m)"
ls "$tmp" | grep -q tmp-; [ $? != 0 ]; ok $? "no temporary files remain"
# a directory that does not exist: the program runs on, and one warning
# names the profile and the reason
env MIALLOC_PROFILE="$tmp/missing/o" MIALLOC_PROFILE_SAMPLE_RATE=64K "$bin" explicit 1 >/dev/null 2>"$tmp/err2"
rc=$?
[ $rc = 0 ] && [ "$(grep -c 'cannot write a profile' "$tmp/err2")" = 1 ]; ok $? "no directory: the program exits 0, with one warning ($rc)"
grep -q "cannot write a profile for $tmp/missing/o: No such file or directory" "$tmp/err2"; ok $? "the warning names the profile and the reason"
done_tap
