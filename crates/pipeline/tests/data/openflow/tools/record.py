#!/usr/bin/env python3
"""Record what ovs-ofctl and ovs-vswitchd say to each other over OpenFlow.

Run by record.sh inside a private network namespace, next to a private
ovs-vswitchd whose bridge listens on ptcp:UPSTREAM (a passive controller
connection).  This script is a TCP proxy on 127.0.0.1:PROXY -> UPSTREAM that
logs every OpenFlow message in each direction, split on the header's length
field, and the driver that runs each ovs-ofctl command against the proxy.

Output: one JSON file per conversation in OUTDIR:
  {"name", "argv", "rc", "stdout", "stderr", "note",
   "events": [{"t": seconds since start, "conn": n, "dir": "c->s"|"s->c",
               "hex": message bytes} | {"t", "conn", "dir", "close": true}]}
The events are in the order in which the proxy forwarded them: a c->s message
logged before an s->c message was sent by the client before the proxy handed
it that s->c message (so the client could not have been waiting for it).
"""
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time

PROXY = int(os.environ.get("PROXY_PORT", "16654"))
UPSTREAM = int(os.environ.get("UPSTREAM_PORT", "16653"))
OUTDIR = sys.argv[1]
BR = os.environ["BR"]
VSCTL = ["ovs-vsctl", "--db=unix:" + os.environ["OVS_RUNDIR"] + "/db.sock", "--timeout=20"]
APPCTL = ["ovs-appctl", "-t", os.environ["OVS_RUNDIR"] + "/ovs-vswitchd.ctl"]
TARGET = "tcp:127.0.0.1:%d" % PROXY

lock = threading.Lock()
events = []          # of the current conversation
open_conns = set()
t0 = time.monotonic()
conn_no = 0


def log(ev):
    with lock:
        ev["t"] = round(time.monotonic() - t0, 6)
        events.append(ev)


def pump(client, cid):
    up = socket.create_connection(("127.0.0.1", UPSTREAM))
    for s in (client, up):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sel = selectors.DefaultSelector()
    sides = {client: ("c->s", up), up: ("s->c", client)}
    bufs = {client: b"", up: b""}
    for s in sides:
        sel.register(s, selectors.EVENT_READ)
    live = 2
    while live:
        for key, _ in sel.select():
            s = key.fileobj
            d, other = sides[s]
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                data = b""
                log({"conn": cid, "dir": d, "reset": True})
            if not data:
                if bufs[s]:
                    log({"conn": cid, "dir": d, "partial": bufs[s].hex()})
                log({"conn": cid, "dir": d, "close": True})
                sel.unregister(s)
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                live -= 1
                continue
            buf = bufs[s] + data
            # Log each whole message, then forward exactly the bytes logged.
            while len(buf) >= 8:
                n = int.from_bytes(buf[2:4], "big")
                if n < 8 or len(buf) < n:
                    break
                msg, buf = buf[:n], buf[n:]
                log({"conn": cid, "dir": d, "hex": msg.hex()})
                try:
                    other.sendall(msg)
                except OSError as e:
                    log({"conn": cid, "dir": d, "send_error": str(e)})
            bufs[s] = buf
    client.close()
    up.close()
    with lock:
        open_conns.discard(cid)


def listener():
    global conn_no
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", PROXY))
    ls.listen(8)
    while True:
        c, _ = ls.accept()
        with lock:
            conn_no += 1
            cid = conn_no
            open_conns.add(cid)
        threading.Thread(target=pump, args=(c, cid), daemon=True).start()


def quiet(argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def ofctl(name, args, version="OpenFlow13", note="", shown=None):
    """One conversation: ovs-ofctl [-O version] args[0] TARGET args[1:]."""
    global events, t0
    argv = ["ovs-ofctl"]
    if version:
        argv += ["-O", version]
    opts = [a for a in args if a.startswith("--")]
    args = [a for a in args if not a.startswith("--")]
    argv += opts + [args[0], TARGET] + args[1:]
    with lock:
        events = []
        t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with lock:
            if not open_conns:
                break
        time.sleep(0.02)
    with lock:
        evs = list(events)
        left = set(open_conns)
    shown = shown or args
    shown = (["ovs-ofctl"] + (["-O", version] if version else []) + opts
             + [shown[0], "tcp:127.0.0.1:PORT"] + shown[1:])
    rec = {"name": name, "argv": shown, "rc": p.returncode, "stdout": p.stdout,
           "stderr": p.stderr, "note": note, "events": evs,
           "unclosed": sorted(left)}
    with open(os.path.join(OUTDIR, name + ".json"), "w") as f:
        json.dump(rec, f, indent=1)
    print("%-28s rc=%d msgs=%d %s" % (name, p.returncode,
          sum(1 for e in evs if "hex" in e), p.stderr.strip()[:100]), flush=True)


def main():
    threading.Thread(target=listener, daemon=True).start()
    time.sleep(0.2)
    tmp = os.environ["TD"]

    # Version negotiation with ovs-ofctl's default (-O not given: OpenFlow10 only).
    ofctl("hello-default-of10", ["show"], version=None,
          note="no -O: ovs-ofctl allows OpenFlow10 only")
    ofctl("show", ["show"])
    ofctl("dump-table-features", ["dump-table-features"])
    ofctl("add-group", ["add-group", "group_id=1,type=all,bucket=output:2,bucket=output:3"])
    ofctl("add-meter-of10", ["add-meter", "meter=1,pktps,band=type=drop,rate=1000"], version=None,
          note="meters without -O (OpenFlow10)")
    ofctl("add-meter", ["add-meter", "meter=1,pktps,band=type=drop,rate=1000"])

    flows = [
        ("add-flow-resubmit", "table=0,priority=0,actions=resubmit(,1)"),
        ("add-flow-vlan-push", "table=1,priority=99,in_port=2,vlan_tci=0,actions=mod_vlan_vid:20,resubmit(,2)"),
        ("add-flow-learn", "table=2,actions=learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),resubmit(,3)"),
        ("add-flow-reg0-output", "table=4,reg0=1,actions=output:1"),
        ("add-flow-strip-vlan", "table=4,priority=99,reg0=0,dl_vlan=30,actions=output:1,strip_vlan,output:3,output:4"),
        ("add-flow-output-reg", "table=3,reg1=0x5/0xff,metadata=0x10/0xf0,actions=output:NXM_NX_REG0[0..15]"),
        ("add-flow-load-move", "actions=load:0x2->NXM_NX_REG0[0..15],move:NXM_NX_REG0[0..15]->NXM_NX_REG1[16..31],goto_table:4"),
        ("add-flow-write-metadata", "actions=write_metadata:0x1/0x1,goto_table:2"),
        ("add-flow-set-field", "priority=100,in_port=1,udp,nw_dst=10.0.0.0/8,tp_dst=53,actions=set_field:02:00:00:00:00:09->eth_dst,dec_ttl,output:2"),
        ("add-flow-cookie-timeouts", "cookie=0x1234,idle_timeout=10,hard_timeout=60,priority=5,ip,actions=NORMAL"),
        ("add-flow-group", "actions=group:1"),
        ("add-flow-meter", "actions=meter:1,output:2"),
        ("add-flow-reg-writes", "table=6,actions=load:0x5->NXM_NX_REG2[],set_field:0x6->reg3,"
         "set_field:0x7/0xff->reg4,load:0x1->NXM_NX_REG5[3],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],"
         "output:NXM_NX_REG1[]"),
        ("add-flow-match-fields", "table=7,priority=1,in_port=1,dl_src=02:00:00:00:00:01,"
         "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,vlan_tci=0x3005,metadata=0x5,reg2=2,"
         "reg7=0x7/0xf,actions=drop"),
        ("add-flow-vlan-any", "table=7,priority=2,vlan_tci=0x1000/0x1000,actions=drop"),
    ]
    for name, f in flows:
        ofctl(name, ["add-flow", f])

    ofctl("add-flow-no-names", ["add-flow", "--no-names", "table=5,priority=7,actions=drop"],
          note="--no-names: no port/table name look-ups")
    ofctl("add-flow-of10", ["add-flow", "table=1,reg0=1,actions=resubmit(,2)"], version="OpenFlow10",
          note="for contrast: OpenFlow 1.0 (the bridge allows it), where table ids and registers need Nicira messages")
    ofctl("mod-flows", ["mod-flows", "table=4,reg0=1,actions=output:2"])
    ofctl("mod-flows-strict", ["mod-flows", "--strict", "table=4,priority=99,reg0=0,dl_vlan=30,actions=output:3"])
    ofctl("del-flows-strict", ["del-flows", "--strict", "table=4,priority=99,reg0=0,dl_vlan=30"])
    ofctl("del-flows-cookie", ["del-flows", "cookie=0x1234/-1"])
    ofctl("del-flows-out-port", ["del-flows", "out_port=2"])
    ofctl("del-flows-table", ["del-flows", "table=4"])
    ofctl("del-flows-all", ["del-flows"])

    path = os.path.join(tmp, "flows.txt")
    with open(path, "w") as f:
        f.write("table=0,priority=0,actions=resubmit(,1)\n"
                "table=1,priority=10,reg0=0x1/0xff,actions=resubmit(,2)\n"
                "table=1,priority=0,actions=learn(table=10,NXM_OF_VLAN_TCI[0..11],"
                "NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15]),output:2\n")
    with open(path) as f:
        lines = f.read()
    ofctl("add-flows", ["add-flows", path], note="FLOWS_FILE:\n" + lines,
          shown=["add-flows", "FLOWS_FILE"])

    # One packet through the pipeline so that learn() adds a flow to table 10
    # (ofproto/trace -generate runs the actions' side effects; not OpenFlow).
    quiet(APPCTL + ["ofproto/trace", BR,
                    "in_port=1,dl_vlan=7,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02", "-generate"])

    ofctl("dump-flows", ["dump-flows"])
    ofctl("dump-flows-table", ["dump-flows", "table=10"])
    ofctl("dump-aggregate", ["dump-aggregate"])
    ofctl("dump-tables", ["dump-tables"])
    ofctl("dump-ports", ["dump-ports"])
    ofctl("dump-ports-desc", ["dump-ports-desc"])
    ofctl("dump-groups", ["dump-groups"])
    ofctl("dump-meters", ["dump-meters"])
    ofctl("add-flow-port-names", ["add-flow", "table=5,in_port=p1,actions=output:p2"],
          note="port names instead of numbers")
    ofctl("dump-flows-names", ["dump-flows", "--names", "table=5"], note="--names (default when stdout is not a tty is --no-names)")
    ofctl("del-groups", ["del-groups"])
    ofctl("del-meters", ["del-meters"])

    ofctl("error-goto-backwards", ["add-flow", "table=2,actions=goto_table:1"],
          note="goto_table to a lower table: rejected by ovs-vswitchd")
    ofctl("error-missing-group", ["add-flow", "actions=group:99"],
          note="group 99 does not exist (del-groups ran)")

    # Version mismatch: the bridge speaks OpenFlow13 only, ovs-ofctl OpenFlow10 only.
    quiet(VSCTL + ["set", "bridge", BR, "protocols=OpenFlow13"])
    time.sleep(0.5)
    ofctl("hello-mismatch", ["show"], version="OpenFlow10",
          note="bridge protocols=OpenFlow13, ovs-ofctl -O OpenFlow10")
    quiet(VSCTL + ["set", "bridge", BR, "protocols=OpenFlow10,OpenFlow13"])



if __name__ == "__main__":
    main()
