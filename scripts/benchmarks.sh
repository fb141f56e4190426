#!/usr/bin/env bash
# Reproduce docs/BENCHMARKS.md: one run, on this machine, of every section's
# `linerate bench ...` procedure, each writing its own section (between its
# <!-- NAME --> markers), JSON and HTML page:
#  1. `linerate bench overload` (64-byte frames at overload through every DuT,
#     issue 2's targets, cycles per packet, mem ports against testpmd net_null),
#  2. `linerate bench gen` (rate accuracy, maximum rate against trafgen, latency),
#  3. `linerate bench switch` (flow sweep, rule insertion against Open vSwitch,
#     first hit, a 5-table pipeline against one table, throughput through the veth bed,
#     insertion of 1k..1M rules over OpenFlow into linerate and Open vSwitch),
#  4. `linerate bench dnac` (seed 002's DNAC experiment),
#  5. `linerate bench capture` (seed 003's capture-method comparison),
#  6. `linerate bench` with its RFC 2544 defaults (BENCH_RFC2544=0 skips it),
#  7. `linerate bench afpacket` (AF_PACKET rings: latency, loss-free rate; 10 s trials),
#  8. `linerate bench soak` (memory over a run of BENCH_SOAK_MINUTES per pipeline,
#     default 2, after a 1-minute warm-up; its own default is 30 and 2),
#  9. `linerate bench sink-cpu` (where the sink's receive work runs).
# Run as root on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
out=target/bench
mkdir -p "$out"
lr=target/release/linerate
md=docs/BENCHMARKS.md
secs=${BENCH_SECONDS:-5}
reps=${BENCH_REPEAT:-2}
study() { # NAME [options]: one study, its section, JSON and HTML page
    local name=$1
    shift
    echo "== linerate bench $name $*" >&2
    $lr bench "$name" "$@" --markdown "$md" --json "$out/$name.json" --report "$out/$name.html"
}

study overload --seconds "$secs" --repeat "$reps"
study gen --seconds "$secs"
study switch --parts sweep,insert,first,pipeline,veth,openflow --ovs-max 1000000
study dnac
study capture
if [ "${BENCH_RFC2544:-1}" = 1 ]; then
    echo "== RFC 2544: linerate bench" >&2
    $lr bench --json "$out/rfc2544.json" --report docs/bench-report.html --markdown "$md"
fi
study afpacket --trial 10
study soak --minutes "${BENCH_SOAK_MINUTES:-2}" --warmup 60
study sink-cpu
