#!/usr/bin/env bash
# Benchmarks of `linerate gen` (run as root, machine otherwise idle; about 2.5 minutes):
#  1. rate accuracy: requested vs achieved rate through afpacket:g0 (software pacer) and
#     through --xdp (BPF_PROG_RUN live frames, paced inside the XDP program), 64-byte frames;
#  2. maximum single-core 64-byte rate on a veth pair, side by side: gen --xdp, trafgen,
#     gen through afpacket:g0?ring=mmsg, afpacket:g0 (TPACKET_V3) and afxdp:g0;
#  3. latency at 10 kpps with --signature through an idle path (Linux bridge) and through
#     `linerate fwd afpacket:d0 afpacket:d1`, timestamped by `linerate count afpacket:s0`.
#
# Raw outputs (JSON) land in OUT (default target/bench/gen); then
# scripts/bench_report_gen.py writes OUT/summary.json and prints the markdown on stdout.
# Progress goes to stderr. Test beds (`linerate testbed`) are removed on exit, also on error.
#
# usage: scripts/bench_gen.sh [OUT]   (env: BENCH_GEN_SECONDS, default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "bench_gen: run as root (namespaces, XDP, packet sockets)" >&2; exit 1; }
out=${1:-target/bench/gen}
secs=${BENCH_GEN_SECONDS:-5}
lr=target/release/linerate
[[ -x $lr ]] || { echo "bench_gen: $lr missing: cargo build --release -p linerate" >&2; exit 1; }
for c in clang ip trafgen python3; do
    command -v "$c" >/dev/null || { echo "bench_gen: command '$c' not found (scripts/setup.sh installs it)" >&2; exit 1; }
done
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.txt "$out"/*.md

bed_a=lrgb$$a   # gen -> d0 (XDP drop) for rates and maxima
bed_b=lrgb$$b   # gen -> Linux bridge -> sink for the idle-path latency
bed_c=lrgb$$c   # gen -> linerate fwd -> sink for the latency through linerate
tmp=$(mktemp -d /tmp/linerate-bench-gen.XXXXXX)
bg=()
cleanup() {
    local p
    for p in "${bg[@]}"; do
        kill -INT "$p" 2>/dev/null || true
    done
    for p in "${bg[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    $lr testbed down --name "$bed_a" >/dev/null 2>&1 || true
    $lr testbed down --name "$bed_b" >/dev/null 2>&1 || true
    $lr testbed down --name "$bed_c" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The receiver of sections 1 and 2: the veth peer d0 of g0 with an XDP program that drops
# every frame. It keeps veth NAPI running (needed for frames sent by XDP) and makes the
# receiver cost the same, and small, for every sender. The count is the kernel's rx_packets
# of d0, which for veth includes frames handled by XDP (exact, no sampling).
cat >"$tmp/xdp_drop.c" <<'EOF'
#include <linux/bpf.h>
__attribute__((section("xdp"), used)) int xdp_drop(struct xdp_md *ctx) { return XDP_DROP; }
char _license[] __attribute__((section("license"), used)) = "GPL";
EOF
clang -O2 -target bpf -I/usr/include/x86_64-linux-gnu -c "$tmp/xdp_drop.c" -o "$tmp/xdp_drop.o"

echo "== test beds" >&2
$lr testbed up --name "$bed_a" --gro on --no-ipv6 --json >"$out/bed_a.json"
# (not --no-ipv6: with --dut bridge the bed then fails adding its IPv6 route)
$lr testbed up --name "$bed_b" --gro on --dut bridge --json >"$out/bed_b.json"
gns=$bed_a-gen dns=$bed_a-dut
ip -n "$dns" link set dev d0 xdpdrv obj "$tmp/xdp_drop.o" sec xdp
d0mac=$(ip netns exec "$dns" cat /sys/class/net/d0/address)
rxd0() { ip netns exec "$dns" cat /sys/class/net/d0/statistics/rx_packets; }

# gen NAME ARGS...: run `linerate gen ARGS --json --quiet` in the gen namespace on CPU 0,
# write {"name", "rx_packets" (d0 delta over the whole run), "gen": final JSON} to OUT/NAME.json.
gen_run() {
    local name=$1; shift
    local a b
    a=$(rxd0)
    ip netns exec "$gns" $lr gen "$@" --cpu 0 --json --quiet >"$tmp/g.out"
    sleep 0.2   # frames in flight (veth ring) reach d0
    b=$(rxd0)
    printf '{"name":"%s","args":"%s","rx_packets":%d,"gen":%s}\n' "$name" "$*" $((b - a)) \
        "$(tail -n1 "$tmp/g.out")" >"$out/$name.json"
}

echo "== 1. rate accuracy, afpacket:g0 (${secs}s each)" >&2
for r in 10k 50k 100k 200k 500k 1M max; do
    if [[ $r == max ]]; then rate=(); else rate=(--rate "${r}pps"); fi
    gen_run "acc_afpacket_$r" afpacket:g0 --size 60 --dst-mac "$d0mac" "${rate[@]}" --duration "$secs"
done
echo "== 1. rate accuracy, --xdp (${secs}s each)" >&2
for r in 10k 100k 1M 2M; do
    gen_run "acc_xdp_$r" g0 --xdp --size 60 --dst-mac "$d0mac" --rate "${r}pps" --duration "$secs"
done

# 2. Maximum rate: each sender runs for warm-up + window + 1 s in the background; d0 is
# read over a window of $secs seconds after 1 s of warm-up.
max_run() { # NAME CMD...
    local name=$1; shift
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    local pid=$!
    bg+=("$pid")
    sleep 1
    local a b t0 t1
    a=$(rxd0); t0=$(date +%s.%N)
    sleep "$secs"
    b=$(rxd0); t1=$(date +%s.%N)
    if ! wait "$pid"; then
        echo "bench_gen: $name failed: $(tail -n1 "$tmp/$name.err")" >&2
        printf '{"name":"%s","failed":"%s"}\n' "$name" "$(tail -n1 "$tmp/$name.err" | tr -d '"\\')" >"$out/$name.json"
    else
        printf '{"name":"%s","rx_packets":%d,"window_s":%s,"cmd":"%s"}\n' "$name" $((b - a)) \
            "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')" "$*" >"$out/$name.json"
    fi
    bg=("${bg[@]/$pid}")
    cp "$tmp/$name.out" "$out/$name.out.txt"
}
run_for=$((secs + 2))
echo "== 2. maximum single-core rate on the veth g0 -> d0 (${secs}s window each)" >&2
max_run max_xdp ip netns exec "$gns" $lr gen g0 --xdp --size 60 --dst-mac "$d0mac" --duration "$run_for" --cpu 0 --json --quiet
max_run max_trafgen scripts/peers/gen-trafgen.sh "$gns" g0 "$d0mac" 10.95.1.2 "$run_for" 0
max_run max_afpacket_mmsg ip netns exec "$gns" $lr gen 'afpacket:g0?ring=mmsg' --size 60 --dst-mac "$d0mac" --duration "$run_for" --cpu 0 --json --quiet
max_run max_afpacket_v3 ip netns exec "$gns" $lr gen afpacket:g0 --size 60 --dst-mac "$d0mac" --duration "$run_for" --cpu 0 --json --quiet
max_run max_afxdp ip netns exec "$gns" $lr gen afxdp:g0 --size 60 --dst-mac "$d0mac" --duration "$run_for" --cpu 0 --json --quiet

# 3. Latency: 10 kpps with signatures, counted (kernel RX timestamps) at s0.
lat_run() { # NAME GEN_NS SINK_NS DST_MAC
    local name=$1 ns_g=$2 ns_s=$3 dmac=$4
    ip netns exec "$ns_s" $lr count afpacket:s0 --idle 1 --duration $((secs + 5)) --json --quiet >"$tmp/c.out" 2>"$tmp/c.err" &
    local cpid=$!
    bg+=("$cpid")
    sleep 0.5
    ip netns exec "$ns_g" $lr gen afpacket:g0 --rate 10kpps --signature --dst-mac "$dmac" --duration "$secs" --cpu 0 --json --quiet >"$tmp/g.out"
    wait "$cpid" || { echo "bench_gen: count for $name failed: $(tail -n1 "$tmp/c.err")" >&2; return 1; }
    bg=("${bg[@]/$cpid}")
    printf '{"name":"%s","gen":%s,"count":%s}\n' "$name" "$(tail -n1 "$tmp/g.out")" "$(tail -n1 "$tmp/c.out")" >"$out/$name.json"
}
echo "== 3. latency at 10 kpps (${secs}s each)" >&2
lat_run lat_bridge "$bed_b-gen" "$bed_b-sink" "$(ip netns exec "$bed_b-sink" cat /sys/class/net/s0/address)"
$lr testbed up --name "$bed_c" --gro on --no-ipv6 --json >"$out/bed_c.json"
ip netns exec "$bed_c-dut" $lr fwd afpacket:d0 afpacket:d1 --cpu 1 --json --quiet >"$tmp/fwd.out" 2>"$tmp/fwd.err" &
fpid=$!
bg+=("$fpid")
sleep 0.5
lat_run lat_fwd "$bed_c-gen" "$bed_c-sink" "$(ip netns exec "$bed_c-sink" cat /sys/class/net/s0/address)"
kill -INT "$fpid"
wait "$fpid" || { echo "bench_gen: linerate fwd failed: $(tail -n1 "$tmp/fwd.err")" >&2; exit 1; }
bg=("${bg[@]/$fpid}")
tail -n1 "$tmp/fwd.out" >"$out/lat_fwd_dut.json"

echo "== 4. pacing smoothness (crates/io/tests/kprog.rs: gen_pacing_smoothness_report)" >&2
if ! cargo test -q --release -p linerate-io --test kprog -- --ignored --nocapture --exact \
    gen_pacing_smoothness_report >/dev/null 2>"$out/smoothness.txt"; then
    echo "bench_gen: the smoothness report failed: $(tail -n1 "$out/smoothness.txt")" >&2
    : >"$out/smoothness.txt"
fi

cmd="scripts/bench_gen.sh (BENCH_GEN_SECONDS=$secs)"
python3 scripts/bench_report_gen.py "$out" "$cmd"
