#!/usr/bin/env bash
# Peer DuT: Open vSwitch userspace datapath (datapath_type=netdev) inside DUT_NS, with its own
# private ovsdb-server and ovs-vswitchd (run dir /run/linerate-ovs-DUT_NS, nothing shared with a
# system OvS), bridge 'lrovs' with d0 (ofport 1) and d1 (ofport 2) and two flows
# in_port=1,actions=output:2 and in_port=2,actions=output:1.
#   afxdp  (default): ports type=afxdp, polled by one PMD thread pinned to CPU (default 1).
#          OVS_XDP_MODE: space-separated list of options:xdp-mode values tried in order (default
#          'best-effort': OvS tries native-with-zerocopy, native, generic; on veth it ends in
#          native (driver) mode with copy, since veth has no AF_XDP zero-copy).
#   system: ports as plain netdev-linux ports (AF_PACKET-like, handled by the main thread);
#          CPU is then applied with taskset to ovs-vswitchd as a whole.
# OVS_FLOWS_FILE: a file of rules in ovs-ofctl syntax (ports 1 = d0, 2 = d1) loaded with
#          'ovs-ofctl add-flows' instead of the two in_port flows.
#
# usage: dut-ovs.sh start DUT_NS [afxdp|system] [CPU]
#        dut-ovs.sh stop DUT_NS
# exit 3 when Open vSwitch or the afxdp netdev type is unavailable.
set -euo pipefail
PEER_NAME=dut-ovs
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

usage() { echo "usage: $0 start DUT_NS [afxdp|system] [CPU] | stop DUT_NS" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1 ns=$2
need_root
BR=lrovs
rd=/run/linerate-ovs-$(safe_name "$ns")
schema=/usr/share/openvswitch/vswitch.ovsschema

# Private instance environment: every OvS tool looks here instead of /run/openvswitch.
export OVS_RUNDIR=$rd OVS_DBDIR=$rd OVS_LOGDIR=$rd OVS_PKGDATADIR=/usr/share/openvswitch
vsctl() { ovs-vsctl --db="unix:$rd/db.sock" --timeout=20 "$@"; }

stop() {
    [[ $# -eq 0 ]] || usage
    if [[ -d $rd ]]; then
        # ovs-vswitchd first: on exit it closes its afxdp sockets and unloads its XDP programs.
        # Deleting the bridge before that makes ovs-vswitchd remove the ports cleanly.
        if [[ -S $rd/db.sock && -f $rd/ovs-vswitchd.pid ]] && kill -0 "$(cat "$rd/ovs-vswitchd.pid")" 2>/dev/null; then
            vsctl --if-exists del-br "$BR" >/dev/null 2>&1 || true
        fi
        kill_pidfile "$rd/ovs-vswitchd.pid" 15
        kill_pidfile "$rd/ovsdb-server.pid" 10
    fi
    if ns_exists "$ns"; then
        local i left=
        for i in d0 d1; do
            if has_xdp "$ns" "$i"; then
                left+=" $i"
                detach_xdp "$ns" "$i"
            fi
        done
        [[ -z $left ]] || echo "dut-ovs: XDP program(s) still attached after ovs-vswitchd exited on:$left (detached now)" >&2
        for i in d0 d1; do
            has_xdp "$ns" "$i" && die "XDP program still attached to $ns/$i and could not be removed"
        done
        # the bridge's internal port (a tap device) goes away with ovs-vswitchd; make sure.
        ip -n "$ns" link del dev "$BR" 2>/dev/null || true
    fi
    rm -rf "$rd"
}

start() {
    [[ $# -le 2 ]] || usage
    local kind=${1:-afxdp} cpu=${2:-1} i
    [[ $kind == afxdp || $kind == system ]] || usage
    [[ $cpu =~ ^[0-9]+$ ]] && (( cpu < $(nproc) )) || die "bad CPU '$cpu' (nproc=$(nproc))"
    need_cmd ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl
    [[ -f $schema ]] || unavailable "no OvS schema at $schema"
    need_ns "$ns"
    need_iface "$ns" d0
    need_iface "$ns" d1
    [[ -e $rd ]] && die "$rd exists: an instance for $ns is running (stop first)"
    for i in d0 d1; do
        has_xdp "$ns" "$i" && die "$ns/$i already has an XDP program attached"
    done
    mkdir -p "$rd"
    trap 'stop' ERR

    ovsdb-tool create "$rd/conf.db" "$schema"
    ip netns exec "$ns" ovsdb-server "$rd/conf.db" \
        --remote="punix:$rd/db.sock" --unixctl="$rd/ovsdb-server.ctl" \
        --pidfile="$rd/ovsdb-server.pid" --detach --no-chdir \
        --log-file="$rd/ovsdb-server.log"
    vsctl --no-wait init
    local mask
    mask=$(printf '0x%x' $((1 << cpu)))
    vsctl --no-wait set Open_vSwitch . other_config:pmd-cpu-mask="$mask"
    local taskset=()
    [[ $kind == system ]] && taskset=(taskset -c "$cpu")
    ip netns exec "$ns" "${taskset[@]}" ovs-vswitchd "unix:$rd/db.sock" \
        --unixctl="$rd/ovs-vswitchd.ctl" --pidfile="$rd/ovs-vswitchd.pid" --detach --no-chdir \
        --log-file="$rd/ovs-vswitchd.log"

    if [[ $kind == afxdp ]]; then
        vsctl get Open_vSwitch . iface_types | grep -qw afxdp \
            || { stop; unavailable "this ovs-vswitchd has no afxdp netdev type (iface_types: $(vsctl get Open_vSwitch . iface_types 2>/dev/null))"; }
    fi
    vsctl add-br "$BR" -- set bridge "$BR" datapath_type=netdev fail_mode=secure
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$BR.disable_ipv6=1" 2>/dev/null || true
    local mode=
    if [[ $kind == afxdp ]]; then
        local m
        for m in ${OVS_XDP_MODE:-best-effort}; do
            vsctl --if-exists del-port "$BR" d0 -- --if-exists del-port "$BR" d1
            vsctl add-port "$BR" d0 -- set interface d0 type=afxdp options:xdp-mode="$m" ofport_request=1 \
                -- add-port "$BR" d1 -- set interface d1 type=afxdp options:xdp-mode="$m" ofport_request=2 \
                >/dev/null 2>&1 || true
            sleep 1
            if [[ -z $(vsctl get interface d0 error 2>/dev/null | tr -d '[]"') && -z $(vsctl get interface d1 error 2>/dev/null | tr -d '[]"') ]] \
                && [[ $(vsctl get interface d0 ofport) == 1 && $(vsctl get interface d1 ofport) == 2 ]]; then
                mode=$m
                break
            fi
            echo "dut-ovs: xdp-mode=$m failed: $(vsctl get interface d0 error 2>/dev/null)" >&2
        done
        [[ -n $mode ]] || { stop; unavailable "no afxdp xdp-mode works on d0/d1 (see $rd/ovs-vswitchd.log before stop)"; }
    else
        vsctl add-port "$BR" d0 -- set interface d0 ofport_request=1 \
            -- add-port "$BR" d1 -- set interface d1 ofport_request=2
        for i in d0 d1; do
            local err
            err=$(vsctl get interface "$i" error | tr -d '[]"')
            [[ -z $err ]] || die "port $i: $err"
        done
    fi
    ip -n "$ns" link set dev d0 up
    ip -n "$ns" link set dev d1 up
    ovs-ofctl del-flows "$BR"
    if [[ -n ${OVS_FLOWS_FILE:-} ]]; then
        [[ -r $OVS_FLOWS_FILE ]] || die "OVS_FLOWS_FILE '$OVS_FLOWS_FILE': not a readable file"
        ovs-ofctl add-flows "$BR" "$OVS_FLOWS_FILE"
    else
        ovs-ofctl add-flow "$BR" "in_port=1,actions=output:2"
        ovs-ofctl add-flow "$BR" "in_port=2,actions=output:1"
    fi
    local nflows
    nflows=$(ovs-ofctl dump-aggregate "$BR" | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p')
    trap - ERR
    echo "dut-ovs: OvS netdev datapath bridge $BR(d0=1,d1=2) in $ns, ports $kind${mode:+ xdp-mode=$mode}, cpu $cpu, $nflows flows, run dir $rd"
}

case $cmd in
    start) shift 2; start "$@" ;;
    stop) shift 2; stop "$@" ;;
    *) usage ;;
esac
