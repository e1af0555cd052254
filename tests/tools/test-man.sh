#!/bin/sh
# test-man.sh -- the manual pages render without a single groff warning,
# and they cannot drift from the code: every option of the mi_option_t enum
# (legacy names too) and every MIALLOC_ variable of src/options.c is in
# mialloc-options(7), every function of <mialloc.h> is in mialloc(3).
set -u
LC_ALL=C
export LC_ALL
here=$(cd "$(dirname "$0")" && pwd -P)
srcdir=${MIALLOC_SRCDIR:-$(cd "$here/../.." && pwd -P)}
man=$srcdir/doc/man
header=$srcdir/include/mialloc.h
options=$srcdir/src/options.c
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }

if ! command -v groff >/dev/null 2>&1; then
  echo "1..0 # SKIP groff is not installed"
  exit 0
fi

# 1. every page renders cleanly (-ww: all warnings; -z: no output needed)
for page in "$man"/*.[1-8]; do
  name=$(basename "$page")
  warnings=$(groff -ww -man -Tutf8 -z "$page" 2>&1)
  if [ -z "$warnings" ]; then ok "$name renders without warnings"
  else notok "$name renders without warnings"; printf '%s\n' "$warnings" | sed 's/^/# /'; fi
  # and man(1) agrees (it also runs the preprocessors the page asks for)
  if command -v man >/dev/null 2>&1; then
    warnings=$(MANWIDTH=80 man --warnings=w -l "$page" 2>&1 >/dev/null)
    if [ -z "$warnings" ]; then ok "man -l $name: no warnings"
    else notok "man -l $name: no warnings"; printf '%s\n' "$warnings" | sed 's/^/# /'; fi
  fi
done

# The pages' text without font changes (\fB...\fR), for whole-word searches.
plain() { sed 's/\\f[BIRPC]//g; s/\\f(..//g; s/\\-/-/g' "$man/$1"; }
opts_text=$(plain mialloc-options.7)
api_text=$(plain mialloc.3)
has() { printf '%s\n' "$1" | grep -qw -- "$2"; }

# 2. option names: the enum (up to _mi_option_last, then the legacy aliases)
enum=$(sed -n '/typedef enum mi_option_e/,/} mi_option_t;/p' "$header" |
       sed -n 's/^ *\(mi_option_[a-z0-9_]*\).*/\1/p' | sort -u)
[ -n "$enum" ] && ok "found the mi_option_t enum" || notok "found the mi_option_t enum"
missing=""
for o in $enum; do has "$opts_text" "$o" || missing="$missing $o"; done
[ -z "$missing" ] && ok "every enum option name is in mialloc-options.7" ||
  notok "every enum option name is in mialloc-options.7 (missing:$missing)"

# 3. the environment names options.c reads, and their match with the enum
envs=$(grep -o '\[mi_option_[a-z0-9_]*\] = {[^"]*"[A-Z0-9_]*"' "$options" | sed 's/.*"\(.*\)"/\1/')
[ -n "$envs" ] && ok "found the option table of options.c" || notok "found the option table of options.c"
missing=""
for e in $envs; do has "$opts_text" "MIALLOC_$e" || missing="$missing MIALLOC_$e"; done
[ -z "$missing" ] && ok "every MIALLOC_ variable of options.c is in mialloc-options.7" ||
  notok "every MIALLOC_ variable of options.c is in mialloc-options.7 (missing:$missing)"
bad=""
for pair in $(grep -o '\[mi_option_[a-z0-9_]*\] = {[^"]*"[A-Z0-9_]*"' "$options" |
              sed 's/\[mi_option_\([a-z0-9_]*\)\].*"\(.*\)"/\1:\2/'); do
  lower=${pair%%:*}
  upper=$(printf '%s' "$lower" | tr 'a-z' 'A-Z')
  [ "$upper" = "${pair#*:}" ] || bad="$bad $pair"
done
[ -z "$bad" ] && ok "each variable is MIALLOC_ plus its enum name in capitals" ||
  notok "each variable is MIALLOC_ plus its enum name in capitals (not:$bad)"
last=$(sed -n '/typedef enum mi_option_e/,/_mi_option_last/p' "$header" | grep -c '^ *mi_option_[a-z0-9_]*,')
count=$(printf '%s\n' $envs | wc -l)
[ "$last" = "$count" ] && ok "options.c describes all $last options of the enum" ||
  notok "options.c describes all options of the enum ($count of $last)"

# 4. the profiler's variables (read by libmialloc-prof) are there too
missing=""
for e in PROFILE PROFILE_SAMPLE_RATE PROFILE_ALLOC_INTERVAL PROFILE_INUSE_INTERVAL \
         PROFILE_TIME_INTERVAL PROFILE_SIGNAL PROFILE_SEED; do
  has "$opts_text" "MIALLOC_$e" || missing="$missing MIALLOC_$e"
done
[ -z "$missing" ] && ok "the profiler's variables are in mialloc-options.7" ||
  notok "the profiler's variables are in mialloc-options.7 (missing:$missing)"

# 5. every function of the public header is in mialloc(3)
funcs=$(grep '^mi_decl_export' "$header" | sed 's/(.*//' | grep -o '[a-z_][a-z0-9_]*$' | sort -u)
total=$(printf '%s\n' $funcs | wc -l)
missing=""
for f in $funcs; do has "$api_text" "$f" || missing="$missing $f"; done
[ "$total" -gt 100 ] && ok "found the $total functions of mialloc.h" || notok "found the functions of mialloc.h ($total)"
[ -z "$missing" ] && ok "every function of mialloc.h is in mialloc.3" ||
  notok "every function of mialloc.h is in mialloc.3 (missing:$missing)"

echo "1..$n"
exit $failed
