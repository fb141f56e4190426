#!/usr/bin/env python3
"""Three runs of `linerate bench`: per DuT and size the three NDRs, and how
many fall inside the spread each other run stated."""
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
def label(r):
    return r["name"] + (" bi" if r.get("direction") == "bi" else "")
table = {}
for k, run in enumerate(runs):
    for r in run["results"]:
        if r["status"] != "ok":
            continue
        for s in r["sizes"]:
            key = (label(r), s["frame_size"])
            table.setdefault(key, [None] * len(runs))[k] = (
                s.get("throughput_pps"), r.get("throughput_spread"),
                s.get("generator_limited"), s.get("ndr_confirmed"), s.get("ndr_trial_s"))
inside = total = 0
rows = []
for (dut, size), v in table.items():
    cells = []
    for i, x in enumerate(v):
        if x is None or x[0] is None:
            cells.append("-")
            continue
        n_in = n = 0
        for j, y in enumerate(v):
            if j == i or y is None or y[0] is None or y[1] is None:
                continue
            n += 1
            if abs(x[0] / y[0] - 1) <= y[1]:
                n_in += 1
        inside += n_in
        total += n
        mark = (">=" if x[2] else "") 
        conf = "" if x[3] in (True, None) else "†"
        cells.append(f"{mark}{x[0]/1e6:.3f}{conf} (±{(x[1] or 0)*100:.1f} %; {n_in}/{n})")
    rows.append(f"| {dut} | {size} B | " + " | ".join(cells) + " |")
print("| DuT | frame | run 1 NDR Mpps (stated spread; inside the others' spreads) | run 2 | run 3 |")
print("|---|---|---|---|---|")
print("\n".join(rows))
print(f"\n{inside} of {total} results inside the spread another run stated ({100*inside/max(total,1):.0f} %)")
