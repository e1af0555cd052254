#!/bin/sh
# test-interposer.sh -- start-up next to an interposer that calls dlsym and
# malloc from inside open() (fakechroot-style): no deadlock, same output.
lib=${MIALLOC_LIB:?MIALLOC_LIB not set}
b=${MIALLOC_BUILDDIR:-.}
ip=$b/tests/integration/.libs/libinterposer.so
echo "1..4"
n=0
for order in "$ip $lib" "$lib $ip"; do
  for prog in "cat /etc/passwd" "python3 -c print(open('/etc/passwd').read(),end='')"; do
    n=$((n + 1))
    want=$(cat /etc/passwd)
    got=$(LD_PRELOAD="$order" timeout 20 $prog 2>&1)
    rc=$?
    # the wrapper announces itself once per process on stderr: there must be
    # such a line (it really ran), and apart from those lines, the file
    marks=$(printf '%s\n' "$got" | grep -c '^\[interposed\]$')
    rest=$(printf '%s\n' "$got" | grep -v '^\[interposed\]$')
    if [ $rc = 0 ] && [ "$marks" -ge 1 ] && [ "$rest" = "$want" ]; then
      echo "ok $n - ${prog%% *} with LD_PRELOAD='$(basename ${order% *}) $(basename ${order#* })'"
    else
      echo "not ok $n - ${prog%% *} with LD_PRELOAD='$(basename ${order% *}) $(basename ${order#* })' (exit $rc)"
      echo "$got" | head -5 | sed 's/^/# /'
    fi
  done
done
