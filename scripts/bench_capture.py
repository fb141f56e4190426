#!/usr/bin/env python3
"""Capture-method comparison (seed 003 Table 2, seed 001 Fig. 3) on the veth test bed.

Called by scripts/bench_capture.sh (read its header for the set-up). For every capture method and
frame size: the highest loss-free capture rate (binary search over the offered rate, zero loss =
every frame the generator sent was counted by the method) and the capture core's CPU use at that
rate; then a method x frame size full factorial (replicated) analysed with `linerate experiment`.
Markdown on stdout, progress on stderr, raw trials in OUT/trials.json.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

LR = os.environ["LR"]
OUT = os.environ["OUT"]
SIZES = [int(s) for s in os.environ.get("CAP_SIZES", "64,1024").split(",")]
REPS = int(os.environ.get("CAP_REPS", "2"))
TRIAL_S = float(os.environ.get("CAP_TRIAL", "2"))
RES = float(os.environ.get("CAP_RESOLUTION", "0.03"))
MAX_TRIALS = int(os.environ.get("CAP_MAX_TRIALS", "8"))
GEN_CPU, CAP_CPU = 0, 1
# softirq: d0's receive work (NAPI) runs in softirq on the generator's CPU right after each burst the
# generator hands to the veth, so the 256-frame veth ring never overflows and a loss is the capture
# method's own (its socket ring or queue full); CPU 1 runs only the method's user-space part.
# threaded: NAPI in a kthread pinned to CPU 1 with the method (the capture host's one core); then
# the veth ring overflows whenever the thread wakes late, which dominates the result on a VM.
NAPI = os.environ.get("CAP_NAPI", "softirq")
SCALING_COSTS = [int(c) for c in os.environ.get("CAP_SCALING_COSTS", "5000,20000").split(",")]
BED = f"lrcap{os.getpid()}"
NS_GEN, NS_CAP = f"{BED}-gen", f"{BED}-dut"

# name -> (description, command run in the capture namespace on CAP_CPU)
METHODS = {
    "afpacket-recv": (
        "plain AF_PACKET, recvmmsg (`linerate capture afpacket:d0?ring=mmsg`)",
        [LR, "capture", "afpacket:d0?ring=mmsg", "--steer", "fanout", "--no-pin", "--json", "--quiet"],
    ),
    "tpacket-v3": (
        "TPACKET_V3 mmap ring (`linerate capture afpacket:d0`)",
        [LR, "capture", "afpacket:d0", "--steer", "fanout", "--no-pin", "--json", "--quiet"],
    ),
    "afxdp": (
        "AF_XDP, copy mode on veth (`linerate capture afxdp:d0 --steer queues --ring-size 8192`)",
        [LR, "capture", "afxdp:d0", "--steer", "queues", "--ring-size", "8192", "--no-pin", "--json", "--quiet"],
    ),
    "xdp-count": (
        "in-kernel XDP counting (`linerate count d0 --xdp`), the kernel-module analogue",
        [LR, "count", "d0", "--xdp", "--json", "--quiet"],
    ),
    "tcpdump": (
        "tcpdump (libpcap, TPACKET_V3), `tcpdump -i d0 -n -s 0 -B 16384 -w /dev/null`",
        ["tcpdump", "-i", "d0", "-n", "-s", "0", "-B", "16384", "-w", "/dev/null"],
    ),
}
ONLY = [m for m in os.environ.get("CAP_METHODS", ",".join(METHODS)).split(",") if m]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def cpu_ticks(cpu):
    """(busy, softirq, total) jiffies of one CPU from /proc/stat."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + v[4]
                return sum(v) - idle, v[6], sum(v)
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


def share(a, b, i):
    """Share of the time between two cpu_ticks() readings spent in field i."""
    return (b[i] - a[i]) / max(1, b[2] - a[2])


def xmit_errors():
    """Frames g0 could not put into d0's receive ring (veth: the ring is full), summed over queues."""
    out = run(["ip", "netns", "exec", NS_GEN, "ethtool", "-S", "g0"]).stdout
    return sum(int(v) for k, v in re.findall(r"(\S+_xdp_xmit_errors):\s*(\d+)", out))


def pin_napi(ifname, cpu):
    """Pin the veth's NAPI kthreads (napi/IF-ID) to `cpu` (attaching XDP re-creates them) and give
    them SCHED_FIFO: like softirq work after a NIC interrupt, receive processing preempts the
    capture process instead of waiting for a time slice while the 256-frame veth ring overflows."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm.startswith(f"napi/{ifname}-"):
                os.sched_setaffinity(int(pid), {cpu})
                os.sched_setscheduler(int(pid), os.SCHED_FIFO, os.sched_param(50))
        except OSError:
            pass


def captured(method, out, err):
    if method == "tcpdump":
        m = re.search(r"(\d+) packets? captured", err)
        if not m:
            raise RuntimeError(f"tcpdump: no count in: {err.strip()[-300:]}")
        return int(m.group(1))
    last = [l for l in out.splitlines() if l.startswith("{")]
    if not last:
        raise RuntimeError(f"{method}: no JSON report; stderr: {err.strip()[-300:]}")
    j = json.loads(last[-1])
    return j["packets"] if method == "xdp-count" else j["totals"]["received"]


def trial(method, size, rate, cmd=None, cpus=str(CAP_CPU)):
    """Offer `rate` pps (None: the generator's top speed) for TRIAL_S seconds; returns the trial."""
    cmd = ["ip", "netns", "exec", NS_CAP, "taskset", "-c", cpus] + (cmd or METHODS[method][1])
    cap = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        if cap.poll() is not None:
            raise RuntimeError(f"{method} ended early: {cap.stderr.read().strip()[-300:]}")
        if NAPI == "threaded":
            pin_napi("d0", CAP_CPU)
        time.sleep(0.2)
        gen = [LR, "gen", "g0", "--xdp", "--size", str(size - 4), "--json"]
        if rate is None:
            gen += ["--duration", str(TRIAL_S)]
        else:
            gen += ["--rate", f"{int(rate)}pps", "--count", str(int(rate * TRIAL_S))]
        x0, b0, k0 = xmit_errors(), cpu_ticks(CAP_CPU), cpu_ticks(GEN_CPU)
        g = run(["ip", "netns", "exec", NS_GEN, "taskset", "-c", str(GEN_CPU)] + gen)
        b1, k1, x1 = cpu_ticks(CAP_CPU), cpu_ticks(GEN_CPU), xmit_errors()
        time.sleep(0.5)  # let the method drain its queues
        cap.send_signal(signal.SIGINT)
        out, err = cap.communicate(timeout=20)
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    st = json.loads(g.stdout.strip().splitlines()[-1])["stats"]
    sent, secs = st["sent"], st["duration_ns"] / 1e9
    got = captured(method, out, err)
    busy = share(b0, b1, 0)
    return {
        "method": method, "frame_size": size, "offered_pps": rate, "sent": sent,
        "seconds": secs, "sent_pps": sent / secs, "captured": got,
        "lost": max(0, sent - got), "veth_ring_full": x1 - x0, "cpu": busy,
        "cpu0_softirq": share(k0, k1, 1),
    }


def search(method, size, trials):
    """Highest loss-free rate: a trial at top speed, then bisection below it."""
    t = trial(method, size, None)
    trials.append(t)
    log(f"  {method} {size}B top speed: sent {t['sent_pps']/1e6:.3f} Mpps, lost {t['lost']}")
    if t["lost"] == 0:
        return t, True  # limited by the generator
    lo, hi, best = 0.0, t["sent_pps"], None
    guess = 0.95 * t["captured"] / t["seconds"]
    for _ in range(MAX_TRIALS):
        if best is not None and (hi - lo) <= RES * hi:
            break
        rate = guess if guess is not None and lo < guess < hi else (lo + hi) / 2
        guess = None
        t = trial(method, size, rate)
        trials.append(t)
        ok = t["lost"] == 0
        log(f"  {method} {size}B {rate/1e6:.3f} Mpps: lost {t['lost']} (veth ring full"
            f" {t['veth_ring_full']}), CPU 1 {100*t['cpu']:.0f} %, CPU 0 softirq"
            f" {100*t['cpu0_softirq']:.0f} % -> {'pass' if ok else 'fail'}")
        if ok:
            lo, best = rate, t
        else:
            hi = rate
            if best is None and lo == 0:
                guess = 0.7 * rate
    return best, False


def worker_scaling():
    """1 vs 2 capture workers: (a) analysis-bound workers (the http analyser plus a fixed cost per
    packet) fed by a trace replayed in-process at top speed, no generator; (b) capture-bound workers
    (no analyser) on the veth at the generator's top speed, fanout steering."""
    trace = f"{OUT}/scaling.pcapng"
    run([LR, "trace", "http", trace, "--connections", "300", "--min-size", "100000", "--seed", "2", "--json"])
    res = {}
    for cost in SCALING_COSTS:
        # The trace at top speed: the dispatcher reads it no faster than the workers take it
        # (backpressure, no drops). One worker: dispatcher and worker pinned to a CPU each; two:
        # three threads share the two CPUs.
        for n in (1, 2):
            reps = []
            for _ in range(REPS):
                src = f"pcap:{trace}"
                p = run([LR, "capture", src, "--workers", str(n), "--analyser", "http",
                         "--cost-ns", str(cost), "--ted", "off", "--json", "--quiet"])
                j = json.loads(p.stdout.strip().splitlines()[-1])
                reps.append(j["totals"]["forwarded"] / j["t"])
                fw = [w["forwarded"] for w in j["workers"]]
                res[(f"busiest-{cost}", n)] = max(fw) / max(1, sum(fw))
            res[(f"analysis-{cost}", n)] = reps
            log(f"  scaling (a) {cost} ns/packet, {n} worker(s): {', '.join(f'{r/1e3:.1f}' for r in reps)} kpps")
    for n in (1, 2):
        reps = []
        for _ in range(REPS):
            cmd = [LR, "capture", "afpacket:d0", "--steer", "fanout", "--workers", str(n), "--json", "--quiet"]
            t = trial(f"fanout-{n}", 64, None, cmd=cmd, cpus="0-1" if n == 2 else str(CAP_CPU))
            reps.append(t["captured"] / t["seconds"])
        res[("capture", n)] = reps
        log(f"  scaling (b) {n} worker(s): {', '.join(f'{r/1e6:.3f}' for r in reps)} Mpps")
    return res


def main():
    os.makedirs(OUT, exist_ok=True)
    bed = [LR, "testbed", "up", "--name", BED, "--gro", "on"]
    if NAPI == "threaded":
        bed += ["--threaded-napi", "--napi-cpu", str(CAP_CPU)]
    run(bed)
    trials, obs = [], []
    try:
        results = {}
        for rep in range(REPS):
            for size in SIZES:
                for m in ONLY:
                    log(f"== {m}, {size}-byte frames, replication {rep + 1}/{REPS}")
                    best, gen_limited = search(m, size, trials)
                    pps = best["sent_pps"] if best else 0.0
                    results.setdefault((m, size), []).append((pps, best, gen_limited))
                    obs.append((m, size, rep + 1, pps / 1e6))
        if os.environ.get("CAP_SCALING", "1") == "1":
            log("== worker scaling")
            scaling = worker_scaling()
        else:
            scaling = None
    finally:
        subprocess.run([LR, "testbed", "down", "--name", BED], capture_output=True)
        json.dump(trials, open(f"{OUT}/trials.json", "w"), indent=1)
    with open(f"{OUT}/obs.csv", "w") as f:
        f.write("method,frame_size,run,capture_mpps\n")
        for m, s, r, v in obs:
            f.write(f"{m},{s},{r},{v:.6f}\n")
    with open(f"{OUT}/experiment.toml", "w") as f:
        f.write('title = "capture method x frame size: highest loss-free capture rate"\n')
        f.write(f'replications = {REPS}\nresponse = "capture_mpps"\n')
        f.write(f'[[factor]]\nname = "method"\nlevels = {json.dumps(ONLY)}\n')
        f.write(f'[[factor]]\nname = "frame_size"\nlevels = {json.dumps(SIZES)}\n')
        f.write('[data]\nfile = "obs.csv"\n')
    report(results, scaling)


def report(results, scaling):
    size0 = SIZES[0]
    print(f"Highest loss-free capture rate, {size0}-byte frames (mean of {REPS} searches; each trial "
          f"{TRIAL_S:g} s, resolution {100*RES:g} %), with the CPU use at that rate: CPU 1 runs the"
          f" method's user-space part only; its kernel receive work runs in softirq on CPU 0 with the"
          f" generator (NAPI mode `{NAPI}`).")
    print()
    print("| method | Mpps (runs) | Gbit/s | CPU 1 busy (user side) | CPU 0 softirq (kernel side) | / tcpdump |")
    print("|---|---:|---:|---:|---:|---:|")
    mean = {k: sum(p for p, _, _ in v) / len(v) for k, v in results.items()}
    base = mean.get(("tcpdump", size0))
    for m in ONLY:
        v = results[(m, size0)]
        runs = ", ".join(f"{p/1e6:.3f}" for p, _, _ in v)
        cpu = [b["cpu"] for _, b, _ in v if b]
        sirq = [b["cpu0_softirq"] for _, b, _ in v if b]
        ng = sum(1 for _, _, g in v if g)
        lim = f" (generator limit in {ng} of {len(v)})" if ng else ""
        ratio = f"{mean[(m, size0)]/base:.1f}x" if base else "-"
        print(f"| {METHODS[m][0]} | **{mean[(m, size0)]/1e6:.3f}**{lim} ({runs}) |"
              f" {mean[(m, size0)]*size0*8/1e9:.2f} | {100*sum(cpu)/max(1,len(cpu)):.0f} % |"
              f" {100*sum(sirq)/max(1,len(sirq)):.0f} % | {ratio} |")
    print()
    if len(SIZES) > 1:
        print("Mpps by frame size (mean of the searches):")
        print()
        print("| method | " + " | ".join(f"{s} B" for s in SIZES) + " |")
        print("|---|" + "---:|" * len(SIZES))
        for m in ONLY:
            print(f"| {m} | " + " | ".join(f"{mean[(m, s)]/1e6:.3f}" for s in SIZES) + " |")
        print()

    if scaling:
        m = {k: sum(v) / len(v) for k, v in scaling.items() if isinstance(v, list)}
        print("Two workers against one (mean of the runs; each worker's own CPU when pinned):")
        print()
        print("| workers bound by | 1 worker | 2 workers | 2 / 1 | bound by the flow split (busiest worker's share) |")
        print("|---|---:|---:|---:|---:|")
        for cost in SCALING_COSTS:
            k = f"analysis-{cost}"
            b = scaling[(f"busiest-{cost}", 2)]
            print(f"| analysis: http analyser + {cost/1000:g} µs/packet, trace replayed in-process at top speed (`pcap:`), dispatcher |"
                  f" {m[(k, 1)]/1e3:.1f} kpps | {m[(k, 2)]/1e3:.1f} kpps |"
                  f" **{m[(k, 2)]/m[(k, 1)]:.2f}x** | {1/b:.2f}x ({100*b:.1f} %) |")
        print(f"| capture: no analyser, veth at the generator's top speed, fanout |"
              f" {m[('capture', 1)]/1e6:.3f} Mpps | {m[('capture', 2)]/1e6:.3f} Mpps |"
              f" **{m[('capture', 2)]/m[('capture', 1)]:.2f}x** | - |")
        print()


if __name__ == "__main__":
    main()
