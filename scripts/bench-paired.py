#!/usr/bin/env python3
"""Did a change move linerate's speed? Two builds, paired runs in one
sitting, alternating which goes first:

- mem-port fwd: `fwd 'mem:a?source=64' 'mem:b?sink' --cpu 1`, Mpps;
- the switch sweep's rules (docs/BENCHMARKS.md) over mem ports at 1 and
  1M flows, `--profile`: cycles per packet, total and without rx (the
  switch's own work);
- `gen --xdp` top speed on a veth of a test bed (`linerate testbed up`),
  64-byte frames, Mpps.

    python3 scripts/bench-paired.py --before OLD/linerate --after target/release/linerate [--pairs 3]

Prints every pair and the median after/before ratio of each figure, and
the CPU. Root; run nothing else meanwhile. The bed is removed at the end.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from benchlib import cpu

SWEEP = "/tmp/linerate-paired-sweep.flows"


def sweep_rules(path):
    # The switch study's sweep (crates/measure/src/study/switch/rules.rs).
    rows = []
    for f in range(1000):
        rows.append(f"priority=400,udp,nw_src=10.{(f >> 16) & 255}.{(f >> 8) & 255}.{f & 255},"
                    f"nw_dst=10.1.0.1,tp_src={1024 + (f & 0x3fff)},tp_dst=9,actions=output:2")
    for b in range(4096):
        rows.append(f"priority=300,udp,nw_src=10.{b >> 8}.{b & 255}.0/24,tp_dst=53,actions=drop")
    for x in range(16):
        rows.append(f"priority=200,ip,nw_src=10.{x}.0.0/16,"
                    "actions=set_field:02:00:00:00:00:09->eth_dst,output:2")
    rows.append("priority=100,ip,nw_dst=10.1.0.0/16,actions=dec_ttl,output:2")
    rows.append("priority=0,actions=drop")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def last_json(args):
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)}: {out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fwd(binary):
    v = last_json([binary, "fwd", "mem:a?source=64", "mem:b?sink", "--cpu", "1",
                   "--duration", "5", "--json", "--quiet"])
    return v["directions"][0]["forwarded"] / v["elapsed_s"] / 1e6


def switch(binary, flows):
    v = last_json([binary, "switch", "--port", f"1=mem:a?source=64&flows={flows}",
                   "--port", "2=mem:b?sink", "--flows", SWEEP, "--cpu", "1",
                   "--duration", "3", "--profile", "--json", "--quiet"])
    c = v["profile"]["cycles_per_packet"]
    return c["total"], c["total"] - c["rx"]


def gen_xdp(binary, ns):
    v = last_json(["ip", "netns", "exec", ns, binary, "gen", "g0", "--xdp",
                   "--duration", "3", "--json"])
    return v["pps"] / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--pairs", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-paired.py: root is needed (test bed, XDP)")
    sweep_rules(SWEEP)
    bed = f"lrp{os.getpid() % 100000}"
    subprocess.run([a.after, "testbed", "up", "--name", bed], check=True,
                   capture_output=True, timeout=120)
    figures = {
        "fwd mem Mpps": lambda b: fwd(b),
        "switch 1 flow cycles/pkt": lambda b: switch(b, 1)[0],
        "switch 1 flow cycles/pkt w/o rx": lambda b: switch(b, 1)[1],
        "switch 1M flows cycles/pkt": lambda b: switch(b, 1_000_000)[0],
        "switch 1M flows cycles/pkt w/o rx": lambda b: switch(b, 1_000_000)[1],
        "gen --xdp Mpps": lambda b: gen_xdp(b, f"{bed}-gen"),
    }
    print(f"{cpu()}; {a.pairs} pairs, before {a.before}, after {a.after}")
    ratios = {k: [] for k in figures}
    try:
        for i in range(a.pairs):
            for name, f in figures.items():
                if name.endswith("w/o rx"):
                    continue
                order = [a.before, a.after] if i % 2 == 0 else [a.after, a.before]
                got = {}
                for b in order:
                    got[b] = f(b) if "switch" not in name else None
                    if "switch" in name:
                        flows = 1 if "1 flow" in name else 1_000_000
                        got[b] = switch(b, flows)
                if "switch" in name:
                    for j, label in enumerate([name, name + " w/o rx"]):
                        x, y = got[a.before][j], got[a.after][j]
                        ratios[label].append(y / x)
                        print(f"pair {i + 1} {label:<36} before {x:9.2f} after {y:9.2f} ratio {y / x:.3f}",
                              flush=True)
                else:
                    x, y = got[a.before], got[a.after]
                    ratios[name].append(y / x)
                    print(f"pair {i + 1} {name:<36} before {x:9.2f} after {y:9.2f} ratio {y / x:.3f}",
                          flush=True)
    finally:
        subprocess.run([a.after, "testbed", "down", "--name", bed], capture_output=True, timeout=120)
    print("median after/before (range):")
    for k, r in ratios.items():
        print(f"  {k:<36} {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})")


if __name__ == "__main__":
    main()
