# lib.sh -- sourced by tests/prof/*.sh: TAP helpers, a scratch directory,
# and helpers around the pprof readers.
b=${MIALLOC_BUILDDIR:-.}
s=${MIALLOC_SRCDIR:-.}
n=0
ok() {  # ok STATUS NAME
  n=$((n + 1))
  if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
diag() { echo "# $*"; }
done_tap() { echo "1..$n"; exit 0; }
tmp=$(mktemp -d /tmp/mialloc-prof-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# go tool pprof wants a writable HOME and Go caches; never the user's
export HOME=$tmp/home GOCACHE=$tmp/gocache GOPATH=$tmp/gopath GOTOOLCHAIN=local PPROF_TMPDIR=$tmp
mkdir -p "$HOME"
have_go=0; command -v go >/dev/null 2>&1 && have_go=1
have_gp=0; command -v google-pprof >/dev/null 2>&1 && have_gp=1
need_readers() {
  [ $have_go = 1 ] || diag "go is missing: apt-get install golang-go (tools/deps.sh)"
  [ $have_gp = 1 ] || diag "google-pprof is missing: apt-get install google-perftools (tools/deps.sh)"
}
# Run one of the test programs with the profiler from the environment.
# (The programs link libmialloc-prof, so no LD_PRELOAD is needed.)
prog() { "$b/tests/prof/$1"; }

# raw_values FILE FUNC [leaf|any]: the four values (alloc objects, alloc
# bytes, inuse objects, inuse bytes) summed over the samples whose leaf
# (default) or any frame is FUNC, from `go tool pprof -raw`.
raw_values() {
  go tool pprof -raw "$1" 2>/dev/null | awk -v fn="$2" -v mode="${3:-leaf}" '
    /^Samples:/ { sec = "s"; next }
    /^Locations/ { sec = "l"; next }
    /^Mappings/ { sec = "m"; next }
    sec == "s" && /:/ && $1 ~ /^[0-9]+$/ {
      split($0, part, ":"); nv = split(part[1], v, " "); ni = split(part[2], ids, " ")
      ns++; for (k = 1; k <= 4; k++) val[ns, k] = v[k]
      nid[ns] = ni; for (k = 1; k <= ni; k++) sid[ns, k] = ids[k]
      next }
    sec == "l" && $1 ~ /^[0-9]+:$/ { cur = substr($1, 1, length($1) - 1); if ($4 == fn) hit[cur] = 1; next }
    sec == "l" && NF >= 1 && $1 !~ /:$/ { if ($1 == fn) hit[cur] = 1; next }
    END {
      for (i = 1; i <= ns; i++) {
        m = 0
        if (mode == "leaf") m = hit[sid[i, 1]]
        else for (k = 1; k <= nid[i]; k++) if (hit[sid[i, k]]) m = 1
        if (m) for (k = 1; k <= 4; k++) t[k] += val[i, k]
      }
      printf "%.0f %.0f %.0f %.0f\n", t[1], t[2], t[3], t[4]
    }'
}
# total_values FILE: the four values summed over all samples
total_values() {
  go tool pprof -raw "$1" 2>/dev/null | awk '
    /^Samples:/ { sec = 1; next } /^Locations/ { sec = 0 }
    sec && /:/ && $1 ~ /^[0-9]+$/ { split($0, part, ":"); split(part[1], v, " "); for (k = 1; k <= 4; k++) t[k] += v[k] }
    END { printf "%.0f %.0f %.0f %.0f\n", t[1], t[2], t[3], t[4] }'
}
# within A B PERCENT: |A - B| <= PERCENT% of B
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= b * p / 100) }'; }
