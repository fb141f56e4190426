#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian 12 machine for linerate (run as root):
# the Debian packages linerate builds with and measures against, cargo-fuzz
# (needs the nightly toolchain), then a release build (not with --no-build:
# scripts/test.sh builds its own profile). Safe to run again: installs only
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() { [ "$(id -u)" = 0 ] || { echo "setup: run as root (packet I/O, namespaces and XDP need it)" >&2; exit 1; }; }
need_root
BUILD=1
case "${1:-}" in
  "") ;;
  --no-build) BUILD=0 ;;
  *) echo "setup: unknown option '$1' (usage: scripts/setup.sh [--no-build])" >&2; exit 2 ;;
esac

# Build: clang for the XDP programs, libbpf-dev for their headers, libpcap-dev for filters.
# Test and measure: iproute2, ethtool, nftables, tshark, tcpdump, bpftool, prometheus (promtool),
# iputils-ping and python3-venv (os-ken, the OpenFlow controller of the controller tests).
# Peers for side-by-side benchmarks: netsniff-ng (trafgen), dpdk (testpmd), openvswitch-switch.
# A DuT in a guest (--dut vm:NAME): qemu-system-x86 and busybox-static, from which (and the guest
# kernel below) the bench builds the guest's initramfs itself (cpio: its test).
PKGS=(clang llvm libbpf-dev libpcap-dev linux-libc-dev pkg-config iproute2 ethtool nftables
      tshark tcpdump bpftool netsniff-ng dpdk dpdk-dev librte-net-af-xdp23 librte-net-null23
      librte-net-ring23 openvswitch-switch python3 python3-numpy python3-scipy chromium prometheus
      iputils-ping python3-venv qemu-system-x86 busybox-static cpio kmod)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The guest kernel of --dut vm:NAME: Debian's cloud kernel (virtio, AF_XDP and BPF JIT), unpacked
# into /opt/linerate/guest, not installed: in /boot it could become this machine's default boot
# entry.
GUEST=/opt/linerate/guest
if ! ls "$GUEST"/boot/vmlinuz-* >/dev/null 2>&1; then
  kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
  if [ -z "$kpkg" ]; then
    apt-get update -qq
    kpkg=$(apt-cache depends linux-image-cloud-amd64 | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
  fi
  [ -n "$kpkg" ] || { echo "setup: no Debian package of the guest kernel (linux-image-cloud-amd64)" >&2; exit 1; }
  echo "setup: unpacking $kpkg into $GUEST"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq "$kpkg" 2>/dev/null)
  rm -rf "$GUEST.part"
  mkdir -p "$GUEST.part"
  dpkg-deb -x "$tmp"/*.deb "$GUEST.part"
  # modules.dep is made by the package's postinst, which does not run here.
  krel=$(basename "$(ls "$GUEST.part"/boot/vmlinuz-* | head -n 1)")
  depmod -b "$GUEST.part" "${krel#vmlinuz-}"
  rm -rf "$tmp" "$GUEST"
  mv "$GUEST.part" "$GUEST"
fi

# Open vSwitch's Debian package starts a system instance; linerate runs its own
# private instances for benchmarks and wants the system one out of the way.
if systemctl is-active --quiet openvswitch-switch 2>/dev/null; then
  systemctl stop openvswitch-switch >/dev/null 2>&1 || true
fi
# Prometheus' package (promtool and the server, for the metrics tests) starts
# a server listening on :9090 to everyone, unauthenticated: the tests run
# private ones, and nothing of linerate's set-up should listen by default.
if systemctl is-enabled --quiet prometheus 2>/dev/null || systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

# os-ken (PyPI), the controller the controller tests run, in a virtual
# environment of its own (Debian has no package of it).
OSKEN=/opt/linerate/os-ken
OSKEN_VERSION=4.2.2
if ! "$OSKEN/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('os-ken') != '$OSKEN_VERSION')" >/dev/null 2>&1; then
  echo "setup: installing os-ken $OSKEN_VERSION in $OSKEN"
  python3 -m venv "$OSKEN"
  "$OSKEN/bin/pip" install -q "os-ken==$OSKEN_VERSION"
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found (install Rust >= 1.95 with rustup)" >&2; exit 1; }

# Fuzzing (scripts/fuzz.sh): cargo-fuzz on the nightly toolchain.
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "setup: the nightly Rust toolchain is needed for cargo-fuzz: rustup toolchain install nightly" >&2
  exit 1
fi
CARGO_FUZZ_VERSION=0.13.2
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo +nightly install -q --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

if [ "$BUILD" = 1 ]; then
  cargo build --release --locked -q -p linerate
  echo "setup: ready: $(pwd)/target/release/linerate"
else
  echo "setup: ready (no build)"
fi
