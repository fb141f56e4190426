# Sourced by the bench scripts that build their own beds (bench_afpacket.sh,
# bench_soak.sh): after `set -euo pipefail` and `cd` to the repository,
#   . scripts/bench_common.sh NAME
# sets `lr` (the release binary, absolute path; fails naming what is
# missing), `tmp` (a private directory), and the arrays `beds` (test beds by
# name) and `bg` (background pids) that the EXIT trap stops, takes down and
# removes, also on an error or SIGINT/SIGTERM.
bench_name=$1
lr=$(pwd)/target/release/linerate
[[ -x $lr ]] || { echo "$bench_name: $lr missing: cargo build --release -p linerate" >&2; exit 1; }
for c in ip python3; do
    command -v "$c" >/dev/null || { echo "$bench_name: command '$c' not found" >&2; exit 1; }
done
tmp=$(mktemp -d "/tmp/linerate-$bench_name.XXXXXX")
beds=()
bg=()
cleanup() {
    local p b
    for p in "${bg[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${bg[@]}"; do wait "$p" 2>/dev/null || true; done
    for b in "${beds[@]}"; do $lr testbed down --name "$b" >/dev/null 2>&1 || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
