#!/usr/bin/env bash
# Reproduce docs/BENCHMARKS.md: one run, on this machine, of
#  1. `linerate bench --peers` (64-byte frames at overload through every DuT),
#  2. the pure-CPU forwarder (mem ports) with --profile, and DPDK testpmd
#     io-forward between two net_null ports, one after the other,
#  4. `linerate bench` with its RFC 2544 defaults (scripts/bench_rfc2544.sh;
#     BENCH_RFC2544=0 skips it, BENCH_RERUN=1 adds its re-run),
#  5. `linerate bench gen` (rate accuracy, maximum rate against trafgen, latency),
#  6. `linerate bench dnac` (seed 002's DNAC experiment),
#  7. `linerate bench capture` (seed 003's capture-method comparison),
#  8. `linerate bench switch` (flow sweep, rule insertion against Open vSwitch, first hit),
# and write their sections of docs/BENCHMARKS.md.
# Run as root on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
out=target/bench
mkdir -p "$out"
lr=target/release/linerate
secs=${BENCH_SECONDS:-5}
reps=${BENCH_REPEAT:-2}

echo "== linerate bench --peers (${secs}s x ${reps})" >&2
$lr bench --overload --peers --duration "$secs" --repeat "$reps" --json - >"$out/bench.json"
echo "== pure CPU: linerate fwd mem ports" >&2
$lr fwd 'mem:a?source=60' 'mem:b?sink' --cpu 1 --duration "$secs" --profile --json --quiet >"$out/mem.json"
$lr fwd 'mem:a?source=60' 'mem:b?sink' --cpu 1 --duration "$secs" --profile --json --quiet \
    --rewrite-a2b 02:00:00:00:00:02/02:00:00:00:00:01 >"$out/mem_rewrite.json"
echo "== pure CPU: testpmd io-forward net_null" >&2
if scripts/peers/dut-testpmd.sh null "$secs" 1 >"$out/testpmd_null.txt" 2>"$out/testpmd_null.err"; then :; else
    echo "testpmd null unavailable: $(tail -1 "$out/testpmd_null.err")" >&2; : >"$out/testpmd_null.txt"; fi
cmd="scripts/benchmarks.sh (BENCH_SECONDS=$secs BENCH_REPEAT=$reps)"
python3 scripts/bench_report.py "$out" "$cmd" | python3 scripts/md_section.py overview
if [ "${BENCH_RFC2544:-1}" = 1 ]; then
    echo "== RFC 2544: scripts/bench_rfc2544.sh" >&2
    scripts/bench_rfc2544.sh
fi
echo "== traffic generator: linerate bench gen" >&2
$lr bench gen --seconds "$secs" --markdown docs/BENCHMARKS.md --json "$out/gen.json" --report "$out/gen.html"
echo "== DNAC: linerate bench dnac" >&2
$lr bench dnac --markdown docs/BENCHMARKS.md --json "$out/dnac.json" --report "$out/dnac.html"
echo "== capture methods: linerate bench capture" >&2
$lr bench capture --markdown docs/BENCHMARKS.md --json "$out/capture.json" --report "$out/capture.html"
echo "== switch: linerate bench switch" >&2
$lr bench switch --markdown docs/BENCHMARKS.md --json "$out/switch.json" --report "$out/switch.html"
