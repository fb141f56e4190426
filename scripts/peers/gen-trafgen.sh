#!/usr/bin/env bash
# trafgen baseline generator: 60-byte UDP/IPv4 frames (64 bytes on the wire with FCS) sent from
# IFACE in namespace GEN_NS at top speed for SECONDS, on one CPU (default 0).
#
# usage: gen-trafgen.sh GEN_NS IFACE DST_MAC DST_IP SECONDS [CPU]
# stdout (one line): sent=N seconds=S mpps=X      (N from the interface's tx_packets counter)
# exit 3 if trafgen is missing.
set -euo pipefail
PEER_NAME=gen-trafgen
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

[[ $# -ge 5 && $# -le 6 ]] || { echo "usage: $0 GEN_NS IFACE DST_MAC DST_IP SECONDS [CPU]" >&2; exit 2; }
ns=$1 ifc=$2 dmac=$3 dip=$4 secs=$5 cpu=${6:-0}
need_root
need_cmd trafgen setsid
[[ $secs =~ ^[0-9]+$ && $secs -gt 0 ]] || die "SECONDS must be a positive integer, got '$secs'"
[[ $cpu =~ ^[0-9]+$ ]] || die "CPU must be a number, got '$cpu'"
(( cpu < $(nproc) )) || die "CPU $cpu does not exist (nproc=$(nproc))"
[[ $dmac =~ ^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$ ]] || die "bad MAC '$dmac'"
[[ $dip =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad IPv4 address '$dip'"
need_ns "$ns"
need_iface "$ns" "$ifc"

smac=$(iface_mac "$ns" "$ifc")
sip=$(iface_ip4 "$ns" "$ifc" 10.77.1.1)
tmp=$(mktemp -d /tmp/linerate-trafgen.XXXXXX)
tg_pid=
old_wmem=
cleanup() {
    if [[ -n $old_wmem ]]; then
        sysctl -qw "net.core.wmem_default=$old_wmem" || true
    fi
    if [[ -n $tg_pid ]] && kill -0 "$tg_pid" 2>/dev/null; then
        kill -INT -- "-$tg_pid" 2>/dev/null || true
        wait "$tg_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# trafgen forks one process per CPU 0..P-1 and pins process i to CPU i; a config section
# "cpu(N):" gives packets to CPU N only, so the other processes exit at once.
{ printf 'cpu(%d): ' "$cpu"; trafgen_cfg "$smac" "$dmac" "$sip" "$dip"; } >"$tmp/pkt.cfg"

# trafgen's TX_RING socket gets sk_sndbuf = net.core.wmem_default. When the receiver processes
# frames on another CPU (RPS, AF_XDP, testpmd, OvS), sent skbs stay charged to the socket while
# they queue there, the send buffer fills and trafgen dies with "Flushing TX_RING failed:
# Resource temporarily unavailable". trafgen tries to raise the value itself but inside a network
# namespace /proc/sys/net/core/wmem_* is read-only (global sysctl), so raise it from here (the
# script runs in the initial namespace) and restore it on exit.
want_wmem=${GEN_WMEM_DEFAULT:-4194304}
cur_wmem=$(sysctl -n net.core.wmem_default)
if (( cur_wmem < want_wmem )); then
    old_wmem=$cur_wmem
    sysctl -qw "net.core.wmem_max=$(( $(sysctl -n net.core.wmem_max) > want_wmem ? $(sysctl -n net.core.wmem_max) : want_wmem ))"
    sysctl -qw "net.core.wmem_default=$want_wmem"
fi

before=$(tx_packets "$ns" "$ifc")
# setsid: own process group, so SIGINT reaches the forked sender too (-Q: leave IRQ affinity alone).
setsid ip netns exec "$ns" trafgen -Q -o "$ifc" -i "$tmp/pkt.cfg" -P $((cpu + 1)) >"$tmp/out" 2>&1 &
tg_pid=$!
sleep "$secs"
if ! kill -0 "$tg_pid" 2>/dev/null; then
    tg_pid=
    grep -v 'socket memory' "$tmp/out" >&2 || true
    die "trafgen exited early"
fi
kill -INT -- "-$tg_pid"
wait "$tg_pid" || true
tg_pid=
after=$(tx_packets "$ns" "$ifc")
sent=$((after - before))
reported=$(tr -d '\r' <"$tmp/out" | awk '/packets outgoing/ {print $1}' | tail -n1)
echo "gen-trafgen: trafgen reported ${reported:-?} packets outgoing, $ifc tx_packets +$sent" >&2
awk -v n="$sent" -v s="$secs" 'BEGIN { printf "sent=%d seconds=%d mpps=%.3f\n", n, s, n / s / 1e6 }'
