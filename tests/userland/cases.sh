#!/bin/bash
# shellcheck disable=SC2002,SC2003,SC2012,SC2018,SC2019,SC2317
# (useless cat, expr, ls and tr ranges are deliberate: those programs are under
# test; the case functions are called indirectly, by name)

# Case definitions for the userland suite (see run.sh).
#
#   cases.sh --list    print "NAME KIND [REQUIRED-PROGRAM[:PYTHON-MODULE]]" lines
#   cases.sh NAME      run one case in the current directory
#
# run.sh runs every case twice in a fresh, identical working directory with a
# clean environment: once without and once with LD_PRELOAD (taken from
# UL_PRELOAD; this bash itself is never preloaded, everything it starts is).
# Each case prints to stdout whatever should be identical in both runs.
#
# KIND: cmp      compare stdout, stderr and exit status
#       nostderr compare stdout and exit status only
#       maps     stdout is the process's /proc/self/maps; run.sh checks that
#                the library is mapped with the preload and absent without
#
# Rules for cases: deterministic output only (no times, PIDs, addresses,
# absolute dates); every command that fails (non-zero status outside an
# if/||/&& test) is reported through the ERR trap and makes the reference
# run invalid, so expected non-zero statuses must be tested explicitly.

ul_list() {
	cat <<'EOF'
maps_cat maps
maps_bash maps
maps_python3 maps
maps_perl maps
maps_git maps
maps_node maps
bash_script cmp
bash_arrays cmp
dash_script cmp
sort_text cmp
sort_numeric cmp
sort_unique cmp
sort_merge cmp
uniq_count cmp
wc_counts cmp
tr_filters cmp
cut_paste cmp
join_comm cmp
split_cat cmp
head_tail cmp
checksums cmp
find_xargs_du cmp
ls_recursive cmp
base64_od cmp
text_tools cmp
seq_factor cmp
shuf_tsort cmp
utf8_text cmp
diff_cmp cmp
grep_regex cmp
sed_scripts cmp
awk_mawk cmp mawk
awk_gawk cmp gawk
gzip_roundtrip cmp
xz_roundtrip cmp
bzip2_roundtrip cmp
tar_roundtrip cmp
python_workload cmp
python_threads cmp
python_json cmp
python_re cmp
python_sqlite3 cmp
python_hashlib cmp
python_bignum cmp
python_regrtest cmp python3:test.test_dict
perl_hashes cmp
perl_text cmp
git_history cmp
git_clone_gc_fsck cmp
git_diff cmp
gcc_build cmp
gxx_build cmp
make_j2 cmp
sqlite3_bulk cmp
sqlite3_cte cmp
openssl_dgst cmp
openssl_enc cmp
node_script cmp
node_workers cmp
EOF
}

if [[ ${1:-} == --list ]]; then
	ul_list
	exit 0
fi

D=${UL_DATA:?UL_DATA not set}

# ================================================================ maps checks

c_maps_cat() { cat /proc/self/maps; }
c_maps_bash() {
	# The bash child reads its own maps with a builtin redirection.
	# shellcheck disable=SC2016
	bash -c 'while IFS= read -r l; do printf "%s\n" "$l"; done </proc/self/maps'
}
c_maps_python3() { python3 -c 'import sys; sys.stdout.write(open("/proc/self/maps").read())'; }
c_maps_perl() { perl -e 'open(my $f, "<", "/proc/self/maps") or die; print <$f>;'; }
c_maps_git() {
	# The alias runs as a child of git: $PPID is git itself.
	# shellcheck disable=SC2016
	git -c 'alias.maps=!cat /proc/$PPID/maps' maps
}
c_maps_node() { node -e 'process.stdout.write(require("fs").readFileSync("/proc/self/maps"))'; }

# ================================================================ shells

c_bash_script() {
	cat >s.sh <<'EOS'
set -u
D=$1
declare -A count
declare -a arr
s=
for ((i = 0; i < 30000; i++)); do
	k=k$(((i * 7919) % 997))
	count[$k]=$((${count[$k]:-0} + 1))
	arr+=("$k")
	s+="${k#k},"
done
echo "len=${#s} arr=${#arr[@]} keys=${#count[@]}"
echo "${s:0:80}"
t=${s//,/;}
echo "${t:100:60} ${t: -30}"
for k in k0 k1 k500 k996; do echo "$k=${count[$k]}"; done
w="The Quick brown fox jumps over the lazy dog"
echo "${w^^}|${w,,}|${w~~}|${w/Quick/slow}|${w//o/0}|${w#* }|${w##* }|${w%% *}|${w% *}|${#w}"
fib() {
	local n=$1
	if ((n < 2)); then echo "$n"; else echo $(($(fib $((n - 1))) + $(fib $((n - 2))))); fi
}
echo "fib12=$(fib 12)"
nested=$(echo "a$(echo "b$(echo "c$(printf '%s' d)")")")
cat <<EOT
heredoc: arr=${#arr[@]} nested=$nested sum=$((3 * 7 + 2 ** 10))
  literal \$HOME and tab	here
EOT
head -n 60000 "$D/words.txt" >part.txt
total=0 lens=0 lines=0
while read -r a b c n; do
	total=$((total + n))
	lens=$((lens + ${#a} + ${#b} + ${#c}))
	lines=$((lines + 1))
	case $a in
	a*) acount=$((${acount:-0} + 1)) ;;
	*[xyz]) xcount=$((${xcount:-0} + 1)) ;;
	esac
done <part.txt
echo "lines=$lines total=$total lens=$lens a=${acount:-0} xyz=${xcount:-0}"
mapfile -t lines <"$D/text.txt"
IFS=' ' read -r -a parts <<<"${lines[0]}"
printf -v joined '%s|' "${parts[@]}"
echo "paragraphs=${#lines[@]} first=${#parts[@]} joined=${joined:0:70}"
big=$(printf '%.0sab' {1..20000})
echo "big=${#big} ${big:39990:20}"
upper=
for p in "${parts[@]}"; do upper+="${p^}-"; done
echo "$upper"
grow=
for ((i = 0; i < 2000; i++)); do grow="$grow$i:"; grow=${grow#0:}; done
echo "grow=${#grow} ${grow:0:30}"
unset 'arr[5]' 'arr[7]'
echo "after unset: ${#arr[@]} ${arr[*]:0:5}"
exit 0
EOS
	bash s.sh "$D"
	echo "status=$?"
}

c_bash_arrays() {
	cat >a.sh <<'EOS'
D=$1
mapfile -t L < <(head -n 80000 "$D/words.txt")
declare -A freq first
for l in "${L[@]}"; do
	w=${l%% *}
	freq[$w]=$((${freq[$w]:-0} + 1))
	[[ -n ${first[$w]:-} ]] || first[$w]=${l##* }
done
echo "lines=${#L[@]} distinct=${#freq[@]}"
for w in "${!freq[@]}"; do printf '%d %s %s\n' "${freq[$w]}" "$w" "${first[$w]}"; done | sort -k1,1nr -k2,2 | head -n 40
slice=("${L[@]:1000:5}")
printf '<%s>\n' "${slice[@]}"
rev=()
for ((i = ${#L[@]} - 1; i >= ${#L[@]} - 20000; i--)); do rev+=("${L[i]}"); done
echo "rev=${#rev[@]} ${rev[0]} | ${rev[19999]}"
joined=$(IFS=,; echo "${rev[*]:0:3000}")
echo "joined=${#joined}"
for ((i = 0; i < ${#L[@]}; i += 3)); do unset "L[i]"; done
echo "after=${#L[@]} ${L[1]} ${L[2]}"
declare -A m
for ((i = 0; i < 40000; i++)); do m["key$((i % 5000))_$((i % 7))"]+="$i,"; done
echo "m=${#m[@]} ${#m[key17_3]} ${m[key4999_1]:0:40}"
EOS
	bash a.sh "$D"
	echo "status=$?"
}

c_dash_script() {
	cat >d.sh <<'EOS'
D=$1
i=0 acc= total=0
while [ $i -lt 4000 ]; do
	case $((i % 3)) in
	0) acc="$acc$i," ;;
	1) acc="${acc#*,}x" ;;
	*) total=$((total + i)) ;;
	esac
	i=$((i + 1))
done
echo "acc=${#acc} total=$total ${acc%%,*}"
sq() { echo $(($1 * $1)); }
s=0
for n in $(seq 1 300); do s=$((s + $(sq "$n"))); done
echo "sumsq=$s"
count=0 bytes=0
while read -r a b c n; do
	count=$((count + 1))
	bytes=$((bytes + ${#a} + ${#b}))
	[ "$n" -gt 99000 ] && hi=$((${hi:-0} + 1))
done <<EOF
$(head -n 15000 "$D/words.txt")
EOF
echo "count=$count bytes=$bytes hi=${hi:-0}"
set -f
set -- $(head -n 1 "$D/text.txt")
for last; do :; done
echo "args=$# first=$1 last=$last"
IFS=,
set -- $(head -n 3 "$D/keys1.csv" | tr '\n' ,)
unset IFS
echo "fields=$# $2 $4"
out=$(cat <<EOF
here $((6 * 7)) $(echo sub)
EOF
)
echo "$out"
long=
j=0
while [ $j -lt 3000 ]; do long="$long$(printf '%04d' $j)"; j=$((j + 1)); done
echo "long=${#long}"
exit 0
EOS
	dash d.sh "$D"
	echo "status=$?"
}

# ================================================================ coreutils

c_sort_text() {
	sort "$D/words.txt"
	sort -r -k2,2 -k4,4n "$D/words.txt" | md5sum
	sort -f -t ' ' -k3 "$D/text.txt" | md5sum
	sort --parallel=2 -s -k1,1 "$D/words.txt" | md5sum
}

c_sort_numeric() {
	sort -n "$D/nums.txt"
	sort -rn "$D/nums.txt" | md5sum
	head -n 100000 "$D/nums.txt" | sort -g | md5sum
	sort -t ' ' -k4,4n -k1,1 "$D/words.txt" | md5sum
	sort -h <<'EOF'
10K
2M
1G
512
3k
1.5M
EOF
}

c_sort_unique() {
	cut -d ' ' -f1,2 "$D/words.txt" | sort -u
	sort -u -k1,1 "$D/words.txt" | md5sum
	sort -nu "$D/nums.txt" | wc -l
	sort -c "$D/keys1.csv" && echo "keys1 sorted"
	if sort -c "$D/words.txt" 2>/dev/null; then echo "words sorted?"; else echo "words unsorted"; fi
}

c_sort_merge() {
	# A tiny buffer forces many temporary runs and multi-level merges.
	sort -S 64K -T "$TMPDIR" --batch-size=3 -k2,2 -k1,1r "$D/words.txt"
	sort -S 200K -T "$TMPDIR" -n "$D/nums.txt" | md5sum
	split -l 40000 "$D/words.txt" part.
	for p in part.*; do sort -o "$p" "$p"; done
	sort -m -S 32K --batch-size=2 part.* | md5sum
	sort "$D/words.txt" | md5sum
}

c_uniq_count() {
	cut -d ' ' -f1 "$D/words.txt" | sort | uniq -c | sort -k1,1nr -k2,2
	cut -d ' ' -f2,3 "$D/words.txt" | sort | uniq -d | md5sum
	cut -d ' ' -f3 "$D/words.txt" | sort | uniq -u | wc -l
	sort "$D/words.txt" | uniq -f 1 -c | md5sum
	tr ' ' '\n' <"$D/text.txt" | sort | uniq -ic | sort -rn | head -n 30
}

c_wc_counts() {
	cd "$D" || return
	wc words.txt nums.txt text.txt blob.bin keys1.csv keys2.csv utf8.txt
	wc -L text.txt words.txt
	wc -m utf8.txt
	cat words.txt nums.txt | wc -lwc
	find tree -type f -print0 | sort -z | wc -c --files0-from=- | tail -n 5
}

c_tr_filters() {
	tr 'a-z' 'A-Z' <"$D/words.txt" | md5sum
	tr -s 'a-z' <"$D/text.txt"
	tr -d '0-9 ' <"$D/words.txt" | md5sum
	tr -cs '[:alpha:]' '\n' <"$D/text.txt" | md5sum
	tr '\000-\177' '\200-\377' <"$D/blob.bin" | md5sum
	tr -d '\n' <"$D/nums.txt" | tr '.-' 'x_' | head -c 2000
	echo
}

c_cut_paste() {
	cut -d ' ' -f 1,3 "$D/words.txt" | paste -d , - - -
	cut -c 2-5,9- "$D/words.txt" | md5sum
	cut -d , -f 2 --complement "$D/keys1.csv" | md5sum
	head -n 2000 "$D/nums.txt" | paste -s -d '+'
	paste "$D/keys1.csv" "$D/keys2.csv" "$D/nums.txt" | md5sum
	paste -d '\n' "$D/keys1.csv" "$D/keys2.csv" | tail -n 3
}

c_join_comm() {
	join -t , "$D/keys1.csv" "$D/keys2.csv"
	join -t , -a 1 -a 2 -e NULL -o auto "$D/keys1.csv" "$D/keys2.csv" | md5sum
	join -t , -v 2 "$D/keys1.csv" "$D/keys2.csv" | wc -l
	cut -d , -f 1 "$D/keys1.csv" >k1
	cut -d , -f 1 "$D/keys2.csv" >k2
	comm -3 k1 k2 | md5sum
	comm -12 k1 k2 | wc -l
}

c_split_cat() {
	split -l 7000 -a 3 -d "$D/words.txt" w_
	ls w_* | wc -l
	md5sum w_*
	cat w_* | cmp - "$D/words.txt" && echo "lines reassembled"
	split -b 300K "$D/blob.bin" b_
	md5sum b_*
	cat b_* | cmp - "$D/blob.bin" && echo "bytes reassembled"
	split -n l/7 "$D/text.txt" t_
	wc -l t_*
	cat -n "$D/text.txt" | tail -n 4
	cat -A "$D/keys2.csv" | head -n 3
	cat "$D/words.txt" "$D/nums.txt" "$D/blob.bin" | md5sum
}

c_head_tail() {
	head -n 1000 "$D/words.txt"
	tail -n 1000 "$D/words.txt"
	head -c 100000 "$D/blob.bin" | md5sum
	head -c -100 "$D/blob.bin" | wc -c
	head -n -20000 "$D/nums.txt" | md5sum
	tail -c 5000 "$D/blob.bin" | md5sum
	tail -n +200000 "$D/words.txt" | md5sum
	tail -n 3 "$D/text.txt" "$D/keys1.csv"
	cat "$D/words.txt" | tail -n 50000 | head -n 3
}

c_checksums() {
	local w=$PWD
	cd "$D" || return
	md5sum words.txt nums.txt blob.bin text.txt
	sha1sum words.txt blob.bin
	sha224sum blob.bin
	sha256sum words.txt nums.txt blob.bin text.txt
	sha384sum blob.bin
	sha512sum words.txt blob.bin
	b2sum words.txt blob.bin
	cksum words.txt blob.bin
	sum blob.bin
	find tree -type f | sort | xargs sha256sum >"$w/tree.sha256"
	sha256sum --quiet -c "$w/tree.sha256" && echo "tree verified"
	md5sum "$w/tree.sha256" | cut -d ' ' -f1
}

c_find_xargs_du() {
	cd "$D" || return
	find tree | sort
	find tree -type f -size +8k -name '*1*' | sort
	find tree -type l -printf '%p -> %l\n' | sort
	find tree -type f -printf '%p %s %m %TY-%Tm-%Td\n' | sort | md5sum
	find tree -type f -name '*.txt' -print0 | sort -z | xargs -0 -n 37 cat | md5sum
	find tree -type f -name '*.dat' -print0 | xargs -0 -P 2 -n 5 md5sum | sort
	find tree -mindepth 2 -type d -exec ls {} + | md5sum
	find tree -newer blob.bin | wc -l
	du -a tree | sort -k2
	du -s --apparent-size tree
	du -sb tree/*/sub | sort -k2
}

c_ls_recursive() {
	cd "$D" || return
	ls -lR --time-style=+%Y-%m-%d_%H:%M:%S tree
	ls -laS --time-style=long-iso tree/d03
	ls -1Rt tree | md5sum
	ls -lRi tree >/dev/null && echo "inodes listed"
	ls -R -Q --indicator-style=classify tree | md5sum
	ls -lh --block-size=K tree/d07/sub
	ls -d tree/*/f01* | head -n 20
}

c_base64_od() {
	base64 "$D/blob.bin" | md5sum
	base64 "$D/blob.bin" | base64 -d | cmp - "$D/blob.bin" && echo "base64 round trip"
	base64 -w 0 "$D/words.txt" | base64 -d | md5sum
	basenc --base32 "$D/keys2.csv" | basenc --base32 -d | md5sum
	od -A x -t x1z -N 4096 "$D/blob.bin"
	od -A d -t d4 -j 100000 -N 8192 "$D/blob.bin" | md5sum
	od -c "$D/keys1.csv" | head -n 40
}

c_text_tools() {
	nl -ba "$D/text.txt" | md5sum
	fold -w 40 -s "$D/text.txt" | md5sum
	fmt -w 60 "$D/text.txt"
	expand -t 5 "$D/text.txt" | unexpand -a | md5sum
	tac "$D/words.txt" | md5sum
	pr -2 -t -w 100 "$D/keys1.csv" | md5sum
	numfmt --to=iec --padding=8 <<'EOF'
1
1023
1024
1048576
123456789
98765432101
EOF
	head -n 50000 "$D/nums.txt" | grep -v '[.e-]' | numfmt --to=si --format='%.2f' | md5sum
	csplit -s -z -f cs_ "$D/text.txt" $'/^\t/' '{20}'
	wc -c cs_*
}

c_seq_factor() {
	seq 1 7 400000 | factor | md5sum
	seq 2 200000 | factor | tail -n 5
	factor 18446744073709551557 170141183460469231731687303715884105727 340282366920938463463374607431768211455
	seq -w 0.5 0.25 200 | md5sum
	seq -f '%09.3f' -s , 1 0.001 30 | md5sum
	expr 123456789 \* 987 + 5
}

c_shuf_tsort() {
	shuf --random-source="$D/blob.bin" "$D/words.txt" | md5sum
	shuf -i 1-200000 -n 5000 --random-source="$D/blob.bin"
	shuf -r -n 3000 -e a b c d e f g --random-source="$D/blob.bin" | sort | uniq -c
	# An acyclic word graph (edges only go "upwards" in byte order) ...
	awk '{ if ($1 < $2) print $1, $2; if ($3 < $2) print $3, $2 }' "$D/words.txt" | head -n 40000 >edges
	tsort edges | md5sum
	# ... and a small one with a cycle, which tsort reports and still orders.
	printf 'a b\nb c\nc a\nc d\nd e\n' >cyc
	if tsort cyc >order 2>tsort.err; then echo "tsort: no cycle?"; else echo "tsort: cycle reported"; fi
	cat order tsort.err
}

c_utf8_text() {
	export LC_ALL=C.UTF-8
	sort "$D/utf8.txt"
	sort -f -u "$D/utf8.txt" | md5sum
	wc -m -c -L "$D/utf8.txt"
	grep -ci 'ä' "$D/utf8.txt"
	grep -o '[[:upper:]][[:alpha:]]*' "$D/utf8.txt" | sort | uniq -c | sort -k1,1nr -k2 | head -n 30
	sed 's/[éèç]/E/g; s/\(.\)\(.\)$/\2\1/' "$D/utf8.txt" | md5sum
	tr 'a-z' 'A-Z' <"$D/utf8.txt" | md5sum
	LC_ALL=C sort "$D/utf8.txt" | md5sum
}

c_diff_cmp() {
	sed '5000~997s/a/A/g; 30000~4001d; 77777a\
an inserted line' "$D/words.txt" >w2
	if diff -u --label a --label b "$D/words.txt" w2 >d.patch; then echo "no diff?"; else echo "diff status $?"; fi
	cat d.patch
	patch -s -o w3 "$D/words.txt" d.patch && cmp w2 w3 && echo "patch applied"
	if cmp -s "$D/words.txt" w2; then echo same; else echo "cmp: differ"; fi
	cmp -l "$D/words.txt" w2 | wc -l || true
	diff --brief -r "$D/tree" "$D/tree" && echo "trees identical"
	diff -y -W 80 <(head -n 300 "$D/words.txt") <(head -n 300 w2) || true
}

# ================================================================ grep/sed/awk

c_grep_regex() {
	grep -c 'the' "$D/text.txt"
	grep -E '^(ab|cd|ef)[a-z]* .*[0-9]{5}$' "$D/words.txt"
	grep -o -E '[aeiou]{3,}' "$D/text.txt" | sort | uniq -c | sort -k1,1nr -k2 | head -n 40
	grep -i -w -n 'li\|cm' "$D/text.txt" | md5sum
	grep -v -c 'e' "$D/words.txt"
	grep -F -f "$D/patterns.txt" -c "$D/words.txt"
	grep -F -w -f "$D/patterns.txt" -o "$D/text.txt" | md5sum
	grep -c '\(..\).*\1' "$D/keys1.csv"
	grep -P '^k0*1\d{3},\w+,(?:9|8)\d\d$' "$D/keys1.csv" | md5sum
	grep -r -l 'zz' "$D/tree" | sort
	grep -r -c --include='*.txt' 'qu' "$D/tree" | sort | md5sum
	if grep -q 'no-such-string-anywhere' "$D/words.txt"; then echo found; else echo "absent ($?)"; fi
}

c_sed_scripts() {
	sed -E 's/^([a-z]+) ([a-z]+)/\2 \1/; s/[0-9]+$/<&>/' "$D/words.txt" | md5sum
	sed -n '/^ab/,/^cd/p' "$D/words.txt" | md5sum
	head -n 3000 "$D/words.txt" | sed -n '1!G;h;$p' | md5sum
	sed 'y/abcdefghij/0123456789/' "$D/text.txt" | md5sum
	sed -e '/^$/d' -e 's/\t/TAB:/' -e '3~5s/\(\w\+\) \(\w\+\)/\2 \1/g' "$D/text.txt"
	sed -n '$=' "$D/nums.txt"
	sed -E ':a; s/^([^,]*),/\1;/; ta' "$D/keys2.csv" | md5sum
	printf 'line one\nline two\nline three\n' | sed -e '2i\
inserted' -e '$a\
appended' -e 's/line/LINE/2'
	cp "$D/keys1.csv" k.csv
	sed -i -E 's/,([0-9]+)$/,[\1]/' k.csv
	md5sum k.csv
}

awk_program() {
	cat >wc.awk <<'EOF'
{
	for (i = 1; i <= 3; i++) { cnt[$i]++; len[$i] = length($i) }
	sum += $4
	if ($4 > max) { max = $4; maxline = $0 }
	n = split($0, parts, /[aeiou]+/)
	splits += n
	line = $0
	subs += gsub(/[xyz]/, "_", line)
	if (NR % 50000 == 0) printf "%d %s %.4f\n", NR, substr(line, 2, 10), sum / NR
}
END {
	for (w in cnt) { distinct++; if (cnt[w] > 300) big[w] = cnt[w] }
	printf "NR=%d sum=%d max=%d [%s] distinct=%d splits=%d subs=%d\n", NR, sum, max, maxline, distinct, splits, subs
	for (w in big) printf "%s %d %d %s\n", w, big[w], len[w], toupper(w) | "sort -k2,2nr -k1,1"
	close("sort -k2,2nr -k1,1")
	s = ""
	for (i = 0; i < 20000; i++) s = s sprintf("%x", i)
	print length(s), substr(s, 30000, 40), index(s, "ffff")
}
EOF
}

c_awk_mawk() {
	awk_program
	mawk -f wc.awk "$D/words.txt"
	mawk -F , '{ a[$2] += $3 } END { for (k in a) print k, a[k] }' "$D/keys1.csv" | sort | md5sum
	mawk 'BEGIN { srand(7); for (i = 0; i < 5; i++) x = x int(rand() * 1000) " "; print length(x) > 0 }'
}

c_awk_gawk() {
	awk_program
	gawk -f wc.awk "$D/words.txt"
	gawk -F , '{ a[$2][$3 % 10]++ } END { PROCINFO["sorted_in"] = "@ind_str_asc"; for (k in a) { s = 0; for (j in a[k]) s += a[k][j]; print k, s, length(a[k]) } }' "$D/keys1.csv" | md5sum
	gawk '{ v[NR] = $4 } END { n = asort(v); print n, v[1], v[int(n / 2)], v[n] }' "$D/words.txt"
	gawk '{ print gensub(/([a-z])([a-z])/, "\\2\\1", "g", $1) }' "$D/words.txt" | md5sum
	gawk 'BEGIN { print strftime("%Y-%m-%d %H:%M:%S", 1600000000, 1); printf "%s\n", sprintf("%c%c%c", 72, 105, 33) }'
	gawk -v RS='\n\n' 'END { print NR }' "$D/text.txt"
}

# ================================================================ compression, archives

c_gzip_roundtrip() {
	for lvl in 1 6 9; do
		gzip -n -"$lvl" -c "$D/words.txt" >w.gz
		sha256sum w.gz
		gzip -dc w.gz | cmp - "$D/words.txt" && echo "gzip -$lvl round trip"
	done
	gzip -n -c "$D/blob.bin" >b.gz
	sha256sum b.gz
	gzip -t b.gz && echo "gzip -t ok"
	cp "$D/text.txt" t.txt
	gzip -n t.txt && gzip -l t.txt.gz && gunzip t.txt.gz && cmp t.txt "$D/text.txt" && echo "file round trip"
	cat "$D/nums.txt" | gzip -n | zcat | md5sum
}

c_xz_roundtrip() {
	head -c 2500000 "$D/words.txt" >w
	xz -2 -T1 -c w >w.xz
	sha256sum w.xz
	xz -dc w.xz | cmp - w && echo "xz -2 round trip"
	xz -6 -T2 --block-size=400KiB -c "$D/text.txt" "$D/keys2.csv" >t.xz
	sha256sum t.xz
	xz -dc -T2 t.xz | md5sum
	xz -l t.xz
	xz -0 --format=lzma -c "$D/keys1.csv" >k.lzma
	sha256sum k.lzma
	unlzma -c k.lzma | cmp - "$D/keys1.csv" && echo "lzma round trip"
	xz -t t.xz && echo "xz -t ok"
}

c_bzip2_roundtrip() {
	head -c 3000000 "$D/words.txt" >w
	for lvl in 1 9; do
		bzip2 -"$lvl" -c w >w.bz2
		sha256sum w.bz2
		bzip2 -dc w.bz2 | cmp - w && echo "bzip2 -$lvl round trip"
	done
	head -c 1000000 "$D/blob.bin" | bzip2 -c >b.bz2
	sha256sum b.bz2
	bzip2 -t b.bz2 && echo "bzip2 -t ok"
	bzcat b.bz2 | md5sum
}

c_tar_roundtrip() {
	local opts=(--sort=name --mtime='2020-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner --format=gnu)
	tar "${opts[@]}" -cf t.tar -C "$D" tree
	sha256sum t.tar
	tar -tvf t.tar
	mkdir x
	tar -xf t.tar -C x
	diff -r x/tree "$D/tree" && echo "extracted tree identical"
	tar "${opts[@]}" -I 'gzip -n' -cf t.tgz -C "$D" tree words.txt
	sha256sum t.tgz
	tar -tzf t.tgz | md5sum
	tar "${opts[@]}" -I 'xz -1 -T1' -cf t.txz -C "$D" tree/d05 tree/d06
	tar -xJOf t.txz tree/d05/f010.txt | md5sum
	tar -cf - -C "$D" tree | tar -tf - | sort | md5sum
	tar --delete -f t.tar tree/d00 && tar -tf t.tar | wc -l
}

# ================================================================ python

c_python_workload() {
	cat >w.py <<'EOF'
import collections, heapq, itertools, sys, gc
D = sys.argv[1]
lines = open(D + "/words.txt").read().split("\n")
d = {}
pairs = collections.Counter()
for line in lines:
    if not line:
        continue
    a, b, c, n = line.split(" ")
    d.setdefault(a, []).append(int(n))
    pairs[(a, c)] += 1
print(len(lines), len(d), len(pairs))
stats = sorted(((len(v), sum(v), k) for k, v in d.items()), reverse=True)
for cnt, s, k in stats[:15]:
    print(f"{k:12s} {cnt:6d} {s:12d} {s / cnt:12.3f}")
print(pairs.most_common(5))
words = sorted(d, key=lambda w: (len(w), w[::-1]))
print(words[:10], words[-5:])
s = set(d)
t = {w[::-1] for w in d}
print(len(s & t), len(s | t), len(s ^ t))
big = "".join(w.upper() + str(len(w)) for w in words) * 3
print(len(big), big.count("AB"), big.find("ZZZ"), hash(big[:5]) == hash(big[:5]))
parts = big.split("A")
print(len(parts), max(map(len, parts)))
nested = [[i * j % 97 for j in range(300)] for i in range(300)]
print(sum(map(sum, nested)), sum(sorted(itertools.chain.from_iterable(nested))[::1000]))
od = collections.OrderedDict()
for i in range(100000):
    od[i % 7919] = i
    if i % 3 == 0:
        od.move_to_end(i % 7919, last=False)
print(len(od), list(od.items())[:3])
dq = collections.deque(range(100000))
dq.rotate(12345)
print(dq[0], dq[-1], len(dq))
print(heapq.nlargest(5, (int(l.split()[3]) for l in lines if l)))
tmp = {}
for i in range(300000):
    tmp[str(i)] = bytes(i % 50)
    if i % 2:
        del tmp[str(i - 1)]
print(len(tmp), sum(len(v) for v in tmp.values()))
del tmp, big, parts
print(gc.collect() >= 0)
fmt = "|".join("{:>8}".format(x) for x in range(0, 2000, 37))
print(fmt[:120])
print("%s %r %08.3f %x" % ("str", ("t", 1), 3.14159, 48879))
EOF
	python3 w.py "$D"
}

c_python_threads() {
	cat >t.py <<'EOF'
import collections, concurrent.futures, hashlib, queue, sys, threading
D = sys.argv[1]
lines = open(D + "/words.txt").read().splitlines()
chunks = [lines[i:i + 2500] for i in range(0, len(lines), 2500)]
work = queue.Queue(maxsize=16)
results = queue.Queue()
lock = threading.Lock()
shared = {"items": 0, "words": collections.Counter()}
barrier = threading.Barrier(6)

def worker(wid):
    barrier.wait()
    while True:
        item = work.get()
        if item is None:
            work.task_done()
            return
        idx, chunk = item
        text = "\n".join(chunk).encode()
        cnt = collections.Counter(w for l in chunk for w in l.split()[:3])
        lens = sorted(len(l) for l in chunk)
        results.put((idx, hashlib.sha256(text).hexdigest()[:16], len(cnt),
                     cnt.most_common(1)[0], lens[len(lens) // 2]))
        with lock:
            shared["items"] += 1
            shared["words"].update(cnt)
        work.task_done()

threads = [threading.Thread(target=worker, args=(i,)) for i in range(5)]
for t in threads:
    t.start()
barrier.wait()
for i, c in enumerate(chunks):
    work.put((i, c))
for _ in threads:
    work.put(None)
work.join()
for t in threads:
    t.join()
out = []
while not results.empty():
    out.append(results.get())
out.sort()
for r in out:
    print(*r)
print(shared["items"], len(shared["words"]), sorted(shared["words"].items(), key=lambda kv: (-kv[1], kv[0]))[:3])

def job(n):
    acc = []
    for i in range(n * 200, n * 200 + 20000):
        acc.append(str(i * i)[::-1])
    return n, len("".join(acc)), hashlib.md5("".join(acc).encode()).hexdigest()

with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
    for r in ex.map(job, range(24)):
        print(*r)
local = threading.local()
def tl(n):
    local.v = [n] * 1000
    return sum(local.v)
with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
    print(sum(ex.map(tl, range(200))))
EOF
	python3 t.py "$D"
}

c_python_json() {
	cat >j.py <<'EOF'
import hashlib, json, sys
D = sys.argv[1]
recs = []
for i, line in enumerate(open(D + "/words.txt")):
    if i >= 50000:
        break
    a, b, c, n = line.split()
    recs.append({"id": i, "w": [a, b, c], "n": int(n), "f": int(n) / 7.0,
                 "ok": int(n) % 2 == 0, "nil": None,
                 "m": {"k" + str(i % 13): a * (i % 3), "u": "\u00e4\u4e2d" + b}})
doc = {"records": recs, "meta": {"count": len(recs), "nested": [[[i] * 3] * 2 for i in range(500)]}}
s = json.dumps(doc, sort_keys=True)
print(len(s), hashlib.sha256(s.encode()).hexdigest())
s2 = json.dumps(doc, indent=2, ensure_ascii=False, separators=(",", ": "))
print(len(s2), hashlib.sha256(s2.encode()).hexdigest())
back = json.loads(s)
print(back == doc, json.loads(s2) == doc)
print(json.dumps(back["records"][12345], sort_keys=True))
utf = [json.loads(json.dumps(l.strip())) for l in open(D + "/utf8.txt", encoding="utf-8")]
print(len(utf), hashlib.md5("".join(utf).encode()).hexdigest())
dec = json.JSONDecoder()
obj, end = dec.raw_decode('{"a": [1, 2.5, "x"]} trailing')
print(obj, end)
try:
    json.loads('{"a": [1, 2,, 3]}')
except json.JSONDecodeError as e:
    print("error:", e.msg, e.pos)
EOF
	python3 j.py "$D"
}

c_python_re() {
	cat >r.py <<'EOF'
import collections, re, sys
D = sys.argv[1]
text = open(D + "/text.txt").read()
words = open(D + "/words.txt").read()
print(len(re.findall(r"\b[A-Z][a-z]+\b", text)))
print(collections.Counter(re.findall(r"[aeiou]{2,}", text)).most_common(10))
sent = re.split(r"(?<=[.!?;])\s+", text)
print(len(sent), max(len(s) for s in sent))
pat = re.compile(r"^(?P<a>\w+) (?P<b>\w+) (?P<c>\w+) (?P<n>\d+)$", re.M)
tot = 0
same = 0
for m in pat.finditer(words):
    tot += int(m.group("n"))
    if m["a"] == m["c"]:
        same += 1
print(tot, same)
out = re.sub(r"(\w)(\w*)", lambda m: m.group(2) + m.group(1) + "ay", text[:200000])
print(len(out), out[:100])
print(re.subn(r"\s+", " ", text)[1])
pats = [re.compile("%s.{0,3}%s" % (chr(97 + i % 26), chr(97 + (i * 7) % 26))) for i in range(700)]
print(sum(len(p.findall(text[:20000])) for p in pats))
print(re.findall(r"(\w+) \1", words)[:10])
print(re.fullmatch(r"(a|b)*c", "ab" * 1000 + "c") is not None)
print(re.escape("a.b*c?"), re.sub(r"(?i)THE", "<the>", "The the tHe"))
EOF
	python3 r.py "$D"
}

c_python_sqlite3() {
	cat >s.py <<'EOF'
import hashlib, sqlite3, sys
D = sys.argv[1]
db = sqlite3.connect("p.db")
db.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, a TEXT, b TEXT, c TEXT, n INTEGER)")
rows = []
for i, line in enumerate(open(D + "/words.txt")):
    a, b, c, n = line.split()
    rows.append((i, a, b, c, int(n)))
    if len(rows) == 110000:
        break
with db:
    db.executemany("INSERT INTO w VALUES (?,?,?,?,?)", rows)
db.execute("CREATE INDEX w_a ON w(a)")
db.create_function("rev", 1, lambda s: s[::-1])
class Cat:
    def __init__(self): self.parts = []
    def step(self, v): self.parts.append(v)
    def finalize(self): return ",".join(sorted(self.parts))[:60]
db.create_aggregate("cat", 1, Cat)
for r in db.execute("SELECT a, count(*), sum(n), cat(c) FROM w GROUP BY a ORDER BY count(*) DESC, a LIMIT 12"):
    print(r)
print(db.execute("SELECT count(*), sum(length(rev(a || b))) FROM w WHERE n % 3 = 0").fetchone())
print(db.execute("SELECT a, n FROM w WHERE a = 'qo' ORDER BY n DESC LIMIT 3").fetchall())
mem = sqlite3.connect(":memory:")
mem.execute("CREATE TABLE k(key TEXT PRIMARY KEY, v TEXT, n INT)")
mem.executemany("INSERT INTO k VALUES (?,?,?)", (l.strip().split(",") for l in open(D + "/keys1.csv")))
print(mem.execute("SELECT count(*), max(key), sum(n) FROM k").fetchone())
h = hashlib.sha256()
for line in db.iterdump():
    h.update(line.encode())
print(h.hexdigest())
db.execute("DELETE FROM w WHERE n % 2 = 0")
db.commit()
db.execute("VACUUM")
print(db.execute("PRAGMA integrity_check").fetchone(), db.execute("SELECT count(*) FROM w").fetchone())
EOF
	python3 s.py "$D"
}

c_python_hashlib() {
	cat >h.py <<'EOF'
import base64, binascii, bz2, hashlib, hmac, lzma, sys, zlib
D = sys.argv[1]
blob = open(D + "/blob.bin", "rb").read()
words = open(D + "/words.txt", "rb").read()
for name in ("md5", "sha1", "sha256", "sha512", "sha3_256", "blake2b", "blake2s"):
    h = hashlib.new(name)
    for i in range(0, len(words), 65521):
        h.update(words[i:i + 65521])
    print(name, h.hexdigest(), hashlib.new(name, blob).hexdigest())
print(hashlib.shake_128(blob).hexdigest(40))
print(hmac.new(b"key" * 20, words, "sha256").hexdigest())
print(hashlib.pbkdf2_hmac("sha256", b"pw", b"salt", 2000).hex())
for lvl in (1, 6, 9):
    c = zlib.compress(words, lvl)
    print("zlib", lvl, len(c), hashlib.md5(c).hexdigest(), zlib.decompress(c) == words)
c = bz2.compress(words[:2000000])
print("bz2", len(c), hashlib.md5(c).hexdigest(), bz2.decompress(c) == words[:2000000])
c = lzma.compress(words[:1500000], preset=2)
print("lzma", len(c), lzma.decompress(c) == words[:1500000])
d = zlib.decompressobj()
zb = zlib.compress(blob)
parts = [d.decompress(zb[i:i + 1000]) for i in range(0, len(zb), 1000)]
print(b"".join(parts) + d.flush() == blob, len(parts))
print(binascii.crc32(blob), zlib.adler32(words))
e = base64.b64encode(blob)
print(len(e), hashlib.md5(e).hexdigest(), base64.b64decode(e) == blob)
print(base64.b85encode(blob[:64]).decode())
EOF
	python3 h.py "$D"
}

c_python_bignum() {
	cat >b.py <<'EOF'
import decimal, fractions, hashlib, math, sys
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)
x = 3 ** 200000
s = str(x)
print(len(s), s[:20], s[-20:])
f = math.factorial(12000)
print(len(str(f)), sum(map(int, str(f))))
print(hashlib.md5(f.to_bytes((f.bit_length() + 7) // 8, "big")).hexdigest())
a, b = 0, 1
for _ in range(30000):
    a, b = b, a + b
print(len(str(a)), a % 1000000007)
decimal.getcontext().prec = 2000
D = decimal.Decimal
def arctan_inv(n):
    x = D(1) / n
    total, term, k, sign = x, x, 1, 1
    n2 = n * n
    while True:
        term /= n2
        k += 2
        sign = -sign
        t = term / k
        if t == 0 or t.adjusted() < -2010:
            break
        total += sign * t
    return total
pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
print(str(pi)[:60], str(pi)[1990:2000])
print(str(D(2).sqrt())[:50])
h = sum(fractions.Fraction(1, k) for k in range(1, 1500))
print(len(str(h.numerator)), len(str(h.denominator)), float(h))
print(pow(7, 10 ** 5, 10 ** 40 + 7), math.gcd(2 ** 4000 - 1, 2 ** 6000 - 1).bit_length())
print(math.isqrt(10 ** 4001) % 10 ** 12)
EOF
	python3 b.py
}

# CPython's own regression tests (the libpython3.X-testsuite package) for
# the object types, the cyclic garbage collector, threads, ctypes, mmap and
# tracemalloc, with every object taken from malloc (PYTHONMALLOC=malloc)
# instead of CPython's own small-object arenas.  One process runs them in
# turn; only the verdict is printed (the lines with times are dropped), so
# a failure shows as a different verdict, with the failing test's output.
c_python_regrtest() {
	PYTHONMALLOC=malloc python3 -m test -q test_dict test_list test_set test_deque \
		test_unicode test_bytes test_long test_struct test_array test_memoryview \
		test_collections test_itertools test_functools test_sort test_json test_re \
		test_zlib test_hashlib test_gc test_thread test_ctypes test_mmap \
		test_tracemalloc 2>&1 | grep -v -E '^(0:[0-9]{2}:[0-9]{2} |Total duration: )'
}

# ================================================================ perl

c_perl_hashes() {
	cat >h.pl <<'EOF'
use strict;
use warnings;
my $D = shift;
my (%cnt, %sum, %by_len, @rows);
open(my $fh, '<', "$D/words.txt") or die;
while (my $l = <$fh>) {
	chomp $l;
	my ($a, $b, $c, $n) = split / /, $l;
	$cnt{$_}++ for ($a, $b, $c);
	$sum{$a} += $n;
	push @{ $by_len{ length $a } }, $a;
	push @rows, [$a, $n] if $n % 97 == 0;
}
close $fh;
printf "distinct=%d rows=%d lens=%d\n", scalar(keys %cnt), scalar(@rows), scalar(keys %by_len);
for my $w ((sort { $cnt{$b} <=> $cnt{$a} || $a cmp $b } keys %cnt)[0 .. 19]) {
	printf "%-12s %7d %12d %10.3f %s\n", $w, $cnt{$w}, $sum{$w} // 0, ($sum{$w} // 0) / $cnt{$w}, uc reverse $w;
}
for my $len (sort { $a <=> $b } keys %by_len) {
	my %seen;
	my @u = grep { !$seen{$_}++ } @{ $by_len{$len} };
	printf "len %2d: %6d %5d %s\n", $len, scalar @{ $by_len{$len} }, scalar @u, join(',', (sort @u)[0 .. 2]);
}
my @sorted = sort { $a->[1] <=> $b->[1] or $a->[0] cmp $b->[0] } @rows;
print join(' ', map { "$_->[0]:$_->[1]" } @sorted[0 .. 9]), "\n";
delete @cnt{ grep { /^[a-m]/ } keys %cnt };
printf "after delete: %d\n", scalar keys %cnt;
my %h2 = map { $_ => [ (1) x (length($_) % 5) ] } keys %cnt;
my $tot = 0;
$tot += @{ $h2{$_} } for keys %h2;
print "tot=$tot exists=", (exists $h2{zzzz} ? 1 : 0), "\n";
my %deep;
$deep{ $_ % 10 }{ $_ % 7 }{ $_ % 3 } .= chr(97 + $_ % 26) for 1 .. 100000;
print join(';', map { my $k = $_; join(',', map { length join '', values %{ $deep{$k}{$_} } } sort keys %{ $deep{$k} }) } sort keys %deep), "\n";
EOF
	perl h.pl "$D"
}

c_perl_text() {
	cat >t.pl <<'EOF'
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use Storable qw(freeze thaw);
use List::Util qw(sum max first);
my $D = shift;
my $text = do { local $/; open(my $f, '<', "$D/text.txt") or die; <$f> };
my $words = do { local $/; open(my $f, '<', "$D/words.txt") or die; <$f> };
print length($text), " ", md5_hex($text), "\n";
my @sent = split /(?<=[.!?;])\s+/, $text;
print scalar(@sent), " ", max(map { length } @sent), "\n";
(my $t2 = $text) =~ s/\b(\w)(\w*)/$2$1ay/g;
print md5_hex($t2), "\n";
(my $t3 = $text) =~ s/(\d+)|([aeiou]{2})/defined $1 ? $1 * 2 : uc $2/ge;
print md5_hex($t3), "\n";
my $vowels = ($text =~ tr/aeiou//);
print "vowels=$vowels\n";
my @caps = $text =~ /\b([A-Z][a-z]{6,})\b/g;
print scalar(@caps), " @caps[0..4]\n";
my @nums = map { (split / /)[3] } split /\n/, $words;
my @st = map { $_->[1] } sort { $a->[0] <=> $b->[0] or $a->[1] cmp $b->[1] } map { [ ($_ * 7919) % 10007, $_ ] } @nums;
print sum(@nums), " @st[0..5]\n";
print join(",", map { sprintf "%x/%o/%.3e/%5s/%-5s|", $_, $_, $_ / 3, $_ % 1000, $_ % 77 } @nums[0 .. 7]), "\n";
my $packed = pack("N*", @nums[0 .. 9999]);
print length($packed), " ", md5_hex($packed), " ", sum(unpack("N*", $packed)), "\n";
my $s = "abc" x 100000;
substr($s, 1000, 3, "XYZW");
print length($s), " ", index($s, "XYZW"), " ", scalar reverse(substr($s, 0, 10)), "\n";
my $data = { words => [ split /\s+/, substr($words, 0, 500000) ], n => \@nums, h => { map { $_ => $_ ** 2 } 1 .. 5000 } };
my $frozen = freeze($data);
my $back = thaw($frozen);
print scalar(@{ $back->{words} }), " ", $back->{h}{77}, " ", scalar(@{ $back->{n} }), "\n";
my $f = first { /^zz/ } sort keys %{ { map { $_ => 1 } @{ $back->{words} } } };
print defined $f ? $f : "none", "\n";
my $here = <<"EOT";
heredoc ${\ scalar(@sent)} @{[ lc 'ABC' ]}
EOT
print $here;
my $str = "";
$str .= sprintf("%05d;", $_) for 1 .. 50000;
print length($str), " ", md5_hex($str), "\n";
print join(" ", ("a" .. "e")), " ", join("", map { chr(ord($_) + 1) } split //, "HAL"), "\n";
EOF
	perl t.pl "$D"
}

# ================================================================ git

ul_git_env() {
	export GIT_AUTHOR_NAME='A U Thor' GIT_AUTHOR_EMAIL=author@example.com
	export GIT_COMMITTER_NAME='C O Mitter' GIT_COMMITTER_EMAIL=committer@example.com
	export GIT_TERMINAL_PROMPT=0
}

ul_git_at() { # EPOCH-OFFSET COMMAND...
	local t=$((1600000000 + $1 * 3600))
	shift
	GIT_AUTHOR_DATE="$t +0000" GIT_COMMITTER_DATE="$t +0000" "$@"
}

# Build ./repo: 40 commits of edits, additions, deletions, renames and a merge.
ul_git_repo() {
	ul_git_env
	git init -q -b main repo
	cd repo || return
	git config gc.auto 0
	git config core.autocrlf false
	cp -R "$D/tree/d00" "$D/tree/d01" .
	cp "$D/text.txt" .
	chmod -R u+w .
	git add -A
	ul_git_at 0 git commit -q -m "initial import"
	local i f
	for i in $(seq 1 40); do
		f=$(printf 'd00/f%03d.txt' $((i % 25)))
		printf 'change %d: %s\n' "$i" "$(sed -n "${i}p" "$D/words.txt")" >>"$f"
		sed -i "$((i % 7 + 1))s/a/A$i/g" "$(printf 'd01/f%03d.txt' $((i * 3 % 25)))"
		if ((i % 5 == 0)); then head -c $((i * 700)) "$D/text.txt" >"new$i.txt"; fi
		if ((i % 8 == 0)); then git rm -q "d00/sub/b0$((i / 8)).dat"; fi
		if ((i % 10 == 2 && i > 2)); then git mv "new$((i - 2)).txt" "renamed$i.txt"; fi
		if ((i % 9 == 0)); then chmod +x "d01/f00$((i / 9)).txt"; fi
		git add -A
		ul_git_at "$i" git commit -q -m "commit $i" -m "Touches $f and more."
	done
	git checkout -q -b feature HEAD~6
	head -n 500 "$D/words.txt" >feature.txt
	git add feature.txt
	ul_git_at 41 git commit -q -m "feature work"
	git checkout -q main
	ul_git_at 42 git merge -q --no-ff -m "merge feature" feature
	ul_git_at 43 git tag -a v1.0 -m "release 1.0"
}

c_git_history() {
	ul_git_repo || return
	git rev-parse HEAD HEAD~10 v1.0
	git log --stat --format='%H %an <%ae> %ad %s' --date=iso-strict
	git log --graph --oneline --all
	git rev-list --count HEAD
	git ls-tree -r HEAD | md5sum
	git cat-file -p HEAD
	git cat-file -p v1.0
	git show --stat --format=%B HEAD~7
	git shortlog -sne HEAD
	git describe --tags HEAD~1 2>&1 || true
	git describe --tags
	git status --porcelain=v2 --branch
	git count-objects | sed 's/, [0-9]* kilobytes//'
	git for-each-ref --format='%(refname) %(objectname) %(objecttype)'
}

c_git_clone_gc_fsck() {
	ul_git_repo || return
	cd .. || return
	git clone -q --no-local repo clone
	cd clone || return
	git log --format='%H %s' | md5sum
	git rev-list --objects --all | sort | md5sum
	git gc -q
	git fsck --full --strict --no-progress && echo "fsck ok"
	git count-objects -v | grep -E '^(count|in-pack|packs|prune-packable|garbage):'
	git repack -a -d -f -q --window=50 --depth=20
	git fsck --full --no-progress && echo "fsck after repack ok"
	git verify-pack .git/objects/pack/*.idx && echo "verify-pack ok"
	git count-objects -v | grep -E '^(count|in-pack|packs):'
	git bundle create ../all.bundle --all 2>/dev/null
	git bundle verify -q ../all.bundle 2>&1
	cd .. || return
	git clone -q all.bundle fromb
	git -C fromb rev-parse HEAD
	git -C fromb log --oneline -3
	diff -r --exclude=.git repo fromb && echo "bundle clone identical"
}

c_git_diff() {
	ul_git_repo || return
	git diff --stat HEAD~10 HEAD
	git diff HEAD~3 HEAD
	git diff --word-diff HEAD~2 HEAD
	git diff -M --summary HEAD~20 HEAD
	git format-patch -3 --stdout | md5sum
	git format-patch -2 --stdout | tail -n 40
	git diff --binary HEAD~5 HEAD >p.diff
	git checkout -q -b test HEAD~5
	git apply --check p.diff && echo "patch applies"
	git apply --index p.diff && git diff --cached --stat | tail -n 1
	git reset -q --hard
	git checkout -q main
	git blame -s d00/f005.txt | head -n 20
	git blame --line-porcelain text.txt | md5sum
	git archive --format=tar HEAD | sha256sum
	git archive --format=tar.gz --prefix=p/ v1.0 | gzip -dc | md5sum
	git grep -n -c 'change' HEAD -- d00
	git log -S 'change 7:' --format='%h %s'
	git log -G 'A3[0-9]' --format='%h %s'
	git diff --no-index --stat "$D/keys1.csv" "$D/keys2.csv" || true
}

# ================================================================ compilers, make

c_gcc_build() {
	mkdir cproj && cd cproj || return
	cat >proj.h <<'EOF'
#ifndef PROJ_H
#define PROJ_H
#include <stddef.h>
#include <stdint.h>
struct entry { char *key; long count; };
struct map;
struct map *map_new(void);
void map_add(struct map *m, const char *key, long n);
struct entry **map_entries(struct map *m, size_t *n);
void map_free(struct map *m);
struct strbuf { char *buf; size_t len, cap; };
void sb_init(struct strbuf *sb);
void sb_append(struct strbuf *sb, const char *s, size_t n);
void sb_appendf(struct strbuf *sb, const char *fmt, ...);
void sb_free(struct strbuf *sb);
struct node;
struct node *bst_insert(struct node *t, unsigned long k);
struct node *bst_delete(struct node *t, unsigned long k);
size_t bst_size(const struct node *t);
size_t bst_height(const struct node *t);
unsigned long bst_sum(const struct node *t);
void bst_free(struct node *t);
uint32_t fnv1a(const void *p, size_t n);
#endif
EOF
	cat >map.c <<'EOF'
#include <stdlib.h>
#include <string.h>
#include "proj.h"
struct map { struct entry *slots; size_t cap, used; };
struct map *map_new(void) {
	struct map *m = calloc(1, sizeof *m);
	m->cap = 16;
	m->slots = calloc(m->cap, sizeof *m->slots);
	return m;
}
static void grow(struct map *m) {
	struct entry *old = m->slots;
	size_t oc = m->cap;
	m->cap *= 2;
	m->slots = calloc(m->cap, sizeof *m->slots);
	for (size_t i = 0; i < oc; i++)
		if (old[i].key) {
			size_t j = fnv1a(old[i].key, strlen(old[i].key)) & (m->cap - 1);
			while (m->slots[j].key) j = (j + 1) & (m->cap - 1);
			m->slots[j] = old[i];
		}
	free(old);
}
void map_add(struct map *m, const char *key, long n) {
	if (2 * (m->used + 1) > m->cap) grow(m);
	size_t j = fnv1a(key, strlen(key)) & (m->cap - 1);
	while (m->slots[j].key && strcmp(m->slots[j].key, key)) j = (j + 1) & (m->cap - 1);
	if (!m->slots[j].key) { m->slots[j].key = strdup(key); m->used++; }
	m->slots[j].count += n;
}
struct entry **map_entries(struct map *m, size_t *n) {
	struct entry **v = malloc(m->used * sizeof *v);
	size_t k = 0;
	for (size_t i = 0; i < m->cap; i++) if (m->slots[i].key) v[k++] = &m->slots[i];
	*n = k;
	return v;
}
void map_free(struct map *m) {
	for (size_t i = 0; i < m->cap; i++) free(m->slots[i].key);
	free(m->slots);
	free(m);
}
EOF
	cat >strbuf.c <<'EOF'
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "proj.h"
void sb_init(struct strbuf *sb) { sb->buf = NULL; sb->len = sb->cap = 0; }
void sb_append(struct strbuf *sb, const char *s, size_t n) {
	if (sb->len + n + 1 > sb->cap) {
		sb->cap = (sb->len + n + 1) * 3 / 2;
		sb->buf = realloc(sb->buf, sb->cap);
	}
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = 0;
}
void sb_appendf(struct strbuf *sb, const char *fmt, ...) {
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	sb_append(sb, tmp, (size_t)n);
}
void sb_free(struct strbuf *sb) { free(sb->buf); sb_init(sb); }
EOF
	cat >tree.c <<'EOF'
#include <stdlib.h>
#include "proj.h"
struct node { unsigned long k; struct node *l, *r; };
struct node *bst_insert(struct node *t, unsigned long k) {
	if (!t) { t = malloc(sizeof *t); t->k = k; t->l = t->r = NULL; return t; }
	if (k < t->k) t->l = bst_insert(t->l, k);
	else if (k > t->k) t->r = bst_insert(t->r, k);
	return t;
}
struct node *bst_delete(struct node *t, unsigned long k) {
	if (!t) return NULL;
	if (k < t->k) t->l = bst_delete(t->l, k);
	else if (k > t->k) t->r = bst_delete(t->r, k);
	else {
		struct node *c;
		if (!t->l) { c = t->r; free(t); return c; }
		if (!t->r) { c = t->l; free(t); return c; }
		c = t->r;
		while (c->l) c = c->l;
		t->k = c->k;
		t->r = bst_delete(t->r, c->k);
	}
	return t;
}
size_t bst_size(const struct node *t) { return t ? 1 + bst_size(t->l) + bst_size(t->r) : 0; }
size_t bst_height(const struct node *t) {
	if (!t) return 0;
	size_t a = bst_height(t->l), b = bst_height(t->r);
	return 1 + (a > b ? a : b);
}
unsigned long bst_sum(const struct node *t) { return t ? t->k + bst_sum(t->l) + bst_sum(t->r) : 0; }
void bst_free(struct node *t) { if (t) { bst_free(t->l); bst_free(t->r); free(t); } }
EOF
	cat >util.c <<'EOF'
#include "proj.h"
uint32_t fnv1a(const void *p, size_t n) {
	const unsigned char *s = p;
	uint32_t h = 2166136261u;
	while (n--) { h ^= *s++; h *= 16777619u; }
	return h;
}
EOF
	cat >main.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "proj.h"
static int by_count(const void *a, const void *b) {
	const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
	if (x->count != y->count) return x->count < y->count ? 1 : -1;
	return strcmp(x->key, y->key);
}
int main(int argc, char **argv) {
	if (argc < 2) return 2;
	FILE *f = fopen(argv[1], "r");
	if (!f) { perror(argv[1]); return 1; }
	struct map *m = map_new();
	struct strbuf sb;
	sb_init(&sb);
	char line[512];
	long lines = 0;
	while (fgets(line, sizeof line, f)) {
		char *save, *tok = strtok_r(line, " \n", &save);
		for (int k = 0; tok; k++, tok = strtok_r(NULL, " \n", &save)) {
			if (k < 3) map_add(m, tok, 1);
			else sb_appendf(&sb, "%s;", tok);
		}
		lines++;
	}
	fclose(f);
	size_t n;
	struct entry **v = map_entries(m, &n);
	qsort(v, n, sizeof *v, by_count);
	for (size_t i = 0; i < 15 && i < n; i++) printf("%-12s %ld\n", v[i]->key, v[i]->count);
	printf("lines=%ld distinct=%zu sb=%zu hash=%08x\n", lines, n, sb.len, (unsigned)fnv1a(sb.buf, sb.len));
	free(v);
	map_free(m);
	sb_free(&sb);
	struct node *t = NULL;
	for (unsigned long i = 0; i < 200000; i++) t = bst_insert(t, (i * 2654435761u) % 1000003);
	for (unsigned long i = 0; i < 200000; i += 2) t = bst_delete(t, (i * 2654435761u) % 1000003);
	printf("bst size=%zu height=%zu sum=%lu\n", bst_size(t), bst_height(t), bst_sum(t));
	bst_free(t);
	char **ptrs = calloc(100000, sizeof *ptrs);
	unsigned long acc = 0;
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < 100000; i++) {
			size_t sz = (size_t)((i * 31 + round * 17) % 2000) + 1;
			ptrs[i] = realloc(ptrs[i], sz);
			memset(ptrs[i], i & 0xff, sz);
			acc += (unsigned char)ptrs[i][sz - 1];
		}
	for (int i = 0; i < 100000; i++) free(ptrs[i]);
	free(ptrs);
	printf("realloc acc=%lu\n", acc);
	return 0;
}
EOF
	local src
	for src in map strbuf tree util main; do
		gcc -O2 -g -Wall -Wextra -c "$src.c" -o "$src.o"
	done
	ar rcs libutil.a util.o strbuf.o
	gcc -O2 -o prog main.o map.o tree.o libutil.a
	gcc -O0 -g3 -Wall -o prog0 map.c strbuf.c tree.c util.c main.c
	gcc -O2 -E main.c | md5sum
	gcc -O2 -S -o - tree.c | md5sum
	sha256sum ./*.o libutil.a
	nm -g --defined-only libutil.a
	./prog "$D/words.txt"
	./prog0 "$D/words.txt" | md5sum
}

c_gxx_build() {
	mkdir cxx && cd cxx || return
	cat >shapes.hpp <<'EOF'
#pragma once
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
struct Shape {
	virtual ~Shape() = default;
	virtual double area() const = 0;
	virtual std::string name() const = 0;
};
std::unique_ptr<Shape> make_shape(int kind, double a, double b);
template <typename K, typename V> class Registry {
	std::map<K, std::vector<V>> items_;
public:
	void add(const K &k, V v) { items_[k].push_back(std::move(v)); }
	size_t size() const { return items_.size(); }
	const std::map<K, std::vector<V>> &items() const { return items_; }
	const std::vector<V> &at(const K &k) const {
		auto it = items_.find(k);
		if (it == items_.end()) throw std::out_of_range("no key " + k);
		return it->second;
	}
};
std::map<std::string, long> count_words(const std::string &path);
std::vector<long> parallel_sums(int threads, int n);
EOF
	cat >shapes.cpp <<'EOF'
#include "shapes.hpp"
#include <sstream>
namespace {
struct Rect : Shape {
	double w, h;
	Rect(double a, double b) : w(a), h(b) {}
	double area() const override { return w * h; }
	std::string name() const override { std::ostringstream o; o << "rect(" << w << "x" << h << ")"; return o.str(); }
};
struct Circle : Shape {
	double r;
	explicit Circle(double a) : r(a) {}
	double area() const override { return 3.14159265358979 * r * r; }
	std::string name() const override { return "circle(" + std::to_string(r) + ")"; }
};
}
std::unique_ptr<Shape> make_shape(int kind, double a, double b) {
	switch (kind % 3) {
	case 0: return std::make_unique<Rect>(a, b);
	case 1: return std::make_unique<Circle>(a);
	default: throw std::invalid_argument("bad kind " + std::to_string(kind));
	}
}
EOF
	cat >words.cpp <<'EOF'
#include "shapes.hpp"
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>
std::map<std::string, long> count_words(const std::string &path) {
	std::ifstream in(path);
	std::unordered_map<std::string, long> u;
	std::string line, w;
	while (std::getline(in, line)) {
		std::istringstream ss(line);
		for (int k = 0; k < 3 && (ss >> w); k++) u[w]++;
	}
	return std::map<std::string, long>(u.begin(), u.end());
}
std::vector<long> parallel_sums(int threads, int n) {
	std::vector<long> out(threads);
	std::vector<std::thread> ts;
	for (int t = 0; t < threads; t++)
		ts.emplace_back([t, n, &out] {
			std::vector<std::shared_ptr<std::string>> v;
			long s = 0;
			for (int i = 0; i < n; i++) {
				v.push_back(std::make_shared<std::string>(std::to_string(i * (t + 1))));
				if (v.size() > 1000) { for (auto &p : v) s += (long)p->size(); v.clear(); }
			}
			for (auto &p : v) s += (long)p->size();
			out[t] = s;
		});
	for (auto &th : ts) th.join();
	return out;
}
EOF
	cat >main.cpp <<'EOF'
#include "shapes.hpp"
#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <list>
#include <numeric>
#include <set>
int main(int argc, char **argv) {
	if (argc < 2) return 2;
	auto counts = count_words(argv[1]);
	std::vector<std::pair<std::string, long>> v(counts.begin(), counts.end());
	std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
	for (size_t i = 0; i < 12; i++) std::cout << std::setw(12) << std::left << v[i].first << ' ' << v[i].second << '\n';
	std::cout << "distinct=" << counts.size() << '\n';
	Registry<std::string, std::unique_ptr<Shape>> reg;
	int errors = 0;
	double total = 0;
	for (int i = 0; i < 30000; i++) {
		try {
			auto s = make_shape(i, 1 + i % 17, 2 + i % 5);
			total += s->area();
			std::string key = s->name().substr(0, 6);
			reg.add(key, std::move(s));
		} catch (const std::invalid_argument &e) {
			errors++;
		}
	}
	std::cout << std::fixed << std::setprecision(3) << "total=" << total << " errors=" << errors << " keys=" << reg.size() << '\n';
	for (auto &kv : reg.items()) std::cout << kv.first << ' ' << kv.second.size() << ' ' << kv.second.back()->name() << '\n';
	try { reg.at("nope"); } catch (const std::out_of_range &e) { std::cout << "caught: " << e.what() << '\n'; }
	auto sums = parallel_sums(4, 200000);
	for (long s : sums) std::cout << s << ' ';
	std::cout << '\n';
	std::set<std::string> st;
	std::list<std::string> lst;
	for (int i = 0; i < 100000; i++) { st.insert(std::to_string(i % 7777) + "x"); lst.push_front(std::string(i % 40, 'a' + i % 26)); }
	lst.sort();
	lst.unique();
	std::cout << st.size() << ' ' << *st.begin() << ' ' << *st.rbegin() << ' ' << lst.size() << '\n';
	std::vector<int> big(1000000);
	std::iota(big.begin(), big.end(), 0);
	std::reverse(big.begin(), big.end());
	std::stable_sort(big.begin(), big.end(), [](int a, int b) { return a % 1000 < b % 1000; });
	std::cout << big[0] << ' ' << big[999999] << ' ' << std::accumulate(big.begin(), big.begin() + 1000, 0L) << '\n';
	return 0;
}
EOF
	local src
	for src in shapes words main; do
		g++ -std=c++17 -O2 -Wall -pthread -c "$src.cpp" -o "$src.o"
	done
	g++ -pthread -o prog shapes.o words.o main.o
	sha256sum ./*.o
	./prog "$D/words.txt"
}

c_make_j2() {
	mkdir mk mk/sub && cd mk || return
	local i
	for i in $(seq -w 0 23); do
		cat >"mod_$i.c" <<EOF
#include "config.h"
long mod_$i(long x) { long s = 0; for (long k = 0; k < x; k++) s += (k * $((10#$i + 3))) % 1009; return s + NMODS; }
EOF
	done
	cat >main.c <<'EOF'
#include <stdio.h>
#include "config.h"
#include "funcs.h"
extern long sub_value(void);
int main(void) {
	long (*f[])(long) = { FUNCS };
	long t = 0;
	for (int i = 0; i < NMODS; i++) { long v = f[i](1000 + i); printf("mod %d = %ld\n", i, v); t += v; }
	printf("total = %ld sub = %ld\n", t, sub_value());
	return 0;
}
EOF
	cat >sub/sub.c <<'EOF'
long sub_value(void) { return 4242; }
EOF
	cat >sub/Makefile <<'EOF'
libsub.a: sub.o
	$(AR) rcs $@ $^
sub.o: sub.c
	$(CC) -O1 -c -o $@ $<
EOF
	cat >Makefile <<'EOF'
MODS := $(sort $(patsubst %.c,%,$(wildcard mod_*.c)))
OBJS := $(addprefix obj/,$(addsuffix .o,$(MODS))) obj/main.o
CFLAGS := -O1 -Wall -MMD -MP -Igen
GENERATED := gen/config.h gen/funcs.h

all: prog report.txt

prog: $(OBJS) sub/libsub.a
	$(CC) -o $@ $(OBJS) sub/libsub.a

obj/%.o: %.c $(GENERATED) | obj
	$(CC) $(CFLAGS) -c -o $@ $<

obj gen:
	mkdir -p $@

gen/config.h: | gen
	printf '#define NMODS %d\n' $(words $(MODS)) >$@

gen/funcs.h: Makefile | gen
	printf '#define FUNCS %s\n' "$(foreach m,$(MODS),$(m),)" >$@
	$(foreach m,$(MODS),printf 'long $(m)(long);\n' >>$@;)

sub/libsub.a: FORCE
	$(MAKE) --no-print-directory -s -C sub

report.txt: prog
	./prog >$@
	echo "objects: $(words $(OBJS))" >>$@
	echo "shell: $(shell echo $(MODS) | wc -w)" >>$@

clean:
	rm -rf obj gen prog report.txt sub/*.o sub/*.a

.PHONY: all clean FORCE
-include $(OBJS:.o=.d)
EOF
	make -s -j2
	cat report.txt
	if make -q; then echo "up to date"; else echo "make -q: not up to date ($?)"; fi
	touch mod_05.c
	make -s -j2 -O
	ls obj/*.o | wc -l
	if make -q prog; then echo "prog up to date"; else echo "prog stale"; fi
	make -s clean
	make -s -j2 --output-sync=target all
	md5sum report.txt
	make -s -j2 -k bogus-target 2>&1 || echo "make failed as expected"
}

# ================================================================ sqlite3 CLI

c_sqlite3_bulk() {
	sqlite3 db.sqlite <"$D/inserts.sql"
	sqlite3 db.sqlite <<'EOF'
CREATE INDEX t_grp ON t(grp, val);
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(grp), min(name), max(name), printf('%.2f', sum(val)) FROM t;
SELECT grp, count(*), printf('%.3f', avg(val)), max(val) FROM t GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 20;
SELECT name, count(*) AS c FROM t GROUP BY name ORDER BY c DESC, name LIMIT 20;
SELECT id, name, val FROM t WHERE grp = 17 ORDER BY val DESC, id LIMIT 10;
EXPLAIN QUERY PLAN SELECT id FROM t WHERE grp = 17 ORDER BY val;
SELECT tag, count(*) FROM t GROUP BY tag ORDER BY tag;
CREATE TABLE g AS SELECT grp, group_concat(name, ',') AS names, count(*) AS n FROM (SELECT grp, name FROM t ORDER BY id) GROUP BY grp;
SELECT g.grp, length(g.names), t.name FROM g JOIN t ON t.id = g.grp + 1 ORDER BY g.grp LIMIT 15;
UPDATE t SET tag = upper(tag) WHERE id % 3 = 0;
DELETE FROM t WHERE id % 10 = 0;
SELECT count(*), count(DISTINCT name), count(DISTINCT tag) FROM t;
VACUUM;
PRAGMA integrity_check;
EOF
	sqlite3 db.sqlite .dump | sha256sum
	sqlite3 -csv db.sqlite 'SELECT * FROM t ORDER BY name, id' | md5sum
	sqlite3 -json db.sqlite 'SELECT * FROM t WHERE id < 40 ORDER BY id'
	sqlite3 -header -column db.sqlite 'SELECT grp, n FROM g ORDER BY n DESC, grp LIMIT 8'
}

c_sqlite3_cte() {
	sqlite3 <<'EOF'
PRAGMA temp_store = FILE;
PRAGMA cache_size = -500;
CREATE TABLE s AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200000)
  SELECT i, (i * 7919) % 10007 AS k, substr('abcdefghijklmnopqrstuvwxyz', i % 26 + 1, i % 9 + 1) AS w FROM c;
SELECT count(*), sum(k), max(w) FROM s;
SELECT k, w FROM s ORDER BY w DESC, k LIMIT 10;
SELECT w, count(*), sum(k) FROM s GROUP BY w ORDER BY count(*) DESC, w LIMIT 10;
SELECT i, k, row_number() OVER (PARTITION BY i % 5 ORDER BY k DESC, i) AS rn FROM s WHERE i < 60 ORDER BY i;
SELECT i % 7, sum(k) OVER (ORDER BY i ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) FROM s WHERE i BETWEEN 100 AND 120;
SELECT json_group_array(json_object('i', i, 'w', w)) FROM (SELECT i, w FROM s WHERE i % 20000 = 0);
SELECT length(group_concat(w, '')), sum(length(w)) FROM s;
SELECT upper(w), replace(w, 'a', 'AA'), instr(w, 'c'), printf('%08d|%-6s|%.2e', k, w, k * 1.5) FROM s WHERE i IN (1, 77, 12345);
CREATE TABLE t2 AS SELECT k, count(*) AS n FROM s GROUP BY k;
SELECT count(*), max(n), min(n) FROM t2;
SELECT a.k, a.n, b.i FROM t2 a JOIN s b ON a.k = b.k WHERE b.i < 50 ORDER BY a.k, b.i LIMIT 10;
SELECT k FROM s EXCEPT SELECT k FROM t2 WHERE n > 19;
SELECT count(*) FROM (SELECT DISTINCT w, k % 100 FROM s);
EOF
}

# ================================================================ openssl

c_openssl_dgst() {
	local alg
	for alg in sha256 sha512 sha1 md5 sha3-256 blake2b512 sha224; do
		openssl dgst "-$alg" <"$D/words.txt"
	done
	openssl dgst -sha256 <"$D/blob.bin"
	openssl dgst -sha256 -hmac 'fixed key' <"$D/text.txt"
	cat "$D/words.txt" "$D/blob.bin" "$D/nums.txt" | openssl dgst -sha384 -r
	openssl sha256 -r "$D/nums.txt" | cut -d ' ' -f1
	openssl base64 -in "$D/keys2.csv" | md5sum
	openssl base64 -in "$D/keys2.csv" | openssl base64 -d | cmp - "$D/keys2.csv" && echo "openssl base64 round trip"
}

c_openssl_enc() {
	local key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
	local iv=f0e0d0c0b0a090807060504030201000
	openssl enc -aes-256-cbc -K "$key" -iv "$iv" -nosalt -in "$D/words.txt" -out w.enc
	sha256sum w.enc
	openssl enc -d -aes-256-cbc -K "$key" -iv "$iv" -nosalt -in w.enc | cmp - "$D/words.txt" && echo "aes-256-cbc round trip"
	openssl enc -aes-128-ctr -K "${key:0:32}" -iv "$iv" -nosalt -in "$D/blob.bin" | sha256sum
	openssl enc -chacha20 -K "$key" -iv "$iv" -nosalt -in "$D/text.txt" -out t.enc
	sha256sum t.enc
	openssl enc -d -chacha20 -K "$key" -iv "$iv" -nosalt -in t.enc | cmp - "$D/text.txt" && echo "chacha20 round trip"
	openssl enc -aes-256-cbc -pbkdf2 -iter 2000 -pass pass:secret -nosalt -a -in "$D/keys1.csv" -out k.b64
	sha256sum k.b64
	openssl enc -d -aes-256-cbc -pbkdf2 -iter 2000 -pass pass:secret -nosalt -a -in k.b64 | cmp - "$D/keys1.csv" && echo "pbkdf2 round trip"
	if openssl enc -d -aes-256-cbc -K "${key/0/f}" -iv "$iv" -nosalt -in w.enc -out /dev/null 2>/dev/null; then echo "wrong key accepted?"; else echo "wrong key rejected"; fi
}

# ================================================================ node

c_node_script() {
	cat >n.js <<'EOF'
'use strict';
const fs = require('fs');
const crypto = require('crypto');
const zlib = require('zlib');
const D = process.argv[2];
const text = fs.readFileSync(D + '/words.txt', 'utf8');
const lines = text.split('\n').filter(Boolean);
const counts = new Map();
let total = 0n;
for (const l of lines) {
  const [a, b, c, n] = l.split(' ');
  for (const w of [a, b, c]) counts.set(w, (counts.get(w) || 0) + 1);
  total += BigInt(n);
}
const top = [...counts].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).slice(0, 15);
console.log(lines.length, counts.size, total.toString());
for (const [w, c] of top) console.log(w.padEnd(12), String(c).padStart(7));
let seed = 12345;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const objs = [];
for (let i = 0; i < 200000; i++) objs.push({ id: i, v: Math.floor(rnd() * 1e6), s: 'x'.repeat(i % 17) + i.toString(36) });
objs.sort((a, b) => a.v - b.v || a.id - b.id);
console.log(objs[0].id, objs[199999].id, objs[100000].s);
const json = JSON.stringify(objs.slice(0, 50000));
const back = JSON.parse(json);
console.log(json.length, back.length, back[49999].v, crypto.createHash('sha256').update(json).digest('hex'));
const gz = zlib.gzipSync(Buffer.from(text), { level: 6 });
console.log(gz.length, crypto.createHash('md5').update(gz).digest('hex'), zlib.gunzipSync(gz).equals(Buffer.from(text)));
const blob = fs.readFileSync(D + '/blob.bin');
console.log(crypto.createHash('sha512').update(blob).digest('base64'));
console.log(crypto.createHmac('sha256', 'k').update(blob.subarray(0, 100000)).digest('hex'));
const ta = new Float64Array(1 << 20);
for (let i = 0; i < ta.length; i++) ta[i] = Math.sin(i) * 1000;
let sum = 0;
for (const x of ta) sum += Math.round(x);
console.log(sum);
const set = new Set(lines.map((l) => l.split(' ')[1]));
console.log(set.size, [...set].sort().slice(0, 5).join(','));
const re = /\b([a-z])([a-z]*)\1\b/g;
console.log((text.match(re) || []).length);
let big = 1n;
for (let i = 1n; i <= 3000n; i++) big *= i;
console.log(big.toString().length, big.toString().slice(0, 20));
const utf = fs.readFileSync(D + '/utf8.txt', 'utf8');
console.log(utf.length, Buffer.byteLength(utf), utf.normalize('NFD').length, utf.toUpperCase().slice(0, 40));
EOF
	node n.js "$D"
}

c_node_workers() {
	cat >w.js <<'EOF'
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const crypto = require('crypto');
if (isMainThread) {
  const fs = require('fs');
  const lines = fs.readFileSync(process.argv[2] + '/words.txt', 'utf8').split('\n').filter(Boolean);
  const n = 4;
  const size = Math.ceil(lines.length / n);
  const jobs = [];
  for (let i = 0; i < n; i++) {
    jobs.push(new Promise((resolve, reject) => {
      const w = new Worker(__filename, { workerData: { id: i, lines: lines.slice(i * size, (i + 1) * size) } });
      w.on('message', resolve);
      w.on('error', reject);
    }));
  }
  Promise.all(jobs).then((res) => {
    res.sort((a, b) => a.id - b.id);
    for (const r of res) console.log(r.id, r.count, r.distinct, r.hash, r.top.join(','));
    const merged = new Map();
    for (const r of res) for (const [w, c] of r.all) merged.set(w, (merged.get(w) || 0) + c);
    console.log(merged.size, [...merged.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 5).join(' '));
    return Promise.all([1, 2, 3].map(async (k) => { await new Promise((r) => setImmediate(r)); return k * k; }));
  }).then((sq) => console.log('async', sq.join(',')));
} else {
  const { id, lines } = workerData;
  const m = new Map();
  const h = crypto.createHash('sha256');
  for (const l of lines) {
    h.update(l);
    for (const w of l.split(' ').slice(0, 3)) m.set(w, (m.get(w) || 0) + 1);
  }
  const arr = [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  parentPort.postMessage({ id, count: lines.length, distinct: m.size, hash: h.digest('hex').slice(0, 16), top: arr.slice(0, 3).map((e) => e[0]), all: arr });
}
EOF
	node w.js "$D"
}

# ================================================================ dispatcher

name=${1:?usage: cases.sh --list | cases.sh NAME}
if ! declare -F "c_$name" >/dev/null; then
	echo "cases.sh: unknown case: $name" >&2
	exit 98
fi
umask 022
# Report failing commands (pipefail: also a crash in the middle of a
# pipeline).  A pipeline whose only non-zero statuses are 141 (SIGPIPE: a
# reader such as head exited early) is not a failure: whether the writer
# notices is a matter of timing.
ul_err() {
	local st=$1 line=$2 cmd=$3 s bad=0
	shift 3
	# At the top level this is the case function's own status, which run.sh
	# compares anyway; the failing command inside it was reported already.
	((${#FUNCNAME[@]} > 2)) || return 0
	for s in "$@"; do
		[[ $s == 0 || $s == 141 ]] || bad=1
	done
	((bad)) || return 0
	local msg="exit $st at line $line: $cmd"
	(($# > 1)) && msg="exit $st (pipeline: $*) at line $line: $cmd"
	echo "!! $msg"
	echo "$msg" >>"${UL_ERRLOG:-/dev/null}"
}
set -E -o pipefail
trap 'ul_err "$?" "$LINENO" "$BASH_COMMAND" "${PIPESTATUS[@]}"' ERR
if [[ -n ${UL_PRELOAD:-} ]]; then
	export LD_PRELOAD=$UL_PRELOAD
fi
"c_$name"
rc=$?
# See ul_err: a final pipeline that ended by SIGPIPE counts as success.
((rc == 141)) && rc=0
exit "$rc"
