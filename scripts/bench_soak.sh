#!/usr/bin/env bash
# Soak: does a long run leak? `linerate fwd`, `linerate switch` and
# `linerate capture`, one after the other, each for MINUTES under traffic at
# half its loss-free rate, the resident memory (RSS) of the process sampled
# every 10 s. A benchmark command, not a test.
#
#   scripts/bench_soak.sh [MINUTES]      (default 30 per pipeline)
#
# Per pipeline, on a fresh gen/dut/sink bed, the pipeline on CPU 1 of the DuT
# namespace over afxdp:d0/afxdp:d1 (capture: afxdp:d0, HTTP analyser, files
# not kept):
#  1. its loss-free rate: for fwd and switch the RFC 2544 throughput of
#     `linerate bench --dut linerate-afxdp --dut linerate-switch` (64 B, the
#     same pipelines on the same bed); for capture (not a bench DuT) 5 s
#     trials of the in-kernel generator (`gen g0 --xdp`) against its own
#     count of what it took in without a drop, bisection to 5 %;
#  2. the soak at half that rate, RSS from /proc/PID/status every 10 s;
#  3. growth: RSS at the end against RSS after a 2-minute warm-up, and the
#     slope of a least-squares line through the samples after warm-up.
# Writes the "soak" section of docs/BENCHMARKS.md (scripts/md_section.py).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
. scripts/bench_common.sh bench_soak

cat >"$tmp/flows" <<'EOF'
priority=10,in_port=1,udp,actions=output:2
priority=10,in_port=2,actions=output:1
priority=1,actions=drop
EOF

# The XDP program on d0/d1 (fwd, switch) or a packet socket... is there: the
# pipeline is ready when its control socket answers (switch, capture) or its
# first once-a-second line appeared (fwd).
wait_ready() { # NAME PID
    local i
    for i in $(seq 1 3000); do
        kill -0 "$2" 2>/dev/null || { echo "bench_soak: $1 exited: $(tail -n2 "$tmp/$1.err")" >&2; exit 1; }
        [[ -s "$tmp/$1.out" ]] && return 0
        sleep 0.01
    done
    echo "bench_soak: $1 never became ready" >&2
    exit 1
}

# Start pipeline NAME in the DuT namespace of bed BED (stdout: JSON lines).
start_pipeline() { # NAME BED
    local name=$1 bed=$2
    local out=$tmp/$name.out err=$tmp/$name.err
    # Each started directly with & (not a compound command, which would run
    # in a subshell): $! is then linerate itself (ip netns exec execs it).
    case $name in
        fwd) ip netns exec "$bed-dut" $lr fwd afxdp:d0 afxdp:d1 --cpu 1 --json >"$out" 2>"$err" & ;;
        switch) ip netns exec "$bed-dut" $lr switch --port 1=afxdp:d0 --port 2=afxdp:d1 \
            --flows "$tmp/flows" --cpu 1 --json >"$out" 2>"$err" & ;;
        capture) ip netns exec "$bed-dut" $lr capture afxdp:d0 --analyser http --ctl "$tmp/cap.sock" \
            --json >"$out" 2>"$err" & ;;
    esac
    pid=$!
    bg+=("$pid")
    wait_ready "$name" "$pid"
}

stop_pipeline() { # NAME PID
    kill -INT "$2"
    wait "$2" || { echo "bench_soak: $1 failed: $(tail -n2 "$tmp/$1.err")" >&2; exit 1; }
    bg=("${bg[@]/$2}")
}

captured() { # what the capture has taken in without a drop so far
    python3 -c 'import json,socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"stats\n")
v=json.loads(s.makefile().readline()); t=v["totals"]
print(t["received"] - sum(t["dropped"].values()))' "$tmp/cap.sock"
}

# One capture trial: RATE pps for SECS s from g0; prints "sent taken".
trial() { # NAME BED RATE SECS
    local bed=$2 rate=$3 secs=$4 before sent last=-1 now
    before=$(captured)
    sent=$(ip netns exec "$bed-gen" $lr gen g0 --xdp --rate "$rate" --duration "$secs" --cpu 0 --json --quiet \
        | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["stats"]["sent"])')
    # The capture has taken what it will once its count stops moving.
    now=$(captured)
    while [[ $now != "$last" ]]; do last=$now; sleep 0.2; now=$(captured); done
    echo "$sent $((now - before))"
}

soak_one() { # NAME
    local name=$1 bed=lrsk$$$1
    beds+=("$bed")
    $lr testbed up --name "$bed" --no-ipv6 --json >/dev/null
    start_pipeline "$name" "$bed"
    local ppid=$pid
    # 1. Loss-free rate.
    local lo=10000 hi=4000000 r out s g
    case $name in
        fwd) lo=$(bench_rate linerate-afxdp) ;;
        switch) lo=$(bench_rate linerate-switch) ;;
        *)
            # Bisection between 10 kpps and the generator's top.
            while (( hi - lo > lo / 20 )); do
                r=$(( (lo + hi) / 2 ))
                out=$(trial "$name" "$bed" "$r" 5)
                s=${out% *}; g=${out#* }
                if (( g >= s && s > 0 )); then lo=$r; else hi=$r; fi
                echo "bench_soak: $name: $r pps -> sent $s received $g" >&2
            done
            ;;
    esac
    local rate=$(( lo / 2 ))
    if [[ $name == capture ]]; then
        # A fresh process for the soak: its counts and memory then hold
        # only the soak, not the bisection's overload trials.
        stop_pipeline "$name" "$ppid"
        rm -f "$tmp/cap.sock"
        start_pipeline "$name" "$bed"
        ppid=$pid
    fi
    echo "bench_soak: $name: loss-free ~$lo pps; soaking at $rate pps for $minutes min" >&2
    # 2. The soak.
    ip netns exec "$bed-gen" $lr gen g0 --xdp --rate "$rate" --duration $((minutes * 60)) --cpu 0 --json --quiet \
        >"$tmp/$name.gen" 2>"$tmp/$name.gen.err" &
    local gpid=$!
    bg+=("$gpid")
    local t0=$SECONDS
    : >"$tmp/$name.rss"
    while kill -0 "$gpid" 2>/dev/null; do
        awk -v t=$((SECONDS - t0)) '/^VmRSS/ { print t, $2 }' "/proc/$ppid/status" >>"$tmp/$name.rss"
        sleep 10 # the sampling period, not a wait for readiness
    done
    wait "$gpid" || { echo "bench_soak: the generator failed: $(tail -n1 "$tmp/$name.gen.err")" >&2; exit 1; }
    bg=("${bg[@]/$gpid}")
    kill -0 "$ppid" 2>/dev/null || { echo "bench_soak: $name died during the soak: $(tail -n2 "$tmp/$name.err")" >&2; exit 1; }
    stop_pipeline "$name" "$ppid"
    printf '{"name":"%s","loss_free_pps":%d,"rate_pps":%d,"gen":%s,"final":%s,"rss":[%s]}\n' \
        "$name" "$lo" "$rate" "$(tail -n1 "$tmp/$name.gen")" "$(tail -n1 "$tmp/$name.out")" \
        "$(awk '{ printf "%s[%d,%d]", (NR > 1 ? "," : ""), $1, $2 }' "$tmp/$name.rss")" >>"$tmp/soak.jsonl"
    $lr testbed down --name "$bed" >/dev/null
}

echo "== loss-free rates of fwd and switch (linerate bench)" >&2
$lr bench --dut linerate-afxdp --dut linerate-switch --sizes 64 --repetitions 2 --no-latency \
    --frame-loss-sizes none --b2b-sizes none --no-report --no-history --json "$tmp/bench.json" >&2
bench_rate() { # DUT: its 64-byte throughput, pps
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["name"] == sys.argv[2]:
        print(int(r["sizes"][0]["throughput_pps"]))' "$tmp/bench.json" "$1"
}

for p in fwd switch capture; do
    echo "== $p" >&2
    soak_one "$p"
done
cat "$tmp/soak.jsonl" >&2

python3 - "$tmp/soak.jsonl" "$minutes" <<'EOF' | python3 scripts/md_section.py soak
import json, platform, subprocess, sys, datetime
rows = [json.loads(l) for l in open(sys.argv[1])]
minutes = sys.argv[2]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print("## Soak: memory over a long run\n")
print(f"Measured {datetime.date.today()} on {cpu} ({subprocess.getoutput('nproc')} CPUs), "
      f"kernel {platform.release()}, release build; command: `scripts/bench_soak.sh {minutes}`.\n")
print(f"Each pipeline on a fresh bed (afxdp:d0/d1, CPU 1), {minutes} min of 64-byte frames from the "
      "in-kernel generator at half its loss-free rate (measured first, 5 s trials); the resident "
      "memory (VmRSS) of the process every 10 s. Growth: the last sample against the one after a "
      "2-minute warm-up; slope: least squares over the samples after warm-up.\n")
print("| pipeline | loss-free | soak rate | sent | taken in | RSS after warm-up | RSS max | RSS at the end | growth | slope |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    s = r["rss"]
    warm = [v for t, v in s if t >= 120] or [v for _, v in s]
    post = [(t, v) for t, v in s if t >= 120] or s
    n = len(post)
    mt = sum(t for t, _ in post) / n
    mv = sum(v for _, v in post) / n
    den = sum((t - mt) ** 2 for t, _ in post) or 1
    slope = sum((t - mt) * (v - mv) for t, v in post) / den * 60  # KiB per minute
    sent = r["gen"].get("stats", {}).get("sent", 0)
    f = r["final"]
    got = f["totals"]["received"] if "totals" in f else f.get("received", sum(d["received"] for d in f.get("directions", [])))
    lost = f"{(sent - got) / sent * 100:.2f} % short" if sent else "-"
    print(f"| {r['name']} | {r['loss_free_pps'] / 1e6:.3f} Mpps | {r['rate_pps'] / 1e6:.3f} Mpps | {sent} | {got} ({lost}) | "
          f"{warm[0] / 1024:.1f} MiB | {max(v for _, v in s) / 1024:.1f} MiB | {s[-1][1] / 1024:.1f} MiB | "
          f"{(s[-1][1] - warm[0]):+d} KiB | {slope:+.2f} KiB/min |")
print()
for r in rows:
    f = r["final"]
    if "totals" in f:
        t = f["totals"]
        bal = t["received"] == t["forwarded"] + sum(t["dropped"].values())
        drops = {k: v for k, v in t["dropped"].items() if v}
    else:
        bal = f.get("balanced", all(d.get("balanced") for d in f.get("directions", [])))
        drops = f.get("drops") or {d["direction"]: d["drops"] for d in f.get("directions", []) if d["drops"]}
    late = r["gen"].get("stats", {}).get("late_max_ns", 0) / 1e6
    k = f.get("kernel")
    if isinstance(k, list):  # fwd: per socket side
        full = sum(dict(s["counters"]).get("rx_ring_full", 0) for s in k if s["side"].endswith("rx"))
    elif isinstance(k, dict):
        full = k.get("rx_ring_full", 0)
    else:
        full = None
    kern = "" if full is None else f"; the kernel's AF_XDP rx_ring_full: {full}"
    print(f"- {r['name']}: received = passed + drops: {bal}; drops by reason: {drops or 'none'}{kern}; "
          f"the generator's longest stall {late:.0f} ms.")
print("\nFrames short of what was sent were dropped before the pipeline (the AF_XDP RX ring full): when "
      "the in-kernel generator falls behind its schedule (its longest stall above) it sends the frames it "
      "owes in one catch-up burst (crates/io/src/xdp/generator.rs, Pacing::InProgram) that the 2048-frame ring "
      "cannot hold.")
EOF
