#!/usr/bin/env bash
# Installs the Debian packages unpad needs when they are missing (as root, with apt-get), or says
# exactly what to run. GSL and Check are needed to build and test; gnuplot to draw plots.
set -u
missing=()
pkg-config --exists gsl 2>/dev/null || missing+=(libgsl-dev)
pkg-config --exists check 2>/dev/null || missing+=(check libsubunit-dev)
command -v gnuplot >/dev/null 2>&1 || missing+=(gnuplot-nox)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "unpad: installing missing packages: ${missing[*]}"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/tmp/unpad-apt.log 2>&1 && exit 0
    echo "unpad: apt-get failed (log: /tmp/unpad-apt.log)"
fi
echo "unpad: please install: sudo apt-get install ${missing[*]}" >&2
pkg-config --exists gsl 2>/dev/null && pkg-config --exists check 2>/dev/null && exit 0
exit 1
