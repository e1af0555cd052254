#!/bin/sh
# test-triggers.sh -- every trigger writes its snapshot: allocation interval,
# in-use interval, time interval (also while the program sleeps), signal,
# explicit mi_profiler_snapshot(), exit; and a setuid program ignores the
# environment.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
bin=$b/tests/prof/prof-sites
count() { ls "$tmp"/"$1".*.pb.gz 2>/dev/null | wc -l; }
export MIALLOC_PROFILE_SAMPLE_RATE=64K MIALLOC_PROFILE_SEED=7

# exit only: a program that does nothing special leaves one profile
MIALLOC_PROFILE=$tmp/exit "$bin" explicit 0 >/dev/null 2>&1
[ "$(count exit)" = 1 ]; ok $? "exit writes a snapshot ($(count exit))"

MIALLOC_PROFILE=$tmp/expl "$bin" explicit 3 >/dev/null 2>&1
[ "$(count expl)" = 4 ]; ok $? "3 explicit snapshots + exit ($(count expl))"

# 256 MiB allocated in 64 KiB blocks, interval 64 MiB: 4 (+/- 1 for the
# estimate) + exit
MIALLOC_PROFILE=$tmp/alloc MIALLOC_PROFILE_ALLOC_INTERVAL=64M "$bin" alloc 256 >/dev/null 2>&1
c=$(count alloc); [ "$c" -ge 4 ] && [ "$c" -le 6 ]; ok $? "allocation interval: $c snapshots for 4 intervals + exit"
MIALLOC_PROFILE=$tmp/alloc0 MIALLOC_PROFILE_ALLOC_INTERVAL=0 "$bin" alloc 256 >/dev/null 2>&1
[ "$(count alloc0)" = 1 ]; ok $? "MIALLOC_PROFILE_ALLOC_INTERVAL=0 turns it off ($(count alloc0))"

# 128 MiB kept in 1 MiB blocks, in-use interval 32 MiB: 4 (+/- 1) + exit
MIALLOC_PROFILE=$tmp/inuse MIALLOC_PROFILE_INUSE_INTERVAL=32MiB MIALLOC_PROFILE_ALLOC_INTERVAL=0 \
  "$bin" inuse 128 >/dev/null 2>&1
c=$(count inuse); [ "$c" -ge 4 ] && [ "$c" -le 6 ]; ok $? "in-use interval: $c snapshots for 4 intervals + exit"

# time interval 1 s while the program sleeps 4 s: 4 (the last one may lose
# the race with exit) + exit
MIALLOC_PROFILE=$tmp/time MIALLOC_PROFILE_TIME_INTERVAL=1 "$bin" sleep 4 >/dev/null 2>&1 &
pid=$!
sleep 3
c=$(count time)
[ "$c" -ge 2 ]; ok $? "time interval: $c snapshots after 3 s while the program sleeps"
wait $pid
c=$(count time); [ "$c" -ge 4 ] && [ "$c" -le 6 ]; ok $? "time interval: $c snapshots for a 4 s sleep (4 + exit)"

# signal
MIALLOC_PROFILE=$tmp/sig MIALLOC_PROFILE_SIGNAL=10 "$bin" signal 10 >/dev/null 2>&1
ok $? "the program survives MIALLOC_PROFILE_SIGNAL=10 (SIGUSR1)"
[ "$(count sig)" = 2 ]; ok $? "the signal writes a snapshot (+ exit): $(count sig)"

# bad values: a warning, the default
MIALLOC_PROFILE=$tmp/bad MIALLOC_PROFILE_TIME_INTERVAL=90000 "$bin" explicit 0 >/dev/null 2>"$tmp/err"
grep -q "MIALLOC_PROFILE_TIME_INTERVAL: invalid value 90000" "$tmp/err"; ok $? "a time interval over a day is refused with a warning"
[ "$(count bad)" = 1 ]; ok $? "and the profiler still runs"

# setuid: a copy of prof-sites owned by nobody, run by root, has AT_SECURE
# set and must ignore MIALLOC_PROFILE
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  ran=no
  for d in "$b/tests/prof" /tmp /var/tmp; do
    cp "$bin" "$d/prof-sites-setuid.$$" 2>/dev/null || continue
    chown nobody "$d/prof-sites-setuid.$$" && chmod 4755 "$d/prof-sites-setuid.$$"
    out=$(MIALLOC_PROFILE=$tmp/suid MIALLOC_PROFILE_SIGNAL=10 "$d/prof-sites-setuid.$$" status 2>&1)
    rm -f "$d/prof-sites-setuid.$$"
    case $out in *secure=1*) ran=yes; break ;; esac   # else: a nosuid file system
  done
  [ $ran = yes ]; ok $? "a setuid copy ran with AT_SECURE set ($out)"
  case $out in *active=0*) r=0 ;; *) r=1 ;; esac
  ok $r "the setuid program did not start the profiler"
  [ "$(count suid)" = 0 ]; ok $? "and wrote no profile"
  out=$(MIALLOC_PROFILE=$tmp/plain "$bin" status 2>&1)
  case $out in *"secure=0 active=1"*) r=0 ;; *) r=1 ;; esac
  ok $r "the same program not setuid does start it ($out)"
else
  ok 1 "the setuid check needs root and a nobody user"
fi
done_tap
