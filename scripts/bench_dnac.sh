#!/usr/bin/env bash
# The DNAC experiment (seed 002, Table 3) for docs/BENCHMARKS.md, printed as markdown on stdout
# (progress on stderr):
#  1. `linerate trace http` writes a trace of HTTP/TCP downloads from 1000 clients to 25 servers
#     with heavy-tailed (Pareto) body sizes, and prints its ground truth;
#  2. one `linerate capture` worker with the built-in http analyser and a fixed per-packet cost
#     (a heavy analyser) takes the trace replayed at top speed: what it forwards per second is
#     its capacity;
#  3. the trace is replayed at a low rate (DNAC_LOW_FRAC of the capacity) and at DNAC_OVERLOAD
#     times the capacity, with TED on and off; the events found are compared.
# Run as root on an otherwise idle machine.
# Env: DNAC_CONNECTIONS (1000), DNAC_MIN_SIZE (100000), DNAC_COST_NS (10000), DNAC_OVERLOAD (10),
#      DNAC_LOW_FRAC (0.2), DNAC_SEED (1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
lr=$PWD/target/release/linerate
out=$PWD/target/bench/dnac
mkdir -p "$out"
conns=${DNAC_CONNECTIONS:-1000}
minsize=${DNAC_MIN_SIZE:-100000}
cost=${DNAC_COST_NS:-10000}
over=${DNAC_OVERLOAD:-10}
lowfrac=${DNAC_LOW_FRAC:-0.2}
seed=${DNAC_SEED:-1}
trace=$out/http.pcapng

echo "== trace: $conns connections" >&2
$lr trace http "$trace" --connections "$conns" --min-size "$minsize" --mean-gap-us 1000 \
    --seed "$seed" --json >"$out/truth.json"

cap() { # RATE TED NAME
    $lr capture "pcap:$trace?rate=$1" --analyser http --cost-ns "$cost" --ted "$2" --json --quiet |
        tail -1 >"$out/$3.json"
}
echo "== capacity of one worker (cost $cost ns/packet)" >&2
cap 1000000 off capacity
capacity=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(int(j["totals"]["forwarded"]/j["t"]))' "$out/capacity.json")
low=$(python3 -c "print(int($capacity*$lowfrac))")
high=$(python3 -c "print(int($capacity*$over))")
for r in low high; do
    for ted in off on; do
        rate=${!r}
        echo "== $r rate ($rate pps), TED $ted" >&2
        cap "$rate" "$ted" "$r-$ted"
    done
done

python3 - "$out" "$capacity" "$low" "$high" "$cost" "$over" "$lowfrac" "$minsize" <<'EOF'
import json, sys
out, capacity, low, high, cost, over, lowfrac, minsize = sys.argv[1:]
truth = json.load(open(f"{out}/truth.json"))
print(f"Trace (`linerate trace http`): {truth['connections']:,} HTTP/1.1 downloads from 1000 clients to 25 servers,"
      f" {truth['packets']:,} packets, {truth['bytes']/1e6:.0f} MB; body sizes Pareto (shape 1.2, minimum {int(minsize):,} B),"
      f" median {truth['median_body']:,} B, largest {truth['largest_body']:,} B; the largest 10 % carry"
      f" {100*truth['top10_byte_share']:.0f} % of the bytes. Ground truth: {truth['requests']:,} requests, {truth['responses']:,} responses,"
      f" {truth['pairs']:,} request/response pairs.")
print()
print(f"One capture worker (software dispatcher, `--analyser http --cost-ns {cost}`: the built-in HTTP analyser plus {int(cost)/1000:g} µs of"
      f" busy work per packet, a heavy analyser) takes {int(capacity):,} packets/s (trace at top speed, TED off). The trace is then replayed"
      f" (`pcap:FILE?rate=PPS`) at {float(lowfrac):g}x that ({int(low):,} pps) and at {over}x ({int(high):,} pps), with TED on and off.")
print()
print("| offered | TED | received | forwarded | dropped: TED | dropped: ring full | http_request | http_response | http_pair (http_track) | pairs found |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
ev = {}
for r, rate in [("low", low), ("high", high)]:
    for ted in ["off", "on"]:
        j = json.load(open(f"{out}/{r}-{ted}.json"))
        t = j["totals"]
        e = t["events"]
        assert t["received"] == t["forwarded"] + sum(t["dropped"].values()), t
        ev[(r, ted)] = e
        print(f"| {int(rate):,} pps ({'low' if r == 'low' else over + 'x capacity'}) | {ted} | {t['received']:,} | {t['forwarded']:,} |"
              f" {t['dropped']['ted']:,} | {t['dropped']['ring_full']:,} | {e['http_request']:,} | {e['http_response']:,} | {e['http_pair']:,} |"
              f" {100*e['http_pair']/truth['pairs']:.1f} % |")
print()
def ratio(k):
    off = ev[("high", "off")][k]
    on = ev[("high", "on")][k]
    return f"{on/off:.1f}x" if off else f"{on} vs 0"
print(f"At overload TED finds {ratio('http_request')} the requests, {ratio('http_response')} the responses and {ratio('http_pair')} the"
      f" request/response pairs that the same worker finds without it (seed 002 reports 2.5-3.2x).")
EOF
