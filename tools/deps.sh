#!/bin/sh
# deps.sh -- install what building and testing mialloc needs on Debian.
# Installs only missing packages; safe to run repeatedly.  Needs root (or
# sudo) when something is missing.
set -e
here=$(cd "$(dirname "$0")" && pwd)
# zlib1g-dev and libunwind-dev: libmialloc-prof; golang-go (go tool pprof), google-perftools
# (google-pprof), binutils (their symboliser) and groff: the profiler tests;
# clang: make fuzz (libFuzzer)
pkgs="build-essential autoconf automake libtool pkg-config g++ zlib1g-dev libunwind-dev valgrind golang-go google-perftools binutils groff-base clang"
if [ -f "$here/../tests/userland/deps.txt" ]; then
  pkgs="$pkgs $(grep -v '^#' "$here/../tests/userland/deps.txt" | tr '\n' ' ')"
fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps.sh: installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
