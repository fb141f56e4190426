#!/usr/bin/env python3
"""Does --metrics slow forwarding down? Mem-port fwd (an endless 64-byte
source into a sink, forwarding thread on CPU 1) without and with `--metrics`
while a scraper on CPU 0 fetches /metrics every 100 ms, in alternating pairs in one
sitting; then, as the yardstick of noise, as many pairs without and without.

    python3 scripts/bench-metrics.py [--pairs 5] [--seconds 10] [--bin target/release/linerate]

Prints each pair's Mpps and ratio, the median ratio and the range of both
sets, and the CPU. Build first (`cargo build --release`); run nothing else
meanwhile.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import threading
import time
import urllib.request

from benchlib import cpu


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port, stop, counts):
    # The scraper stands for a Prometheus server: on CPU 0, off the
    # forwarding core, as an operator would place it.
    os.sched_setaffinity(0, {0})
    url = f"http://127.0.0.1:{port}/metrics"
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                r.read()
                counts[0] += 1
        except OSError:
            pass
        stop.wait(0.1)


def run(binary, seconds, metrics):
    args = [binary, "fwd", "mem:a?source=64", "mem:b?sink", "--cpu", "1",
            "--duration", str(seconds), "--json", "--quiet"]
    stop, counts, t = threading.Event(), [0], None
    if metrics:
        port = free_port()
        args += ["--metrics", f"127.0.0.1:{port}"]
        t = threading.Thread(target=scrape, args=(port, stop, counts))
    p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    if t:
        t.start()
    out, _ = p.communicate(timeout=seconds + 60)
    stop.set()
    if t:
        t.join()
    if p.returncode != 0:
        raise SystemExit(f"linerate fwd failed ({p.returncode})")
    v = json.loads(out.strip().splitlines()[-1])
    d = v["directions"][0]
    return d["forwarded"] / v["elapsed_s"] / 1e6, counts[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--bin", default="target/release/linerate")
    a = ap.parse_args()
    print(f"{cpu()}; mem-port fwd, 64 B, {a.seconds:g} s per run, {a.pairs} pairs")
    print(f"{'pair':>4} {'without Mpps':>13} {'with Mpps':>10} {'scrapes':>8} {'ratio':>13}")
    summary = []
    for label, metrics in (("with/without", True), ("without/without (noise)", False)):
        print(f"{label}:")
        ratios = []
        for i in range(a.pairs):
            # Alternate which goes first, so that a drift of the host favours neither.
            if i % 2 == 0:
                off, _ = run(a.bin, a.seconds, False)
                on, n = run(a.bin, a.seconds, metrics)
            else:
                on, n = run(a.bin, a.seconds, metrics)
                off, _ = run(a.bin, a.seconds, False)
            ratios.append(on / off)
            print(f"{i + 1:>4} {off:>13.3f} {on:>10.3f} {n:>8} {on / off:>13.3f}", flush=True)
        summary.append(f"{label}: median {statistics.median(ratios):.3f} "
                       f"(range {min(ratios):.3f}-{max(ratios):.3f})")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
