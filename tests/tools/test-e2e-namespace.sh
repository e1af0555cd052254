#!/bin/sh
# End-to-end test of system-wide use (TAP producer): tools/mialloc-preload
# enables mialloc in /etc/ld.so.preload inside a private mount namespace,
# real programs run on it, and it is disabled again.
#
# The real /etc is never written: inside the namespace (unshare -m, mount
# propagation made private) a copy of /etc is bind-mounted over /etc, and
# nothing is done there unless a marker file that only the copy holds is
# seen at /etc.  Afterwards the real /etc/ld.so.preload is checked to be
# unchanged.
#
# Needs root and unshare(1); without them the tests fail (not skipped) with
# the reason.  Runs in about 10-20 s.
#
# Environment:
#   MIALLOC_LIB     the built library, absolute path (default:
#                   $MIALLOC_SRCDIR/src/.libs/libmialloc.so.1); a copy of it
#                   is what gets preloaded
#   MIALLOC_SRCDIR  the repository root (default: two levels up from this
#                   script)
#   E2E_KEEP        1 = keep the temporary directory (printed at the end)
#
# Exit status: 0 when every test passed, 1 otherwise.

set -u
LC_ALL=C
export LC_ALL
unset LD_PRELOAD || true
# Debian's own programs, not a user's shims.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

NTESTS=20
marker=.mialloc-e2e-marker

# ------------------------------------------------------------- workloads
# clean CMD...: run CMD with a fixed, minimal environment (no MIALLOC_*,
# no LD_PRELOAD), the same outside and inside the namespace.
clean() {
	env -i PATH=/usr/bin:/bin HOME="$T/home" LC_ALL=C TZ=UTC "$@"
}

# work DIR: run the real programs, leaving NAME.out, NAME.err and NAME.rc
# in DIR for each workload.
work() {
	o=$1
	mkdir -p "$o" "$o/sorttmp" "$o/repo" "$T/home"

	# sort: a 6 MiB file with a small buffer, so that it merges temporary
	# files, with two threads.
	rc=0
	clean timeout 60 sort -S 1M -T "$o/sorttmp" --parallel=2 -k2,2 -k1,1n \
		-o "$o/sorted" "$T/data.txt" >/dev/null 2>"$o/sort.err" || rc=$?
	echo "$rc" >"$o/sort.rc"
	{ cksum <"$o/sorted"; wc -l <"$o/sorted"; } >"$o/sort.out" 2>>"$o/sort.err"
	rm -f "$o/sorted"

	# python3: JSON round trip of a few MiB of nested data.
	rc=0
	clean timeout 60 python3 -I "$T/roundtrip.py" >"$o/python3.out" 2>"$o/python3.err" || rc=$?
	echo "$rc" >"$o/python3.rc"

	# git: init, two commits with fixed names and dates, log, diff, gc,
	# fsck.
	rc=0
	(cd "$o/repo" && clean GIT_CONFIG_NOSYSTEM=1 \
		GIT_AUTHOR_NAME=Alice GIT_AUTHOR_EMAIL=alice@example.org \
		GIT_COMMITTER_NAME=Bob GIT_COMMITTER_EMAIL=bob@example.org \
		GIT_AUTHOR_DATE=2020-01-02T03:04:05Z GIT_COMMITTER_DATE=2020-01-02T03:04:05Z \
		timeout 60 sh -ec '
			git init -q -b main .
			seq 1 30000 >a
			git add a
			git commit -q -m one
			seq 1 3 30000 >a
			seq 5 7 90000 >b
			git add -A
			git commit -q -m two
			git log --format="%H %T %an %ae %ad %cn %s" --date=iso-strict
			git diff --stat HEAD~1 HEAD
			git gc -q
			git fsck --full --no-progress
			git rev-list --objects --all | sort
		') >"$o/git.out" 2>"$o/git.err" || rc=$?
	echo "$rc" >"$o/git.rc"

	# gcc: compile and run a small program; the binary must be the same.
	rc=0
	clean timeout 60 gcc -O2 -o "$o/prog" "$T/prog.c" >"$o/gcc.out" 2>"$o/gcc.err" || rc=$?
	if [ "$rc" = 0 ]; then
		clean timeout 60 "$o/prog" >>"$o/gcc.out" 2>>"$o/gcc.err" || rc=$?
		cksum <"$o/prog" >>"$o/gcc.out"
	fi
	echo "$rc" >"$o/gcc.rc"
}

# ------------------------------------------------------------- inside
# Runs as "$0 --inner" under unshare -m.  Records one result per test in
# $T/res/ID: "ok" or the reason for failure.
inner() {
	T=$E2E_T
	lib=$E2E_LIB
	lib2=$E2E_LIB2
	helper=$E2E_HELPER
	r() { printf '%s\n' "$2" >"$T/res/$1"; }

	# Never outside a namespace of our own.
	if [ "$(readlink /proc/self/ns/mnt)" = "$E2E_OUTER_MNTNS" ]; then
		r ns "--inner is not running in a new mount namespace"
		exit 1
	fi
	if ! mount --make-rprivate /; then
		r ns "mount --make-rprivate / failed"
		exit 1
	fi
	if ! mount --bind "$T/etc" /etc; then
		r ns "mount --bind $T/etc /etc failed"
		exit 1
	fi
	# Nothing below may run unless /etc really is the copy.
	if [ ! -e "/etc/$marker" ]; then
		r ns "the copy of /etc is not visible at /etc"
		exit 1
	fi
	r ns ok

	rc=0
	timeout 60 "$helper" --lib "$lib" enable >"$T/enable.log" 2>&1 || rc=$?
	if [ "$rc" = 0 ]; then r enable ok; else r enable "exit $rc: $(cat "$T/enable.log")"; fi

	if grep -qxF -- "$lib" /etc/ld.so.preload 2>/dev/null; then
		r listed ok
	else
		r listed "not listed: $(cat /etc/ld.so.preload 2>&1)"
	fi

	rc=0
	timeout 60 "$helper" status >"$T/status.log" 2>&1 || rc=$?
	if [ "$rc" = 0 ]; then r status ok; else r status "exit $rc: $(cat "$T/status.log")"; fi

	err=$(env -u LD_PRELOAD MIALLOC_VERBOSE=1 /bin/true 2>&1)
	case $err in
	*"malloc is redirected to mialloc"*) r verbose ok ;;
	*) r verbose "stderr: $err" ;;
	esac

	cat /proc/self/maps >"$T/maps.cat" 2>&1
	if grep -qF -- "$lib" "$T/maps.cat"; then r mapscat ok; else r mapscat "$lib not in cat's maps"; fi
	clean python3 -I -c 'import sys; sys.stdout.write(open("/proc/self/maps").read())' >"$T/maps.py" 2>&1
	if grep -qF -- "$lib" "$T/maps.py"; then r mapspy ok; else r mapspy "$lib not in python3's maps"; fi

	work "$T/ns"

	rc=0
	timeout 60 "$helper" disable >"$T/disable.log" 2>&1 || rc=$?
	if [ "$rc" = 0 ] && [ ! -e /etc/ld.so.preload ]; then
		r disable ok
	else
		r disable "exit $rc, ld.so.preload: $(cat /etc/ld.so.preload 2>&1) log: $(cat "$T/disable.log")"
	fi

	err=$(env -u LD_PRELOAD MIALLOC_VERBOSE=1 /bin/true 2>&1)
	cat /proc/self/maps >"$T/maps.off" 2>&1
	case $err in
	*mialloc*) r off "stderr still mentions mialloc: $err" ;;
	*)
		if grep -qF -- "$lib" "$T/maps.off"; then
			r off "library still in cat's maps"
		else
			r off ok
		fi
		;;
	esac

	# The listed library disappears: ld.so skips it with a warning, and
	# disable still works.
	rc=0
	timeout 60 "$helper" --lib "$lib2" enable >"$T/enable2.log" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		r deleted "enable of $lib2 failed: $(cat "$T/enable2.log")"
	else
		rm -f -- "$lib2"
		rc=0
		timeout 60 "$helper" disable >"$T/disable2.log" 2>&1 || rc=$?
		if [ "$rc" = 0 ] && [ ! -e /etc/ld.so.preload ]; then
			r deleted ok
		else
			r deleted "exit $rc: $(cat "$T/disable2.log")"
		fi
	fi

	# Another allocator listed first would win malloc: enable must refuse
	# without writing the file.
	if [ -z "$E2E_OTHER" ]; then
		r other "no other allocator (jemalloc, tcmalloc, mimalloc) installed"
	else
		printf '# admin entry\n%s\n' "$E2E_OTHER" >/etc/ld.so.preload
		before=$(cksum </etc/ld.so.preload)
		ibefore=$(stat -c %i /etc/ld.so.preload)
		rc=0
		timeout 60 "$helper" --lib "$lib" enable >"$T/enable3.log" 2>&1 || rc=$?
		if [ "$rc" != 0 ] && [ "$(cksum </etc/ld.so.preload)" = "$before" ] &&
			[ "$(stat -c %i /etc/ld.so.preload)" = "$ibefore" ]; then
			r other ok
		else
			r other "exit $rc, ld.so.preload now: $(cat /etc/ld.so.preload 2>&1) log: $(cat "$T/enable3.log")"
		fi
		rm -f /etc/ld.so.preload
	fi

	# The check after the rename fails (a fake timeout(1) that fails once
	# the library is listed): the previous contents must come back.
	mkdir -p "$T/fakebin"
	{
		echo '#!/bin/sh'
		echo "if grep -qF -- '$lib' /etc/ld.so.preload 2>/dev/null; then"
		echo '	echo "fake timeout: failing on purpose" >&2'
		echo '	exit 1'
		echo 'fi'
		echo 'exec /usr/bin/timeout "$@"'
	} >"$T/fakebin/timeout"
	chmod +x "$T/fakebin/timeout"
	printf '# admin entry\n' >/etc/ld.so.preload
	before=$(cksum </etc/ld.so.preload)
	rc=0
	PATH=$T/fakebin:$PATH timeout 60 "$helper" --lib "$lib" enable >"$T/enable4.log" 2>&1 || rc=$?
	if [ "$rc" != 0 ] && [ "$(cksum </etc/ld.so.preload)" = "$before" ] &&
		grep -q 'restoring the previous contents' "$T/enable4.log"; then
		r restore ok
	else
		r restore "exit $rc, ld.so.preload now: $(cat /etc/ld.so.preload 2>&1) log: $(cat "$T/enable4.log")"
	fi
	rm -f /etc/ld.so.preload
	exit 0
}

if [ "${1:-}" = --inner ]; then
	inner
fi

# ------------------------------------------------------------- outside
here=$(cd "$(dirname "$0")" && pwd -P)
self=$here/$(basename "$0")
srcdir=${MIALLOC_SRCDIR:-$(cd "$here/../.." && pwd -P)}
helper=$srcdir/tools/mialloc-preload
srclib=${MIALLOC_LIB:-$srcdir/src/.libs/libmialloc.so.1}

n=0
failed=0
ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}
notok() {
	n=$((n + 1))
	echo "not ok $n - $1"
	failed=1
	shift
	for why in "$@"; do
		printf '%s\n' "$why" | sed 's/^/# /'
	done
}
# finish_all REASON: the remaining tests fail with REASON
finish_all() {
	while [ "$n" -lt "$NTESTS" ]; do
		notok "end-to-end test not run" "$1"
	done
	exit 1
}

realsum() {
	if [ -e /etc/ld.so.preload ]; then
		cksum </etc/ld.so.preload
	else
		echo absent
	fi
}
real_before=$(realsum)

echo "1..$NTESTS"

if [ "$(id -u)" = 0 ]; then
	ok "running as root"
else
	notok "running as root" "this test needs root (mount namespaces, bind mounts)"
	finish_all "not root"
fi
if ! command -v unshare >/dev/null; then
	notok "unshare is available" "unshare(1) not found (util-linux)"
	finish_all "no unshare"
fi
if ! unshare -m true 2>"${TMPDIR:-/tmp}/.mialloc-e2e-unshare.$$"; then
	why=$(cat "${TMPDIR:-/tmp}/.mialloc-e2e-unshare.$$")
	rm -f "${TMPDIR:-/tmp}/.mialloc-e2e-unshare.$$"
	notok "unshare -m works" "unshare -m failed: $why"
	finish_all "no mount namespace"
fi
rm -f "${TMPDIR:-/tmp}/.mialloc-e2e-unshare.$$"
ok "unshare -m works"

if [ ! -f "$srclib" ] || [ ! -x "$helper" ]; then
	notok "reference outputs with plain glibc" "library ($srclib) or helper ($helper) missing"
	finish_all "library or helper missing"
fi

T=$(mktemp -d /tmp/mialloc-e2e.XXXXXX) || finish_all "mktemp failed"
chmod 755 "$T"
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	if [ "${E2E_KEEP:-0}" = 1 ]; then
		echo "# kept $T"
	else
		rm -rf -- "$T"
	fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
mkdir -p "$T/res" "$T/lib" "$T/lib2"
cp -L -- "$srclib" "$T/lib/libmialloc.so.1"
cp -L -- "$srclib" "$T/lib2/libmialloc.so.1"
lib=$T/lib/libmialloc.so.1
lib2=$T/lib2/libmialloc.so.1

# Inputs.
awk 'BEGIN {
	s = 12345
	for (i = 0; i < 240000; i++) {
		s = (s * 1103515 + 12345) % 2147483648
		printf "%010d %s %d\n", s, substr("abcdefghijklmnopqrstuvwxyz", s % 26 + 1, 4), i
	}
}' >"$T/data.txt"
cat >"$T/roundtrip.py" <<'EOF'
import hashlib, json, random
random.seed(7)
d = [{"id": i, "name": "n%d" % i * 3, "vals": [random.random() for _ in range(5)],
      "tags": {"t%d" % j: [j] * j for j in range(i % 7)}} for i in range(40000)]
s = json.dumps(d, sort_keys=True)
e = json.loads(s)
assert e == d
s2 = json.dumps(e, sort_keys=True, indent=1)
print(len(s), hashlib.sha256(s.encode()).hexdigest())
print(len(s2), hashlib.sha256(s2.encode()).hexdigest())
EOF
cat >"$T/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp(const void *a, const void *b) {
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}
int main(void) {
	unsigned s = 1, sum = 0;
	char *keep[1000] = {0};
	for (int round = 0; round < 200; round++) {
		size_t n = 1000 + round * 50;
		unsigned *v = malloc(n * sizeof *v);
		if (!v) return 2;
		for (size_t i = 0; i < n; i++) v[i] = s = s * 1103515245u + 12345u;
		qsort(v, n, sizeof *v, cmp);
		sum = sum * 31 + v[n / 2];
		free(v);
		for (int i = 0; i < 1000; i++) {
			free(keep[i]);
			keep[i] = malloc((s >> (i % 16)) % 4000 + 1);
			if (!keep[i]) return 3;
			memset(keep[i], i, 1);
		}
	}
	for (int i = 0; i < 1000; i++) free(keep[i]);
	printf("%u\n", sum);
	return 0;
}
EOF

work "$T/ref"
missing=
for w in sort python3 git gcc; do
	if [ "$(cat "$T/ref/$w.rc" 2>/dev/null)" != 0 ]; then
		missing="$missing $w(exit $(cat "$T/ref/$w.rc" 2>/dev/null): $(head -c 300 "$T/ref/$w.err" 2>/dev/null))"
	fi
done
if [ -z "$missing" ]; then
	ok "reference outputs with plain glibc (sort, python3, git, gcc)"
else
	notok "reference outputs with plain glibc (sort, python3, git, gcc)" "failed:$missing"
fi

# The private copy of /etc, with the marker only it holds.
if ! cp -a /etc "$T/etc" 2>"$T/cp.err" && [ ! -f "$T/etc/passwd" ]; then
	notok "private /etc in a mount namespace" "cp -a /etc failed: $(cat "$T/cp.err")"
	finish_all "no copy of /etc"
fi
: >"$T/etc/$marker"
if [ -e "/etc/$marker" ]; then
	notok "private /etc in a mount namespace" "/etc/$marker exists outside the namespace"
	finish_all "marker already in the real /etc"
fi

# An installed allocator other than mialloc, for the precedence test.
other=
for f in /usr/lib/*/libjemalloc.so.2 /usr/lib/*/libtcmalloc_minimal.so.4 /usr/lib/*/libmimalloc.so.2; do
	if [ -f "$f" ]; then
		other=$f
		break
	fi
done

rc=0
E2E_OUTER_MNTNS=$(readlink /proc/self/ns/mnt) E2E_T=$T E2E_LIB=$lib E2E_OTHER=$other E2E_LIB2=$lib2 E2E_HELPER=$helper \
	timeout 180 nice unshare -m --propagation private sh "$self" --inner \
	>"$T/inner.log" 2>&1 || rc=$?

result() { # ID DESC
	if [ ! -e "$T/res/$1" ]; then
		notok "$2" "not reached (inner script exit $rc)" "$(tail -n 20 "$T/inner.log")"
	elif [ "$(cat "$T/res/$1")" = ok ]; then
		ok "$2"
	else
		notok "$2" "$(cat "$T/res/$1")"
	fi
}
result ns "private /etc in a mount namespace (bind-mounted copy)"
result enable "mialloc-preload --lib <copy> enable (ROOT /, inside the namespace)"
result listed "/etc/ld.so.preload lists the library"
result status "mialloc-preload status exits 0"
result verbose "new processes run on mialloc (MIALLOC_VERBOSE=1 /bin/true, no LD_PRELOAD)"
result mapscat "/proc/self/maps of cat lists the library"
result mapspy "/proc/self/maps of python3 lists the library"

active=0
[ "$(cat "$T/res/verbose" 2>/dev/null)" = ok ] && active=1
for w in sort python3 git gcc; do
	d="$w: same stdout, stderr and exit status as plain glibc, via ld.so.preload"
	if [ "$active" != 1 ]; then
		notok "$d" "mialloc was not active through ld.so.preload"
		continue
	fi
	diffs=
	for f in out err rc; do
		if ! cmp -s "$T/ref/$w.$f" "$T/ns/$w.$f"; then
			diffs="$diffs$w.$f differs:
$(diff "$T/ref/$w.$f" "$T/ns/$w.$f" 2>&1 | head -n 20)
"
		fi
	done
	if [ -z "$diffs" ] && [ "$(cat "$T/ref/$w.rc")" = 0 ]; then
		ok "$d"
	else
		notok "$d" "${diffs:-reference run failed}"
	fi
done

result disable "mialloc-preload disable removes the entry (and the file)"
result off "after disable, new processes are not on mialloc"
result deleted "disable works after the listed library file was deleted"
result other "enable with another allocator listed first refuses, file not rewritten${other:+ ($other)}"
result restore "a failing check after the rename puts the previous contents back"

real_after=$(realsum)
if [ "$real_before" = "$real_after" ] && [ ! -e "/etc/$marker" ]; then
	ok "real /etc/ld.so.preload unchanged ($real_after) and the copy never visible outside"
else
	notok "real /etc/ld.so.preload unchanged" "before: $real_before" "after: $real_after"
fi

if [ "$n" != "$NTESTS" ]; then
	echo "# planned $NTESTS tests, ran $n"
	failed=1
fi
exit "$failed"
