#!/usr/bin/env bash
# Peer DuT: kernel IPv4 forwarding inside DUT_NS, with a static (permanent) neighbour entry for the
# sink so no ARP is involved. The outgoing interface is the one the DUT_NS routes SINK_IP through.
# CPU (default 1): RPS steers receive processing on d0/d1 to this core ('none': leave it on the
# sender's core, see set_rps in lib.sh).
#
# usage: dut-ipfwd.sh start DUT_NS SINK_IP SINK_MAC [CPU|none]
#        dut-ipfwd.sh stop DUT_NS
set -euo pipefail
PEER_NAME=dut-ipfwd
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

usage() { echo "usage: $0 start DUT_NS SINK_IP SINK_MAC [CPU|none] | stop DUT_NS" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1 ns=$2
need_root
need_cmd ip
state_dir=/run/linerate-peers
state=$state_dir/ipfwd-$(safe_name "$ns").state

stop() {
    [[ $# -eq 0 ]] || usage
    if ! ns_exists "$ns"; then
        rm -f "$state"
        return 0
    fi
    local old_fwd=0 added_neigh= neigh_ip= neigh_dev=
    if [[ -f $state ]]; then
        # shellcheck disable=SC1090
        source "$state"
    fi
    ip netns exec "$ns" sysctl -qw "net.ipv4.ip_forward=$old_fwd"
    if [[ -n $added_neigh && -n $neigh_ip && -n $neigh_dev ]]; then
        ip -n "$ns" neigh del "$neigh_ip" dev "$neigh_dev" 2>/dev/null || true
    fi
    local i
    for i in d0 d1; do
        ip -n "$ns" link show dev "$i" >/dev/null 2>&1 && set_rps "$ns" none "$i"
    done
    rm -f "$state"
}

start() {
    [[ $# -ge 2 && $# -le 3 ]] || usage
    local sip=$1 smac=$2 cpu=${3:-1} dev old_fwd added=
    [[ $sip =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad IPv4 address '$sip'"
    [[ $smac =~ ^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$ ]] || die "bad MAC '$smac'"
    need_ns "$ns"
    [[ -f $state ]] && die "already started in $ns (stop first)"
    dev=$(ip -n "$ns" -4 route get "$sip" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n1)
    [[ -n $dev ]] || die "no route to $sip in namespace $ns"
    old_fwd=$(ip netns exec "$ns" sysctl -n net.ipv4.ip_forward)
    if ! ip -n "$ns" neigh show "$sip" dev "$dev" | grep -q PERMANENT; then
        added=1
    fi
    mkdir -p "$state_dir"
    printf 'old_fwd=%s\nadded_neigh=%s\nneigh_ip=%s\nneigh_dev=%s\n' "$old_fwd" "$added" "$sip" "$dev" >"$state"
    trap 'stop' ERR
    ip -n "$ns" neigh replace "$sip" lladdr "$smac" dev "$dev" nud permanent
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
    local i
    for i in d0 d1; do
        ip -n "$ns" link show dev "$i" >/dev/null 2>&1 && set_rps "$ns" "$cpu" "$i"
    done
    trap - ERR
    echo "dut-ipfwd: forwarding on in $ns, $sip -> $smac via $dev, rps cpu=$cpu"
}

case $cmd in
    start) shift 2; start "$@" ;;
    stop) shift 2; stop "$@" ;;
    *) usage ;;
esac
