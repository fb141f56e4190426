"""An os-ken application that takes the role its environment names, for
linerate's test of two controllers (LR_ROLE=master or slave, LR_GEN the
generation id). It asks for the role on connect; as master it installs
the table miss to the controller; as slave it tries a FLOW_MOD (which the
switch must refuse with IS_SLAVE). It prints what it gets, a line each:
its role reply, every error, every packet-in."""

import os

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


class RoleApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.role = os.environ.get("LR_ROLE", "master")
        self.gen = int(os.environ.get("LR_GEN", "1"))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        ofp, p = dp.ofproto, dp.ofproto_parser
        role = ofp.OFPCR_ROLE_MASTER if self.role == "master" else ofp.OFPCR_ROLE_SLAVE
        dp.send_msg(p.OFPRoleRequest(dp, role, self.gen))

    @set_ev_cls(ofp_event.EventOFPRoleReply, MAIN_DISPATCHER)
    def role_reply(self, ev):
        dp = ev.msg.datapath
        ofp, p = dp.ofproto, dp.ofproto_parser
        print("role_app: role=%d gen=%d" % (ev.msg.role, ev.msg.generation_id), flush=True)
        if self.role == "master":
            actions = [p.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
            match = p.OFPMatch()
        else:
            actions = []
            match = p.OFPMatch(eth_type=0x88B5)
        inst = [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(p.OFPFlowMod(datapath=dp, priority=0 if self.role == "master" else 5,
                                 match=match, instructions=inst))
        dp.send_msg(p.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        print("role_app: barrier", flush=True)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev):
        print("role_app: error type=%d code=%d" % (ev.msg.type, ev.msg.code), flush=True)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        print("role_app: packet-in in_port=%d reason=%d"
              % (ev.msg.match["in_port"], ev.msg.reason), flush=True)
