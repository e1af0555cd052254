#!/bin/sh
# main-job.sh -- the README's first command: build mialloc and run a real
# program on it, showing that mialloc was active and its statistics.
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
[ -x configure ] || autoreconf -fi
./configure -q
make -j"$(nproc)" >/dev/null
lib=$(pwd)/src/.libs/libmialloc.so.1
prof=$(pwd)/prof/.libs/libmialloc-prof.so.1
out=$(mktemp -d /tmp/mialloc-main-job.XXXXXX)
echo "== configure chose:"
grep -E 'MIALLOC_TLS_MODEL_NAME|MIALLOC_HAVE_CPUID' config.h | sed 's/^/   /'
echo "== running a real program under mialloc: python3 building and sorting 300000 records"
echo "   (with the heap profiler: LD_PRELOAD=\"libmialloc.so.1 libmialloc-prof.so.1\" MIALLOC_PROFILE=$out/python3)"
# the system python3, not a version-manager shim: the program itself
py=/usr/bin/python3
[ -x "$py" ] || py=python3
LD_PRELOAD="$lib $prof" MIALLOC_PROFILE="$out/python3" MIALLOC_VERBOSE=1 MIALLOC_SHOW_STATS=1 "$py" - <<'PYEOF'
import json, random
random.seed(7)
rows = [{"id": i, "name": "user%06d" % i, "score": random.random(), "tags": ["t%d" % (i % 13)] * (i % 5)}
        for i in range(300000)]
rows.sort(key=lambda r: (r["score"], r["id"]))
text = json.dumps(rows[:1000])
counts = {}
for r in rows:
    for t in r["tags"]:
        counts[t] = counts.get(t, 0) + 1
print("records:", len(rows), "json bytes:", len(text), "distinct tags:", len(counts))
PYEOF
echo "== heap profile written at exit:"
ls -l "$out"/python3.*.pb.gz | sed 's/^/   /'
profile=$(ls -t "$out"/python3.*.pb.gz | head -1)
echo "== go tool pprof -top (allocated space: where python3 allocated, estimated from the samples):"
export GOCACHE="${GOCACHE:-$out/gocache}" HOME="${HOME:-$out}"
go tool pprof -top -nodecount=15 -sample_index=alloc_space "$py" "$profile" 2>&1 | sed 's/^/   /'
