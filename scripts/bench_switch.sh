#!/usr/bin/env bash
# The `linerate switch` benchmarks of docs/BENCHMARKS.md (issue 5), one run each, printed as
# markdown on stdout (progress on stderr):
#   sweep   mem-port Mpps and cycles/packet vs active flows (1 .. 1M), cache on and off,
#           with a ~5k-rule set over 5 subtables (the shape of seed 000 Fig. 5);
#   insert  time to insert 1k .. 1M rules through the control socket, and into Open vSwitch's
#           userspace datapath with `ovs-ofctl add-flows` for the sizes it manages;
#   first   time from `switch-ctl add-flow` until the first packet hits the new rule, under load.
# usage: scripts/bench_switch.sh [sweep] [insert] [first]   (default: all three)
# Run as root on an otherwise idle machine. Env: SW_SECONDS (3), SW_CPU (1), SW_OVS_MAX (100000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
lr=$PWD/target/release/linerate
out=$PWD/target/bench/switch
mkdir -p "$out"
secs=${SW_SECONDS:-3}
cpu=${SW_CPU:-1}
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(sweep insert first)
echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
    "kernel $(uname -r), release build, one run each; command: \`scripts/bench_switch.sh ${parts[*]}\`."
echo

# The sweep's rule set. The mem source's flow F is 10.F2.F1.F0:1024+(F&0x3fff) -> 10.1.0.1:9/udp.
#  - 1000 exact 5-tuple rules for flows 0..999            (subtable 1, priority 400)
#  - 4096 /24 source blocks to UDP port 53, drop          (subtable 2, never matches this traffic)
#  - 16 /16 source prefixes: rewrite eth_dst, output:2    (subtable 3, covers flows < 1M)
#  - nw_dst=10.1.0.0/16: dec_ttl, output:2                (subtable 4)
#  - priority 0: drop                                     (subtable 5)
sweep_rules() {
    python3 - <<'EOF'
for f in range(1000):
    print(f"priority=400,udp,nw_src=10.{(f>>16)&255}.{(f>>8)&255}.{f&255},nw_dst=10.1.0.1,"
          f"tp_src={1024+(f&0x3fff)},tp_dst=9,actions=output:2")
for b in range(4096):
    print(f"priority=300,udp,nw_src=10.{b>>8}.{b&255}.0/24,tp_dst=53,actions=drop")
for x in range(16):
    print(f"priority=200,ip,nw_src=10.{x}.0.0/16,actions=set_field:02:00:00:00:00:09->eth_dst,output:2")
print("priority=100,ip,nw_dst=10.1.0.0/16,actions=dec_ttl,output:2")
print("priority=0,actions=drop")
EOF
}

sweep() {
    sweep_rules >"$out/sweep.flows"
    local n emc
    for n in 1 100 10000 100000 1000000; do
        for emc in on off; do
            echo "== sweep: $n flows, cache $emc" >&2
            local extra=()
            [ $emc = on ] || extra=(--no-emc)
            $lr switch --port "1=mem:a?source=64&flows=$n" --port '2=mem:b?sink' \
                --flows "$out/sweep.flows" --cpu "$cpu" --duration "$secs" --profile --json --quiet \
                "${extra[@]}" | tail -1 >"$out/sweep-$n-$emc.json"
        done
    done
    echo "### Flow sweep on in-memory ports (seed 000 Fig. 5)"
    echo
    echo "\`linerate switch --port '1=mem:a?source=64&flows=N' --port '2=mem:b?sink' --flows sweep.flows --cpu $cpu --duration $secs --profile [--no-emc]\`;"
    echo "sweep.flows: $(wc -l <"$out/sweep.flows") rules in 5 subtables (1000 exact 5-tuples, 4096 /24 sources to UDP 53, 16 /16 sources with a MAC rewrite, one /16 destination with dec_ttl, a drop-all; written by this script)."
    echo "The source draws each packet's flow at random and writes its addresses (rx column: the work a NIC would do);"
    echo "\"switch\" is every stage but rx, the cost of the switch itself."
    echo
    python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
print("| flows | cache | Mpps | cache hit rate | subtables per classifier lookup | rx | extract | lookup | actions | tx+buffers | switch cycles/pkt | total cycles/pkt |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for n in [1, 100, 10000, 100000, 1000000]:
    for emc in ["on", "off"]:
        j = json.load(open(f"{out}/sweep-{n}-{emc}.json"))
        assert j["balanced"], "received != forwarded + drops"
        c = j["profile"]["cycles_per_packet"]
        mpps = j["received"] / j["elapsed_s"] / 1e6
        hr = f'{100*j["cache"]["emc_hit_rate"]:.1f} %' if emc == "on" else "-"
        sw = c["total"] - c["rx"]
        print(f'| {n:,} | {emc} | {mpps:.1f} | {hr} | {j["cache"]["subtables_per_lookup"]:.2f} | {c["rx"]:.1f} | '
              f'{c["extract"]:.1f} | {c["lookup"]:.1f} | {c["actions"]:.1f} | {c["tx"]+c["buffers"]:.1f} | **{sw:.1f}** | {c["total"]:.1f} |')
EOF
    echo
}

insert_rules() { # N -> rules on stdout (one subtable, as in the section text)
    python3 -c "import sys
n=int(sys.argv[1])
for i in range(n): print(f'priority={100+i%7},udp,nw_dst=10.{(i>>16)&255}.{(i>>8)&255}.{i&255},tp_dst={1000+i%50},actions=output:2')" "$1"
}

insert() {
    local sock=$out/insert.sock n pid
    rm -f "$sock"
    $lr switch --port '1=mem:a?source=64' --port '2=mem:b?sink' --ctl "$sock" --cpu "$cpu" --quiet --json \
        >"$out/insert-switch.json" 2>"$out/insert-switch.err" &
    pid=$!
    trap 'kill -INT $pid 2>/dev/null || true' EXIT
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
    : >"$out/insert.tsv"
    # The largest size twice: the first time the switch's memory grows (page faults), the
    # second time it reuses what the first left (the switch keeps freed memory).
    local runs=(1000 10000 100000 1000000 1000000) seen=""
    for n in "${runs[@]}"; do
        [ -f "$out/rules-$n.flows" ] || insert_rules $n >"$out/rules-$n.flows"
        echo "== insert: $n rules into linerate switch" >&2
        $lr switch-ctl "$sock" del-flows >/dev/null
        local t0 t1 rep again=first
        case " $seen " in *" $n "*) again=again ;; esac
        seen="$seen $n"
        t0=$(date +%s.%N)
        rep=$($lr switch-ctl "$sock" add-flows "$out/rules-$n.flows" --json)
        t1=$(date +%s.%N)
        echo -e "linerate\t$n\t$(echo "$rep" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["seconds"], j["receive_parse_seconds"], sep="\t")')\t$(echo "$t1 - $t0" | bc)\t$again" >>"$out/insert.tsv"
    done
    kill -INT $pid; wait $pid || true
    trap - EXIT
    # Open vSwitch userspace datapath (a netdev bridge with no ports: the flow table is what is measured).
    local ovs=$out/ovs
    if command -v ovs-vswitchd >/dev/null; then
        ovs_start "$ovs"
        for n in 1000 10000 100000 1000000; do
            [ $n -le "${SW_OVS_MAX:-100000}" ] || { echo -e "ovs\t$n\t-\t-\tskipped (SW_OVS_MAX=${SW_OVS_MAX:-100000})" >>"$out/insert.tsv"; continue; }
            echo "== insert: $n rules into Open vSwitch (ovs-ofctl add-flows)" >&2
            ovs-ofctl del-flows lrbench
            local t0 t1
            t0=$(date +%s.%N)
            ovs-ofctl add-flows lrbench "$out/rules-$n.flows"
            t1=$(date +%s.%N)
            echo -e "ovs\t$n\t-\t-\t$(echo "$t1 - $t0" | bc)\t$(ovs-ofctl dump-aggregate lrbench | grep -o 'flow_count=[0-9]*')" >>"$out/insert.tsv"
        done
        ovs_stop "$ovs"
    fi
    echo "### Rule insertion (seed 000: Open vSwitch's insertion time grew exponentially)"
    echo
    echo "Rules \`priority=100..106,udp,nw_dst=10.A.B.C,tp_dst=1000..1049,actions=output:2\` (one subtable), each batch into an emptied table."
    echo "linerate: \`linerate switch-ctl SOCK add-flows FILE\` into a switch forwarding at full speed on mem ports. Reply fields: \`receive_parse_seconds\` (reading and parsing the rule text), \`seconds\` (checking the rules, building and publishing the table); wall: the whole command."
    echo "The 1M batch runs twice: the first time the switch's memory grows to hold it (page faults), the second time it reuses that memory."
    echo "Open vSwitch $(ovs-vswitchd --version 2>/dev/null | head -1 | awk '{print $NF}'): \`ovs-ofctl add-flows BR FILE\` into a private ovs-vswitchd with a netdev (userspace) bridge, wall time of the command."
    echo
    python3 - "$out/insert.tsv" <<'EOF'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print("| rules | linerate parse (s) | linerate table (s) | table rules/s | linerate wall (s) | wall rules/s | Open vSwitch wall (s) | OvS rules/s | OvS/linerate wall |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
ov = {int(r[1]): r for r in rows if r[0] == "ovs"}
for l in (r for r in rows if r[0] == "linerate"):
    n = int(l[1]); tb = float(l[2]); ps = float(l[3]); lw = float(l[4])
    label = f"{n:,}" + (" (again)" if l[5] == "again" else "")
    o = ov.get(n) if l[5] == "first" else None
    if o and o[4].replace(".", "", 1).isdigit():
        ow = float(o[4]); os_ = f"{ow:.2f}"; orate = f"{n/ow:,.0f}"; ratio = f"{ow/lw:.1f}x"
    else:
        os_ = (o[4] if o else "-"); orate = "-"; ratio = "-"
    print(f"| {label} | {ps:.3f} | {tb:.3f} | {n/tb:,.0f} | {lw:.2f} | {n/lw:,.0f} | {os_} | {orate} | {ratio} |")
EOF
    echo
}

# Time from `switch-ctl add-flow` until the first packet hits the new rule (seed 004 Sect. 5.5):
# the switch forwards 16 flows at full speed over a base table; each round adds a rule of a higher
# priority than all before it for one of the 16 flows, then reads the rule's first-hit time
# (`dump-flows MATCH --json`: created_ns is when the switch took the request, first_hit_ns the
# batch that first hit it).
first() {
    [ -f "$out/sweep.flows" ] || sweep_rules >"$out/sweep.flows"
    [ -f "$out/rules-100000.flows" ] || insert_rules 100000 >"$out/rules-100000.flows"
    cat "$out/sweep.flows" "$out/rules-100000.flows" >"$out/first-big.flows"
    local base
    : >"$out/first.tsv"
    for base in sweep.flows first-big.flows; do
        local sock=$out/first.sock pid
        rm -f "$sock"
        $lr switch --port '1=mem:a?source=64&flows=16' --port '2=mem:b?sink' --flows "$out/$base" \
            --ctl "$sock" --cpu "$cpu" --quiet --json >"$out/first-switch.json" 2>"$out/first-switch.err" &
        pid=$!
        trap 'kill -INT $pid 2>/dev/null || true' EXIT
        for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
        sleep 1
        echo "== first packet: base table $base" >&2
        python3 - "$lr" "$sock" "$(wc -l <"$out/$base")" "${SW_FIRST_ROUNDS:-200}" >>"$out/first.tsv" <<'PY'
import json, subprocess, sys, time
lr, sock, base, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def ctl(*a):
    r = subprocess.run([lr, "switch-ctl", sock, *a, "--json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)
lat = []
for i in range(rounds):
    prio, src = 500 + i, f"10.0.0.{i % 16}"
    ctl("add-flow", f"priority={prio},udp,nw_src={src},actions=output:2")
    t = time.time()
    while True:
        st = [x for x in ctl("dump-flows", f"udp,nw_src={src}")["stats"] if x["priority"] == prio]
        if st and st[0]["first_hit_ns"]:
            lat.append((st[0]["first_hit_ns"] - st[0]["created_ns"]) / 1e3)
            break
        if time.time() - t > 5:
            sys.exit(f"rule {prio} not hit within 5 s")
        time.sleep(0.002)
lat.sort()
print(f"{base}\t{len(lat)}\t{lat[len(lat)//2]:.1f}\t{lat[int(len(lat)*0.9)]:.1f}\t{lat[-1]:.1f}\t{lat[0]:.1f}")
PY
        kill -INT $pid; wait $pid || true
        trap - EXIT
        python3 -c 'import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert j["balanced"], j' "$out/first-switch.json"
    done
    echo "### Time from add-flow to the first packet that hits the rule, under load (seed 004 Sect. 5.5)"
    echo
    echo "The switch forwards 16 UDP flows from \`mem:a?source=64&flows=16\` at full speed on CPU $cpu; each round \`switch-ctl add-flow\` adds a rule (priority above all others) for one of the flows, and \`switch-ctl dump-flows MATCH --json\` reads its \`first_hit_ns - created_ns\` (created: when the switch took the request; first hit: the batch that first hit it): copying and publishing the table, the datapath taking the new version at its next batch, and the first matching packet."
    echo
    echo "| rules in the table | rounds | median (µs) | p90 (µs) | max (µs) | min (µs) |"
    echo "|---:|---:|---:|---:|---:|---:|"
    awk -F'\t' '{printf "| %d | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6}' "$out/first.tsv"
    echo
}

# A private ovsdb-server + ovs-vswitchd in a namespace of our own (its bridge's internal port
# lives there), bridge lrbench with datapath_type=netdev.
ovs_ns=lrswb-$$
ovs_start() { # DIR
    local d=$1
    ovs_stop "$d"
    mkdir -p "$d"
    export OVS_RUNDIR=$d OVS_DBDIR=$d OVS_LOGDIR=$d
    trap 'ovs_stop '"$d" EXIT
    ip netns add "$ovs_ns"
    local x=(ip netns exec "$ovs_ns")
    ovsdb-tool create "$d/conf.db" /usr/share/openvswitch/vswitch.ovsschema
    "${x[@]}" ovsdb-server "$d/conf.db" --remote="punix:$d/db.sock" --pidfile="$d/ovsdb-server.pid" --detach --log-file="$d/ovsdb.log"
    ovs-vsctl --db="unix:$d/db.sock" --no-wait init
    "${x[@]}" ovs-vswitchd "unix:$d/db.sock" --pidfile="$d/ovs-vswitchd.pid" --detach --log-file="$d/vswitchd.log"
    ovs-vsctl --db="unix:$d/db.sock" --timeout=20 add-br lrbench -- set bridge lrbench datapath_type=netdev
}

ovs_stop() {
    local d=$1 p
    for p in ovs-vswitchd ovsdb-server; do
        if [ -f "$d/$p.pid" ]; then kill "$(cat "$d/$p.pid")" 2>/dev/null || true; fi
    done
    sleep 0.5
    ip netns del "$ovs_ns" 2>/dev/null || true
    rm -rf "$d"
    trap - EXIT
}

for p in "${parts[@]}"; do
    case $p in
    sweep) sweep ;;
    insert) insert ;;
    first) first ;;
    *) echo "unknown part '$p' (sweep, insert, first)" >&2; exit 2 ;;
    esac
done
