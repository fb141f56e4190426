#!/usr/bin/env bash
# Capture-method comparison (seed 003 Table 2, seed 001 Fig. 3, issue 6) for docs/BENCHMARKS.md,
# markdown on stdout (progress on stderr):
#  - a veth test bed (`linerate testbed up`, GRO on so the veth has NAPI): `linerate gen g0 --xdp`
#    on CPU 0 sends into d0; the method's user-space part runs on CPU 1; d0's kernel receive work
#    runs in softirq on CPU 0 right after each burst the generator hands over (CAP_NAPI=threaded
#    moves it into a NAPI kthread on CPU 1 instead; see bench_capture.py);
#  - per method and frame size: the highest loss-free capture rate (a trial at the generator's top
#    speed, then bisection; zero loss = every frame sent was counted by the method), CPU 1's busy
#    share and CPU 0's softirq share at that rate;
#  - worker scaling: 1 vs 2 workers, analysis-bound (trace replayed in-process) and capture-bound
#    (veth at top speed);
#  - methods: plain AF_PACKET recv (ring=mmsg), TPACKET_V3 ring, AF_XDP, in-kernel XDP counting,
#    tcpdump (libpcap);
#  - then the method x frame size full factorial (replicated) through `linerate experiment --data`.
# Run as root on an otherwise idle machine. The bed is removed at the end, also on failure.
# Env: CAP_SIZES (64,1024), CAP_REPS (2), CAP_TRIAL (2 s), CAP_RESOLUTION (0.03),
#      CAP_METHODS (afpacket-recv,tpacket-v3,afxdp,xdp-count,tcpdump), CAP_NAPI (softirq),
#      CAP_SCALING (1), OUT (target/bench/capture).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench_capture: run as root (namespaces, XDP)" >&2; exit 1; }
scripts/setup.sh >/dev/null
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p linerate
export LR=${CARGO_TARGET_DIR:-$PWD/target}/release/linerate
export OUT=${OUT:-$PWD/target/bench/capture}
mkdir -p "$OUT"
echo "Date $(date -u +%FT%TZ), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), kernel $(uname -r), $(tcpdump --version 2>&1 | head -1)."
echo "Command: \`scripts/bench_capture.sh\` (CAP_SIZES=${CAP_SIZES:-64,1024} CAP_REPS=${CAP_REPS:-2} CAP_TRIAL=${CAP_TRIAL:-2})."
echo
python3 scripts/bench_capture.py
[ "$(wc -l <"$OUT/obs.csv")" -gt 1 ] || exit 0
echo "Allocation of variation (\`linerate experiment $OUT/experiment.toml\`, observations in obs.csv):"
echo
echo '```'
"$LR" experiment "$OUT/experiment.toml"
echo '```'
