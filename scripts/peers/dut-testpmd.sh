#!/usr/bin/env bash
# Peer DuT: DPDK dpdk-testpmd "io" forwarding between d0 and d1 of DUT_NS, through the net_af_xdp
# or net_af_packet PMD; or, as a pure-CPU reference, between two net_null ports.
#
# usage: dut-testpmd.sh start DUT_NS af_xdp|af_packet [CPU]   (CPU: forwarding core, default 1)
#        dut-testpmd.sh stop DUT_NS
#        dut-testpmd.sh null SECONDS [CPU]      prints the Mpps per port testpmd reports
#
# testpmd runs headless: non-interactive mode with --stats-period keeps it forwarding until
# SIGINT/SIGTERM (without --stats-period it waits for a line on stdin and exits on EOF).
# Memory: --no-huge -m 512 --no-shconf (--in-memory is refused together with --no-huge because
# --no-huge implies legacy memory) and --total-num-mbufs=16384 (the default pool of ~155k mbufs
# does not fit in 512 MB of non-hugepage memory).
# pid file and log: /run/linerate-peers/testpmd-DUT_NS.{pid,log}
# exit 3 when dpdk-testpmd or the PMD is unavailable.
set -euo pipefail
PEER_NAME=dut-testpmd
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

usage() {
    echo "usage: $0 start DUT_NS af_xdp|af_packet [CPU] | stop DUT_NS | null SECONDS [CPU]" >&2
    exit 2
}
[[ $# -ge 2 ]] || usage
cmd=$1
need_root
state_dir=/run/linerate-peers

pmd_dir() {
    local d
    for d in /usr/lib/*/dpdk/pmds-* /usr/local/lib/*/dpdk/pmds-* /usr/local/lib/dpdk/pmds-*; do
        [[ -d $d ]] && { echo "$d"; return 0; }
    done
    return 1
}

# need_pmd NAME (e.g. net_af_xdp): the PMD's shared library must exist; prints its path.
need_pmd() {
    need_cmd dpdk-testpmd
    local dir lib
    dir=$(pmd_dir) || unavailable "no DPDK PMD directory (install the librte-net-* packages)"
    lib=$(ls "$dir"/librte_"$1".so* 2>/dev/null | head -n1 || true)
    [[ -n $lib ]] || unavailable "DPDK PMD $1 not installed (no $dir/librte_$1.so*)"
    echo "$lib"
}

check_cpu() {
    [[ $1 =~ ^[0-9]+$ ]] || die "CPU must be a number, got '$1'"
    (( $1 < $(nproc) )) || die "CPU $1 does not exist (nproc=$(nproc))"
}

# EAL lcore map: lcore 0 = main (sleeps in the stats loop) on another CPU if there is one,
# lcore 1 = the forwarding core on CPU.
lcores_for() {
    local cpu=$1 main=$1
    if (( $(nproc) > 1 )); then
        main=$(( cpu == 0 ? 1 : 0 ))
    fi
    echo "0@$main,1@$cpu"
}

eal_common() { # FILE_PREFIX LCORES
    echo "--lcores $2 --main-lcore 0 --no-huge -m 512 --no-shconf --no-pci --file-prefix $1 --log-level=lib.eal:notice"
}

testpmd_app_args() {
    echo "--forward-mode=io --auto-start --stats-period 1 --nb-cores=1 --total-num-mbufs=16384"
}

stop() {
    [[ $# -eq 1 ]] || usage
    local ns=$1 base pf
    base=$state_dir/testpmd-$(safe_name "$ns")
    pf=$base.pid
    # testpmd handles SIGTERM/SIGINT: stops forwarding, closes the ports (detaching XDP).
    kill_pidfile "$pf" 15
    local promisc_before=
    if [[ -f $base.state ]]; then
        # shellcheck disable=SC1091
        source "$base.state"
    fi
    rm -f "$base.state"
    if ns_exists "$ns"; then
        local i left=
        for i in d0 d1; do
            ip -n "$ns" link show dev "$i" >/dev/null 2>&1 || continue
            if [[ " $promisc_before " != *" $i "* ]]; then
                ip -n "$ns" link set dev "$i" promisc off
            fi
        done
        for i in d0 d1; do
            if has_xdp "$ns" "$i"; then
                left+=" $i"
                detach_xdp "$ns" "$i"
            fi
        done
        if [[ -n $left ]]; then
            echo "dut-testpmd: XDP program(s) were still attached after testpmd exited on:$left (detached now)" >&2
        fi
        for i in d0 d1; do
            if has_xdp "$ns" "$i"; then
                die "XDP program still attached to $ns/$i and could not be removed"
            fi
        done
    fi
    return 0
}

start() {
    [[ $# -ge 2 && $# -le 3 ]] || usage
    local ns=$1 kind=$2 cpu=${3:-1} base pf log vdev0 vdev1 pmd
    check_cpu "$cpu"
    case $kind in
        af_xdp)
            pmd=net_af_xdp
            vdev0="net_af_xdp0,iface=d0,start_queue=0,queue_count=1"
            vdev1="net_af_xdp1,iface=d1,start_queue=0,queue_count=1"
            ;;
        af_packet)
            pmd=net_af_packet
            vdev0="net_af_packet0,iface=d0,qpairs=1,qdisc_bypass=1"
            vdev1="net_af_packet1,iface=d1,qpairs=1,qdisc_bypass=1"
            ;;
        *) usage ;;
    esac
    need_pmd "$pmd" >/dev/null
    need_ns "$ns"
    need_iface "$ns" d0
    need_iface "$ns" d1
    base=$state_dir/testpmd-$(safe_name "$ns")
    pf=$base.pid log=$base.log
    if [[ -f $pf ]] && kill -0 "$(cat "$pf")" 2>/dev/null; then
        die "testpmd already running in $ns (pid $(cat "$pf")); stop first"
    fi
    mkdir -p "$state_dir"
    local i promisc=
    for i in d0 d1; do
        has_xdp "$ns" "$i" && die "$ns/$i already has an XDP program attached"
        ip -n "$ns" link set dev "$i" up
        # testpmd turns promiscuous mode on and leaves it on; stop restores it.
        ip -n "$ns" link show dev "$i" 2>/dev/null | head -n1 | grep -q PROMISC && promisc+=" $i"
    done
    echo "promisc_before='${promisc# }'" >"$base.state"

    # LIBXDP_SKIP_DISPATCHER: `ip netns exec` mounts a fresh /sys without bpffs, so libxdp cannot
    # use its multi-program dispatcher anyway; skip it explicitly and load the PMD's program alone.
    # shellcheck disable=SC2046
    setsid ip netns exec "$ns" env LIBXDP_SKIP_DISPATCHER=1 \
        dpdk-testpmd $(eal_common "lrtp-$(safe_name "$ns")" "$(lcores_for "$cpu")") \
        --vdev "$vdev0" --vdev "$vdev1" -- $(testpmd_app_args) \
        </dev/null >"$log" 2>&1 &
    local pid=$!
    echo "$pid" >"$pf"
    # Ready when forwarding started; fail fast when it exits.
    local ok= ready_lines=4
    [[ $kind == af_packet ]] && ready_lines=8
    for _ in $(seq 1 200); do
        if ! kill -0 "$pid" 2>/dev/null; then
            break
        fi
        # Forwarding has started once the per-second statistics blocks (one per port) come out.
        # The af_packet PMD drops what arrives in the first ~3 s after "packet forwarding" is
        # printed (measured: lost at 2.5 s, fine at 3 s), so wait for 4 blocks there.
        if [[ $(grep -c 'Throughput (since last show)' "$log") -ge $ready_lines ]]; then
            ok=1
            break
        fi
        sleep 0.1
    done
    if [[ -z $ok ]]; then
        local why
        why=$(grep -E 'Cause:|Error|failed|Failed|Invalid' "$log" | head -n1 || true)
        stop "$ns" || true
        if grep -qiE 'Failed to probe|No probed|not supported|driver.*not found|Cannot find' <<<"$why"; then
            unavailable "testpmd $kind: ${why:-see $log}"
        fi
        die "testpmd $kind failed to start: ${why:-see $log}"
    fi
    local mode=
    if [[ $kind == af_xdp ]]; then
        mode=$(ip -n "$ns" -d link show dev d0 | grep -oE 'xdpgeneric|xdpdrv|xdpoffload|xdp ' | head -n1 || true)
    fi
    echo "dut-testpmd: $kind io forwarding d0<->d1 in $ns, pid $pid, forwarding core $cpu${mode:+, XDP mode ${mode% }}, log $log"
}

null_ref() {
    [[ $# -ge 1 && $# -le 2 ]] || usage
    local secs=$1 cpu=${2:-1}
    [[ $secs =~ ^[0-9]+$ && $secs -ge 2 ]] || die "SECONDS must be an integer >= 2, got '$secs'"
    check_cpu "$cpu"
    need_pmd net_null >/dev/null
    mkdir -p "$state_dir"
    # globals: the EXIT trap runs after this function returned.
    log=$(mktemp "$state_dir/testpmd-null.XXXXXX")
    # shellcheck disable=SC2046
    setsid dpdk-testpmd $(eal_common "lrtp-null-$$" "$(lcores_for "$cpu")") \
        --vdev net_null0 --vdev net_null1 -- $(testpmd_app_args) </dev/null >"$log" 2>&1 &
    pid=$!
    trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"; trap - EXIT' EXIT
    sleep "$secs"
    kill -0 "$pid" 2>/dev/null || die "testpmd (net_null) exited early: $(grep -E 'Cause:' "$log" | head -n1)"
    kill -TERM "$pid"
    wait "$pid" || true
    # Per port: mean of the per-second "Rx-pps" samples, the first one (start-up) left out.
    awk '
        /NIC statistics for port/ { port = $(NF - 1) }
        /Rx-pps:/ { n[port]++; all[port] += $2; if (n[port] > 1) { sum[port] += $2; cnt[port]++ } }
        END {
            found = 0
            for (p in n) {
                # (only one sample when start-up was slow: use it)
                v = cnt[p] ? sum[p] / cnt[p] : all[p] / n[p]
                printf "null port %s: %.2f Mpps\n", p, v / 1e6; found = 1
            }
            if (!found) { print "dut-testpmd: no Rx-pps samples in testpmd output" > "/dev/stderr"; exit 1 }
        }' "$log" | sort
}

case $cmd in
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    null) shift; null_ref "$@" ;;
    *) usage ;;
esac
