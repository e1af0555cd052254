#!/bin/sh
# test-symbols.sh -- protobuf profiles name functions from the dynamic
# symbol tables of stripped binaries (Debian's python3), and only where an
# address lies inside a symbol: a static function of a stripped program is
# never given a neighbour's name.
. "${MIALLOC_SRCDIR:-.}/tests/prof/lib.sh"
need_readers
if [ $have_go = 0 ]; then done_tap; fi
stripped() {  # stripped FILE: no .symtab section
  command -v readelf >/dev/null 2>&1 || return 0
  ! readelf -S -W "$1" 2>/dev/null | grep -q '\.symtab'
}

# --- a stripped program with a static allocation site ---------------------
bin=$b/tests/prof/prof-static
MIALLOC_PROFILE=$tmp/s MIALLOC_PROFILE_SAMPLE_RATE=64K "$bin" >"$tmp/out" 2>"$tmp/err"
ok $? "prof-static runs"
grep -q "profiler 1" "$tmp/out"; ok $? "the profiler runs in prof-static"
grep -q "between 1" "$tmp/out"
ok $? "static_site lies between the two exported functions (a nearest-symbol guess would misname it)"
stripped "$bin"; ok $? "prof-static has no .symtab"
set -- "$tmp"/s.*.pb.gz
f=$1
go tool pprof -top -unit=MB -sample_index=inuse_space "$f" >"$tmp/top" 2>&1
ok $? "go tool pprof -top reads the profile"
mib_of() {  # mib_of NAME: the flat MiB of the -top line of NAME, or -1
  awk -v fn="$1" '$NF == fn { sub(/MB$/, "", $1); print $1 + 0; found = 1; exit } END { if (!found) print -1 }' "$tmp/top"
}
m=$(mib_of sym_exported_alloc)
within "$m" 32 15
ok $? "the exported allocation site is named, with its 32 MiB ($m MiB)"
! grep -q 'sym_exported_before' "$tmp/top"
ok $? "no frame is named after the exported function below static_site"
# every named location of the program's own mapping (M=1) is the exported
# allocation site; static_site and main stay addresses
go tool pprof -raw "$f" 2>/dev/null | sed -n '/^Locations/,/^Mappings/p' >"$tmp/locs"
named=$(awk '$3 == "M=1" && NF > 3 { print $4 }' "$tmp/locs" | sort -u | tr '\n' ' ')
bare=$(awk '$3 == "M=1" && NF == 3' "$tmp/locs" | wc -l)
[ "$named" = "sym_exported_alloc " ] && [ "$bare" -ge 2 ]
ok $? "in prof-static only sym_exported_alloc is named ($named; $bare bare locations)"
[ -n "$named" ] || diag "$(cat "$tmp/locs")"
# the static site's 32 MiB stays with an unnamed leaf of the program
m=$(mib_of "[prof-static]")
within "$m" 32 15
ok $? "static_site's 32 MiB is flat in the unnamed [prof-static] ($m MiB)"

# --- Debian's python3: stripped, named from its .dynsym ---------------------
py=$(readlink -f /usr/bin/python3 2>/dev/null)
if [ -x "$py" ] && [ -n "$MIALLOC_LIB" ] && [ -n "$MIALLOC_PROF_LIB" ]; then
  stripped "$py"; ok $? "$py has no .symtab"
  LD_PRELOAD="$MIALLOC_LIB $MIALLOC_PROF_LIB" MIALLOC_PROFILE=$tmp/py MIALLOC_PROFILE_SAMPLE_RATE=64K \
    "$py" -c 'x = [str(i) * 50 for i in range(300000)]' 2>"$tmp/err"
  ok $? "python3 runs under the preloaded profiler"
  set -- "$tmp"/py.*.pb.gz
  go tool pprof -top -sample_index=alloc_space "$1" >"$tmp/pytop" 2>&1
  grep -q ' Py[A-Za-z_]*$' "$tmp/pytop"
  ok $? "go tool pprof -top shows Py functions of python3: $(grep -o ' Py[A-Za-z_]*$' "$tmp/pytop" | head -3 | tr -d '\n')"
  grep -q ' Py_BytesMain$' "$tmp/pytop"
  ok $? "python's stacks reach Py_BytesMain (drop_frames does not cut them at __libc_start_main)"
else
  diag "skipping the python3 checks: /usr/bin/python3 or the library paths are missing"
fi
done_tap
