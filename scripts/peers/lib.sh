# Shared helpers for scripts/peers/*.sh. Source it; it does not set shell options.
# shellcheck shell=bash

# Exit code for "this peer cannot run here" so a caller can skip it.
EX_UNAVAILABLE=3

# unavailable REASON... : one line on stderr, exit 3.
unavailable() {
    echo "${PEER_NAME:-peer}: unavailable: $*" >&2
    exit "$EX_UNAVAILABLE"
}

die() {
    echo "${PEER_NAME:-peer}: $*" >&2
    exit 1
}

need_root() {
    [[ $(id -u) -eq 0 ]] || unavailable "must run as root"
}

need_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || unavailable "command '$c' not found"
    done
}

ns_exists() { ip netns list | awk '{print $1}' | grep -qx -- "$1"; }

need_ns() {
    ns_exists "$1" || die "no network namespace named '$1'"
}

need_iface() { # NS IFACE
    ip -n "$1" link show dev "$2" >/dev/null 2>&1 || die "no interface '$2' in namespace '$1'"
}

# A name safe for file paths derived from a namespace name.
safe_name() { printf '%s' "$1" | tr -c 'A-Za-z0-9_.-' '_'; }

# rx/tx packet counters of an interface inside a namespace (veth: rx of X == frames its peer
# transmitted successfully into X, counted before X's stack or XDP handles them).
rx_packets() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/rx_packets"; }
tx_packets() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_packets"; }

# Does the interface have an XDP program attached (any mode)?
has_xdp() { # NS IFACE
    ip -n "$1" -d link show dev "$2" 2>/dev/null | grep -qE 'prog/xdp|xdpgeneric|xdpdrv|xdpoffload|xdpmulti'
}

# Detach any XDP program (all modes) from an interface; quiet if none.
detach_xdp() { # NS IFACE
    ip -n "$1" link show dev "$2" >/dev/null 2>&1 || return 0
    local m
    for m in xdp xdpgeneric xdpdrv; do
        ip -n "$1" link set dev "$2" "$m" off 2>/dev/null || true
    done
}

# Kill a process by pid file and wait for it to exit (TERM, then KILL after $2 s).
kill_pidfile() { # PIDFILE [GRACE_SECONDS]
    local pf=$1 grace=${2:-10} pid i
    [[ -f $pf ]] || return 0
    pid=$(cat "$pf" 2>/dev/null || true)
    if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < grace * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
            done
        fi
    fi
    rm -f "$pf"
}

# trafgen packet config for one 60-byte (64 on the wire with FCS) UDP/IPv4 frame.
# trafgen fills in the IPv4 and UDP checksums.
trafgen_cfg() { # SRC_MAC DST_MAC SRC_IP DST_IP
    cat <<CFG
{
  eth(sa=$1, da=$2, type=0x0800),
  ipv4(saddr=$3, daddr=$4, ttl=64, df),
  udp(sport=4321, dport=9),
  fill(0x00, 18)
}
CFG
}

iface_mac() { ip netns exec "$1" cat "/sys/class/net/$2/address"; }

# First IPv4 address of an interface, or the fallback given.
iface_ip4() { # NS IFACE FALLBACK
    local a
    a=$(ip -n "$1" -4 -o addr show dev "$2" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1)
    printf '%s\n' "${a:-$3}"
}

# The kernel forwarders (bridge, IP forwarding) run in the softirq of the CPU that put the frame
# into the veth, i.e. the generator's CPU. RPS on the DuT's receiving interfaces moves that work
# to the DuT core instead. set_rps NS CPU|none IFACE...
set_rps() {
    local ns=$1 cpu=$2 mask=0 i q
    shift 2
    if [[ $cpu != none ]]; then
        [[ $cpu =~ ^[0-9]+$ ]] || die "CPU must be a number or 'none', got '$cpu'"
        (( cpu < $(nproc) )) || die "CPU $cpu does not exist (nproc=$(nproc))"
        mask=$(printf '%x' $((1 << cpu)))
    fi
    for i in "$@"; do
        for q in $(ip netns exec "$ns" sh -c "ls -d /sys/class/net/$i/queues/rx-* 2>/dev/null"); do
            ip netns exec "$ns" sh -c "echo $mask > $q/rps_cpus"
        done
    done
}
