#!/usr/bin/env bash
# Peer DuT: Linux bridge of d0 and d1 inside DUT_NS (bridge 'lrpeer-br', STP off, forward delay 0).
# CPU (default 1): RPS steers the DuT's receive processing to this core (see set_rps in lib.sh);
# 'none' leaves it on the sender's core.
#
# usage: dut-bridge.sh start|stop DUT_NS [CPU|none]
set -euo pipefail
PEER_NAME=dut-bridge
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

[[ $# -ge 2 && $# -le 3 ]] || { echo "usage: $0 start|stop DUT_NS [CPU|none]" >&2; exit 2; }
cmd=$1 ns=$2 cpu=${3:-1}
BR=lrpeer-br
need_root
need_cmd ip bridge

stop() {
    ns_exists "$ns" || return 0
    if ip -n "$ns" link show dev "$BR" >/dev/null 2>&1; then
        ip -n "$ns" link del dev "$BR"
    fi
    local i
    for i in d0 d1; do
        ip -n "$ns" link show dev "$i" >/dev/null 2>&1 && set_rps "$ns" none "$i"
    done
    return 0
}

start() {
    need_ns "$ns"
    need_iface "$ns" d0
    need_iface "$ns" d1
    ip -n "$ns" link show dev "$BR" >/dev/null 2>&1 && die "bridge $BR already exists in $ns (stop first)"
    trap 'stop' ERR
    ip -n "$ns" link add name "$BR" type bridge stp_state 0 forward_delay 0
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$BR.disable_ipv6=1"
    ip -n "$ns" link set dev d0 master "$BR"
    ip -n "$ns" link set dev d1 master "$BR"
    ip -n "$ns" link set dev "$BR" up
    ip -n "$ns" link set dev d0 up
    ip -n "$ns" link set dev d1 up
    set_rps "$ns" "$cpu" d0 d1
    trap - ERR
    echo "dut-bridge: $BR(d0,d1) up in $ns, rps cpu=$cpu"
}

case $cmd in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop DUT_NS [CPU|none]" >&2; exit 2 ;;
esac
