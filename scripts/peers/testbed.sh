#!/usr/bin/env bash
# Minimal 3-namespace test bed for developing the peer scripts:
#
#   NAME-gen [g0] <-veth-> [d0] NAME-dut [d1] <-veth-> [s0] NAME-sink
#
#   g0 02:00:00:00:01:01 10.77.1.1/24    d0 02:00:00:00:01:02 10.77.1.2/24
#   s0 02:00:00:00:02:02 10.77.2.2/24    d1 02:00:00:00:02:01 10.77.2.1/24
#
# Static neighbours everywhere (no ARP needed), IPv6 off on every interface,
# GEN routes 10.77.2.0/24 via the DuT, SINK routes 10.77.1.0/24 via the DuT.
# IP forwarding is NOT enabled in the DuT (dut-ipfwd.sh does that).
#
# usage: testbed.sh up|down|show NAME
set -euo pipefail

usage() { echo "usage: $0 up|down|show NAME" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
cmd=$1 name=$2
[[ $name =~ ^[A-Za-z0-9_.-]{1,40}$ ]] || { echo "testbed: bad name '$name'" >&2; exit 2; }
GEN=$name-gen DUT=$name-dut SINK=$name-sink

G0_MAC=02:00:00:00:01:01 D0_MAC=02:00:00:00:01:02
D1_MAC=02:00:00:00:02:01 S0_MAC=02:00:00:00:02:02
G0_IP=10.77.1.1 D0_IP=10.77.1.2 D1_IP=10.77.2.1 S0_IP=10.77.2.2

ns_exists() { ip netns list | awk '{print $1}' | grep -qx -- "$1"; }

down() {
    local ns
    for ns in "$GEN" "$DUT" "$SINK"; do
        if ns_exists "$ns"; then
            # Deleting the namespace destroys its veth ends (and their peers).
            ip netns del "$ns"
        fi
    done
}

# ipv6 off for the namespace (defaults for new interfaces) and the given interfaces.
no_ipv6() {
    local ns=$1; shift
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    local i
    for i in "$@"; do
        ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"
    done
}

up() {
    local ns
    for ns in "$GEN" "$DUT" "$SINK"; do
        if ns_exists "$ns"; then
            echo "testbed: namespace $ns already exists (run '$0 down $name' first)" >&2
            exit 1
        fi
    done
    trap 'down' ERR
    for ns in "$GEN" "$DUT" "$SINK"; do
        ip netns add "$ns"
        no_ipv6 "$ns"
        ip -n "$ns" link set lo up
    done
    ip link add g0 netns "$GEN" address "$G0_MAC" type veth peer d0 netns "$DUT" address "$D0_MAC"
    ip link add d1 netns "$DUT" address "$D1_MAC" type veth peer s0 netns "$SINK" address "$S0_MAC"
    no_ipv6 "$GEN" g0
    no_ipv6 "$DUT" d0 d1
    no_ipv6 "$SINK" s0

    ip -n "$GEN" addr add "$G0_IP/24" dev g0
    ip -n "$DUT" addr add "$D0_IP/24" dev d0
    ip -n "$DUT" addr add "$D1_IP/24" dev d1
    ip -n "$SINK" addr add "$S0_IP/24" dev s0
    ip -n "$GEN" link set g0 up
    ip -n "$DUT" link set d0 up
    ip -n "$DUT" link set d1 up
    ip -n "$SINK" link set s0 up

    ip -n "$GEN" route add 10.77.2.0/24 via "$D0_IP" dev g0
    ip -n "$SINK" route add 10.77.1.0/24 via "$D1_IP" dev s0
    ip -n "$GEN" neigh replace "$D0_IP" lladdr "$D0_MAC" dev g0 nud permanent
    ip -n "$DUT" neigh replace "$G0_IP" lladdr "$G0_MAC" dev d0 nud permanent
    ip -n "$DUT" neigh replace "$S0_IP" lladdr "$S0_MAC" dev d1 nud permanent
    ip -n "$SINK" neigh replace "$D1_IP" lladdr "$D1_MAC" dev s0 nud permanent
    trap - ERR
    echo "testbed $name up: $GEN/g0 $G0_MAC $G0_IP  $DUT/d0 $D0_MAC $D0_IP  $DUT/d1 $D1_MAC $D1_IP  $SINK/s0 $S0_MAC $S0_IP"
}

show() {
    local ns
    for ns in "$GEN" "$DUT" "$SINK"; do
        echo "== $ns"
        ip -n "$ns" -br link 2>/dev/null || echo "(absent)"
    done
}

case $cmd in
    up) up ;;
    down) down ;;
    show) show ;;
    *) usage ;;
esac
