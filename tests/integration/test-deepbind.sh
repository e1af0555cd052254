#!/bin/sh
# test-deepbind.sh -- a plugin opened with RTLD_DEEPBIND (as php opens its
# extensions) under the preloaded library: dlopen clears the flag, so the
# plugin's malloc, realloc and free are mialloc's and blocks cross both
# ways; MIALLOC_DLOPEN_DEEPBIND=1 keeps the flag (the plugin then gets
# glibc's malloc).  The host finds the plugin through its own RUNPATH only,
# which dlopen searches only if it still knows its caller.
b=${MIALLOC_BUILDDIR:-.}
lib=$b/src/.libs/libmialloc.so.1
host=$b/tests/integration/deepbind-host
echo "1..4"
check() {   # n, description, expected output, command...
  n=$1 desc=$2 want=$3
  shift 3
  # the library's verbose lines other than dlopen's are not this test's
  out=$("$@" 2>&1 | grep -v '^==' | awk '!/^mialloc: / || /RTLD_DEEPBIND/')
  if [ "$out" = "$want" ]; then echo "ok $n - $desc"
  else
    echo "not ok $n - $desc"
    echo "$want" | sed 's/^/# wanted: /'
    echo "$out" | sed 's/^/# got:    /'
  fi
}
check 1 "without the preload the host and plugin run (glibc's malloc on both sides)" "ok other" \
  env -u LD_PRELOAD "$host" cross
check 2 "preloaded: the plugin's malloc is mialloc's, blocks cross both ways, found by the host's RUNPATH" \
  "ok mialloc" env LD_PRELOAD="$lib" "$host" cross
check 3 "and the same with MIALLOC_VERBOSE=1, which says that the flag is cleared" \
  "mialloc: dlopen clears RTLD_DEEPBIND, so plugins use mialloc (MIALLOC_DLOPEN_DEEPBIND=1 keeps it)
ok mialloc" env LD_PRELOAD="$lib" MIALLOC_VERBOSE=1 "$host" cross
check 4 "MIALLOC_DLOPEN_DEEPBIND=1 keeps the flag: the plugin's malloc is glibc's (no block crosses)" \
  "ok other" env LD_PRELOAD="$lib" MIALLOC_DLOPEN_DEEPBIND=1 "$host" apart
