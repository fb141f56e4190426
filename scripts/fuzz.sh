#!/usr/bin/env bash
# Fuzz every cargo-fuzz target in fuzz/ (wire formats, pcap/pcapng files,
# port URIs, switch rules/groups/meters/keys, HTTP, generator profiles,
# experiment files, bench history lines, watchdog registrations, capture
# filters) for a bounded time, with AddressSanitizer, debug assertions and
# overflow checks.
#   scripts/fuzz.sh [SECONDS]          (or FUZZ_SECONDS=...; default 300)
# SECONDS bounds the whole step, build included: what the build leaves is
# shared equally by the targets (at least FUZZ_MIN_PER=5 s each), run
# FUZZ_JOBS at a time (default: the number of CPUs). The targets are
# `cargo fuzz list` (fuzz/Cargo.toml); each starts from its committed seed
# corpus fuzz/corpus/TARGET, copied to fuzz/target/corpus/TARGET so the
# committed one does not change.
# Needs the nightly toolchain and cargo-fuzz (scripts/setup.sh installs it).
# Exit status: 0 every target built and ran without a crash; 1 a target
# crashed (named; its input is under fuzz/artifacts/TARGET/); 2 bad usage,
# no toolchain, a target without a seed corpus, or the build failed.
set -euo pipefail
cd "$(dirname "$0")/.."

BUDGET="${1:-${FUZZ_SECONDS:-300}}"
MIN_PER="${FUZZ_MIN_PER:-5}"
JOBS="${FUZZ_JOBS:-$(nproc)}"
for v in BUDGET MIN_PER JOBS; do
    if ! [[ "${!v}" =~ ^[0-9]+$ ]] || [ "${!v}" -lt 1 ]; then
        echo "fuzz.sh: $v must be a positive integer, got '${!v}'" >&2
        exit 2
    fi
done
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: the nightly Rust toolchain is needed for cargo-fuzz: rustup toolchain install nightly" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is not installed: run scripts/setup.sh" >&2
    exit 2
fi
t0=$(date +%s)

mapfile -t TARGETS < <(cargo +nightly fuzz list --fuzz-dir fuzz)
if [ "${#TARGETS[@]}" -eq 0 ]; then
    echo "fuzz.sh: no fuzz targets in fuzz/Cargo.toml" >&2
    exit 2
fi
# Every target file is a target, and every target has a seed corpus.
bad=0
for f in fuzz/fuzz_targets/*.rs; do
    t=$(basename "$f" .rs)
    if ! printf '%s\n' "${TARGETS[@]}" | grep -qx "$t"; then
        echo "fuzz.sh: $f has no [[bin]] in fuzz/Cargo.toml" >&2
        bad=1
    fi
done
for t in "${TARGETS[@]}"; do
    if [ -z "$(ls -A "fuzz/corpus/$t" 2>/dev/null)" ]; then
        echo "fuzz.sh: target '$t' has no seed corpus fuzz/corpus/$t/ (add a few inputs, see fuzz/examples/seeds.rs)" >&2
        bad=1
    fi
done
[ "$bad" -eq 0 ] || exit 2

# Build: AddressSanitizer (the default), optimised, with debug assertions
# and overflow checks in every crate (-O -a).
FLAGS=(-O -a -s address --fuzz-dir fuzz)
echo "fuzz.sh: building ${#TARGETS[@]} targets (cargo +nightly fuzz build ${FLAGS[*]})"
mkdir -p fuzz/target
if ! cargo +nightly fuzz build "${FLAGS[@]}" >fuzz/target/fuzz-build.log 2>&1; then
    grep -m6 -A7 '^error' fuzz/target/fuzz-build.log >&2 || tail -n 40 fuzz/target/fuzz-build.log >&2
    failed=()
    for t in "${TARGETS[@]}"; do
        cargo +nightly fuzz build "${FLAGS[@]}" "$t" >/dev/null 2>&1 || failed+=("$t")
    done
    echo "fuzz.sh: BUILD FAILED for: ${failed[*]:-(all; see fuzz/target/fuzz-build.log)}" >&2
    exit 2
fi
HOST=$(rustc +nightly -vV | sed -n 's/^host: //p')
BIN="fuzz/target/$HOST/release"
t1=$(date +%s)
build_s=$(( t1 - t0 ))

n=${#TARGETS[@]}
left=$(( BUDGET - build_s ))
# A target also spends about 2 s starting, reading its corpus and ending
# (the leak check).
PER=$(( (left * JOBS) / n - 2 ))
[ "$PER" -ge "$MIN_PER" ] || PER=$MIN_PER
echo "fuzz.sh: built in ${build_s} s; ${n} targets x ${PER} s, ${JOBS} at a time"

# One target: fuzz for $PER s from a scratch copy of its seed corpus.
run_one() {
    local t=$1
    local dir="fuzz/target/corpus/$t" log="fuzz/target/fuzz-$t.log"
    rm -rf "$dir"
    mkdir -p "$dir" "fuzz/artifacts/$t"
    cp -r "fuzz/corpus/$t/." "$dir/"
    local rc=0
    "$BIN/$t" -max_total_time="$PER" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" "$dir" >"$log" 2>&1 || rc=$?
    echo "$rc" >"fuzz/target/fuzz-$t.rc"
}

running=0
for t in "${TARGETS[@]}"; do
    run_one "$t" &
    running=$(( running + 1 ))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$(( running - 1 ))
    fi
done
wait

failed=()
total=0
for t in "${TARGETS[@]}"; do
    log="fuzz/target/fuzz-$t.log"
    rc=$(cat "fuzz/target/fuzz-$t.rc" 2>/dev/null || echo 99)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    inputs=$(ls "fuzz/target/corpus/$t" | wc -l)
    total=$(( total + ${execs:-0} ))
    if [ "$rc" = 0 ]; then
        printf 'fuzz.sh: %-15s %4d s %11s executions %5d corpus inputs  ok\n' "$t" "$PER" "${execs:-?}" "$inputs"
    else
        printf 'fuzz.sh: %-15s %4d s %11s executions %5d corpus inputs  CRASH (exit %s)\n' "$t" "$PER" "${execs:-?}" "$inputs" "$rc"
        failed+=("$t")
    fi
done
t2=$(date +%s)
for t in "${failed[@]}"; do
    echo "== $t (full log: fuzz/target/fuzz-$t.log)" >&2
    # The panic message or the sanitizer's report, and what libFuzzer saved.
    grep -A3 -m1 "panicked at" "fuzz/target/fuzz-$t.log" >&2 ||
        grep -A12 -m1 "ERROR: " "fuzz/target/fuzz-$t.log" >&2 || true
    grep "^SUMMARY\|Test unit written" "fuzz/target/fuzz-$t.log" >&2 || true
    a=$(ls -t "fuzz/artifacts/$t" 2>/dev/null | head -n 1)
    [ -n "$a" ] && echo "fuzz.sh: reproduce: cargo +nightly fuzz run ${FLAGS[*]} $t fuzz/artifacts/$t/$a" >&2
done
echo "fuzz.sh: ${n} targets, ${total} executions, build ${build_s} s + fuzzing $(( t2 - t1 )) s = $(( t2 - t0 )) s"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: CRASH in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: no crash"
