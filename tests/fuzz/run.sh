#!/usr/bin/env bash
# run.sh SECONDS bin/fuzz_NAME... — runs each harness for SECONDS on a scratch copy of its seed
# corpus (tests/fuzz/corpus/NAME stays as committed) and fails when any of them finds a crash, a
# sanitizer report, a leak, a timeout or a failed check; the input that did it is kept under
# build/fuzz/findings/ and its path printed.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=$1; shift
failed=()
for bin in "$@"; do
    name=${bin##*/fuzz_}
    work=build/fuzz/work/$name findings=build/fuzz/findings
    rm -rf "$work"; mkdir -p "$work" "$findings"
    log=build/fuzz/$name.log
    printf 'fuzz %-6s %3d s ... ' "$name" "$secs"
    "./$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -artifact_prefix="$findings/$name-" -print_final_stats=1 "$work" "tests/fuzz/corpus/$name" \
        >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        echo "ok (${runs:-?} inputs)"
    else
        echo "FAILED (exit $rc; log $log)"
        grep -E 'ERROR|SUMMARY|fuzz check failed|Test unit written' "$log" | head -8 | sed 's/^/    /'
        failed+=("$name")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: findings in: ${failed[*]}"
    exit 1
fi
echo "fuzz: no findings"
