#!/bin/sh
# test.sh -- the README's test command: install build dependencies, build
# mialloc from this checkout and run its whole test suite (make check).
# Extra arguments go to configure, e.g. tools/test.sh --with-tls-model=pthread-keys
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
[ -x configure ] || autoreconf -fi
./configure "$@"
make -j"$(nproc)" >/dev/null
make -j"$(nproc)" check
