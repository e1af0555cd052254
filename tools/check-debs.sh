#!/bin/sh
# check-debs.sh DIR -- install the .debs built in DIR, check what a user of
# the packages relies on, then purge them and check nothing is left.
# Prints TAP; run as root on a machine where the packages may be installed
# (CI).  Leaves the system as it found it.
set -u
dir=${1:?usage: check-debs.sh DIR-WITH-DEBS}
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $1"; }
check() { desc=$1; shift; if "$@" >/dev/null 2>&1; then ok "$desc"; else notok "$desc"; fi; }

debs=$(ls "$dir"/libmialloc1_*.deb "$dir"/libmialloc-prof1_*.deb "$dir"/libmialloc-dev_*.deb \
          "$dir"/mialloc-tools_*.deb 2>/dev/null)
[ -n "$debs" ] || { echo "1..1"; echo "not ok 1 - no packages in $dir"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check "apt install of the four packages" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $debs
files=$(dpkg -L libmialloc1 libmialloc-prof1 libmialloc-dev mialloc-tools 2>/dev/null | sort -u)

libs=$(pkg-config --libs mialloc 2>/dev/null | sed "s/ *$//")
echo "# pkg-config --libs mialloc: $libs"
[ "$libs" = "-lmialloc" ] && ok "pkg-config --libs mialloc prints -lmialloc" || notok "pkg-config --libs mialloc prints -lmialloc"
check "pkg-config knows mialloc-prof" pkg-config --exists mialloc-prof

cat >"$work/app.c" <<'EOF'
#include <mialloc.h>
#include <mialloc-prof.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  void *p = malloc(100);
  int ours = mi_is_redirected() && mi_usable_size(p) >= 100;
  free(p);
  printf("%s\n", ours ? "on mialloc" : "NOT on mialloc");
  return ours ? 0 : 1;
}
EOF
# shellcheck disable=SC2046
check "a program built with pkg-config's flags links" \
  cc -o "$work/app" "$work/app.c" $(pkg-config --cflags --libs mialloc mialloc-prof)
check "and runs on mialloc" "$work/app"

check "mialloc-prof writes a profile of a real program" \
  sh -c "cd '$work' && mialloc-prof -o '$work/ls' -- ls / && ls '$work'/ls.*.pb.gz"
check "mialloc-preload status says: not enabled (exit 1)" sh -c "mialloc-preload status; [ \$? -eq 1 ]"
check "man pages are installed" sh -c "man -w mialloc && man -w mialloc-options && man -w mialloc-prof && man -w mialloc-preload"

check "apt purge of the four packages" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq \
  libmialloc1 libmialloc-prof1 libmialloc-dev mialloc-tools
left=""
for f in $files; do
  [ -d "$f" ] && continue
  [ -e "$f" ] && left="$left $f"
done
[ -z "$left" ] && ok "nothing the packages installed is left behind" || notok "left behind:$left"
if grep -qs mialloc /etc/ld.so.preload; then notok "/etc/ld.so.preload does not name mialloc"; else ok "/etc/ld.so.preload does not name mialloc"; fi
echo "1..$n"
[ $fail -eq 0 ]
