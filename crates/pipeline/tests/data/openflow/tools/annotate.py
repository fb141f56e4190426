#!/usr/bin/env python3
"""Turn record.py's JSON logs into the annotated hex files (NAME.txt).

usage: annotate.py RAWDIR OUTDIR "WHAT WAS RECORDED" [SEQUENCES_FILE]

Each message becomes one block: a title line
  # DIR TYPE (xid 0x........): summary (from `ovs-ofctl ofp-print`)
then the rest of ofp-print's decoding ("#   | ..."), then the field-level
layout ("#   +OFF ...", offsets from the start of the message), then the
message's bytes in hex, 16 a line.  Blocks are separated by an empty line.
A connection close is a block of comment lines only ("# c->s EOF ...").
The decoder here is written for the messages seen in these recordings
(OpenFlow 1.3 plus the Nicira extensions ovs-ofctl uses) and falls back to
"(not decoded)" for anything else.
"""
import json
import os
import subprocess
import sys

OFPT13 = ["HELLO", "ERROR", "ECHO_REQUEST", "ECHO_REPLY", "EXPERIMENTER",
          "FEATURES_REQUEST", "FEATURES_REPLY", "GET_CONFIG_REQUEST",
          "GET_CONFIG_REPLY", "SET_CONFIG", "PACKET_IN", "FLOW_REMOVED",
          "PORT_STATUS", "PACKET_OUT", "FLOW_MOD", "GROUP_MOD", "PORT_MOD",
          "TABLE_MOD", "MULTIPART_REQUEST", "MULTIPART_REPLY",
          "BARRIER_REQUEST", "BARRIER_REPLY", "QUEUE_GET_CONFIG_REQUEST",
          "QUEUE_GET_CONFIG_REPLY", "ROLE_REQUEST", "ROLE_REPLY",
          "GET_ASYNC_REQUEST", "GET_ASYNC_REPLY", "SET_ASYNC", "METER_MOD"]
OFPT10 = ["HELLO", "ERROR", "ECHO_REQUEST", "ECHO_REPLY", "VENDOR",
          "FEATURES_REQUEST", "FEATURES_REPLY", "GET_CONFIG_REQUEST",
          "GET_CONFIG_REPLY", "SET_CONFIG", "PACKET_IN", "FLOW_REMOVED",
          "PORT_STATUS", "PACKET_OUT", "FLOW_MOD", "PORT_MOD",
          "STATS_REQUEST", "STATS_REPLY", "BARRIER_REQUEST", "BARRIER_REPLY",
          "QUEUE_GET_CONFIG_REQUEST", "QUEUE_GET_CONFIG_REPLY"]
OFPMP = {0: "OFPMP_DESC", 1: "OFPMP_FLOW", 2: "OFPMP_AGGREGATE", 3: "OFPMP_TABLE",
         4: "OFPMP_PORT_STATS", 5: "OFPMP_QUEUE", 6: "OFPMP_GROUP",
         7: "OFPMP_GROUP_DESC", 8: "OFPMP_GROUP_FEATURES", 9: "OFPMP_METER",
         10: "OFPMP_METER_CONFIG", 11: "OFPMP_METER_FEATURES",
         12: "OFPMP_TABLE_FEATURES", 13: "OFPMP_PORT_DESC",
         0xffff: "OFPMP_EXPERIMENTER"}
NXT = {10: "NXT_ROLE_REQUEST", 11: "NXT_ROLE_REPLY", 12: "NXT_SET_FLOW_FORMAT",
       13: "NXT_FLOW_MOD", 14: "NXT_FLOW_REMOVED", 15: "NXT_FLOW_MOD_TABLE_ID",
       16: "NXT_SET_PACKET_IN_FORMAT", 17: "NXT_PACKET_IN", 18: "NXT_FLOW_AGE",
       19: "NXT_SET_ASYNC_CONFIG", 20: "NXT_SET_CONTROLLER_ID",
       24: "NXT_TLV_TABLE_MOD", 25: "NXT_TLV_TABLE_REQUEST",
       26: "NXT_TLV_TABLE_REPLY", 27: "NXT_SET_ASYNC_CONFIG2", 28: "NXT_RESUME",
       30: "NXT_PACKET_IN2", 31: "NXT_GROUP_MOD", 32: "NXT_CT_FLUSH"}
NX_VENDOR = 0x00002320
ONF_VENDOR = 0x4F4E4600
NXAST = {1: "NXAST_RESUBMIT", 2: "NXAST_SET_TUNNEL", 5: "NXAST_POP_QUEUE",
         6: "NXAST_REG_MOVE", 7: "NXAST_REG_LOAD", 8: "NXAST_NOTE",
         9: "NXAST_SET_TUNNEL64", 10: "NXAST_MULTIPATH", 12: "NXAST_BUNDLE",
         13: "NXAST_BUNDLE_LOAD", 14: "NXAST_RESUBMIT_TABLE",
         15: "NXAST_OUTPUT_REG", 16: "NXAST_LEARN", 17: "NXAST_EXIT",
         18: "NXAST_DEC_TTL", 19: "NXAST_FIN_TIMEOUT", 20: "NXAST_CONTROLLER",
         21: "NXAST_DEC_TTL_CNT_IDS", 22: "NXAST_WRITE_METADATA",
         27: "NXAST_STACK_PUSH", 28: "NXAST_STACK_POP", 29: "NXAST_SAMPLE",
         32: "NXAST_OUTPUT_REG2", 33: "NXAST_REG_LOAD2", 34: "NXAST_CONJUNCTION",
         35: "NXAST_CT", 36: "NXAST_NAT", 37: "NXAST_CONTROLLER2",
         38: "NXAST_SAMPLE2", 39: "NXAST_OUTPUT_TRUNC", 42: "NXAST_CLONE",
         43: "NXAST_CT_CLEAR", 44: "NXAST_RESUBMIT_TABLE_CT", 45: "NXAST_LEARN2",
         49: "NXAST_CHECK_PKT_LARGER", 50: "NXAST_DELETE_FIELD"}
OFPAT13 = {0: "OFPAT_OUTPUT", 11: "OFPAT_COPY_TTL_OUT", 12: "OFPAT_COPY_TTL_IN",
           15: "OFPAT_SET_MPLS_TTL", 16: "OFPAT_DEC_MPLS_TTL",
           17: "OFPAT_PUSH_VLAN", 18: "OFPAT_POP_VLAN", 19: "OFPAT_PUSH_MPLS",
           20: "OFPAT_POP_MPLS", 21: "OFPAT_SET_QUEUE", 22: "OFPAT_GROUP",
           23: "OFPAT_SET_NW_TTL", 24: "OFPAT_DEC_NW_TTL", 25: "OFPAT_SET_FIELD",
           26: "OFPAT_PUSH_PBB", 27: "OFPAT_POP_PBB", 0xffff: "OFPAT_EXPERIMENTER"}
OFPIT = {1: "OFPIT_GOTO_TABLE", 2: "OFPIT_WRITE_METADATA", 3: "OFPIT_WRITE_ACTIONS",
         4: "OFPIT_APPLY_ACTIONS", 5: "OFPIT_CLEAR_ACTIONS", 6: "OFPIT_METER",
         0xffff: "OFPIT_EXPERIMENTER"}
FLOW_MOD_CMD = ["OFPFC_ADD", "OFPFC_MODIFY", "OFPFC_MODIFY_STRICT", "OFPFC_DELETE",
                "OFPFC_DELETE_STRICT"]
ERR_TYPE = {0: "OFPET_HELLO_FAILED", 1: "OFPET_BAD_REQUEST", 2: "OFPET_BAD_ACTION",
            3: "OFPET_BAD_INSTRUCTION", 4: "OFPET_BAD_MATCH",
            5: "OFPET_FLOW_MOD_FAILED", 6: "OFPET_GROUP_MOD_FAILED",
            7: "OFPET_PORT_MOD_FAILED", 8: "OFPET_TABLE_MOD_FAILED",
            9: "OFPET_QUEUE_OP_FAILED", 10: "OFPET_SWITCH_CONFIG_FAILED",
            11: "OFPET_ROLE_REQUEST_FAILED", 12: "OFPET_METER_MOD_FAILED",
            13: "OFPET_TABLE_FEATURES_FAILED", 0xffff: "OFPET_EXPERIMENTER"}
ERR_CODE = {
    0: ["OFPHFC_INCOMPATIBLE", "OFPHFC_EPERM"],
    1: ["OFPBRC_BAD_VERSION", "OFPBRC_BAD_TYPE", "OFPBRC_BAD_MULTIPART",
        "OFPBRC_BAD_EXPERIMENTER", "OFPBRC_BAD_EXP_TYPE", "OFPBRC_EPERM",
        "OFPBRC_BAD_LEN", "OFPBRC_BUFFER_EMPTY", "OFPBRC_BUFFER_UNKNOWN",
        "OFPBRC_BAD_TABLE_ID", "OFPBRC_IS_SLAVE", "OFPBRC_BAD_PORT",
        "OFPBRC_BAD_PACKET", "OFPBRC_MULTIPART_BUFFER_OVERFLOW"],
    2: ["OFPBAC_BAD_TYPE", "OFPBAC_BAD_LEN", "OFPBAC_BAD_EXPERIMENTER",
        "OFPBAC_BAD_EXP_TYPE", "OFPBAC_BAD_OUT_PORT", "OFPBAC_BAD_ARGUMENT",
        "OFPBAC_EPERM", "OFPBAC_TOO_MANY", "OFPBAC_BAD_QUEUE",
        "OFPBAC_BAD_OUT_GROUP", "OFPBAC_MATCH_INCONSISTENT",
        "OFPBAC_UNSUPPORTED_ORDER", "OFPBAC_BAD_TAG", "OFPBAC_BAD_SET_TYPE",
        "OFPBAC_BAD_SET_LEN", "OFPBAC_BAD_SET_ARGUMENT"],
    3: ["OFPBIC_UNKNOWN_INST", "OFPBIC_UNSUP_INST", "OFPBIC_BAD_TABLE_ID",
        "OFPBIC_UNSUP_METADATA", "OFPBIC_UNSUP_METADATA_MASK",
        "OFPBIC_BAD_EXPERIMENTER", "OFPBIC_BAD_EXP_TYPE", "OFPBIC_BAD_LEN",
        "OFPBIC_EPERM"],
    5: ["OFPFMFC_UNKNOWN", "OFPFMFC_TABLE_FULL", "OFPFMFC_BAD_TABLE_ID",
        "OFPFMFC_OVERLAP", "OFPFMFC_EPERM", "OFPFMFC_BAD_TIMEOUT",
        "OFPFMFC_BAD_COMMAND", "OFPFMFC_BAD_FLAGS"],
    6: ["OFPGMFC_GROUP_EXISTS", "OFPGMFC_INVALID_GROUP", "OFPGMFC_WEIGHT_UNSUPPORTED",
        "OFPGMFC_OUT_OF_GROUPS", "OFPGMFC_OUT_OF_BUCKETS", "OFPGMFC_CHAINING_UNSUPPORTED",
        "OFPGMFC_WATCH_UNSUPPORTED", "OFPGMFC_LOOP", "OFPGMFC_UNKNOWN_GROUP",
        "OFPGMFC_CHAINED_GROUP", "OFPGMFC_BAD_TYPE", "OFPGMFC_BAD_COMMAND",
        "OFPGMFC_BAD_BUCKET", "OFPGMFC_BAD_WATCH", "OFPGMFC_EPERM"],
    12: ["OFPMMFC_UNKNOWN", "OFPMMFC_METER_EXISTS", "OFPMMFC_INVALID_METER",
         "OFPMMFC_UNKNOWN_METER", "OFPMMFC_BAD_COMMAND", "OFPMMFC_BAD_FLAGS",
         "OFPMMFC_BAD_RATE", "OFPMMFC_BAD_BURST", "OFPMMFC_BAD_BAND",
         "OFPMMFC_BAD_BAND_VALUE", "OFPMMFC_OUT_OF_METERS", "OFPMMFC_OUT_OF_BANDS"],
}
PORTS32 = {0xffffff00: "OFPP_MAX", 0xfffffff8: "OFPP_IN_PORT", 0xfffffff9: "OFPP_TABLE",
           0xfffffffa: "OFPP_NORMAL", 0xfffffffb: "OFPP_FLOOD", 0xfffffffc: "OFPP_ALL",
           0xfffffffd: "OFPP_CONTROLLER", 0xfffffffe: "OFPP_LOCAL", 0xffffffff: "OFPP_ANY"}
PORTS16 = {0xfff8: "OFPP_IN_PORT", 0xfff9: "OFPP_TABLE", 0xfffa: "OFPP_NORMAL",
           0xfffb: "OFPP_FLOOD", 0xfffc: "OFPP_ALL", 0xfffd: "OFPP_CONTROLLER",
           0xfffe: "OFPP_LOCAL", 0xffff: "OFPP_NONE"}
GROUPS = {0xfffffffc: "OFPG_ALL", 0xffffffff: "OFPG_ANY"}

# OXM/NXM fields (include/openvswitch/meta-flow.h of Open vSwitch 3.1).
_F = {
    0x0000: "NXM_OF_IN_PORT NXM_OF_ETH_DST NXM_OF_ETH_SRC NXM_OF_ETH_TYPE "
            "NXM_OF_VLAN_TCI NXM_OF_IP_TOS NXM_OF_IP_PROTO NXM_OF_IP_SRC "
            "NXM_OF_IP_DST NXM_OF_TCP_SRC NXM_OF_TCP_DST NXM_OF_UDP_SRC "
            "NXM_OF_UDP_DST NXM_OF_ICMP_TYPE NXM_OF_ICMP_CODE NXM_OF_ARP_OP "
            "NXM_OF_ARP_SPA NXM_OF_ARP_TPA",
    0x8000: "OXM_OF_IN_PORT OXM_OF_IN_PHY_PORT OXM_OF_METADATA OXM_OF_ETH_DST "
            "OXM_OF_ETH_SRC OXM_OF_ETH_TYPE OXM_OF_VLAN_VID OXM_OF_VLAN_PCP "
            "OXM_OF_IP_DSCP OXM_OF_IP_ECN OXM_OF_IP_PROTO OXM_OF_IPV4_SRC "
            "OXM_OF_IPV4_DST OXM_OF_TCP_SRC OXM_OF_TCP_DST OXM_OF_UDP_SRC "
            "OXM_OF_UDP_DST OXM_OF_SCTP_SRC OXM_OF_SCTP_DST OXM_OF_ICMPV4_TYPE "
            "OXM_OF_ICMPV4_CODE OXM_OF_ARP_OP OXM_OF_ARP_SPA OXM_OF_ARP_TPA "
            "OXM_OF_ARP_SHA OXM_OF_ARP_THA OXM_OF_IPV6_SRC OXM_OF_IPV6_DST "
            "OXM_OF_IPV6_FLABEL OXM_OF_ICMPV6_TYPE OXM_OF_ICMPV6_CODE "
            "OXM_OF_IPV6_ND_TARGET OXM_OF_IPV6_ND_SLL OXM_OF_IPV6_ND_TLL "
            "OXM_OF_MPLS_LABEL OXM_OF_MPLS_TC OXM_OF_MPLS_BOS OXM_OF_PBB_ISID "
            "OXM_OF_TUNNEL_ID OXM_OF_IPV6_EXTHDR",
}
FIELDS = {}
for cls, names in _F.items():
    for i, n in enumerate(names.split()):
        FIELDS[(cls, i)] = n
FIELDS[(0x8000, 44)] = "OXM_OF_PACKET_TYPE"
for i, n in [(16, "TUN_ID"), (17, "ARP_SHA"), (18, "ARP_THA"), (19, "IPV6_SRC"),
             (20, "IPV6_DST"), (21, "ICMPV6_TYPE"), (22, "ICMPV6_CODE"),
             (23, "ND_TARGET"), (24, "ND_SLL"), (25, "ND_TLL"), (26, "IP_FRAG"),
             (27, "IPV6_LABEL"), (28, "IP_ECN"), (29, "IP_TTL"), (30, "MPLS_TTL"),
             (31, "TUN_IPV4_SRC"), (32, "TUN_IPV4_DST"), (33, "PKT_MARK"),
             (34, "TCP_FLAGS"), (35, "DP_HASH"), (36, "RECIRC_ID"), (37, "CONJ_ID"),
             (104, "TUN_FLAGS"), (105, "CT_STATE"), (106, "CT_ZONE"),
             (107, "CT_MARK"), (108, "CT_LABEL")] + [(r, "REG%d" % r) for r in range(16)] \
        + [(111 + r, "XXREG%d" % r) for r in range(8)]:
    FIELDS[(0x0001, i)] = "NXM_NX_" + n
for i, n in [(38, "TUN_GBP_ID"), (39, "TUN_GBP_FLAGS"), (109, "TUN_IPV6_SRC"),
             (110, "TUN_IPV6_DST"), (119, "CT_NW_PROTO"), (120, "CT_NW_SRC"),
             (121, "CT_NW_DST"), (122, "CT_IPV6_SRC"), (123, "CT_IPV6_DST"),
             (124, "CT_TP_SRC"), (125, "CT_TP_DST")] + [(40 + k, "TUN_METADATA%d" % k) for k in range(64)]:
    FIELDS[(0x0001, i)] = "NXM_NX_" + n
for i in range(8):
    FIELDS[(0x8001, i)] = "OXM_OF_PKT_REG%d" % i
FIELDS[(0x1000, 1)] = "ERICOXM_OF_ICMPV6_ND_RESERVED"
FIELDS[(0x1000, 2)] = "ERICOXM_OF_ICMPV6_ND_OPTIONS_TYPE"
NSH_VENDOR = 0x005AD650
EXP_FIELDS = {(ONF_VENDOR, 42): "ONFOXM_ET_TCP_FLAGS", (ONF_VENDOR, 43): "ONFOXM_ET_ACTSET_OUTPUT",
              (NX_VENDOR, 0): "NXOXM_ET_DP_HASH", (NX_VENDOR, 11): "NXOXM_ET_ERSPAN_IDX",
              (NX_VENDOR, 12): "NXOXM_ET_ERSPAN_VER", (NX_VENDOR, 13): "NXOXM_ET_ERSPAN_DIR",
              (NX_VENDOR, 14): "NXOXM_ET_ERSPAN_HWID", (NX_VENDOR, 15): "NXOXM_ET_GTPU_FLAGS",
              (NX_VENDOR, 16): "NXOXM_ET_GTPU_MSGTYPE"}
for i, n in enumerate("FLAGS MDTYPE NP SPI SI C1 C2 C3 C4 TTL".split()):
    EXP_FIELDS[(NSH_VENDOR, i + 1)] = "NXOXM_NSH_" + n


def u(b, o, n):
    return int.from_bytes(b[o:o + n], "big")


def hx(b):
    return b.hex()


def mac(b):
    return ":".join("%02x" % x for x in b)


class Ann:
    def __init__(self, msg):
        self.b = msg
        self.notes = []

    def n(self, off, text, depth=0):
        self.notes.append("+%-4d %s%s" % (off, "  " * depth, text))


def port32(p):
    return "%d" % p if p not in PORTS32 else "0x%08x %s" % (p, PORTS32[p])


def field_name(hdr, exp=None):
    cls, fld = hdr >> 16, (hdr >> 9) & 0x7f
    if cls == 0xffff:
        return EXP_FIELDS.get((exp, fld), "experimenter 0x%08x field %d" % (exp or 0, fld))
    return FIELDS.get((cls, fld), "class 0x%04x field %d" % (cls, fld))


def nxm_header_text(hdr, exp=None):
    cls, fld, hm, ln = hdr >> 16, (hdr >> 9) & 0x7f, (hdr >> 8) & 1, hdr & 0xff
    s = "0x%08x = class 0x%04x field %d hasmask %d length %d (%s)" % (
        hdr, cls, fld, hm, ln, field_name(hdr, exp))
    return s


def fmt_value(name, v):
    if "ETH_" in name and len(v) == 6 or name.endswith(("_SHA", "_THA", "_SLL", "_TLL")):
        return mac(v)
    if len(v) == 4 and ("IPV4" in name or "IP_SRC" in name or "IP_DST" in name or "_SPA" in name or "_TPA" in name):
        return ".".join(str(x) for x in v)
    return "0x" + hx(v)


def oxm_tlvs(a, off, end, depth):
    """Decode OXM TLVs in a.b[off:end]; returns nothing."""
    b = a.b
    while off + 4 <= end:
        hdr = u(b, off, 4)
        if hdr == 0:
            a.n(off, "padding %d byte(s)" % (end - off), depth)
            return
        cls, hm, ln = hdr >> 16, (hdr >> 8) & 1, hdr & 0xff
        exp = None
        body = off + 4
        if cls == 0xffff:
            exp = u(b, body, 4)
            body += 4
            vlen = ln - 4
        else:
            vlen = ln
        name = field_name(hdr, exp)
        val_len = vlen // 2 if hm else vlen
        v = b[body:body + val_len]
        s = "OXM %s%s: " % (nxm_header_text(hdr, exp),
                           "" if exp is None else " experimenter 0x%08x" % exp)
        s += "value %s" % fmt_value(name, v)
        if hm:
            s += " mask %s" % fmt_value(name, b[body + val_len:body + vlen])
        if name in ("OXM_OF_VLAN_VID",):
            vv = u(v, 0, 2)
            s += " [OFPVID_PRESENT=0x1000 %s, vid %d]" % ("set" if vv & 0x1000 else "clear", vv & 0xfff)
        if name in ("NXM_OF_VLAN_TCI",):
            vv = u(v, 0, 2)
            s += " [CFI bit 0x1000 %s, vid %d, pcp %d]" % ("set" if vv & 0x1000 else "clear", vv & 0xfff, vv >> 13)
        a.n(off, s, depth)
        off = body + vlen


def match(a, off, depth):
    b = a.b
    typ, ln = u(b, off, 2), u(b, off + 2, 2)
    padded = (ln + 7) // 8 * 8
    a.n(off, "ofp_match: type %d (%s), length %d (+%d pad to 8 -> %d bytes)"
        % (typ, {0: "OFPMT_STANDARD", 1: "OFPMT_OXM"}.get(typ, "?"), ln, padded - ln, padded), depth)
    if ln == 4:
        a.n(off + 4, "(no OXM fields: match all)", depth + 1)
    oxm_tlvs(a, off + 4, off + ln, depth + 1)
    return off + padded


def nx_hdr_at(b, off):
    """An NXM/OXM header in an action: 4 bytes, or 8 if experimenter."""
    hdr = u(b, off, 4)
    if hdr >> 16 == 0xffff:
        return hdr, u(b, off + 4, 4), 8
    return hdr, None, 4


def ofs_nbits(v):
    ofs, nb = v >> 6, (v & 0x3f) + 1
    return "ofs_nbits 0x%04x = ofs %d, n_bits %d -> bits [%d..%d]" % (v, ofs, nb, ofs, ofs + nb - 1)


def learn_specs(a, off, end, depth):
    b = a.b
    i = 0
    while off + 2 <= end:
        h = u(b, off, 2)
        if h == 0:
            a.n(off, "end of specs: %d zero byte(s) (header 0 ends the list; pads to 8)" % (end - off), depth)
            return
        nb = h & 0x7ff
        src_imm = (h >> 13) & 1
        dst = (h >> 11) & 3
        dstn = ["NX_LEARN_DST_MATCH", "NX_LEARN_DST_LOAD", "NX_LEARN_DST_OUTPUT", "reserved"][dst]
        a.n(off, "spec %d header 0x%04x: src %s, dst %s (%d), n_bits %d"
            % (i, h, "NX_LEARN_SRC_IMMEDIATE" if src_imm else "NX_LEARN_SRC_FIELD", dstn, dst, nb), depth)
        off += 2
        if src_imm:
            n = (nb + 15) // 16 * 2
            a.n(off, "src immediate value (%d bytes, n_bits rounded up to 16-bit units): 0x%s" % (n, hx(b[off:off + n])), depth + 1)
            off += n
        else:
            hdr, exp, hl = nx_hdr_at(b, off)
            a.n(off, "src field %s" % nxm_header_text(hdr, exp), depth + 1)
            a.n(off + hl, "src_ofs %d" % u(b, off + hl, 2), depth + 1)
            off += hl + 2
        if dst in (0, 1):
            hdr, exp, hl = nx_hdr_at(b, off)
            a.n(off, "dst field %s" % nxm_header_text(hdr, exp), depth + 1)
            a.n(off + hl, "dst_ofs %d" % u(b, off + hl, 2), depth + 1)
            off += hl + 2
        i += 1


def nx_action(a, off, ln, depth):
    b = a.b
    sub = u(b, off + 8, 2)
    name = NXAST.get(sub, "NXAST subtype %d" % sub)
    a.n(off + 4, "experimenter 0x%08x (NX_VENDOR_ID, Nicira)" % NX_VENDOR, depth)
    a.n(off + 8, "subtype %d %s" % (sub, name), depth)
    p = off + 10
    if sub == 1:
        a.n(p, "in_port %d (0xfff8 = OFPP_IN_PORT), pad 4" % u(b, p, 2), depth)
    elif sub == 14:
        t = b[p + 2]
        a.n(p, "in_port %s, table %s, pad 3" % (
            "0xfff8 OFPP_IN_PORT (= keep the packet's in_port)" if u(b, p, 2) == 0xfff8 else u(b, p, 2),
            "255 (= current table)" if t == 255 else t), depth)
    elif sub == 7:
        a.n(p, ofs_nbits(u(b, p, 2)), depth)
        a.n(p + 2, "dst %s" % nxm_header_text(u(b, p + 2, 4)), depth)
        a.n(p + 6, "value 0x%016x" % u(b, p + 6, 8), depth)
    elif sub == 6:
        a.n(p, "n_bits %d, src_ofs %d, dst_ofs %d" % (u(b, p, 2), u(b, p + 2, 2), u(b, p + 4, 2)), depth)
        q = p + 6
        hdr, exp, hl = nx_hdr_at(b, q)
        a.n(q, "src %s" % nxm_header_text(hdr, exp), depth)
        q += hl
        hdr, exp, hl = nx_hdr_at(b, q)
        a.n(q, "dst %s" % nxm_header_text(hdr, exp), depth)
        q += hl
        if q < off + ln:
            a.n(q, "pad %d (to 8)" % (off + ln - q), depth)
    elif sub == 15:
        a.n(p, ofs_nbits(u(b, p, 2)), depth)
        a.n(p + 2, "src %s" % nxm_header_text(u(b, p + 2, 4)), depth)
        a.n(p + 6, "max_len %d, zero[6]" % u(b, p + 6, 2), depth)
    elif sub == 32:
        a.n(p, ofs_nbits(u(b, p, 2)) + ", max_len %d" % u(b, p + 2, 2), depth)
        hdr, exp, hl = nx_hdr_at(b, p + 4)
        a.n(p + 4, "src %s" % nxm_header_text(hdr, exp), depth)
    elif sub in (16, 45):
        a.n(p, "idle_timeout %d, hard_timeout %d, priority %d" % (u(b, p, 2), u(b, p + 2, 2), u(b, p + 4, 2)), depth)
        a.n(p + 6, "cookie 0x%016x" % u(b, p + 6, 8), depth)
        a.n(p + 14, "flags 0x%04x, table_id %d, pad 1" % (u(b, p + 14, 2), b[p + 16]), depth)
        a.n(p + 18, "fin_idle_timeout %d, fin_hard_timeout %d" % (u(b, p + 18, 2), u(b, p + 20, 2)), depth)
        q = p + 22
        if sub == 45:
            a.n(q, "limit %d, result_dst_ofs %d, pad 2" % (u(b, q, 4), u(b, q + 4, 2)), depth)
            q += 8
        a.n(q, "flow_mod_specs (each: 16-bit header, then src, then dst):", depth)
        learn_specs(a, q, off + ln, depth + 1)
    elif sub == 22:
        a.n(p, "pad 6, metadata 0x%016x, mask 0x%016x" % (u(b, p + 6, 8), u(b, p + 14, 8)), depth)
    elif sub == 18:
        a.n(p, "pad 6", depth)
    else:
        a.n(p, "(body not decoded)", depth)


def actions(a, off, end, depth):
    b = a.b
    while off + 4 <= end:
        typ, ln = u(b, off, 2), u(b, off + 2, 2)
        name = OFPAT13.get(typ, "action type %d" % typ)
        a.n(off, "action type %d %s, len %d" % (typ, name, ln), depth)
        if ln < 8:
            a.n(off, "(bad length)", depth)
            return
        p = off + 4
        if typ == 0:
            ml = u(b, p + 4, 2)
            a.n(p, "port %s, max_len %s, pad 6" % (port32(u(b, p, 4)), "0xffff OFPCML_NO_BUFFER" if ml == 0xffff else ml), depth + 1)
        elif typ == 22:
            a.n(p, "group_id %d" % u(b, p, 4), depth + 1)
        elif typ == 17:
            a.n(p, "ethertype 0x%04x, pad 2" % u(b, p, 2), depth + 1)
        elif typ in (18, 24, 11, 12, 16, 27):
            a.n(p, "pad 4", depth + 1)
        elif typ == 23:
            a.n(p, "nw_ttl %d, pad 3" % b[p], depth + 1)
        elif typ == 21:
            a.n(p, "queue_id %d" % u(b, p, 4), depth + 1)
        elif typ == 25:
            oxm_tlvs(a, p, off + ln, depth + 1)
        elif typ == 0xffff:
            exp = u(b, p, 4)
            if exp == NX_VENDOR:
                nx_action(a, off, ln, depth + 1)
            else:
                a.n(p, "experimenter 0x%08x%s (not decoded)" % (exp, " (ONF)" if exp == ONF_VENDOR else ""), depth + 1)
        off += ln


def instructions(a, off, end, depth):
    b = a.b
    while off + 4 <= end:
        typ, ln = u(b, off, 2), u(b, off + 2, 2)
        a.n(off, "instruction type %d %s, len %d" % (typ, OFPIT.get(typ, "?"), ln), depth)
        p = off + 4
        if typ == 1:
            a.n(p, "table_id %d, pad 3" % b[p], depth + 1)
        elif typ == 2:
            a.n(p, "pad 4, metadata 0x%016x, metadata_mask 0x%016x" % (u(b, p + 4, 8), u(b, p + 12, 8)), depth + 1)
        elif typ in (3, 4):
            a.n(p, "pad 4, then actions:", depth + 1)
            actions(a, p + 4, off + ln, depth + 1)
        elif typ == 5:
            a.n(p, "pad 4", depth + 1)
        elif typ == 6:
            a.n(p, "meter_id %d" % u(b, p, 4), depth + 1)
        if ln < 8:
            return
        off += ln


def buckets(a, off, end, depth):
    b = a.b
    i = 0
    while off + 16 <= end:
        ln = u(b, off, 2)
        a.n(off, "bucket %d: len %d, weight %d, watch_port %s, watch_group %s, pad 4"
            % (i, ln, u(b, off + 2, 2), port32(u(b, off + 4, 4)),
               GROUPS.get(u(b, off + 8, 4), u(b, off + 8, 4))), depth)
        actions(a, off + 16, off + ln, depth + 1)
        if ln < 16:
            return
        off += ln
        i += 1


def bands(a, off, end, depth):
    b = a.b
    while off + 12 <= end:
        typ, ln = u(b, off, 2), u(b, off + 2, 2)
        a.n(off, "band type %d %s, len %d, rate %d, burst_size %d%s" % (
            typ, {1: "OFPMBT_DROP", 2: "OFPMBT_DSCP_REMARK", 0xffff: "OFPMBT_EXPERIMENTER"}.get(typ, "?"),
            ln, u(b, off + 4, 4), u(b, off + 8, 4),
            ", pad 4" if typ == 1 else (", prec_level %d, pad 3" % b[off + 12] if typ == 2 else "")), depth)
        if ln < 12:
            return
        off += ln


def port_desc13(a, off, depth):
    b = a.b
    name = b[off + 16:off + 32].split(b"\0")[0].decode(errors="replace")
    a.n(off, "ofp_port: port_no %s, pad 4, hw_addr %s, pad 2, name '%s' (16 bytes, NUL padded)"
        % (port32(u(b, off, 4)), mac(b[off + 8:off + 14]), name), depth)
    a.n(off + 32, "config 0x%08x, state 0x%08x, curr 0x%08x, advertised 0x%08x, supported 0x%08x, peer 0x%08x"
        % tuple(u(b, off + 32 + 4 * i, 4) for i in range(6)), depth + 1)
    a.n(off + 56, "curr_speed %d kbps, max_speed %d kbps" % (u(b, off + 56, 4), u(b, off + 60, 4)), depth + 1)


def multipart(a, req):
    b = a.b
    mt, flags = u(b, 8, 2), u(b, 10, 2)
    a.n(8, "multipart type %d %s, flags 0x%04x%s, pad 4" % (
        mt, OFPMP.get(mt, "?"), flags, " (OFPMPF_*_MORE: more parts follow)" if flags & 1 else ""))
    p = 16
    if mt == 0xffff:
        a.n(16, "experimenter 0x%08x, exp_type %d" % (u(b, 16, 4), u(b, 20, 4)))
        return
    if req:
        if mt in (1, 2):
            a.n(p, "table_id %s, pad 3, out_port %s, out_group %s, pad 4" % (
                "255 OFPTT_ALL" if b[p] == 255 else b[p], port32(u(b, p + 4, 4)),
                "0x%08x %s" % (u(b, p + 8, 4), GROUPS.get(u(b, p + 8, 4), ""))))
            a.n(p + 16, "cookie 0x%016x, cookie_mask 0x%016x" % (u(b, p + 16, 8), u(b, p + 24, 8)))
            match(a, p + 32, 0)
        elif mt in (4, 5):
            a.n(p, "port_no %s%s" % (port32(u(b, p, 4)), ", pad 4" if mt == 4 else ", queue_id 0x%08x" % u(b, p + 4, 4)))
        elif mt in (6, 7):
            if len(b) > p:
                a.n(p, "group_id 0x%08x %s, pad 4" % (u(b, p, 4), GROUPS.get(u(b, p, 4), "")))
            else:
                a.n(p, "(no body)")
        elif mt in (9, 10):
            m = u(b, p, 4)
            a.n(p, "meter_id 0x%08x%s, pad 4" % (m, " OFPM_ALL" if m == 0xffffffff else ""))
        elif len(b) == p:
            a.n(p, "(no body)")
        else:
            a.n(p, "(body not decoded)")
        return
    # replies
    if len(b) == p:
        a.n(p, "(empty body: no entries)")
    if mt == 1:
        i = 0
        while p + 56 <= len(b):
            ln = u(b, p, 2)
            a.n(p, "ofp_flow_stats %d: length %d, table_id %d, pad 1" % (i, ln, b[p + 2]))
            a.n(p + 4, "duration_sec %d, duration_nsec %d" % (u(b, p + 4, 4), u(b, p + 8, 4)), 1)
            a.n(p + 12, "priority %d, idle_timeout %d, hard_timeout %d, flags 0x%04x, pad 4"
                % (u(b, p + 12, 2), u(b, p + 14, 2), u(b, p + 16, 2), u(b, p + 18, 2)), 1)
            a.n(p + 24, "cookie 0x%016x, packet_count %d, byte_count %d" % (u(b, p + 24, 8), u(b, p + 32, 8), u(b, p + 40, 8)), 1)
            q = match(a, p + 48, 1)
            instructions(a, q, p + ln, 1)
            if ln == 0:
                break
            p += ln
            i += 1
    elif mt == 2:
        a.n(p, "packet_count %d, byte_count %d, flow_count %d, pad 4" % (u(b, p, 8), u(b, p + 8, 8), u(b, p + 16, 4)))
    elif mt == 3:
        rows = []
        while p + 24 <= len(b):
            rows.append((p, b[p], u(b, p + 4, 4), u(b, p + 8, 8), u(b, p + 16, 8)))
            p += 24
        a.n(16, "%d ofp_table_stats entries of 24 bytes: table_id(1) pad(3) active_count(4) lookup_count(8) matched_count(8)" % len(rows))
        for r in rows:
            if r[2] or r[3] or r[4] or r[1] in (0, 254):
                a.n(r[0], "table %d: active_count %d, lookup_count %d, matched_count %d" % r[1:], 1)
        a.n(16, "(tables not listed: all counters 0)", 1)
    elif mt == 4:
        while p + 112 <= len(b):
            v = [u(b, p + 8 + 8 * i, 8) for i in range(12)]
            a.n(p, "ofp_port_stats: port_no %s, pad 4, rx_packets %d tx_packets %d rx_bytes %d tx_bytes %d "
                "rx_dropped %d tx_dropped %d rx_errors %d tx_errors %d rx_frame_err %d rx_over_err %d "
                "rx_crc_err %d collisions %d (8 bytes each)" % tuple([port32(u(b, p, 4))] + v))
            a.n(p + 104, "duration_sec %d, duration_nsec %d" % (u(b, p + 104, 4), u(b, p + 108, 4)), 1)
            p += 112
    elif mt == 13:
        while p + 64 <= len(b):
            port_desc13(a, p, 0)
            p += 64
    elif mt == 0:
        for name, n in (("mfr_desc", 256), ("hw_desc", 256), ("sw_desc", 256), ("serial_num", 32), ("dp_desc", 256)):
            a.n(p, "%s[%d] '%s'" % (name, n, b[p:p + n].split(b"\0")[0].decode(errors="replace")))
            p += n
    elif mt == 7:
        while p + 8 <= len(b):
            ln = u(b, p, 2)
            a.n(p, "ofp_group_desc: length %d, type %d (%s), pad 1, group_id %d" % (
                ln, b[p + 2], ["OFPGT_ALL", "OFPGT_SELECT", "OFPGT_INDIRECT", "OFPGT_FF"][b[p + 2]] if b[p + 2] < 4 else "?",
                u(b, p + 4, 4)))
            buckets(a, p + 8, p + ln, 1)
            if ln == 0:
                break
            p += ln
    elif mt == 6:
        while p + 40 <= len(b):
            ln = u(b, p, 2)
            a.n(p, "ofp_group_stats: length %d, pad 2, group_id %d, ref_count %d, pad 4, packet_count %d, byte_count %d, duration_sec %d, duration_nsec %d"
                % (ln, u(b, p + 4, 4), u(b, p + 8, 4), u(b, p + 16, 8), u(b, p + 24, 8), u(b, p + 32, 4), u(b, p + 36, 4)))
            q = p + 40
            while q + 16 <= p + ln:
                a.n(q, "bucket counter: packet_count %d, byte_count %d" % (u(b, q, 8), u(b, q + 8, 8)), 1)
                q += 16
            if ln == 0:
                break
            p += ln
    elif mt == 10:
        while p + 8 <= len(b):
            ln, fl = u(b, p, 2), u(b, p + 2, 2)
            a.n(p, "ofp_meter_config: length %d, flags 0x%04x (%s), meter_id %d" % (ln, fl, meter_flags(fl), u(b, p + 4, 4)))
            bands(a, p + 8, p + ln, 1)
            if ln == 0:
                break
            p += ln
    elif mt == 9:
        while p + 40 <= len(b):
            ln = u(b, p + 4, 2)
            a.n(p, "ofp_meter_stats: meter_id %d, len %d, pad 6, flow_count %d, packet_in_count %d, byte_in_count %d, duration_sec %d, duration_nsec %d"
                % (u(b, p, 4), ln, u(b, p + 12, 4), u(b, p + 16, 8), u(b, p + 24, 8), u(b, p + 32, 4), u(b, p + 36, 4)))
            q = p + 40
            while q + 16 <= p + ln:
                a.n(q, "band stats: packet_band_count %d, byte_band_count %d" % (u(b, q, 8), u(b, q + 8, 8)), 1)
                q += 16
            if ln == 0:
                break
            p += ln
    elif mt == 12:
        table_features(a, p, len(b))
    elif mt == 11:
        a.n(p, "max_meter %d, band_types 0x%08x, capabilities 0x%08x, max_bands %d, max_color %d, pad 2"
            % (u(b, p, 4), u(b, p + 4, 4), u(b, p + 8, 4), b[p + 12], b[p + 13]))
    elif len(b) > p:
        a.n(p, "(body not decoded)")


TFPT = {0: "OFPTFPT_INSTRUCTIONS", 1: "OFPTFPT_INSTRUCTIONS_MISS", 2: "OFPTFPT_NEXT_TABLES",
        3: "OFPTFPT_NEXT_TABLES_MISS", 4: "OFPTFPT_WRITE_ACTIONS", 5: "OFPTFPT_WRITE_ACTIONS_MISS",
        6: "OFPTFPT_APPLY_ACTIONS", 7: "OFPTFPT_APPLY_ACTIONS_MISS", 8: "OFPTFPT_MATCH",
        10: "OFPTFPT_WILDCARDS", 12: "OFPTFPT_WRITE_SETFIELD", 13: "OFPTFPT_WRITE_SETFIELD_MISS",
        14: "OFPTFPT_APPLY_SETFIELD", 15: "OFPTFPT_APPLY_SETFIELD_MISS",
        0xfffe: "OFPTFPT_EXPERIMENTER", 0xffff: "OFPTFPT_EXPERIMENTER_MISS"}


def tf_items(b, t, p, end):
    """Short text for the items of a table-features property."""
    if t in (2, 3):
        ids = list(b[p:end])
        if ids and ids == list(range(ids[0], ids[-1] + 1)):
            return "%d table ids (1 byte each): %d..%d" % (len(ids), ids[0], ids[-1])
        return "%d table ids: %s" % (len(ids), ids)
    items = []
    if t in (0, 1, 4, 5, 6, 7):
        names = OFPIT if t in (0, 1) else OFPAT13
        while p + 4 <= end:
            it, ln = u(b, p, 2), u(b, p + 2, 2)
            items.append(names.get(it, str(it)).split("_", 1)[1])
            p += max(ln, 4)
        return "%d items (type(2) len(2) each): %s" % (len(items), " ".join(items))
    while p + 4 <= end:
        hdr = u(b, p, 4)
        if hdr == 0:
            break
        exp = u(b, p + 4, 4) if hdr >> 16 == 0xffff else None
        nm = field_name(hdr, exp)
        items.append(nm.replace("NXM_NX_", "nx:").replace("NXM_OF_", "nxof:").replace("OXM_OF_", "")
                     + ("/m" if hdr & 0x100 else ""))
        p += 8 if exp is not None else 4
    return "%d OXM headers (4 bytes each, 8 if experimenter): %s" % (len(items), " ".join(items))


def table_features(a, p, end):
    b = a.b
    first = True
    while p + 64 <= end:
        ln = u(b, p, 2)
        name = b[p + 8:p + 40].split(b"\0")[0].decode(errors="replace")
        a.n(p, "ofp_table_features: length %d, table_id %d, pad 5, name '%s' (32 bytes), metadata_match 0x%016x, "
            "metadata_write 0x%016x, config 0x%08x, max_entries %d"
            % (ln, b[p + 2], name, u(b, p + 40, 8), u(b, p + 48, 8), u(b, p + 56, 4), u(b, p + 60, 4)))
        q = p + 64
        props = []
        while q + 4 <= p + ln:
            t, pl = u(b, q, 2), u(b, q + 2, 2)
            if first:
                a.n(q, "property %s (%d), length %d (+pad to 8): %s"
                    % (TFPT.get(t, "?"), t, pl, tf_items(b, t, q + 4, q + pl)), 1)
            props.append("%s:%d" % (TFPT.get(t, str(t))[7:], pl))
            if pl < 4:
                break
            q += (pl + 7) // 8 * 8
        if not first:
            a.n(p + 64, "properties (type:length): " + " ".join(props), 1)
        first = False
        if ln < 64:
            break
        p += ln


def meter_flags(fl):
    s = [n for bit, n in ((1, "OFPMF_KBPS"), (2, "OFPMF_PKTPS"), (4, "OFPMF_BURST"), (8, "OFPMF_STATS")) if fl & bit]
    return "|".join(s) or "none"


def hello(a):
    b = a.b
    p = 8
    if len(b) == 8:
        a.n(8, "(no hello elements)")
    while p + 4 <= len(b):
        t, ln = u(b, p, 2), u(b, p + 2, 2)
        if t == 1:
            bm = [u(b, p + 4 + 4 * i, 4) for i in range((ln - 4) // 4)]
            vers = [v for i, w in enumerate(bm) for v in range(32 * i, 32 * i + 32) if w >> (v - 32 * i) & 1]
            a.n(p, "hello element type 1 OFPHET_VERSIONBITMAP, length %d, bitmap %s = wire versions %s (%s)"
                % (ln, " ".join("0x%08x" % w for w in bm), vers,
                   ", ".join({1: "1.0", 2: "1.1", 3: "1.2", 4: "1.3", 5: "1.4", 6: "1.5"}.get(v, "?") for v in vers)))
        else:
            a.n(p, "hello element type %d length %d" % (t, ln))
        if ln < 4:
            break
        q = p + (ln + 7) // 8 * 8
        if q > p + ln and q <= len(b):
            a.n(p + ln, "pad %d (elements are padded to 8)" % (q - p - ln))
        p = q


def decode(msg):
    """(type name, xid, notes) for one message."""
    a = Ann(msg)
    b = msg
    ver, typ, ln, xid = b[0], b[1], u(b, 2, 2), u(b, 4, 4)
    vn = {1: "1.0", 2: "1.1", 3: "1.2", 4: "1.3", 5: "1.4", 6: "1.5"}.get(ver, "?")
    names = OFPT10 if ver == 1 else OFPT13
    tname = "OFPT_" + names[typ] if typ < len(names) else "type %d" % typ
    if ver == 1 and typ == 4:
        tname = "OFPT_VENDOR"
    a.n(0, "ofp_header: version 0x%02x (OpenFlow %s), type %d, length %d, xid 0x%08x" % (ver, vn, typ, ln, xid))
    if typ == 0:
        hello(a)
        return tname, xid, a.notes
    if ver != 4:
        if typ == 1:
            et, ec = u(b, 8, 2), u(b, 10, 2)
            a.n(8, "error type %d %s, code %d %s" % (et, ERR_TYPE.get(et, "?"), ec, (ERR_CODE.get(et) or [])[ec] if ec < len(ERR_CODE.get(et) or []) else "?"))
            a.n(12, "data: %r" % b[12:].decode(errors="replace") if et == 0 else "data: first bytes of the failed request")
        elif typ == 4 and ver == 1 and len(b) >= 16:
            exp, sub = u(b, 8, 4), u(b, 12, 4)
            if exp == NX_VENDOR:
                tname = "OFPT_VENDOR " + NXT.get(sub, "NXT subtype %d" % sub)
            a.n(8, "vendor 0x%08x%s, subtype %d %s" % (exp, " (Nicira)" if exp == NX_VENDOR else "", sub,
                                                       NXT.get(sub, "") if exp == NX_VENDOR else ""))
            if exp == NX_VENDOR and sub == 12:
                f = u(b, 16, 4)
                a.n(16, "format %d (%s)" % (f, {0: "NXFF_OPENFLOW10", 2: "NXFF_NXM"}.get(f, "?")))
            elif exp == NX_VENDOR and sub == 15:
                a.n(16, "set %d (1 = the high byte of ofp10_flow_mod's 16-bit command is the table id), pad 7" % b[16])
            elif len(b) > 16:
                a.n(16, "(body: see ofp-print above)")
        elif typ in (16, 17) and ver == 1 and len(b) >= 12:
            st = u(b, 8, 2)
            sn = {0: "OFPST_DESC", 1: "OFPST_FLOW", 2: "OFPST_AGGREGATE", 3: "OFPST_TABLE",
                  4: "OFPST_PORT", 5: "OFPST_QUEUE", 0xffff: "OFPST_VENDOR"}.get(st, "?")
            tname += " " + sn
            a.n(8, "stats type %d %s, flags 0x%04x" % (st, sn, u(b, 10, 2)))
            if len(b) > 12:
                a.n(12, "(body: see ofp-print above)")
        elif len(b) > 8:
            a.n(8, "(OpenFlow %s body: see ofp-print above)" % vn)
        return tname, xid, a.notes
    if typ in (18, 19):
        tname += " " + OFPMP.get(u(b, 8, 2), "?")
        multipart(a, typ == 18)
    elif typ == 14:
        cmd = b[25]
        a.n(8, "cookie 0x%016x, cookie_mask 0x%016x" % (u(b, 8, 8), u(b, 16, 8)))
        a.n(24, "table_id %s, command %d %s" % ("255 OFPTT_ALL" if b[24] == 255 else b[24], cmd, FLOW_MOD_CMD[cmd] if cmd < 5 else "?"))
        a.n(26, "idle_timeout %d, hard_timeout %d, priority %d" % (u(b, 26, 2), u(b, 28, 2), u(b, 30, 2)))
        a.n(32, "buffer_id 0x%08x%s, out_port %s, out_group 0x%08x %s" % (
            u(b, 32, 4), " (OFP_NO_BUFFER)" if u(b, 32, 4) == 0xffffffff else "",
            port32(u(b, 36, 4)), u(b, 40, 4), GROUPS.get(u(b, 40, 4), "")))
        fl = u(b, 44, 2)
        fs = [n for bit, n in ((1, "SEND_FLOW_REM"), (2, "CHECK_OVERLAP"), (4, "RESET_COUNTS"), (8, "NO_PKT_COUNTS"), (16, "NO_BYT_COUNTS")) if fl & bit]
        a.n(44, "flags 0x%04x%s, pad 2" % (fl, " (" + "|".join("OFPFF_" + f for f in fs) + ")" if fs else ""))
        q = match(a, 48, 0)
        if q < len(b):
            instructions(a, q, len(b), 0)
        else:
            a.n(q, "(no instructions)")
    elif typ == 15:
        cmd, gt = u(b, 8, 2), b[10]
        a.n(8, "command %d %s, type %d %s, pad 1, group_id %d" % (
            cmd, ["OFPGC_ADD", "OFPGC_MODIFY", "OFPGC_DELETE"][cmd] if cmd < 3 else "?",
            gt, ["OFPGT_ALL", "OFPGT_SELECT", "OFPGT_INDIRECT", "OFPGT_FF"][gt] if gt < 4 else "?",
            u(b, 12, 4)) + (" (0xfffffffc OFPG_ALL)" if u(b, 12, 4) == 0xfffffffc else ""))
        if len(b) > 16:
            buckets(a, 16, len(b), 0)
        else:
            a.n(16, "(no buckets)")
    elif typ == 29:
        cmd, fl, mid = u(b, 8, 2), u(b, 10, 2), u(b, 12, 4)
        a.n(8, "command %d %s, flags 0x%04x (%s), meter_id %d%s" % (
            cmd, ["OFPMC_ADD", "OFPMC_MODIFY", "OFPMC_DELETE"][cmd] if cmd < 3 else "?",
            fl, meter_flags(fl), mid, " (0xffffffff OFPM_ALL)" if mid == 0xffffffff else ""))
        if len(b) > 16:
            bands(a, 16, len(b), 0)
        else:
            a.n(16, "(no bands)")
    elif typ == 6:
        a.n(8, "datapath_id 0x%016x, n_buffers %d, n_tables %d, auxiliary_id %d, pad 2" % (u(b, 8, 8), u(b, 16, 4), b[20], b[21]))
        a.n(24, "capabilities 0x%08x, reserved 0x%08x" % (u(b, 24, 4), u(b, 28, 4)))
    elif typ in (8, 9):
        a.n(8, "flags 0x%04x, miss_send_len %d" % (u(b, 8, 2), u(b, 10, 2)))
    elif typ == 1:
        et, ec = u(b, 8, 2), u(b, 10, 2)
        codes = ERR_CODE.get(et) or []
        a.n(8, "error type %d %s, code %d %s" % (et, ERR_TYPE.get(et, "?"), ec, codes[ec] if ec < len(codes) else "?"))
        if et == 0:
            a.n(12, "data: %r (ASCII text)" % b[12:].decode(errors="replace"))
        else:
            a.n(12, "data: the first %d bytes of the request that failed (its header: type %d, xid 0x%08x)"
                % (len(b) - 12, b[13] if len(b) > 13 else -1, u(b, 16, 4) if len(b) >= 20 else -1))
    elif typ == 4:
        exp, sub = u(b, 8, 4), u(b, 12, 4)
        if exp == NX_VENDOR:
            tname = NXT.get(sub, "NXT subtype %d" % sub)
        a.n(8, "experimenter 0x%08x, exp_type %d %s" % (exp, sub, NXT.get(sub, "") if exp == NX_VENDOR else ""))
    elif typ == 12:
        a.n(8, "reason %d, pad 7" % b[8])
        port_desc13(a, 16, 0)
    elif len(b) > 8:
        a.n(8, "(body not decoded)")
    return tname, xid, a.notes


def ofp_print(h):
    p = subprocess.run(["ovs-ofctl", "ofp-print", h], capture_output=True, text=True)
    return (p.stdout + p.stderr).rstrip("\n").split("\n")


def hexlines(b):
    return [" ".join("%02x" % x for x in b[i:i + 16]) for i in range(0, len(b), 16)]


def is_tf_reply(b):
    return len(b) >= 16 and b[0] == 4 and b[1] == 19 and u(b, 8, 2) == 12


def norm(b):
    return b[:4] + b"\0\0\0\0" + b[8:]


def seq_lines(rec, cmap):
    multi = len(cmap) > 1
    seq = []
    for e in rec["events"]:
        tag = e["dir"] + (" [conn %d]" % cmap[e["conn"]] if multi else "")
        if "hex" in e:
            t, _, _ = decode(bytes.fromhex(e["hex"]))
            s = "%s %s" % (tag, t.replace("OFPT_", ""))
        elif e.get("close"):
            s = "%s EOF" % tag
        elif e.get("reset"):
            s = "%s RST (connection reset)" % tag
        else:
            continue
        if seq and seq[-1][0] == s:
            seq[-1][1] += 1
        else:
            seq.append([s, 1])
    return [s if n == 1 else "%s  x%d" % (s, n) for s, n in seq]


def render(rec, version, canon):
    out = []
    c = out.append
    cmap = {}
    for e in rec["events"]:
        cmap.setdefault(e["conn"], len(cmap) + 1)
    multi = len(cmap) > 1
    c("# OpenFlow conversation '%s', recorded from %s (see README.md)." % (rec["name"], version))
    c("# command: " + " ".join(a if a.replace("-", "").replace("_", "").replace(".", "").replace(":", "").replace("/", "").isalnum() else "'%s'" % a for a in rec["argv"]))
    if rec["note"]:
        for line in rec["note"].rstrip("\n").split("\n"):
            c("# note: " + line)
    c("# exit code: %d" % rec["rc"])
    for stream in ("stdout", "stderr"):
        lines = rec[stream].rstrip("\n").split("\n") if rec[stream] else []
        if not lines:
            c("# %s: (empty)" % stream)
        for line in lines:
            c("# %s: %s" % (stream, line))
    c("# sequence (in the order the proxy forwarded them%s):" % (
        "; [conn N] = Nth TCP connection ovs-ofctl opened" if multi else ""))
    for i, s in enumerate(seq_lines(rec, cmap)):
        c("#   %2d. %s" % (i + 1, s))
    if not rec["events"]:
        c("#   (no messages: ovs-ofctl gave up before it connected)")
    c("# format: one block per message: '# DIR TYPE (xid): summary', '#   | ' ovs-ofctl ofp-print")
    c("# lines, '#   +OFF' field layout (byte offset in the message), then the message's bytes.")
    for e in rec["events"]:
        c("")
        tag = e["dir"] if not multi else "%s [conn %d]" % (e["dir"], cmap[e["conn"]])
        if e.get("close"):
            who = "client (ovs-ofctl)" if e["dir"] == "c->s" else "switch"
            c("# %s EOF at +%.3fs: %s closed its side of the TCP connection" % (tag, e["t"], who))
            continue
        if e.get("reset"):
            c("# %s RST at +%.3fs: the connection was reset" % (tag, e["t"]))
            continue
        if "send_error" in e:
            c("# %s (the proxy could not pass the message above on: %s)" % (tag, e["send_error"]))
            continue
        if "partial" in e:
            c("# %s trailing bytes that are not a whole message: %s" % (tag, e["partial"]))
            continue
        b = bytes.fromhex(e["hex"])
        t, xid, notes = decode(b)
        pr = ofp_print(e["hex"])
        summary = pr[0].split("): ", 1)[1] if "): " in pr[0] else ""
        c("# %s %s (xid 0x%08x) at +%.3fs%s" % (tag, t, xid, e["t"], (": " + summary) if summary else ""))
        ref = canon.get(norm(b)) if is_tf_reply(b) and rec["name"] != "dump-table-features" else None
        if ref:
            c("#   (%d bytes, hex left out: byte for byte the same%s as part %d of %d"
              % (len(b), "" if ref[2] == xid else ", apart from the xid,", ref[0], ref[1]))
            c("#   of the OFPMP_TABLE_FEATURES reply in dump-table-features.txt; first 16 bytes: %s)"
              % " ".join("%02x" % x for x in b[:16]))
            continue
        for line in pr[1:]:
            c("#   | " + line)
        for line in notes:
            c("#   " + line)
        out.extend(hexlines(b))
    return "\n".join(out) + "\n"


def main():
    raw, outdir, version = sys.argv[1], sys.argv[2], sys.argv[3]
    seqfile = sys.argv[4] if len(sys.argv) > 4 else os.path.join(outdir, "tools", "sequences.txt")
    recs = [json.load(open(os.path.join(raw, fn))) for fn in sorted(os.listdir(raw)) if fn.endswith(".json")]
    canon = {}
    for rec in recs:
        if rec["name"] == "dump-table-features":
            parts = [norm(bytes.fromhex(e["hex"])) for e in rec["events"]
                     if "hex" in e and is_tf_reply(bytes.fromhex(e["hex"]))]
            xids = [u(bytes.fromhex(e["hex"]), 4, 4) for e in rec["events"]
                    if "hex" in e and is_tf_reply(bytes.fromhex(e["hex"]))]
            canon = {p: (i + 1, len(parts), xids[i]) for i, p in enumerate(parts)}
    missing = 0
    with open(seqfile, "w") as f:
        for rec in recs:
            for e in rec["events"]:
                if "hex" in e:
                    b = bytes.fromhex(e["hex"])
                    if is_tf_reply(b) and norm(b) not in canon:
                        missing += 1
            with open(os.path.join(outdir, rec["name"] + ".txt"), "w") as g:
                g.write(render(rec, version, canon))
            cmap = {}
            for e in rec["events"]:
                cmap.setdefault(e["conn"], len(cmap) + 1)
            f.write("%s (exit %d):\n%s\n" % (rec["name"], rec["rc"],
                    "\n".join("    " + s for s in seq_lines(rec, cmap))))
    if missing and canon:
        print("annotate: %d OFPMP_TABLE_FEATURES reply part(s) differ from dump-table-features's: written in full" % missing)


if __name__ == "__main__":
    main()
