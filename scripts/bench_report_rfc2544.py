#!/usr/bin/env python3
"""Render `linerate bench --json` (RFC 2544) results as a markdown section and
put it into docs/BENCHMARKS.md between <!-- rfc2544 --> and <!-- /rfc2544 -->
(appended when the markers are missing).

usage: bench_report_rfc2544.py RESULTS.json [RESULTS2.json] "COMMAND" [BENCHMARKS.md]
A second results file is a re-run: its throughput is shown next to the first.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import md_section  # noqa: E402

args = sys.argv[1:]
files = [a for a in args if a.endswith(".json")]
rest = [a for a in args if not a.endswith(".json")]
cmd = rest[0]
md_path = rest[1] if len(rest) > 1 else "docs/BENCHMARKS.md"
runs = [json.load(open(f)) for f in files]
d = runs[0]


def mpps(v):
    return "-" if v is None else f"{v / 1e6:.3f}"


def tp(s):
    if s.get("throughput_pps") is None:
        return "-"
    return (">=" if s["generator_limited"] else "") + mpps(s["throughput_pps"])


def latency_of(s):
    if s.get("latency_merged"):
        return s["latency_merged"]
    i = s.get("latency_trial")
    if i is None:
        return None
    l = s["trials"][i].get("latency")
    return l if l and l["samples"] else None


def empty_p50(run, size):
    for e in run.get("empty_bed") or []:
        l = e["trial"].get("latency")
        if e["frame_size"] == size and l and l["samples"]:
            return l["p50_ns"]
    return None


def lat(s, run=None):
    l = latency_of(s)
    if not l:
        return "-"
    base = empty_p50(run, s["frame_size"]) if run else None
    minus = "" if base is None else f" ({(l['p50_ns'] - base) / 1e3:+.1f})"
    return f"{l['p50_ns'] / 1e3:.1f} / {l['p99_ns'] / 1e3:.1f}{minus}"


RULES = [
    ("offered short", "under the rate asked"),
    ("generator behind", "behind"),
    ("kernel disagrees", "kernel's counters disagree"),
    ("sent short", "the generator sent"),
    ("more received than sent", "received of"),
]


def size_of(run, dut, size):
    for r in run["results"]:
        if r["name"] == dut:
            for s in r["sizes"]:
                if s["frame_size"] == size:
                    return s
    return None


out = []
out.append("## RFC 2544: throughput, latency, frame loss, back-to-back (`linerate bench`)")
out.append("")
rerun_s = f" (the re-run: {runs[1]['seconds']:.0f} s)" if len(runs) > 1 else ""
out.append(f"Date {d['date']}, {d['seconds']:.0f} s for the whole run{rerun_s}. Command: `{cmd}`.")
out.append("")
for k, v in d["environment"]:
    out.append(f"- {k}: {v}")
out.append("")
out.append(
    "Throughput is the highest offered rate (Mpps) that lost no frame (RFC 2544 26.1: exact "
    "frame counts, queues drained before counting); `>=` marks a DuT the generator could not "
    "overload (its top speed passed: the XDP DuTs do their work in d0's XDP hook, which runs "
    "on the generator's core, so there the number is where generator and DuT together fill "
    "one core). Every other DuT forwards on its own core, CPU 1: the user-space DuTs are "
    "pinned there and RPS steers the kernel's work on what d0 receives there. Latency is "
    "one-way at that rate, p50 / p99 in us, and in brackets the p50 minus the empty bed's "
    "(the generator's frames straight into the sink, no DuT: what the measurement adds). "
    "Frames are verified: the sink counts only the trial's own tagged frames, each once. A "
    "trial counts only when valid (offered at least 99 % of the rate asked, the generator no "
    "more than 2048 frames' worth behind its schedule, the kernel's counters of g0, d0, d1 and "
    "s0 within 0.5 % of ours); an invalid one is repeated, at most twice, and one still "
    "invalid counts as a fail. The last column counts the kernel's disagreements."
)
out.append("")
sizes = sorted({s["frame_size"] for r in d["results"] for s in r["sizes"]})
hdr = "| DuT | " + " | ".join(f"{z} B" for z in sizes) + " | re-run spread | latency 64 B | kernel check |"
out.append(hdr)
out.append("|" + "---|" * (len(sizes) + 4))
for r in d["results"]:
    if not r["sizes"]:
        out.append(f"| {r['name']} | {r['status']} |" + " |" * (len(sizes) + 2))
        continue
    cells = []
    for z in sizes:
        vals = []
        for run in runs:
            s = size_of(run, r["name"], z)
            vals.append(tp(s) if s else "-")
        cells.append(" / ".join(vals))
    s64 = size_of(d, r["name"], 64)
    dis = sum(s["kernel_disagreements"] for s in r["sizes"])
    ntr = sum(len(s["trials"]) for s in r["sizes"])
    check = "agrees" if dis == 0 else f"{dis} of {ntr} trials > 0.5 %"
    sp = r.get("throughput_spread")
    spread = "-" if sp is None else f"±{sp * 100:.1f} %"
    out.append(
        f"| {r['name']} | " + " | ".join(cells) + f" | {spread} | {lat(s64, d) if s64 else '-'} | {check} |"
    )
empty = [e for e in d.get("empty_bed") or [] if (e["trial"].get("latency") or {}).get("samples")]
if empty:
    out.append("")
    rate = empty[0]["rate_pps"] / 1e6
    out.append(
        f"Empty bed (generator -> veth -> XDP sink on d0, no DuT) at {rate:.1f} Mpps, one-way "
        "latency in us (stamps on frames of every flow; latency trials send in small kernel "
        "batches, one frame per 400 kpps of rate, as a stamped frame leaves only when its batch "
        "is flushed):"
    )
    out.append("")
    out.append("| frame | samples | min | p50 | p99 | max |")
    out.append("|---|---|---|---|---|---|")
    for e in empty:
        l = e["trial"]["latency"]
        out.append(
            f"| {e['frame_size']} B | {l['samples']} | {l['min_ns'] / 1e3:.1f} | {l['p50_ns'] / 1e3:.1f} "
            f"| {l['p99_ns'] / 1e3:.1f} | {l['max_ns'] / 1e3:.1f} |"
        )
out.append("")
out.append(
    "What the validity rules did in this run, per DuT (all sizes, all procedures): trials run, "
    "trials found invalid by each rule (a trial may break more than one), invalid trials that "
    "still counted (as fails, after two repeats), trials repeated under the search's small-loss "
    "rule, and the frames the sink did not count as received."
)
out.append("")
out.append("| DuT | trials | " + " | ".join(n for n, _ in RULES) + " | invalid, counted as fail | small-loss repeats | foreign / late / duplicated frames |")
out.append("|---|---|" + "---|" * len(RULES) + "---|---|---|")
for r in d["results"]:
    trials = [t for s in r["sizes"] for t in s["trials"]]
    if not trials:
        continue
    counts = []
    for _, key in RULES:
        counts.append(sum(1 for t in trials if any(key in w for w in t.get("invalid", []))))
    stuck = sum(1 for t in trials if t.get("invalid") and not t["repeated"])
    small = sum(1 for t in trials if t["repeated"] and not t.get("invalid"))
    v = [sum(t.get("verify", {}).get(k, 0) for t in trials) for k in ("foreign", "stale", "duplicates")]
    out.append(
        f"| {r['name']} | {len(trials)} | " + " | ".join(str(c) for c in counts)
        + f" | {stuck} | {small} | {v[0]} / {v[1]} / {v[2]} |"
    )
if len(runs) > 1:
    out.append("")
    h = d.get("history") or {}
    if h.get("spread") is not None:
        between = (
            f" It is also at least the spread between runs, ±{h['spread'] * 100:.1f} %: this run's "
            f"results against those of the {h['runs']} earlier run(s) with the same settings kept "
            f"in the machine's history file (`--history`), pooled over every DuT and size."
        )
    elif h:
        between = (
            " The machine's history file held no earlier run with the same settings, so the "
            "spread holds no between-run part: only what moved within this run."
        )
    else:
        between = " The history file was not used (`--no-history`)."
    out.append(
        "Each cell: first run / re-run (same command, right after). The re-run spread is what "
        "the first run states (its report and table): the 95 % prediction interval of a "
        "re-run's result from the two searches per size, pooled over the DuT's sizes, and at "
        "least the one pooled over every DuT's sizes where the DuT was the limit (one DuT's "
        "seven pairs of searches now and then agree closely by chance)." + between
    )
    out.append("")
    out.append("Re-run against the stated spread (per DuT: sizes whose re-run lies within the first run's result ± its spread; the largest difference):")
    out.append("")
    out.append("| DuT | within the spread | largest difference |")
    out.append("|---|---|---|")
    tot_in = tot = 0
    for r in d["results"]:
        sp = r.get("throughput_spread")
        if sp is None or not r["sizes"]:
            continue
        n_in = n = 0
        worst = (0.0, None)
        for s in r["sizes"]:
            s2 = size_of(runs[1], r["name"], s["frame_size"])
            a, b = s.get("throughput_pps"), s2.get("throughput_pps") if s2 else None
            if not a or not b:
                continue
            rel = b / a - 1
            n += 1
            n_in += abs(rel) <= sp
            if abs(rel) > abs(worst[0]):
                worst = (rel, s["frame_size"])
        tot_in += n_in
        tot += n
        w = "-" if worst[1] is None else f"{worst[0] * 100:+.1f} % at {worst[1]} B (spread ±{sp * 100:.1f} %)"
        out.append(f"| {r['name']} | {n_in} of {n} | {w} |")
    out.append("")
    out.append(f"In all: {tot_in} of {tot} re-run results within the stated spread.")
    if tot and tot_in < 0.9 * tot:
        # The DuT whose re-run moved most as a whole (median over its sizes).
        shifts = []
        for r in d["results"]:
            rel = sorted(
                size_of(runs[1], r["name"], s["frame_size"])["throughput_pps"] / s["throughput_pps"] - 1
                for s in r["sizes"]
                if s.get("throughput_pps") and (size_of(runs[1], r["name"], s["frame_size"]) or {}).get("throughput_pps")
            )
            if rel:
                shifts.append((rel[len(rel) // 2], r["name"], r.get("throughput_spread") or 0.0))
        m, name, sp = max(shifts, key=lambda x: abs(x[0]) / max(x[2], 1e-9))
        out.append("")
        out.append(
            f"That is fewer than the 95 % the interval aims at. "
            + (
                "The first run had no earlier run in the history file, so its spread is "
                "estimated within one run, from two searches per size some minutes apart; "
                if h.get("spread") is None
                else "Even with the spread between the earlier runs, "
            )
            + f"between runs, a DuT's whole curve can move on this VM (a guest on a shared "
            f"host): {name}'s re-run moved by {m * 100:+.1f} % (median over its sizes) against "
            f"a stated ±{sp * 100:.1f} %. Compare DuTs measured in the same run (the section "
            f"after this one shows the machine's two speeds that cause it)."
        )
    out.append("")
    out.append(
        "Two searches per size are a small sample: the spread is an estimate, and it cannot "
        "foresee a rare event that neither search met. DuTs that now and then stall (a frame "
        "lost at a rate far below their capacity ends a search there) show it as re-run "
        "results far outside."
    )
out.append("")
out.append("Frame loss rate at 64 B (% of frames lost at % of the generator's top speed), and back-to-back (longest burst at top speed forwarded without loss):")
out.append("")
out.append("| DuT | frame loss | back-to-back (frames) |")
out.append("|---|---|---|")
for r in d["results"]:
    s = size_of(d, r["name"], 64)
    if not s:
        continue
    fl = " ".join(f"{f * 100:.0f}%:{l * 100:.1f}" for f, _, l in s["frame_loss"]) or "-"
    bb = ", ".join(("&ge;" if b["at_least"] else "") + str(b["frames"]) for b in s["back_to_back"]) or "-"
    out.append(f"| {r['name']} | {fl} | {bb} |")
out.append("")
SEED_ORDER = ["linux-bridge", "linux-ipfwd", "linerate-afxdp", "linerate-xdp"]


def order_at_64(run):
    """(name, pps) at 64 B, lowest first, of the DuTs the seeds' order names and linerate afpacket."""
    got = []
    for name in SEED_ORDER + ["linerate-afpacket"]:
        s = size_of(run, name, 64)
        if s and s.get("throughput_pps"):
            got.append((name, s["throughput_pps"]))
    return sorted(got, key=lambda x: x[1])


swaps = []  # per run: the neighbours of the seeds' order found the other way round
seed_order = []  # per run: whether bridge < IP forwarding < linerate afxdp < linerate xdp at 64 B
for k, run in enumerate(runs):
    order = order_at_64(run)
    if not order:
        continue
    label = "" if len(runs) == 1 else (" (run)" if k == 0 else " (re-run)")
    out.append(
        f"Order at 64 B{label}: " + " < ".join(f"{n} {v / 1e6:.3f}" for n, v in order) + " Mpps."
    )
    out.append("")
    v = dict(order)
    swapped = [f"{b} {v[b] / 1e6:.3f} < {a} {v[a] / 1e6:.3f}"
               for a, b in zip(SEED_ORDER, SEED_ORDER[1:]) if a in v and b in v and v[b] < v[a]]
    seed_order.append(not swapped)
    swaps.append(swapped)
if seed_order and all(seed_order):
    order_text = ("At 64 bytes the order is that of seeds 000 and 001: the bridge, then IP forwarding, "
                  "then linerate's user-space AF_XDP path, then its XDP path, which the generator cannot "
                  "overload.")
else:
    held = ["the run", "the re-run"] if len(runs) > 1 else ["the run"]
    order_text = (
        "At 64 bytes the order of seeds 000 and 001 (the bridge, then IP forwarding, then linerate's "
        "user-space AF_XDP path, then its XDP path, which the generator cannot overload) holds in "
        + (" and ".join(h for h, ok in zip(held, seed_order) if ok) or "neither run")
        + " but not in " + " and ".join(f"{h} ({'; '.join(sw)})" for h, ok, sw in zip(held, seed_order, swaps)
                                          if not ok)
        + ": on this machine a result that meets its slow level can do that (the section after "
        "this one).")
above = []
for run in runs:
    n = k = 0
    for z in sizes:
        a, b = size_of(run, "linerate-afxdp", z), size_of(run, "linux-ipfwd", z)
        if a and b and a.get("throughput_pps") and b.get("throughput_pps"):
            n += 1
            k += a["throughput_pps"] > b["throughput_pps"]
    above.append(f"{k} of {n}")
out.append(
    "Reading it. Each DuT forwards on its own core (CPU 1), the generator and d0's driver "
    "work (NAPI, the XDP hook) run on CPU 0, and the sink's receive work runs where the DuT "
    "transmits (veth runs the receiver's NAPI on the sending core). The kernel DuTs run on "
    "CPU 1 through receive packet steering (RPS) of d0; before 2026-11-24 they ran in the "
    "generator's softirq on CPU 0, where their results were lower bounds of generator and "
    "DuT together (`linerate bench --no-rps` keeps that bed). " + order_text + " At larger frames linerate "
    "afxdp and IP forwarding are close (linerate afxdp above IP forwarding at "
    + " / ".join(above)
    + (" sizes in the run / re-run" if len(runs) > 1 else " sizes") + "): on veth, AF_XDP is copy mode, and every frame the DuT "
    "transmits becomes an skb in its sendto, copied once more by veth into a page before the "
    "sink's XDP program sees it (skb_pp_cow_data), so the user-space path pays two copies per "
    "frame that in-kernel forwarding does not; with a NIC with zero-copy AF_XDP both go. A "
    "profile of the DuT's core at overload (`perf record -C 1 -g`, 64 B) put 92 % of it in "
    "sendto's kernel path (44 % the sink's receive work, 17 % that copy) and under 5 % in "
    "linerate's own code. testpmd net_af_xdp and Open vSwitch's afxdp ports take the same "
    "kernel path and land near linerate afxdp. The AF_PACKET DuTs (linerate afpacket, testpmd "
    "net_af_packet) now pay the packet socket's receive copy on their own core too, and fall "
    "below the bridge, as PF_PACKET stayed below in-kernel forwarding in seed 001. Their deep "
    "rings pass short trials while a backlog builds (the latency trial at their throughput "
    "then loses frames, noted in the report): longer trials (`--trial 10`) give lower, more "
    "conservative numbers. "
    "The p99 latency of ~1 ms of the AF_XDP DuTs at their throughput is the 2048-frame ring "
    "filling at the edge of capacity."
)
out.append("")
out.append("The HTML report of this run (plots of throughput against frame size with the line rate, latency CDFs and histograms, frame loss) is `docs/bench-report.html`; the JSON with every trial is written by `--json`.")
md_section.put(md_path, "rfc2544", "\n".join(out))
