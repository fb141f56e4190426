#!/usr/bin/env python3
"""Turn the outputs of scripts/benchmarks.sh into docs/BENCHMARKS.md (stdout)."""
import datetime
import json
import os
import platform
import re
import sys

out, cmd = sys.argv[1], sys.argv[2]
bench = json.load(open(os.path.join(out, "bench.json")))
mem = json.loads(open(os.path.join(out, "mem.json")).read().strip().splitlines()[-1])
memrw = json.loads(open(os.path.join(out, "mem_rewrite.json")).read().strip().splitlines()[-1])
null_txt = open(os.path.join(out, "testpmd_null.txt")).read()
null = [float(x) for x in re.findall(r"null port \d+: ([0-9.]+) Mpps", null_txt)]

cpu = "?"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
ncpu = os.cpu_count()
res = {r["name"]: r for r in bench["results"]}


def med(name):
    r = res.get(name)
    return r["median_pps"] / 1e6 if r and r["median_pps"] else None


def fmt(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


p = print
p("# Benchmarks")
p()
p(f"Measured {datetime.date.today().isoformat()} on one machine: {cpu}, {ncpu} cores (VM), "
  f"Linux {bench['kernel']}, Debian 12. Reproduce with `{cmd}` (as root, machine otherwise idle);"
  " raw JSON lands in `target/bench/`.")
p()
p("## L2 forwarding at overload (64-byte frames)")
p()
p("Test bed: three network namespaces, gen <-veth-> dut <-veth-> sink (`linerate testbed`), a fresh one per trial. "
  f"Generator: linerate's in-kernel XDP generator (BPF_PROG_RUN live frames) on CPU {bench['gen_cpu']}, "
  "64-byte UDP frames over 64 flows, the same for every DuT. Counted at the sink by an XDP counter on s0; "
  "the kernel's rx_packets of s0 is the independent check (column `check`). "
  f"User-space DuTs are pinned to CPU {bench['dut_cpu']}. veth receive work (NAPI, d0's XDP hook) runs as "
  f"softirq on the CPU that sends into the veth, CPU {bench['gen_cpu']}: the XDP DuTs and the AF_XDP copy on "
  "receive share it with the generator. "
  + (f"Receive packet steering (RPS) of d0 moves the kernel's work after the XDP hook (bridge, IP forwarding, "
     f"the packet socket's receive) to CPU {bench['dut_cpu']}. " if bench.get("rps") else
     f"Without RPS (`--no-rps`), the bridge's, IP forwarding's and the packet socket's receive work also runs "
     f"there. ")
  + f"{bench['duration_s']:.0f} s per trial after {bench['warmup_s']:.0f} s warm-up, "
  + f"{len(next(iter(res.values()))['trials'])} trials; the median is shown with min-max.")
p()
p("| DuT | offered Mpps | forwarded Mpps | min-max | vs bridge | check (sink vs kernel counter) |")
p("|---|---:|---:|---:|---:|---:|")
br = med("linux-bridge")
for r in bench["results"]:
    if not r["median_pps"]:
        p(f"| {r['name']} | - | - | - | - | {r['status']} |")
        continue
    m = r["median_pps"] / 1e6
    off = sum(t["offered_pps"] for t in r["trials"]) / len(r["trials"]) / 1e6
    chk = max(abs(t["sink_iface_packets"] - t["sink_packets"]) / max(t["sink_packets"], 1) for t in r["trials"])
    ratio = f"{m / br:.2f}x" if br else "-"
    p(f"| {r['name']}: {r['description']} | {off:.3f} | **{m:.3f}** | {r['min_pps']/1e6:.3f}-{r['max_pps']/1e6:.3f} | {ratio} | {chk*100:.2f} % |")
p()

p("## Targets of issue 2")
p()
best_peer = max([x for x in (med("testpmd-af_xdp"), med("testpmd-af_packet"), med("ovs-afxdp")) if x] or [0]) or None
rows = []
a, x, bare = med("linerate-afxdp"), med("linerate-xdp"), med("xdp-redirect-bare")
if a and best_peer:
    rows.append(("afxdp mode >= 2x the best of testpmd/OvS", f"{a:.3f} / {best_peer:.3f} = {a/best_peer:.2f}x", a / best_peer >= 2))
if x and br:
    rows.append(("xdp mode >= 3x the bridge", f"{x:.3f} / {br:.3f} = {x/br:.2f}x", x / br >= 3))
if x and bare:
    rows.append(("xdp mode >= 0.9x a bare XDP_REDIRECT", f"{x:.3f} / {bare:.3f} = {x/bare:.2f}x", x / bare >= 0.9))
mem_pps = mem["directions"][0]["forwarded"] / mem["elapsed_s"] / 1e6
mem_cyc = mem["profile"]["cycles_per_packet"]["total"]
if null:
    rows.append(("mem-port Mpps per core >= testpmd io-forward net_null (per port)",
                 f"{mem_pps:.1f} / {max(null):.1f} = {mem_pps/max(null):.2f}x", mem_pps >= max(null)))
rows.append(("mem-port forwarding under 40 cycles per packet", f"{mem_cyc:.1f} cycles", mem_cyc < 40))
p("| target | measured | met |")
p("|---|---|---|")
for t, m, ok in rows:
    p(f"| {t} | {m} | {'yes' if ok else '**no**'} |")
p()

p("## Cycles per packet and stage (seed 000, Table II)")
p()
p("`linerate fwd --profile`: TSC cycles per packet (this VM has no PMU; the TSC is constant and invariant), "
  "measured per batch around each step: RX = `recv` (ring read), TX = `send` + `flush` (copy into the TX ring "
  "and the kernel's transmit, including the syscall), buffer management = `release` (frames back to the fill "
  "ring / block back to the kernel), processing = MAC rewrite and accounting. For the veth rows the forwarder "
  "was the DuT of the bench above (at overload).")
p()
p("| forwarder | RX | TX | Buffers | Processing | Total | Mpps |")
p("|---|---:|---:|---:|---:|---:|---:|")
for name in ("linerate-afxdp", "linerate-afpacket"):
    r = res.get(name)
    if not r:
        continue
    for t in r["trials"][-1:]:
        pr = (t.get("dut_account") or {}).get("profile")
        if pr:
            c = pr["cycles_per_packet"]
            p(f"| {name} (veth, 64 B) | {c['rx']:.1f} | {c['tx']:.1f} | {c['buffers']:.1f} | {c['processing']:.1f} | {c['total']:.1f} | {t['forwarded_pps']/1e6:.3f} |")
for label, j in (("mem ports, no rewrite", mem), ("mem ports, MAC rewrite", memrw)):
    c = j["profile"]["cycles_per_packet"]
    pps = j["directions"][0]["forwarded"] / j["elapsed_s"] / 1e6
    p(f"| linerate fwd {label} (60 B) | {c['rx']:.1f} | {c['tx']:.1f} | {c['buffers']:.1f} | {c['processing']:.1f} | {c['total']:.1f} | {pps:.1f} |")
p("| seed 000 Table II: DPDK L2FWD | 55 | 62 | 0 | 0 | 117 | |")
p("| seed 000 Table II: Linux bridge | 491 | 456 | 178+311 | 1508 | 2944 | |")
p()
p("## Pure CPU: forwarding between in-memory ports")
p()
p("`linerate fwd 'mem:a?source=60' 'mem:b?sink' --cpu 1` (an endless source of pre-built frames into a sink: "
  "the job of DPDK's net_null) against `dpdk-testpmd` io-forward between two net_null ports on CPU 1, run one after the other.")
p()
p("| forwarder | Mpps per core | cycles per packet |")
p("|---|---:|---:|")
p(f"| linerate fwd, mem ports | {mem_pps:.1f} | {mem_cyc:.1f} |")
p(f"| linerate fwd, mem ports, MAC rewrite | {memrw['directions'][0]['forwarded']/memrw['elapsed_s']/1e6:.1f} | {memrw['profile']['cycles_per_packet']['total']:.1f} |")
if null:
    p(f"| testpmd io-forward, net_null (per port, mean of the ports) | {sum(null)/len(null):.1f} | |")
else:
    p("| testpmd io-forward, net_null | unavailable | |")
p()
afxdp_tx_share, afxdp_own = "most", "a small part of the"
for t in (res.get("linerate-afxdp") or {}).get("trials", [])[-1:]:
    pr = (t.get("dut_account") or {}).get("profile")
    if pr:
        c = pr["cycles_per_packet"]
        afxdp_tx_share = f"{c['tx'] / c['total'] * 100:.0f} %"
        afxdp_own = f"about {c['rx'] + c['buffers'] + c['processing']:.0f}"
p("## Reading these numbers")
p()
p("- **AF_XDP on veth is capped by the kernel's copy-mode transmit.** veth has no zero-copy AF_XDP, so every "
  "frame an AF_XDP socket sends becomes an skb (allocate, copy, `veth_xmit`, and the sink veth's receive, "
  "which runs as softirq on the sending core). The profile above shows it: of the cycles per packet of "
  f"`linerate-afxdp`, {afxdp_tx_share} are in TX, i.e. inside `sendto()`; linerate's own per-packet work "
  f"(RX ring, processing, buffer recycling) is {afxdp_own} cycles. testpmd (net_af_xdp) and Open vSwitch (afxdp "
  "ports) pay the same kernel path and land at the same rate, so the issue's goal of 2x the best of them is "
  "out of reach on veth whatever the user-space side does; it is a property of the test bed, not of the "
  "forwarders. On a NIC with zero-copy AF_XDP the TX cost is a descriptor write.")
p("- **The XDP mode** forwards in the kernel with a devmap redirect (the 'kernel module' approach of seed 003) "
  "and runs in d0's NAPI on the generator's core; it keeps per-CPU counters per direction, and the table "
  "above compares it with the bare redirect.")
p("- **mem ports vs net_null:** linerate's mem source hands out descriptors of pre-built frames (no buffer "
  "allocation, no data touched), and the sink counts and discards; testpmd's net_null allocates and frees an "
  "mbuf per packet from a mempool. Both measure the forwarding loop without I/O, but the mem ports are cheaper "
  "by construction: the ratio says more about the loop's overhead (dynamic dispatch per batch, counters per "
  "batch) than about a like-for-like buffer cost.")
afp = med("linerate-afpacket")
if bench.get("rps") and afp is not None and br and afp < 0.2 * br:
    p(f"- **AF_PACKET at overload, with RPS: receive livelock.** The packet socket's receive work (its copy into "
      f"the ring) runs in softirq on the DuT's own core, CPU {bench['dut_cpu']}; offered far more than it can take, "
      f"that softirq keeps the core and the forwarder barely runs: linerate-afpacket forwards {afp:.3f} Mpps here, "
      "against several times that as its loss-free rate in the RFC 2544 section (testpmd net_af_packet alike). "
      "`--no-rps` leaves that work on the generator's core, where the forwarder keeps its own.")
order = sorted((v, n) for n in ("linux-bridge", "linux-ipfwd", "linerate-afxdp", "linerate-xdp", "linerate-afpacket")
               if (v := med(n)))
p("- **Ordering at overload:** " + " < ".join(f"{n} {v:.3f}" for v, n in order) + " Mpps. Seeds 000 and 001 "
  "found bridge < IP forwarding < the user-space and XDP paths. The RFC 2544 section below measures the "
  "loss-free rates, which are what the seeds' order is about.")
