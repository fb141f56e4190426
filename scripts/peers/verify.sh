#!/usr/bin/env bash
# Check that a DuT forwards: send N (default 1000) 60-byte UDP frames from GEN_NS/G_IF with trafgen
# (paced, 10 us gap) and count them at SINK_NS/S_IF (rx_packets delta).
#
# usage: verify.sh GEN_NS G_IF SINK_NS S_IF DST_MAC DST_IP [N]
# exit 0 when at least N frames arrived, 1 otherwise; prints one line "verify: K/N frames ...".
set -euo pipefail
PEER_NAME=verify
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

[[ $# -ge 6 && $# -le 7 ]] || { echo "usage: $0 GEN_NS G_IF SINK_NS S_IF DST_MAC DST_IP [N]" >&2; exit 2; }
gns=$1 gif=$2 sns=$3 sif=$4 dmac=$5 dip=$6 n=${7:-1000}
need_root
need_cmd trafgen
[[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || die "N must be a positive integer, got '$n'"
need_ns "$gns"; need_ns "$sns"
need_iface "$gns" "$gif"; need_iface "$sns" "$sif"

tmp=$(mktemp /tmp/linerate-verify.XXXXXX)
trap 'rm -f "$tmp"' EXIT
trafgen_cfg "$(iface_mac "$gns" "$gif")" "$dmac" "$(iface_ip4 "$gns" "$gif" 10.77.1.1)" "$dip" >"$tmp"

before=$(rx_packets "$sns" "$sif")
ip netns exec "$gns" trafgen -Q -o "$gif" -i "$tmp" -n "$n" -P 1 -t 10us >/dev/null 2>&1 \
    || die "trafgen failed"
# Let the forwarder drain its queues.
got=0
for _ in $(seq 1 20); do
    sleep 0.1
    got=$(( $(rx_packets "$sns" "$sif") - before ))
    (( got >= n )) && break
done
if (( got >= n )); then
    echo "verify: $got/$n frames arrived at $sns/$sif: forwards"
else
    echo "verify: only $got/$n frames arrived at $sns/$sif: does NOT forward" >&2
    exit 1
fi
