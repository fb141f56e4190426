#!/usr/bin/env bash
# Fuzz every parser (wire formats, pcap files, port URIs, switch rules) for about SECONDS in total (default 60).
#   scripts/fuzz.sh [SECONDS]
# Uses cargo-fuzz (libFuzzer) when it is installed: with `cargo +nightly`, or
# else on stable with RUSTC_BOOTSTRAP=1 (works with `-s none`, the default). Otherwise (or with
# FUZZ_ENGINE=stable) runs the stable fuzzer example, which needs neither.
# Exits non-zero and names the target if a crash is found.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_TOTAL="${1:-60}"
if ! [[ "$SECONDS_TOTAL" =~ ^[0-9]+$ ]] || [ "$SECONDS_TOTAL" -lt 1 ]; then
    echo "fuzz.sh: SECONDS must be a positive integer, got '$SECONDS_TOTAL'" >&2
    exit 2
fi
TARGETS=(ethernet vlan arp ipv4 ipv6 udp tcp icmp frame flowkey pcap uri switch_rule switch_key http)
PER=$(( SECONDS_TOTAL / ${#TARGETS[@]} ))
[ "$PER" -ge 1 ] || PER=1
ENGINE="${FUZZ_ENGINE:-auto}"
# The crate is #![forbid(unsafe_code)], so AddressSanitizer adds little and
# costs ~50x in speed: no sanitizer by default (FUZZ_SANITIZER=address to change).
SAN="${FUZZ_SANITIZER:-none}"

run_stable() {
    echo "fuzz.sh: stable fuzzer over the wire targets, ${SECONDS_TOTAL} s (pcap, uri, switch_rule, switch_key and http: cargo-fuzz only; their mutation tests run with cargo test)"
    cargo run --quiet --release -p linerate-wire --example fuzz_stable -- "$SECONDS_TOTAL"
}

# Run every cargo-fuzz target; $@ = how to call cargo fuzz (prefix args).
run_cargo_fuzz() {
    local failed=()
    (cd fuzz && "$@" build -O -s "$SAN") || return 3   # build failure: caller falls back
    for t in "${TARGETS[@]}"; do
        echo "fuzz.sh: cargo fuzz $t for ${PER} s"
        if ! (cd fuzz && "$@" run -O -s "$SAN" "$t" -- -max_total_time="$PER" -print_final_stats=0 >"target/fuzz-$t.log" 2>&1); then
            echo "fuzz.sh: CRASH in target '$t' (log: fuzz/target/fuzz-$t.log, artifacts: fuzz/artifacts/$t/)" >&2
            tail -n 30 "fuzz/target/fuzz-$t.log" >&2 || true
            failed+=("$t")
        fi
    done
    if [ "${#failed[@]}" -gt 0 ]; then
        echo "fuzz.sh: crashes in: ${failed[*]}" >&2
        return 1
    fi
    echo "fuzz.sh: all ${#TARGETS[@]} targets ran ${PER} s each, no crash"
}

have_cargo_fuzz() { cargo fuzz --version >/dev/null 2>&1; }

if [ "$ENGINE" = "stable" ] || ! have_cargo_fuzz; then
    [ "$ENGINE" = "stable" ] || echo "fuzz.sh: cargo-fuzz not installed (cargo install cargo-fuzz); using the stable fuzzer"
    run_stable
    exit $?
fi
mkdir -p fuzz/target
rc=0
if cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz on nightly, ${PER} s per target"
    run_cargo_fuzz cargo +nightly fuzz || rc=$?
else
    echo "fuzz.sh: no nightly toolchain; cargo-fuzz on stable with RUSTC_BOOTSTRAP=1, ${PER} s per target"
    export RUSTC_BOOTSTRAP=1
    run_cargo_fuzz cargo fuzz || rc=$?
fi
if [ "$rc" -eq 3 ]; then
    echo "fuzz.sh: cargo-fuzz build failed; using the stable fuzzer"
    run_stable
    exit $?
fi
exit "$rc"
