#!/usr/bin/env python3
"""Probe what ovs-ofctl needs from a switch: a scripted fake OpenFlow 1.3
switch (no Open vSwitch involved) that answers some requests and not others,
and ovs-ofctl run against it.  Writes the same JSON logs as record.py (one
per probe) into OUTDIR, for annotate.py.

Run by record.sh inside its network namespace: usage probe.py OUTDIR.
The fake switch's default answers:
  HELLO (OpenFlow 1.3, version bitmap {1.3}) as soon as the client connects;
  BARRIER_REQUEST -> BARRIER_REPLY; ECHO_REQUEST -> ECHO_REPLY;
  FEATURES_REQUEST -> FEATURES_REPLY (dpid 1, 0 buffers, 11 tables);
  GET_CONFIG_REQUEST -> GET_CONFIG_REPLY (flags 0, miss_send_len 128);
  MULTIPART_REQUEST OFPMP_TABLE_FEATURES / PORT_DESC / FLOW -> one reply
  with an empty body (no tables, no ports, no flows);
  anything else (FLOW_MOD, ...): no answer.
Each probe changes one of these.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

PORT = int(os.environ.get("PROBE_PORT", "16655"))
OUTDIR = sys.argv[1]
TARGET = "tcp:127.0.0.1:%d" % PORT

lock = threading.Lock()
events = []
t0 = time.monotonic()
policy = {}
conn_no = 0
open_conns = set()


def log(ev):
    with lock:
        ev["t"] = round(time.monotonic() - t0, 6)
        events.append(ev)


def msg(typ, xid, body=b"", version=4):
    return bytes([version, typ]) + (8 + len(body)).to_bytes(2, "big") + xid.to_bytes(4, "big") + body


def error(xid, etype, code, req):
    return msg(1, xid, etype.to_bytes(2, "big") + code.to_bytes(2, "big") + req[:64])


def answer(m):
    """Default answers: list of messages for request m."""
    typ, xid = m[1], int.from_bytes(m[4:8], "big")
    if typ == 20:
        return [msg(21, xid)]
    if typ == 2:
        return [msg(3, xid, m[8:])]
    if typ == 5:
        return [msg(6, xid, (1).to_bytes(8, "big") + (0).to_bytes(4, "big") + bytes([11, 0, 0, 0])
                    + (0x4f).to_bytes(4, "big") + (0).to_bytes(4, "big"))]
    if typ == 7:
        return [msg(8, xid, (0).to_bytes(2, "big") + (128).to_bytes(2, "big"))]
    if typ == 18:
        mp = int.from_bytes(m[8:10], "big")
        if mp == 12:
            return [msg(19, xid, m[8:10] + b"\0" * 6 + table_features_entry(0))]
        if mp in (1, 13):
            return [msg(19, xid, m[8:10] + b"\0" * 6)]
    return []


def table_features_entry(table_id, props=True):
    """One ofp_table_features: 64-byte fixed part (no name, metadata_match and
    metadata_write 0, config 0, max_entries 1000), then, if props, the 8
    properties OpenFlow 1.3 requires (INSTRUCTIONS, NEXT_TABLES,
    WRITE_ACTIONS, APPLY_ACTIONS, MATCH, WILDCARDS, WRITE_SETFIELD,
    APPLY_SETFIELD), each with an empty list (type, length 4, 4 bytes pad)."""
    body = b""
    if props:
        for t in (0, 2, 4, 6, 8, 10, 12, 14):
            body += t.to_bytes(2, "big") + (4).to_bytes(2, "big") + b"\0" * 4
    fixed = (64 + len(body)).to_bytes(2, "big") + bytes([table_id]) + b"\0" * 5 + b"\0" * 32 \
        + b"\0" * 16 + (0).to_bytes(4, "big") + (1000).to_bytes(4, "big")
    return fixed + body


def serve(c, cid):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(m):
        log({"conn": cid, "dir": "s->c", "hex": m.hex()})
        c.sendall(m)

    hello = policy.get("hello", msg(0, 0x100 + cid, bytes.fromhex("0001000800000010")))
    send(hello)
    if policy.get("echo_first"):
        send(msg(2, 0x200 + cid, b"ping"))
    buf = b""
    while True:
        try:
            data = c.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            log({"conn": cid, "dir": "c->s", "close": True})
            break
        buf += data
        while len(buf) >= 8 and len(buf) >= int.from_bytes(buf[2:4], "big"):
            n = int.from_bytes(buf[2:4], "big")
            m, buf = buf[:n], buf[n:]
            log({"conn": cid, "dir": "c->s", "hex": m.hex()})
            if m[1] == 0:
                continue
            hook = policy.get("hook")
            replies = hook(m) if hook else None
            for r in (answer(m) if replies is None else replies):
                send(r)
    c.close()
    log({"conn": cid, "dir": "s->c", "close": True})
    with lock:
        open_conns.discard(cid)


def listener():
    global conn_no
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", PORT))
    ls.listen(8)
    while True:
        c, _ = ls.accept()
        with lock:
            conn_no += 1
            cid = conn_no
            open_conns.add(cid)
        threading.Thread(target=serve, args=(c, cid), daemon=True).start()


def probe(name, args, note, pol, version="OpenFlow13"):
    global events, t0, policy
    opts = [a for a in args if a.startswith("--")]
    args = [a for a in args if not a.startswith("--")]
    argv = ["ovs-ofctl", "-O", version] + opts + [args[0], TARGET] + args[1:]
    with lock:
        events = []
        t0 = time.monotonic()
        policy = pol
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = -999, (e.stdout or b"").decode(), (e.stderr or b"").decode() + "\n(killed after 20 s)"
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        with lock:
            if not open_conns:
                break
        time.sleep(0.02)
    with lock:
        evs = list(events)
    shown = ["ovs-ofctl", "-O", version] + opts + [args[0], "tcp:127.0.0.1:PORT"] + args[1:]
    rec = {"name": name, "argv": shown, "rc": rc, "stdout": out, "stderr": err,
           "note": "FAKE SWITCH (tools/probe.py), not Open vSwitch. " + note, "events": evs,
           "unclosed": []}
    with open(os.path.join(OUTDIR, name + ".json"), "w") as f:
        json.dump(rec, f, indent=1)
    print("probe %-26s rc=%d msgs=%d %s" % (name, rc, sum(1 for e in evs if "hex" in e),
          err.strip().replace("\n", " | ")[:160]), flush=True)


def mp_type(m):
    return int.from_bytes(m[8:10], "big") if m[1] == 18 else None


def main():
    threading.Thread(target=listener, daemon=True).start()
    time.sleep(0.2)
    flow = "table=1,reg0=1,actions=resubmit(,2)"
    probe("probe-add-flow-minimal", ["add-flow", flow],
          "OFPMP_TABLE_FEATURES reply with one table (table 0, no name, the 8 properties "
          "OpenFlow 1.3 requires, each empty), empty OFPMP_PORT_DESC reply, no answer to "
          "FLOW_MOD, BARRIER_REPLY: the least a switch has to say for add-flow.", {})
    probe("probe-table-features-empty", ["add-flow", flow],
          "OFPMP_TABLE_FEATURES reply with an empty body (no table).",
          {"hook": lambda m: [msg(19, int.from_bytes(m[4:8], "big"), bytes.fromhex("000c000000000000"))]
           if mp_type(m) == 12 else None})
    probe("probe-table-features-no-props", ["add-flow", flow],
          "OFPMP_TABLE_FEATURES reply with one table (64-byte ofp_table_features) and no properties.",
          {"hook": lambda m: [msg(19, int.from_bytes(m[4:8], "big"), bytes.fromhex("000c000000000000")
                                  + table_features_entry(0, props=False))]
           if mp_type(m) == 12 else None})
    probe("probe-table-features-error", ["add-flow", flow],
          "OFPMP_TABLE_FEATURES answered with OFPT_ERROR OFPBRC_BAD_MULTIPART.",
          {"hook": lambda m: [error(int.from_bytes(m[4:8], "big"), 1, 2, m)] if mp_type(m) == 12 else None})
    probe("probe-port-desc-error", ["add-flow", flow],
          "OFPMP_PORT_DESC answered with OFPT_ERROR OFPBRC_BAD_MULTIPART.",
          {"hook": lambda m: [error(int.from_bytes(m[4:8], "big"), 1, 2, m)] if mp_type(m) == 13 else None})
    probe("probe-no-barrier-reply", ["add-flow", "--timeout=3", flow],
          "BARRIER_REQUEST never answered (ovs-ofctl --timeout=3).",
          {"hook": lambda m: [] if m[1] == 20 else None})
    probe("probe-error-no-barrier-reply", ["add-flow", "--timeout=3", flow],
          "FLOW_MOD answered with OFPT_ERROR OFPBAC_BAD_OUT_GROUP, BARRIER_REQUEST never answered "
          "(ovs-ofctl --timeout=3).",
          {"hook": lambda m: [error(int.from_bytes(m[4:8], "big"), 2, 9, m)] if m[1] == 14
           else ([] if m[1] == 20 else None)})
    last = {}

    def late_error(m):
        if m[1] == 14:
            last["fm"] = m
            return []
        if m[1] == 20:
            fm = last["fm"]
            return [msg(21, int.from_bytes(m[4:8], "big")), error(int.from_bytes(fm[4:8], "big"), 2, 9, fm)]
        return None
    probe("probe-error-after-barrier-reply", ["add-flow", flow],
          "BARRIER_REPLY first, then an OFPT_ERROR OFPBAC_BAD_OUT_GROUP for the FLOW_MOD (wrong order).",
          {"hook": late_error})
    probe("probe-hello-no-bitmap", ["add-flow", flow],
          "The switch's HELLO is a bare 8-byte OpenFlow 1.3 HELLO (no version bitmap element).",
          {"hello": msg(0, 0x77)})
    probe("probe-hello-v15-bitmap13", ["add-flow", flow],
          "The switch's HELLO says version 0x06 (1.5) in its header but its bitmap holds 1.3 only.",
          {"hello": msg(0, 0x78, bytes.fromhex("0001000800000010"), version=6)})
    probe("probe-echo-request", ["add-flow", flow],
          "The switch sends an ECHO_REQUEST right after its HELLO: does ovs-ofctl answer?",
          {"echo_first": True})
    probe("probe-show-minimal", ["show"],
          "show: FEATURES_REPLY, empty PORT_DESC reply, GET_CONFIG_REPLY.", {})
    probe("probe-dump-flows-error", ["dump-flows"],
          "OFPMP_FLOW request answered with OFPT_ERROR OFPBRC_BAD_MULTIPART.",
          {"hook": lambda m: [error(int.from_bytes(m[4:8], "big"), 1, 2, m)] if mp_type(m) == 1 else None})
    probe("probe-dump-flows-two-parts", ["dump-flows"],
          "OFPMP_FLOW answered in two parts: an empty part with OFPMPF_REPLY_MORE, then an empty last part.",
          {"hook": lambda m: [msg(19, int.from_bytes(m[4:8], "big"), bytes.fromhex("0001000100000000")),
                              msg(19, int.from_bytes(m[4:8], "big"), bytes.fromhex("0001000000000000"))]
           if mp_type(m) == 1 else None})


if __name__ == "__main__":
    main()
