#!/usr/bin/env bash
# Installs the Debian packages unpad needs when they are missing (as root, with apt-get), or says
# exactly what to run. GSL and Check are needed to build and test; gnuplot to draw plots.
#   ensure-deps.sh        what `make` and `make test` need
#   ensure-deps.sh fuzz   clang and its libFuzzer runtime, for `make fuzz` (Debian ships the
#                         runtime apart from clang: libclang-rt-<major>-dev, only recommended)
set -u

install() { # install PKG...: as root with apt-get, else print the command; 0 when installed
    echo "unpad: installing missing packages: $*"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"; } \
            >/tmp/unpad-apt.log 2>&1 && return 0
        echo "unpad: apt-get failed (log: /tmp/unpad-apt.log)"
    fi
    echo "unpad: please install: sudo apt-get install $*" >&2
    return 1
}

# 0 when clang links a libFuzzer program with ASan and UBSan.
fuzzer_links() {
    local d
    d=$(mktemp -d) || return 1
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' >"$d/t.c"
    "${FUZZ_CC:-clang}" -fsanitize=fuzzer,address,undefined "$d/t.c" -o "$d/t" >/dev/null 2>&1
    local rc=$?
    rm -rf "$d"
    return $rc
}

if [ "${1:-}" = fuzz ]; then
    fuzzer_links && exit 0
    command -v "${FUZZ_CC:-clang}" >/dev/null 2>&1 || install clang || exit 1
    major=$("${FUZZ_CC:-clang}" --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
    fuzzer_links && exit 0
    install "libclang-rt-${major}-dev" || exit 1
    fuzzer_links && exit 0
    echo "unpad: clang ${major} still cannot link -fsanitize=fuzzer (its libFuzzer runtime is missing)" >&2
    exit 1
fi

missing=()
pkg-config --exists gsl 2>/dev/null || missing+=(libgsl-dev)
pkg-config --exists check 2>/dev/null || missing+=(check libsubunit-dev)
command -v gnuplot >/dev/null 2>&1 || missing+=(gnuplot-nox)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
[ ${#missing[@]} -eq 0 ] && exit 0
install "${missing[@]}" && exit 0
pkg-config --exists gsl 2>/dev/null && pkg-config --exists check 2>/dev/null && exit 0
exit 1
