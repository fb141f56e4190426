#!/usr/bin/env bash
# AF_PACKET forwarding: latency at a low rate and the loss-free 64-byte rate,
# TPACKET_V2 frame rings (the busy-polling default since 2026-11-25) against
# TPACKET_V3 block rings (the default before), in one run on this machine.
#
#   scripts/bench_afpacket.sh [SECONDS] [TRIAL] [SEARCHES]
#       SECONDS   per latency run (default 5)
#       TRIAL     seconds per trial of the long-trial searches (default 30)
#       SEARCHES  long-trial searches per DuT (default 2; ~7 min each at 30 s)
#
#  1. latency at 10 kpps with --signature (66-byte frames), counted with the
#     kernel's RX timestamps at s0, through: the Linux bridge (the idle path),
#     `linerate fwd afpacket:d0 afpacket:d1` (ring=v2 by default) and the
#     same with ring=v3; one fresh gen/dut/sink bed each, fwd on CPU 1;
#  2. the RFC 2544 loss-free rate at 64 bytes of both (`linerate bench
#     --dut linerate-afpacket --dut linerate-afpacket-v3`, whose passes
#     alternate between the two) with the bench's 0.2 s trials (3 searches:
#     a ring that holds many packets passes a short trial on its backlog)
#     and with TRIAL-second trials (SEARCHES searches), with the generator's
#     worst lateness per trial.
# Writes the "afpacket" section of docs/BENCHMARKS.md
# (scripts/bench_afpacket_report.py, scripts/md_section.py).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
trial=${2:-30}
searches=${3:-2}
. scripts/bench_common.sh bench_afpacket

# Wait until namespace NS has at least N running packet sockets (bound and
# receiving: /proc/net/packet column R), i.e. the processes started there
# have opened their ports; 20 s at most.
wait_sockets() { # NS N
    local i
    for i in $(seq 1 2000); do
        local n
        n=$(ip netns exec "$1" awk 'NR > 1 && $5 != "0" && $6 == "1"' /proc/net/packet | wc -l)
        [[ $n -ge $2 ]] && return 0
        sleep 0.01
    done
    echo "bench_afpacket: $2 packet sockets never appeared in $1" >&2
    exit 1
}

lat_run() { # NAME DUT_CMD... (run in the DuT namespace; empty for the bridge)
    local name=$1
    shift
    local bed=lrba$$$name
    beds+=("$bed")
    if [[ $# -eq 0 ]]; then
        $lr testbed up --name "$bed" --dut bridge --no-ipv6 --json >/dev/null
    else
        $lr testbed up --name "$bed" --no-ipv6 --json >/dev/null
        ip netns exec "$bed-dut" "$@" --cpu 1 --json --quiet >"$tmp/$name.fwd" 2>"$tmp/$name.fwd.err" &
        local fpid=$!
        bg+=("$fpid")
        wait_sockets "$bed-dut" 2
    fi
    local dmac
    dmac=$(ip netns exec "$bed-sink" cat /sys/class/net/s0/address)
    ip netns exec "$bed-sink" $lr count afpacket:s0 --idle 1 --duration $((secs + 5)) --json --quiet >"$tmp/c.out" 2>"$tmp/c.err" &
    local cpid=$!
    bg+=("$cpid")
    wait_sockets "$bed-sink" 1
    ip netns exec "$bed-gen" $lr gen afpacket:g0 --rate 10kpps --signature --dst-mac "$dmac" --duration "$secs" --cpu 0 --json --quiet >"$tmp/g.out"
    wait "$cpid" || { echo "bench_afpacket: count for $name failed: $(tail -n1 "$tmp/c.err")" >&2; exit 1; }
    bg=("${bg[@]/$cpid}")
    if [[ -n ${fpid:-} ]]; then
        kill -INT "$fpid"
        wait "$fpid" || { echo "bench_afpacket: $* failed: $(tail -n1 "$tmp/$name.fwd.err")" >&2; exit 1; }
        bg=("${bg[@]/$fpid}")
    fi
    printf '{"name":"%s","cmd":"%s","gen":%s,"count":%s}\n' "$name" "$*" "$(tail -n1 "$tmp/g.out")" "$(tail -n1 "$tmp/c.out")" >>"$tmp/lat.jsonl"
    $lr testbed down --name "$bed" >/dev/null
}

echo "== 1. latency at 10 kpps (${secs} s each)" >&2
lat_run bridge
lat_run v2 $lr fwd afpacket:d0 afpacket:d1
lat_run v3 $lr fwd 'afpacket:d0?ring=v3' 'afpacket:d1?ring=v3'

echo "== 2. loss-free rate at 64 bytes, 0.2 s and ${trial} s trials" >&2
for t in 0.2:3 "$trial:$searches"; do
    $lr bench --dut linerate-afpacket --dut linerate-afpacket-v3 --sizes 64 --trial "${t%%:*}" \
        --repetitions "${t##*:}" --no-latency --frame-loss-sizes none --b2b-sizes none \
        --no-report --no-history --json "$tmp/bench-${t%%:*}.json" >&2
done

python3 scripts/bench_afpacket_report.py "$tmp/lat.jsonl" "$tmp/bench-0.2.json" "$tmp/bench-$trial.json" \
    "$secs" "$trial" "$searches" | python3 scripts/md_section.py afpacket
