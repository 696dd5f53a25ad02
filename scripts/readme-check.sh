#!/usr/bin/env bash
# readme-check.sh — runs every `bin/unpad ...` command of the README's ```sh blocks (continuation
# lines joined, trailing comments dropped) in a scratch copy of the project's inputs, and fails when
# one exits other than the README shows: 0, or 1 where the README prints its refusal on the next
# line (`#   unpad <cmd>: ...`). The GPU commands (unpad-train, mpirun) are not run.
#   scripts/readme-check.sh            (bin/unpad built first: make)
set -u
cd "$(dirname "$0")/.."
[ -x bin/unpad ] || { echo "readme-check: bin/unpad is not built (make)"; exit 2; }
tmp=$(mktemp -d /tmp/unpad-readme-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cp -r models traces plots "$tmp/" && cp bin/unpad "$tmp/bin/"
export UNPAD_HOME=$tmp
awk '/^```sh/ { f = 1; next } /^```/ { f = 0 } f' README.md |
    sed -e :a -e '/\\$/N; s/\\\n//; ta' |
    awk '/^bin\/unpad / { if (cmd != "") print "0\t" cmd; cmd = $0; next }
         /^#   unpad [a-z]+: / && cmd != "" { print "1\t" cmd; cmd = ""; next }
         { if (cmd != "") print "0\t" cmd; cmd = "" }
         END { if (cmd != "") print "0\t" cmd }' >"$tmp/commands.tsv"
n=0 bad=0
while IFS=$'\t' read -r want cmd; do
    cmd=${cmd%%#*}
    n=$((n + 1))
    t0=$SECONDS
    (cd "$tmp" && eval "$cmd" >"$tmp/out.txt" 2>&1)
    rc=$?
    if [ "$rc" -ne "$want" ]; then
        bad=$((bad + 1))
        echo "readme-check: FAILED (exit $rc, README shows $want): $cmd"
        tail -3 "$tmp/out.txt" | sed 's/^/    /'
    else
        echo "ok ($((SECONDS - t0)) s, exit $rc): ${cmd:0:110}"
    fi
done <"$tmp/commands.tsv"
echo "readme-check: $((n - bad)) of $n README commands as shown"
[ "$bad" -eq 0 ]
