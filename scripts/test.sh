#!/usr/bin/env bash
# Run every test of linerate on this machine (as root): set-up, formatting,
# lints, unit and integration tests (namespaces, veth, XDP), and the fuzz
# targets for a bounded time. Exit status 0 only if everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Packages and cargo-fuzz; no release build (the tests build their own
# profile, `ci`: Cargo.toml).
scripts/setup.sh --no-build
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

echo "== fmt"
cargo fmt --all -- --check
echo "== clippy"
cargo clippy --locked --workspace --all-targets -q -- -D warnings
before=$(ip netns list | awk '{print $1}' | sort)
echo "== tests"
# Namespace tests use unique names and clean up after themselves; two
# threads keep the 2-core machine responsive.
cargo test --locked --workspace --profile ci -- --test-threads=2
echo "== fuzz (bounded)"
# Seconds for the whole step, build included; each target at least 2 s
# here (a smoke run from its seed corpus: CI time), longer runs with
# scripts/fuzz.sh alone.
FUZZ_MIN_PER="${FUZZ_MIN_PER:-2}" scripts/fuzz.sh "${FUZZ_SECONDS:-150}"
echo "== leftovers"
# Only namespaces that appeared during this run count (other work on a
# developer machine may have beds of its own).
after=$(ip netns list | awk '{print $1}' | sort)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep -E '^lr' || true)
if [ -n "$left" ]; then echo "tests left namespaces behind: $left" >&2; exit 1; fi
echo "all tests passed"
