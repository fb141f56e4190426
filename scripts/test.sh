#!/usr/bin/env bash
# Run every test of linerate on this machine (as root): set-up, formatting,
# lints, unit and integration tests (namespaces, veth, XDP), and the fuzz
# targets for a bounded time. Exit status 0 only if everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

echo "== fmt"
cargo fmt --all -- --check
echo "== clippy"
cargo clippy --locked --workspace --all-targets -q -- -D warnings
before=$(ip netns list | awk '{print $1}' | sort)
echo "== tests"
# Namespace tests use unique names and clean up after themselves; two
# threads keep the 2-core machine responsive.
cargo test --locked --workspace --release -- --test-threads=2
echo "== fuzz (bounded)"
scripts/fuzz.sh "${FUZZ_SECONDS:-150}"   # seconds for the whole step, build included (each target gets at least 5 s)
echo "== leftovers"
# Only namespaces that appeared during this run count (other work on a
# developer machine may have beds of its own).
after=$(ip netns list | awk '{print $1}' | sort)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep -E '^lr' || true)
if [ -n "$left" ]; then echo "tests left namespaces behind: $left" >&2; exit 1; fi
echo "all tests passed"
