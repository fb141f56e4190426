#!/usr/bin/env bash
# Records the OpenFlow conversations between ovs-ofctl and ovs-vswitchd that
# the *.txt files one directory up hold (see ../README.md).
#
# A private ovsdb-server + ovs-vswitchd (run dir in a temp dir, nothing shared
# with a system Open vSwitch), ovs-vswitchd inside a network namespace of its
# own, bridge lrof0 (datapath_type=netdev, fail_mode=secure,
# protocols=OpenFlow10,OpenFlow13) with internal ports p1 (ofport 1) and p2
# (ofport 2) and a passive controller listener ptcp:16653:127.0.0.1.
# record.py (in the same namespace) proxies 127.0.0.1:16654 -> 16653, runs
# each ovs-ofctl command against the proxy and logs the messages; annotate.py
# turns the logs into the annotated hex files.
#
# usage: record.sh [OUTDIR]     (default: the directory above this script)
# Needs root and openvswitch-switch. Removes its namespace, daemons and temp
# dir on exit, also on failure.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$(dirname "$here")}
[[ $(id -u) -eq 0 ]] || { echo "record.sh: needs root" >&2; exit 2; }
for c in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ovs-appctl ip python3; do
    command -v "$c" >/dev/null || { echo "record.sh: $c missing" >&2; exit 3; }
done

ns=lrof-rec-$$
BR=lrof0
td=$(mktemp -d /tmp/lrof-rec.XXXXXX)
export OVS_RUNDIR=$td OVS_DBDIR=$td OVS_LOGDIR=$td OVS_PKGDATADIR=/usr/share/openvswitch

kill_pidfile() {
    local f=$1 pid i
    [[ -f $f ]] || return 0
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || return 0
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
    set +e
    kill_pidfile "$td/ovs-vswitchd.pid"
    kill_pidfile "$td/ovsdb-server.pid"
    ip netns del "$ns" 2>/dev/null
    rm -rf "$td"
}
trap cleanup EXIT

vsctl() { ovs-vsctl --db="unix:$td/db.sock" --timeout=20 "$@"; }

ip netns add "$ns"
ip -n "$ns" link set lo up
ovsdb-tool create "$td/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server "$td/conf.db" --remote="punix:$td/db.sock" --unixctl="$td/ovsdb-server.ctl" \
    --pidfile="$td/ovsdb-server.pid" --log-file="$td/ovsdb-server.log" --no-chdir --detach \
    -vconsole:off
vsctl --no-wait init
ip netns exec "$ns" ovs-vswitchd "unix:$td/db.sock" --unixctl="$td/ovs-vswitchd.ctl" \
    --pidfile="$td/ovs-vswitchd.pid" --log-file="$td/ovs-vswitchd.log" --no-chdir --detach \
    -vconsole:off
vsctl add-br $BR -- set bridge $BR datapath_type=netdev fail_mode=secure \
        protocols=OpenFlow10,OpenFlow13 \
    -- add-port $BR p1 -- set interface p1 type=internal ofport_request=1 \
    -- add-port $BR p2 -- set interface p2 type=internal ofport_request=2
vsctl set-controller $BR ptcp:16653:127.0.0.1
for i in $(seq 100); do
    ip netns exec "$ns" ss -ltnH 'sport = :16653' | grep -q . && break
    sleep 0.1
done
ip netns exec "$ns" ss -ltnH 'sport = :16653' | grep -q . || { echo "no listener on 16653" >&2; exit 1; }
ovs-vswitchd --version | head -1 >"$td/version"

mkdir -p "$td/raw"
ip netns exec "$ns" env BR=$BR TD="$td" nice -n 10 python3 "$here/record.py" "$td/raw"
nice -n 10 python3 "$here/annotate.py" "$td/raw" "$out" "$(cat "$td/version")"
# The probes: a fake switch (no Open vSwitch) in the same namespace.
mkdir -p "$td/probes" "$out/probes"
ip netns exec "$ns" nice -n 10 python3 "$here/probe.py" "$td/probes"
nice -n 10 python3 "$here/annotate.py" "$td/probes" "$out/probes" \
    "a scripted fake switch (tools/probe.py) talking to ovs-ofctl $(ovs-ofctl --version | head -1 | awk '{print $NF}')" \
    "$out/probes/sequences.txt"
grep -E 'WARN|ERR' "$td/ovs-vswitchd.log" >"$td/warn" || true
if [[ -s $td/warn ]]; then
    echo "--- ovs-vswitchd warnings/errors during the recording:"
    cat "$td/warn"
fi
