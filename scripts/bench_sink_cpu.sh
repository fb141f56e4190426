#!/usr/bin/env bash
# Where the sink's receive work runs, measured both ways in one sitting:
# `linerate bench` on the default bed (s0's NAPI in the softirq of the CPU
# that transmits to s0: the DuT's) and with `--sink-cpu 0` (s0's NAPI in a
# kernel thread on CPU 0, the generator's: on 2 CPUs there is no third).
# Writes the "sink-cpu" section of docs/BENCHMARKS.md. Run as root on an
# otherwise idle machine. Arguments go to both runs (default: the DuTs and
# sizes below).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
out=target/bench
mkdir -p "$out"
lr=target/release/linerate
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    args=(--dut linerate-afxdp --dut linux-bridge --dut linux-ipfwd --sizes 64,1518
          --repetitions 2 --frame-loss-sizes none --b2b-sizes none)
fi
common=(--no-report --no-history "${args[@]}")
echo "== sink's receive on the DuT's CPU (default)" >&2
$lr bench --json "$out/sink-default.json" "${common[@]}"
echo "== sink's receive in a thread on CPU 0 (--sink-cpu 0)" >&2
$lr bench --json "$out/sink-cpu0.json" --sink-cpu 0 "${common[@]}"
python3 - "$out/sink-default.json" "$out/sink-cpu0.json" "scripts/bench_sink_cpu.sh $*" <<'PY'
import json, os, sys
sys.path.insert(0, "scripts")
import md_section
a, b = (json.load(open(f)) for f in sys.argv[1:3])
cmd = sys.argv[3]
cpu = dict(a["environment"]).get("CPU", "?")
out = ["## Where the sink's receive work runs (`--sink-cpu`)", ""]
out.append(
    f"Date {a['date']}, {cpu}, kernel {dict(a['environment']).get('kernel', '?')}. Command: `{cmd}` "
    f"(two `linerate bench` runs back to back: {a['seconds']:.0f} s and {b['seconds']:.0f} s)."
)
out.append("")
out.append(
    "veth runs a receiver's NAPI in the softirq of the CPU that transmits to it, so by default "
    "the sink's receive work (s0's NAPI and its XDP counter) runs on the DuT's core and is "
    "charged to the DuT. `--sink-cpu 0` moves it into a kernel thread pinned to CPU 0; this "
    "machine has two CPUs, so that is the generator's. Throughput in Mpps (median of the "
    "searches), latency p50 in us:"
)
out.append("")
out.append("| DuT | frame | sink on the DuT's CPU | sink in a thread on CPU 0 | ratio | p50 latency (default / --sink-cpu 0) |")
out.append("|---|---|---|---|---|---|")
def sizes(run):
    return {(r["name"], s["frame_size"]): s for r in run["results"] for s in r["sizes"]}
def p50(s):
    l = s.get("latency_merged") or (s["trials"][s["latency_trial"]].get("latency") if s.get("latency_trial") is not None else None)
    return "-" if not l or not l["samples"] else f"{l['p50_ns'] / 1e3:.1f}"
sa, sb = sizes(a), sizes(b)
for key in sa:
    x, y = sa[key], sb.get(key)
    if not y:
        continue
    tx, ty = x.get("throughput_pps"), y.get("throughput_pps")
    f = lambda v, s: "-" if v is None else (">=" if s["generator_limited"] else "") + f"{v / 1e6:.3f}"
    ratio = f"{ty / tx:.2f}x" if tx and ty else "-"
    out.append(f"| {key[0]} | {key[1]} B | {f(tx, x)} | {f(ty, y)} | {ratio} | {p50(x)} / {p50(y)} |")
out.append("")
out.append(
    "Reading it. On two CPUs there is no free core for the sink: on CPU 0 its NAPI thread shares "
    "the core with the generator, which spins in BPF_PROG_RUN for the whole trial, so the thread "
    "runs only when the scheduler preempts the generator, s0's ring overflows, and the frames "
    "lost there count against the DuT (d1 sent them: the kernel's counters agree with ours). "
    "The rows with `--sink-cpu 0` are the sink's limit, not the DuT's. The default bed charges "
    "the sink's receive work to the DuT's core instead (44 % of the AF_XDP DuT's core in the "
    "profile of the RFC 2544 section): the DuTs' numbers there are what a DuT reaches while "
    "also paying for its receiver. `--sink-cpu` is for machines with a third CPU."
)
out.append("")
md_section.put("docs/BENCHMARKS.md", "sink-cpu", "\n".join(out))
PY
