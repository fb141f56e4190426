"""A MAC-learning switch for os-ken, written for linerate's tests.

It behaves as os-ken's (and Ryu's) well-known simple_switch_13 example,
which PyPI's os-ken no longer ships: on connect, a table-miss rule sends
every frame to the controller (whole frames, no buffer); each packet-in
teaches the source MAC's port, installs `in_port,eth_dst,eth_src ->
output` at priority 1 once the destination is known, and sends the frame
on with a packet-out (flooded while the destination is unknown).
"""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, ether_types, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ports = {}  # dpid -> {mac: port}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        p = dp.ofproto_parser
        miss = [p.OFPActionOutput(dp.ofproto.OFPP_CONTROLLER, dp.ofproto.OFPCML_NO_BUFFER)]
        self.install(dp, 0, p.OFPMatch(), miss)
        print("learning_switch: connected dpid=%#x" % dp.id, flush=True)

    def install(self, dp, priority, match, actions):
        p = dp.ofproto_parser
        inst = [p.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(p.OFPFlowMod(datapath=dp, priority=priority, match=match, instructions=inst))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, p = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            return
        table = self.ports.setdefault(dp.id, {})
        moved = eth.src in table and table[eth.src] != in_port
        table[eth.src] = in_port
        if moved:
            dp.send_msg(p.OFPFlowMod(datapath=dp, command=ofp.OFPFC_DELETE,
                                     out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                                     match=p.OFPMatch(eth_dst=eth.src)))
        print("learning_switch: packet-in dpid=%#x in_port=%d %s -> %s reason=%d%s"
              % (dp.id, in_port, eth.src, eth.dst, msg.reason, " (moved)" if moved else ""),
              flush=True)
        out = table.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [p.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            match = p.OFPMatch(in_port=in_port, eth_dst=eth.dst, eth_src=eth.src)
            self.install(dp, 1, match, actions)
        data = msg.data if msg.buffer_id == ofp.OFP_NO_BUFFER else None
        dp.send_msg(p.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id,
                                   in_port=in_port, actions=actions, data=data))
