#!/usr/bin/env python3
"""Check the vector files: parse every NAME.txt (and probes/NAME.txt) the way a
test would, and verify that each message block's bytes are one whole OpenFlow
message (header length = number of bytes), that the title's xid is the
header's, and that every block whose hex was left out points at a part of
dump-table-features.txt with the same length and first 16 bytes (xid aside).

usage: check.py [DIR]   (default: the directory above this script)
Prints one line per file and 'N passed, N failed'; exit 1 on any failure.
"""
import lzma
import os
import re
import sys

TITLE = re.compile(r"^# (c->s|s->c)(?: \[conn (\d+)\])? (\S+)(?: (OFPMP_\w+|OFPST_\w+|NXT_\w+))? \(xid 0x([0-9a-f]{8})\)")
OMITTED = re.compile(r"^#   \((\d+) bytes, hex left out: .* as part (\d+) of (\d+)")
FIRST16 = re.compile(r"first 16 bytes: ((?:[0-9a-f]{2} ?){16})\)")


def parse(path):
    """Blocks: dicts with dir, conn, type, xid, bytes (or None if left out), omitted info."""
    blocks, cur = [], None
    f = lzma.open(path, "rt") if path.endswith(".xz") else open(path)
    for line in f:
        line = line.rstrip("\n")
        m = TITLE.match(line)
        if m:
            cur = {"dir": m.group(1), "conn": int(m.group(2) or 1), "type": m.group(3),
                   "mp": m.group(4), "xid": int(m.group(5), 16), "bytes": b"", "omitted": None}
            blocks.append(cur)
            continue
        if cur is None:
            continue
        if line == "":
            cur = None
            continue
        m = OMITTED.match(line)
        if m:
            cur["omitted"] = [int(m.group(1)), int(m.group(2)), None]
            continue
        m = FIRST16.search(line)
        if m and cur["omitted"]:
            cur["omitted"][2] = bytes.fromhex(m.group(1))
            continue
        if not line.startswith("#"):
            cur["bytes"] += bytes.fromhex(line)
    return blocks


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    canon = [b["bytes"] for b in parse(os.path.join(d, "dump-table-features.txt.xz"))
             if b["dir"] == "s->c" and b["mp"] == "OFPMP_TABLE_FEATURES"]
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith((".txt", ".txt.xz")))
    pd = os.path.join(d, "probes")
    if os.path.isdir(pd):
        files += sorted(os.path.join(pd, f) for f in os.listdir(pd) if f.endswith(".txt") and f != "sequences.txt")
    ok = bad = 0
    for path in files:
        errs = []
        blocks = parse(path)
        for i, b in enumerate(blocks):
            if b["omitted"]:
                n, part, first = b["omitted"]
                ref = canon[part - 1] if 0 < part <= len(canon) else b""
                if len(ref) != n or first is None or first[:4] + first[8:] != ref[:4] + ref[8:16] \
                        or int.from_bytes(first[4:8], "big") != b["xid"]:
                    errs.append("block %d: left-out part %d does not match dump-table-features.txt" % (i, part))
                continue
            m = b["bytes"]
            if len(m) < 8 or int.from_bytes(m[2:4], "big") != len(m):
                errs.append("block %d: %d bytes, header says %s" % (i, len(m), int.from_bytes(m[2:4], "big") if len(m) >= 4 else "?"))
            elif int.from_bytes(m[4:8], "big") != b["xid"]:
                errs.append("block %d: xid differs from the title" % i)
        if not blocks and "(no messages" not in open(path).read():
            errs.append("no message blocks")
        print("%-40s %3d messages %s" % (os.path.relpath(path, d), len(blocks), "ok" if not errs else "FAILED: " + "; ".join(errs)))
        if errs:
            bad += 1
        else:
            ok += 1
    print("%d passed, %d failed" % (ok, bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
