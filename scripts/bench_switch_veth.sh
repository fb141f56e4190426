#!/usr/bin/env bash
# The software switches through the veth test bed, in one `linerate bench` run (RFC 2544
# throughput, 64-byte frames by default): the Linux bridge, `linerate switch` with 1 rule per
# direction and with 10 000 rules, Open vSwitch userspace (afxdp ports) with its 2 in_port rules
# and with the same 10 000 rules (the rule set: linerate_measure::bench::dut_switch::switch_rules).
# Writes the run's JSON and prints a markdown table: DuT, rules, Mpps per size, ratio to the bridge.
#
# usage: scripts/bench_switch_veth.sh [more `linerate bench` options, e.g. --trial 2 --repetitions 3]
# env:   SIZES      frame sizes on the wire (default 64; e.g. 64,1518)
#        OUT        the JSON (default target/bench/switch-veth.json)
#        LINERATE   the binary (default: a release build of this tree, built first)
# Run as root on an otherwise idle machine (2 CPUs: generator on CPU 0, DuT on CPU 1).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench_switch_veth: run as root (namespaces, XDP)" >&2; exit 1; }
sizes=${SIZES:-64}
out=${OUT:-target/bench/switch-veth.json}
if [ -z "${LINERATE:-}" ]; then
    cargo build --release -q -p linerate
    lr=${CARGO_TARGET_DIR:-target}/release/linerate
else
    lr=$LINERATE
fi
mkdir -p "$(dirname "$out")"
duts=(linux-bridge linerate-switch linerate-switch-10k ovs-afxdp ovs-afxdp-10k)
args=(bench --sizes "$sizes" --frame-loss-sizes none --b2b-sizes none --no-report --json "$out")
for d in "${duts[@]}"; do args+=(--dut "$d"); done
args+=("$@")
echo "== $lr ${args[*]}" >&2
"$lr" "${args[@]}"

python3 - "$out" "scripts/bench_switch_veth.sh $* (SIZES=$sizes)" <<'EOF'
import json
import sys

d = json.load(open(sys.argv[1]))
cmd = sys.argv[2]
rules = {
    "linux-bridge": "FDB (2 MACs)",
    "linerate-switch": "2 (1 per direction)",
    "linerate-switch-10k": "10 000",
    "ovs-afxdp": "2 (1 per direction)",
    "ovs-afxdp-10k": "10 000",
}
res = d["results"]
sizes = sorted({s["frame_size"] for r in res for s in r["sizes"]})


def tp(r, size):
    for s in r["sizes"]:
        if s["frame_size"] == size:
            return s
    return None


def cell(s):
    if s is None or s.get("throughput_pps") is None:
        return "-"
    v = f"{s['throughput_pps'] / 1e6:.3f}"
    lo, hi = s.get("throughput_min_pps"), s.get("throughput_max_pps")
    if len(s.get("searches", [])) > 1 and lo is not None and hi is not None:
        v += f" ({lo / 1e6:.3f}-{hi / 1e6:.3f})"
    return (">=" if s.get("generator_limited") else "") + v


bridge = next((r for r in res if r["name"] == "linux-bridge"), None)
first = sizes[0] if sizes else 64
bs = tp(bridge, first) if bridge else None
base = bs.get("throughput_pps") if bs else None
# A generator-limited bridge forwards at least `base`: the ratios are then upper bounds.
base_lim = bool(bs and bs.get("generator_limited"))
print(f"Command: `{cmd}`, {d['date']}, {d['seconds']:.0f} s. Throughput: highest offered rate with no loss (Mpps; median (min-max) of the searches).")
print()
head = ["DuT", "rules"] + [f"{z} B Mpps" for z in sizes] + [f"{first} B / bridge", "status"]
print("| " + " | ".join(head) + " |")
print("|" + "|".join(["---"] * len(head)) + "|")
for r in res:
    s = tp(r, first)
    v = s.get("throughput_pps") if s else None
    ratio = "-"
    if v is not None and base:
        lim = bool(s.get("generator_limited"))
        if r is bridge:
            ratio = "1.00"
        elif base_lim and lim:
            ratio = "? (both generator-limited)"
        else:
            ratio = ("<=" if base_lim else ">=" if lim else "") + f"{v / base:.2f}"
    row = [r["name"], rules.get(r["name"], "?")] + [cell(tp(r, z)) for z in sizes] + [ratio, r["status"]]
    print("| " + " | ".join(row) + " |")
EOF
