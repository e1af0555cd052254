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
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
updated=""

missing_of() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || printf ' %s' "$p"
  done
}

apt_install() {
  echo "deps.sh: installing: $*"
  [ -n "$updated" ] || $SUDO apt-get update -qq
  updated=yes
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

missing=$(missing_of $pkgs)
[ -z "$missing" ] || apt_install $missing

# CPython's own tests (the userland case python_regrtest) come in a package
# named for the Python version; without it that case is skipped, so not
# getting it is no error.
py=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || exit 0
suite=$(missing_of "libpython$py-testsuite")
[ -z "$suite" ] || apt_install $suite || echo "deps.sh: no$suite: the userland case python_regrtest will be skipped"
