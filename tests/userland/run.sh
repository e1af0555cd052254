#!/bin/bash
# Real-userland compatibility suite for mialloc (TAP producer).
#
# Runs real Debian programs and scripted sessions twice: once plainly (glibc
# malloc) and once with LD_PRELOAD=$MIALLOC_LIB, and compares stdout, exit
# status and stderr byte for byte.  A few extra checks prove that the library
# really was mapped into the preloaded processes.
#
# Environment:
#   MIALLOC_LIB        library to preload (authoritative when set).  Default:
#                      the first src/.libs/libmialloc.so.1 that exists under
#                      $abs_top_builddir, the current directory, its parent
#                      or grandparent (build directories), else the one under
#                      the source tree that holds this script.
#   USERLAND_CASES     space-separated glob patterns selecting cases by name
#                      (default: all).  `run.sh --list` lists the names.
#   USERLAND_TIMEOUT   seconds allowed for one run of one case (default 240).
#   USERLAND_PATH      PATH for the programs under test
#                      (default /usr/sbin:/usr/bin:/sbin:/bin: Debian's own).
#   USERLAND_KEEP      1 = keep the temporary directory (printed at the end).
#   USERLAND_VERBOSE   1 = print per-case timings as diagnostics.
#   MIALLOC_*          every other MIALLOC_ variable is passed to both runs.
#
# Exit status: 0 when every case matched, 1 otherwise (the TAP stream is the
# authoritative result).

set -u
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
srcroot=$(cd "$here/../.." && pwd -P)
cases_sh=$here/cases.sh

if [[ ${1:-} == --list ]]; then
	exec bash "$cases_sh" --list
fi

# ---------------------------------------------------------------- library
libdefault=src/.libs/libmialloc.so.1
if [[ -n ${MIALLOC_LIB:-} ]]; then
	lib=$MIALLOC_LIB
else
	lib=$srcroot/$libdefault
	for cand in "${abs_top_builddir:+$abs_top_builddir/$libdefault}" "$PWD/$libdefault" \
		"$PWD/../$libdefault" "$PWD/../../$libdefault"; do
		if [[ -n $cand && -e $cand ]]; then
			lib=$cand
			break
		fi
	done
fi
case $lib in
/*) ;;
*) lib=$PWD/$lib ;;
esac
if [[ ! -f $lib ]]; then
	echo "Bail out! library not found: $lib"
	exit 1
fi
# Absolute, with symlinks in the directory part resolved; the file name is
# kept as given (LD_PRELOAD=.../libmialloc.so.1 like a user would write it).
lib=$(cd "$(dirname "$lib")" && pwd -P)/$(basename "$lib")
libreal=$(readlink -f "$lib")
case $lib in
*[[:space:]:]*)
	echo "Bail out! library path unusable in LD_PRELOAD (space or colon): $lib"
	exit 1
	;;
esac

testpath=${USERLAND_PATH:-/usr/sbin:/usr/bin:/sbin:/bin}
timeout_s=${USERLAND_TIMEOUT:-240}

# ---------------------------------------------------------------- cases
mapfile -t allcases < <(bash "$cases_sh" --list)
if ((${#allcases[@]} == 0)); then
	echo "Bail out! cannot list cases from $cases_sh"
	exit 1
fi
selected=()
for entry in "${allcases[@]}"; do
	name=${entry%% *}
	if [[ -n ${USERLAND_CASES:-} ]]; then
		hit=0
		read -r -a pats <<<"$USERLAND_CASES"
		for pat in "${pats[@]}"; do
			# shellcheck disable=SC2053  # glob match intended
			if [[ $name == $pat ]]; then
				hit=1
				break
			fi
		done
		((hit)) || continue
	fi
	selected+=("$entry")
done

echo "1..${#selected[@]}"
((${#selected[@]} > 0)) || exit 0

# ---------------------------------------------------------------- scratch
tmproot=$(mktemp -d "${TMPDIR:-/tmp}/mialloc-userland.XXXXXX") || {
	echo "Bail out! mktemp failed"
	exit 1
}
cleanup() {
	if [[ ${USERLAND_KEEP:-0} == 1 ]]; then
		echo "# kept $tmproot"
	else
		chmod -R u+rwx "$tmproot" 2>/dev/null
		rm -rf "$tmproot"
	fi
}
child=
stop() {
	[[ -n $child ]] && kill -TERM "$child" 2>/dev/null && wait "$child"
	exit "$1"
}
trap cleanup EXIT
trap 'stop 130' INT
trap 'stop 143' TERM

data=$tmproot/data
if ! env -u LD_PRELOAD PATH="$testpath" python3 "$here/gendata.py" "$data" >"$tmproot/gendata.log" 2>&1; then
	echo "Bail out! test data generation failed: $(tail -n 3 "$tmproot/gendata.log" | tr '\n' ' ')"
	exit 1
fi
chmod -R a-w "$data"

# Variables passed to both runs: a clean, deterministic environment plus any
# MIALLOC_* options the caller set.
passenv=()
while IFS= read -r v; do
	[[ $v == MIALLOC_LIB ]] && continue
	passenv+=("$v=${!v}")
done < <(compgen -e | grep '^MIALLOC_' || true)

# run_case NAME MODE(plain|preload) OUTPREFIX
run_case() {
	local name=$1 mode=$2 out=$3 preload=
	[[ $mode == preload ]] && preload=$lib
	local work=$tmproot/work home=$tmproot/home tmp=$tmproot/tmp
	chmod -R u+rwx "$work" 2>/dev/null
	rm -rf "$work" "$home" "$tmp"
	mkdir -p "$work" "$home" "$tmp"
	: >"$out.errlog"
	# Run in the background so that a signal to this script can stop the
	# case: timeout(1) runs in a process group of its own.
	(
		cd "$work" || exit 99
		exec env -i --default-signal=PIPE \
			PATH="$testpath" HOME="$home" TMPDIR="$tmp" USER=root LOGNAME=root \
			LC_ALL=C LANG=C TZ=UTC TERM=dumb SHELL=/bin/sh \
			SOURCE_DATE_EPOCH=1577836800 \
			PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1 \
			PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0 \
			GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL="$home/.gitconfig" \
			UL_DATA="$data" UL_PRELOAD="$preload" UL_LIBREAL="$libreal" \
			UL_ERRLOG="$out.errlog" UL_MODE="$mode" \
			"${passenv[@]}" \
			timeout -k 10 "$timeout_s" bash "$cases_sh" "$name"
	) </dev/null >"$out.out" 2>"$out.err" &
	child=$!
	wait "$child"
	echo $? >"$out.rc"
	child=
}

# Show where two files first differ (cheap even for multi-MiB files).
show_diff() {
	local what=$1 a=$2 b=$3 line
	local sa sb
	sa=$(stat -c %s "$a") sb=$(stat -c %s "$b")
	echo "#   $what differs (plain $sa bytes, preload $sb bytes): $(cmp "$a" "$b" 2>&1 | head -n 1)"
	line=$(cmp "$a" "$b" 2>/dev/null | sed -n 's/.* line \([0-9]*\).*/\1/p' | head -n 1)
	if [[ -n $line ]]; then
		echo "#     plain  : $(sed -n "${line}{p;q}" "$a" | cut -c1-200)"
		echo "#     preload: $(sed -n "${line}{p;q}" "$b" | cut -c1-200)"
	fi
}

tail_diag() {
	local label=$1 f=$2
	[[ -s $f ]] || return 0
	echo "#   $label (last lines):"
	tail -n 8 "$f" | cut -c1-300 | sed 's/^/#     /'
}

secs() {
	local s=${1/./}
	local e=${2/./}
	local d=$(((e - s) / 10000))
	printf '%d.%02d' $((d / 100)) $((d % 100))
}

# REQUIRED-PROGRAM of a case: a program on the test PATH, or PROGRAM:MODULE,
# a Python that can import MODULE (a test package installed on its own).
have_requirement() {
	local prog=${1%%:*}
	PATH=$testpath command -v "$prog" >/dev/null 2>&1 || return 1
	[[ $1 != *:* ]] || PATH=$testpath "$prog" -c "import ${1#*:}" >/dev/null 2>&1
}

n=0 cmp_total=0 cmp_ok=0 maps_total=0 maps_ok=0 skipped=0 failed=0
t_start=$EPOCHREALTIME
for entry in "${selected[@]}"; do
	n=$((n + 1))
	read -r name kind req <<<"$entry"
	if [[ -n ${req:-} ]] && ! have_requirement "$req"; then
		echo "ok $n - $name # SKIP $req not installed"
		skipped=$((skipped + 1))
		continue
	fi
	res=$tmproot/res/$name
	mkdir -p "$res"
	t0=$EPOCHREALTIME
	run_case "$name" plain "$res/plain"
	t1=$EPOCHREALTIME
	run_case "$name" preload "$res/preload"
	t2=$EPOCHREALTIME
	prc=$(<"$res/plain.rc") qrc=$(<"$res/preload.rc")
	diag=()
	if [[ $kind == maps ]]; then
		maps_total=$((maps_total + 1))
		if grep -qF -- "$libreal" "$res/plain.out"; then
			diag+=("#   library already mapped without LD_PRELOAD (system-wide preload?)")
		fi
		if ! grep -qF -- "$libreal" "$res/preload.out"; then
			diag+=("#   $libreal not in the process's /proc/self/maps under LD_PRELOAD (exit $qrc)")
			mapfile -t -O "${#diag[@]}" diag < <(tail_diag "preload stderr" "$res/preload.err")
		fi
		if [[ $prc != 0 || $qrc != 0 ]]; then
			diag+=("#   exit status: plain=$prc preload=$qrc")
		fi
		if ((${#diag[@]} == 0)); then
			maps_ok=$((maps_ok + 1))
		fi
	else
		cmp_total=$((cmp_total + 1))
		# The reference run must itself be clean, or the comparison is vacuous.
		if [[ -s $res/plain.errlog || $prc != 0 ]]; then
			diag+=("#   reference run (no preload) failed: exit $prc")
			mapfile -t -O "${#diag[@]}" diag < <(tail_diag "failed commands" "$res/plain.errlog")
			mapfile -t -O "${#diag[@]}" diag < <(tail_diag "stderr" "$res/plain.err")
		fi
		if [[ ! -s $res/plain.out ]]; then
			diag+=("#   reference run printed nothing")
		fi
		if [[ $prc != "$qrc" ]]; then
			diag+=("#   exit status: plain=$prc preload=$qrc$( ((qrc == 124 || qrc == 137)) && echo " (timeout ${timeout_s}s)")")
		fi
		if ! cmp -s "$res/plain.out" "$res/preload.out"; then
			mapfile -t -O "${#diag[@]}" diag < <(show_diff stdout "$res/plain.out" "$res/preload.out")
		fi
		if [[ $kind != nostderr ]] && ! cmp -s "$res/plain.err" "$res/preload.err"; then
			mapfile -t -O "${#diag[@]}" diag < <(show_diff stderr "$res/plain.err" "$res/preload.err")
		fi
		if ((${#diag[@]})); then
			mapfile -t -O "${#diag[@]}" diag < <(tail_diag "failed commands under preload" "$res/preload.errlog")
			mapfile -t -O "${#diag[@]}" diag < <(tail_diag "preload stderr" "$res/preload.err")
		else
			cmp_ok=$((cmp_ok + 1))
		fi
	fi
	if ((${#diag[@]})); then
		failed=$((failed + 1))
		echo "not ok $n - $name"
		printf '%s\n' "${diag[@]}"
		echo "#   reproduce: USERLAND_CASES=$name MIALLOC_LIB=$lib $here/run.sh"
	else
		echo "ok $n - $name"
		[[ ${USERLAND_KEEP:-0} == 1 ]] || rm -rf "$res"
	fi
	if [[ ${USERLAND_VERBOSE:-0} == 1 ]]; then
		echo "#   time: plain $(secs "$t0" "$t1")s, preload $(secs "$t1" "$t2")s"
	fi
done
echo "# library: $lib"
((skipped)) && echo "# skipped: $skipped"
echo "# preload active: $maps_ok of $maps_total checks"
echo "# total time: $(secs "$t_start" "$EPOCHREALTIME")s"
echo "# userland: $cmp_ok of $cmp_total programs match"
((failed == 0))
