#!/bin/sh
# Tests for tools/mialloc-preload (TAP producer).
#
# Every test works on a fake root in a temporary directory (--root DIR); the
# real /etc is never written.  The only commands run against ROOT "/" are
# run as user "nobody" and must be refused before they touch anything.
#
# Environment:
#   MIALLOC_LIB     the built library, absolute path (default:
#                   $MIALLOC_SRCDIR/src/.libs/libmialloc.so.1)
#   MIALLOC_SRCDIR  the repository root (default: two levels up from this
#                   script)
#   CC              compiler for the broken test libraries (default: cc)
#
# Exit status: 0 when every test passed, 1 otherwise.

set -u
LC_ALL=C
export LC_ALL
unset LD_PRELOAD || true

here=$(cd "$(dirname "$0")" && pwd -P)
srcdir=${MIALLOC_SRCDIR:-$(cd "$here/../.." && pwd -P)}
helper=$srcdir/tools/mialloc-preload
lib=${MIALLOC_LIB:-$srcdir/src/.libs/libmialloc.so.1}
case $lib in
/*) ;;
*) lib=$PWD/$lib ;;
esac
cc=${CC:-cc}

if [ ! -f "$lib" ]; then
	echo "Bail out! library not found: $lib (set MIALLOC_LIB)"
	exit 1
fi
if [ ! -f "$helper" ]; then
	echo "Bail out! helper not found: $helper (set MIALLOC_SRCDIR)"
	exit 1
fi

# The real /etc/ld.so.preload must be the same at the end.
realsum() {
	if [ -e /etc/ld.so.preload ]; then
		cksum </etc/ld.so.preload
	else
		echo absent
	fi
}
real_before=$(realsum)

T=$(mktemp -d "${TMPDIR:-/tmp}/mialloc-preload-test.XXXXXX") || {
	echo "Bail out! mktemp failed"
	exit 1
}
pub=
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	rm -rf -- "$T"
	if [ -n "$pub" ]; then rm -rf -- "$pub"; fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null) || ma=
[ -n "$ma" ] || ma=$(gcc -print-multiarch 2>/dev/null) || ma=
[ -n "$ma" ] || ma=x86_64-linux-gnu
deflib=/usr/lib/$ma/libmialloc.so.1

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
		echo "# $why"
	done
	if [ -s "$T/out" ] || [ -s "$T/err" ]; then
		sed 's/^/#   out: /' "$T/out" 2>/dev/null
		sed 's/^/#   err: /' "$T/err" 2>/dev/null
	fi
}
# check DESC COMMAND...: ok when COMMAND succeeds
check() {
	d=$1
	shift
	if "$@"; then ok "$d"; else notok "$d" "failed: $*"; fi
}

# hp ARGS...: run the helper, stdout/stderr to $T/out, $T/err; rc in $rc
rc=0
hp() {
	rc=0
	nice "$helper" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
}

sum() {
	if [ -e "$1" ]; then cksum <"$1"; else echo absent; fi
}
ino() { stat -c %i -- "$1"; }
no_temp() {
	for f in "$1"/etc/.ld.so.preload.*; do
		[ -e "$f" ] && return 1
	done
	return 0
}
# same FILE EXPECTED-TEXT
same() {
	printf '%s' "$2" >"$T/expected"
	cmp -s -- "$1" "$T/expected"
}
has() { grep -q -- "$2" "$1"; }

# mkroot NAME: a fresh fake root with the library at the default path
mkroot() {
	R=$T/$1
	mkdir -p "$R/etc" "$R/usr/lib/$ma"
	cp -- "$lib" "$R$deflib"
	P=$R/etc/ld.so.preload
}

echo "1..50"

# ------------------------------------------------------------- basics
if sh -n "$helper" && { ! command -v dash >/dev/null || dash -n "$helper"; }; then
	ok "helper parses with sh -n (and dash -n)"
else
	notok "helper parses with sh -n (and dash -n)"
fi
check "helper is executable" test -x "$helper"

hp --help
if [ "$rc" = 0 ] && has "$T/out" '^Usage: mialloc-preload'; then ok "--help exits 0 with usage"; else notok "--help exits 0 with usage" "rc=$rc"; fi

mkroot basic
hp --root "$R" frobnicate
if [ "$rc" != 0 ] && has "$T/err" 'unknown command'; then ok "unknown command fails ($rc) with a message"; else notok "unknown command fails with a message" "rc=$rc"; fi
hp --root "$R" --frob status
if [ "$rc" != 0 ] && has "$T/err" 'unknown option'; then ok "unknown option fails ($rc) with a message"; else notok "unknown option fails with a message" "rc=$rc"; fi
hp --root "$R"
if [ "$rc" != 0 ] && has "$T/err" 'no command'; then ok "missing command fails ($rc)"; else notok "missing command fails" "rc=$rc"; fi
hp --root "$R" --lib lib/libmialloc.so.1 enable
if [ "$rc" != 0 ] && has "$T/err" 'absolute' && [ ! -e "$P" ]; then ok "relative --lib refused"; else notok "relative --lib refused" "rc=$rc"; fi
hp --root "$R" status enable
if [ "$rc" != 0 ] && [ ! -e "$P" ]; then ok "two commands refused"; else notok "two commands refused" "rc=$rc"; fi

# ------------------------------------------------------------- enable
hp --root "$R" status
if [ "$rc" = 1 ]; then ok "status without ld.so.preload exits 1"; else notok "status without ld.so.preload exits 1" "rc=$rc"; fi

hp --root "$R" enable
if [ "$rc" = 0 ] && same "$P" "$deflib
"; then ok "enable (default path) creates ld.so.preload with the entry"; else notok "enable (default path) creates ld.so.preload with the entry" "rc=$rc"; fi
mode=$(stat -c %a -- "$P" 2>/dev/null)
if [ "$mode" = 644 ]; then ok "ld.so.preload is mode 644"; else notok "ld.so.preload is mode 644" "mode=$mode"; fi
check "no .ld.so.preload.* temp file left after enable" no_temp "$R"

hp --root "$R" status
if [ "$rc" = 0 ] && has "$T/out" "$deflib"; then ok "status when enabled exits 0 and names the path"; else notok "status when enabled exits 0 and names the path" "rc=$rc"; fi

# other entries and comments kept, in order
mkroot keep
text='# site preloads
/usr/lib/libfoo.so
  # indented comment
/usr/lib/libbar.so /usr/lib/libbaz.so	# two on a line

/usr/lib/libqux.so
'
printf '%s' "$text" >"$P"
i0=$(ino "$P")
hp --root "$R" enable
if [ "$rc" = 0 ] && same "$P" "$text$deflib
"; then ok "enable keeps other entries and comments verbatim, in order"; else notok "enable keeps other entries and comments verbatim, in order" "rc=$rc"; fi
i1=$(ino "$P")
if [ "$i0" != "$i1" ]; then ok "enable renamed a new file into place (inode $i0 -> $i1)"; else notok "enable renamed a new file into place" "inode unchanged: $i0"; fi
check "no temp file left" no_temp "$R"

s0=$(sum "$P")
hp --root "$R" enable
s1=$(sum "$P")
i2=$(ino "$P")
if [ "$rc" = 0 ] && [ "$s0" = "$s1" ] && [ "$i1" = "$i2" ] && has "$T/out" 'already'; then ok "enable twice is idempotent (file not rewritten)"; else notok "enable twice is idempotent" "rc=$rc s0=$s0 s1=$s1 i=$i1/$i2"; fi

mkroot nonl
printf '# no newline at end\n/usr/lib/libfoo.so' >"$P"
hp --root "$R" enable
if [ "$rc" = 0 ] && same "$P" "# no newline at end
/usr/lib/libfoo.so
$deflib
"; then ok "enable after a last line without newline keeps it intact"; else notok "enable after a last line without newline keeps it intact" "rc=$rc"; fi

mkroot opt
mkdir -p "$R/opt/m"
cp -- "$lib" "$R/opt/m/libmialloc.so.1"
hp --root "$R" --lib /opt/m/libmialloc.so.1 enable
if [ "$rc" = 0 ] && same "$P" "/opt/m/libmialloc.so.1
"; then ok "--lib path is written as seen inside ROOT (no ROOT prefix)"; else notok "--lib path is written as seen inside ROOT" "rc=$rc"; fi
hp --root="$R" --lib=/opt/m/libmialloc.so.1 status
if [ "$rc" = 0 ]; then ok "--root=DIR --lib=PATH forms work (status 0)"; else notok "--root=DIR --lib=PATH forms work" "rc=$rc"; fi

# another libmialloc entry is replaced, others kept
mkroot replace
printf '/usr/lib/libfoo.so\n/usr/local/lib/libmialloc.so.1 /usr/lib/libbar.so\n# end\n' >"$P"
hp --root "$R" enable
if [ "$rc" = 0 ] && same "$P" "/usr/lib/libfoo.so
/usr/lib/libbar.so
# end
$deflib
"; then ok "enable replaces another libmialloc entry, keeps the rest"; else notok "enable replaces another libmialloc entry" "rc=$rc"; fi

# ------------------------------------------------------------- refusals
mkroot missing
printf '# keep me\n/usr/lib/libfoo.so\n' >"$P"
rm -f -- "$R$deflib"
s0=$(sum "$P")
i0=$(ino "$P")
hp --root "$R" enable
if [ "$rc" != 0 ] && has "$T/err" 'does not exist' && [ "$(sum "$P")" = "$s0" ] && [ "$(ino "$P")" = "$i0" ]; then
	ok "enable with a missing library refuses, file byte-identical"
else
	notok "enable with a missing library refuses, file byte-identical" "rc=$rc"
fi
# the file checked is $ROOT$PATH, not the host's PATH
hp --root "$R" --lib "$lib" enable
if [ "$rc" != 0 ] && [ "$(sum "$P")" = "$s0" ]; then ok "enable checks ROOT/PATH, not the host's PATH"; else notok "enable checks ROOT/PATH, not the host's PATH" "rc=$rc"; fi
mkroot missing2
rm -f -- "$R$deflib"
hp --root "$R" enable
if [ "$rc" != 0 ] && [ ! -e "$P" ]; then ok "enable with a missing library and no file leaves no file"; else notok "enable with a missing library and no file leaves no file" "rc=$rc"; fi

# broken libraries
cat >"$T/exit1.c" <<'EOF'
#include <unistd.h>
__attribute__((constructor)) static void die_at_start(void) { _exit(1); }
EOF
cat >"$T/plain.c" <<'EOF'
int mialloc_test_not_an_allocator(void) { return 42; }
EOF
built=1
nice "$cc" -shared -fPIC -o "$T/exit1.so" "$T/exit1.c" 2>"$T/cc.err" || built=0
nice "$cc" -shared -fPIC -o "$T/plain.so" "$T/plain.c" 2>>"$T/cc.err" || built=0
printf 'this is not an ELF file\n' >"$T/notelf.so"

refuse_with() { # DESC FILE
	mkroot "broken-$(basename "$2")"
	printf '# keep\n/usr/lib/libfoo.so\n' >"$P"
	cp -- "$2" "$R$deflib"
	s0=$(sum "$P")
	i0=$(ino "$P")
	hp --root "$R" enable
	if [ "$rc" != 0 ] && has "$T/err" 'smoke test failed' && [ "$(sum "$P")" = "$s0" ] &&
		[ "$(ino "$P")" = "$i0" ] && no_temp "$R"; then
		ok "$1"
	else
		notok "$1" "rc=$rc"
	fi
}
if [ "$built" = 1 ]; then
	refuse_with "enable refuses a library whose constructor calls _exit(1); file untouched" "$T/exit1.so"
	refuse_with "enable refuses a shared object that is not mialloc; file untouched" "$T/plain.so"
else
	notok "enable refuses a library whose constructor calls _exit(1)" "cannot build test libraries with $cc: $(cat "$T/cc.err")"
	notok "enable refuses a shared object that is not mialloc" "cannot build test libraries with $cc"
fi
refuse_with "enable refuses a non-ELF file; file untouched" "$T/notelf.so"

mkroot symlink
printf '/usr/lib/libfoo.so\n' >"$R/etc/real.preload"
ln -s real.preload "$P"
hp --root "$R" enable
if [ "$rc" != 0 ] && [ -L "$P" ] && [ "$(cat "$R/etc/real.preload")" = /usr/lib/libfoo.so ]; then ok "enable refuses a symlinked ld.so.preload"; else notok "enable refuses a symlinked ld.so.preload" "rc=$rc"; fi

# failures while writing: temp file removed, file untouched
mkdir -p "$T/failmv" "$T/failsync"
printf '#!/bin/sh\necho "fake mv fails" >&2\nexit 1\n' >"$T/failmv/mv"
printf '#!/bin/sh\necho "fake sync fails" >&2\nexit 1\n' >"$T/failsync/sync"
chmod +x "$T/failmv/mv" "$T/failsync/sync"
for what in mv sync; do
	mkroot "fail$what"
	printf '# keep\n/usr/lib/libfoo.so\n' >"$P"
	s0=$(sum "$P")
	i0=$(ino "$P")
	rc=0
	PATH=$T/fail$what:$PATH nice "$helper" --root "$R" enable >"$T/out" 2>"$T/err" </dev/null || rc=$?
	if [ "$rc" != 0 ] && [ "$(sum "$P")" = "$s0" ] && [ "$(ino "$P")" = "$i0" ] && no_temp "$R"; then
		ok "a failing $what: enable fails, file untouched, temp file removed"
	else
		notok "a failing $what: enable fails, file untouched, temp file removed" "rc=$rc"
	fi
done

# ------------------------------------------------------------- disable
mkroot dis
printf '# site\n/usr/lib/libfoo.so\n%s\n/usr/lib/libbar.so\n' "$deflib" >"$P"
i0=$(ino "$P")
hp --root "$R" disable
if [ "$rc" = 0 ] && same "$P" '# site
/usr/lib/libfoo.so
/usr/lib/libbar.so
'; then ok "disable removes only our entry"; else notok "disable removes only our entry" "rc=$rc"; fi
if [ -e "$P" ] && [ "$(ino "$P")" != "$i0" ]; then ok "disable renamed a new file into place"; else notok "disable renamed a new file into place"; fi
check "no temp file left after disable" no_temp "$R"
mode=$(stat -c %a -- "$P" 2>/dev/null)
if [ "$mode" = 644 ]; then ok "ld.so.preload is mode 644 after disable"; else notok "ld.so.preload is mode 644 after disable" "mode=$mode"; fi

mkroot disline
printf '/usr/lib/liba.so:%s /usr/lib/libb.so # comment\n# %s commented out\n' "$deflib" "$deflib" >"$P"
hp --root "$R" disable
if [ "$rc" = 0 ] && same "$P" "/usr/lib/liba.so /usr/lib/libb.so # comment
# $deflib commented out
"; then ok "disable keeps other entries of a shared line and comments"; else notok "disable keeps other entries of a shared line and comments" "rc=$rc"; fi
hp --root "$R" status
if [ "$rc" = 1 ]; then ok "a commented-out entry is not enabled (status 1)"; else notok "a commented-out entry is not enabled (status 1)" "rc=$rc"; fi

mkroot disother
printf '/usr/lib/libfoo.so\n/opt/x/libmialloc.so.1.0.0\n/opt/y/mymalloc.so\n' >"$P"
hp --root "$R" --lib /opt/y/mymalloc.so disable
if [ "$rc" = 0 ] && same "$P" '/usr/lib/libfoo.so
'; then ok "disable removes the --lib path and any libmialloc.so* entry"; else notok "disable removes the --lib path and any libmialloc.so* entry" "rc=$rc"; fi

mkroot disdel
printf '/usr/lib/libfoo.so\n%s\n' "$deflib" >"$P"
rm -f -- "$R$deflib"
hp --root "$R" disable
if [ "$rc" = 0 ] && same "$P" '/usr/lib/libfoo.so
'; then ok "disable works when the listed library was deleted"; else notok "disable works when the listed library was deleted" "rc=$rc"; fi

mkroot disbroken
printf '/usr/lib/libfoo.so\n%s\n' "$deflib" >"$P"
if [ "$built" = 1 ]; then cp -- "$T/exit1.so" "$R$deflib"; else cp -- "$T/notelf.so" "$R$deflib"; fi
hp --root "$R" disable
if [ "$rc" = 0 ] && same "$P" '/usr/lib/libfoo.so
'; then ok "disable works when the listed library was replaced by a broken one"; else notok "disable works when the listed library was replaced by a broken one" "rc=$rc"; fi

mkroot disonly
printf '%s\n\n' "$deflib" >"$P"
hp --root "$R" disable
if [ "$rc" = 0 ] && [ ! -e "$P" ] && no_temp "$R"; then ok "disable removes ld.so.preload when nothing else is left"; else notok "disable removes ld.so.preload when nothing else is left" "rc=$rc"; fi
hp --root "$R" disable
if [ "$rc" = 0 ] && [ ! -e "$P" ]; then ok "disable without ld.so.preload succeeds, creates nothing"; else notok "disable without ld.so.preload succeeds" "rc=$rc"; fi

mkroot disnone
printf '# nothing of ours\n/usr/lib/libfoo.so\n' >"$P"
s0=$(sum "$P")
i0=$(ino "$P")
hp --root "$R" disable
if [ "$rc" = 0 ] && [ "$(sum "$P")" = "$s0" ] && [ "$(ino "$P")" = "$i0" ]; then ok "disable when not enabled leaves the file untouched"; else notok "disable when not enabled leaves the file untouched" "rc=$rc"; fi

# ------------------------------------------------------------- status
mkroot stmiss
printf '%s\n' "$deflib" >"$P"
rm -f -- "$R$deflib"
hp --root "$R" status
if [ "$rc" = 2 ] && has "$T/out" 'missing'; then ok "status with a listed but missing library exits 2"; else notok "status with a listed but missing library exits 2" "rc=$rc"; fi
mkdir -p "$T/noetc"
hp --root "$T/noetc" status
if [ "$rc" = 2 ]; then ok "status on a root without etc/ exits 2"; else notok "status on a root without etc/ exits 2" "rc=$rc"; fi
hp --root "$T/does-not-exist" status
if [ "$rc" = 2 ]; then ok "status on a missing root exits 2"; else notok "status on a missing root exits 2" "rc=$rc"; fi
mkroot stlib
printf '%s\n' "$deflib" >"$P"
mkdir -p "$R/opt"
cp -- "$lib" "$R/opt/libmialloc.so.1"
hp --root "$R" --lib /opt/libmialloc.so.1 status
if [ "$rc" = 1 ]; then ok "status --lib counts only that path (exit 1)"; else notok "status --lib counts only that path (exit 1)" "rc=$rc"; fi

# ------------------------------------------------------------- full cycle
mkroot cycle
printf '# c\n/usr/lib/libfoo.so\n' >"$P"
s0=$(sum "$P")
hp --root "$R" enable && hp --root "$R" disable
if [ "$rc" = 0 ] && [ "$(sum "$P")" = "$s0" ]; then ok "enable then disable restores the original bytes"; else notok "enable then disable restores the original bytes" "rc=$rc"; fi

# ------------------------------------------------------------- root check
# As "nobody", ROOT "/" must be refused before anything is touched.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	pub=$(mktemp -d "${TMPDIR:-/tmp}/mialloc-preload-pub.XXXXXX")
	chmod 755 "$pub"
	cp -- "$helper" "$pub/mialloc-preload"
	chmod 755 "$pub/mialloc-preload"
	for c in enable disable; do
		rc=0
		(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups \
			"$pub/mialloc-preload" --lib "$deflib" "$c") >"$T/out" 2>"$T/err" </dev/null || rc=$?
		if [ "$rc" != 0 ] && has "$T/err" 'must be run as root'; then
			ok "$c as non-root with ROOT / is refused"
		else
			notok "$c as non-root with ROOT / is refused" "rc=$rc"
		fi
	done
elif [ "$(id -u)" != 0 ]; then
	for c in enable disable; do
		hp --lib "$deflib" "$c"
		if [ "$rc" != 0 ] && has "$T/err" 'must be run as root'; then
			ok "$c as non-root with ROOT / is refused"
		else
			notok "$c as non-root with ROOT / is refused" "rc=$rc"
		fi
	done
else
	notok "enable as non-root with ROOT / is refused" "setpriv not available to drop privileges"
	notok "disable as non-root with ROOT / is refused" "setpriv not available to drop privileges"
fi

real_after=$(realsum)
if [ "$real_before" = "$real_after" ]; then ok "real /etc/ld.so.preload unchanged ($real_after)"; else notok "real /etc/ld.so.preload unchanged" "before: $real_before" "after: $real_after"; fi

if [ "$n" != 50 ]; then
	echo "# planned 50 tests, ran $n"
	failed=1
fi
exit "$failed"
