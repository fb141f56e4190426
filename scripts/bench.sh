#!/usr/bin/env bash
# The main job: set up this machine (idempotent), then run `linerate bench`
# on its built-in default test bed and print the results. Extra arguments go
# to `linerate bench` (see `linerate bench --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec target/release/linerate bench "$@"
