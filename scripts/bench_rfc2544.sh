#!/usr/bin/env bash
# The RFC 2544 section of docs/BENCHMARKS.md: `linerate bench` with its
# defaults (every DuT available, 64..1518-byte frames), its HTML report kept
# as docs/bench-report.html, optionally a re-run (BENCH_RERUN=1) shown next
# to the first run. Run as root on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
out=target/bench
mkdir -p "$out"
lr=target/release/linerate
echo "== linerate bench (RFC 2544, defaults)" >&2
$lr bench --json "$out/rfc2544.json" --report docs/bench-report.html "$@"
files=("$out/rfc2544.json")
if [ "${BENCH_RERUN:-0}" = 1 ]; then
    echo "== linerate bench again (re-run)" >&2
    $lr bench --json "$out/rfc2544-rerun.json" --no-report "$@"
    files+=("$out/rfc2544-rerun.json")
fi
python3 scripts/bench_report_rfc2544.py "${files[@]}" "scripts/bench_rfc2544.sh $* (BENCH_RERUN=${BENCH_RERUN:-0})"
