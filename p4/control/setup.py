"""Control-plane setup of bolt.p4, for bfrt_python.

Run inside the SDE's BF Runtime shell once switchd has loaded the program:

    BOLT_CONFIG=/etc/bolt/bolt_switch.json $SDE/run_bfshell.sh -b p4/control/setup.py

It reads a JSON file (p4/control/bolt_switch.example.json shows every key) and programs:
front-panel ports, the recirculation port (and the parser value set that recognises it),
the fork multicast group (two copies to the recirculation port, RID_CONTINUE and
RID_SPAWN), the steering of Bolt packets from other pipes to the scheduler pipe, the
queue configuration (levels in use, pass budget), the scheduler's service addresses, the
ACLs, and L2/L3 forwarding. `bfrt` is the object the BF Runtime shell provides.

Everything here is soft state, as the scheduler is: rerunning the script after a restart
restores it; queued tasks are lost and clients resubmit (DESIGN.md, fault tolerance).
"""

import ipaddress
import json
import os

# bolt.p4 constants this script must agree with.
RID_CONTINUE = 1
RID_SPAWN = 2
# Ingress mirror sessions (headers.p4 MIRROR_*) and the length each copy is cut to:
# bolt_pass_h 20 + bolt_bridge_h 22 + Ethernet, IPv4, UDP, Bolt 50 + the layout's fixed
# part, + the 1-byte bolt_mirror_h in front. The copy goes to the recirculation port;
# what follows the cut (the rest of a list) is not in it.
MIRROR_SESSIONS = {
    1: 20 + 22 + 50 + 8 + 24 + 1,      # MIRROR_SUBMIT_BOUNCE: JobRef, the refused TASK
    2: 20 + 22 + 50 + 40 + 1,          # MIRROR_RETURN_BOUNCE: the refused ENTRY
    3: 20 + 22 + 50 + 8 + 40 + 8 + 1,  # MIRROR_HELD_GET: SwapState, held ENTRY, Requester
    4: 20 + 22 + 50 + 8 + 40 + 4 + 1,  # MIRROR_HELD_REFILL: SwapState, held ENTRY, RefillRequest
    5: 20 + 22 + 50 + 4 + 1,           # MIRROR_SEARCH_ON: RefillRequest, no entry found
}
MAX_PRIORITIES = 8


def ip_int(text):
    return int(ipaddress.IPv4Address(text))


def mac_int(text):
    return int(text.replace(":", ""), 16)


def load_config():
    path = os.environ.get("BOLT_CONFIG", "/etc/bolt/bolt_switch.json")
    with open(path) as f:
        cfg = json.load(f)
    levels = cfg["queue"]["priorities"]
    if not 1 <= levels <= MAX_PRIORITIES:
        raise ValueError("queue.priorities must be 1 to %d, not %d" % (MAX_PRIORITIES, levels))
    if not 0 <= cfg["queue"]["max_passes"] <= 0xFFFF:
        raise ValueError("queue.max_passes (SWAP passes per level) must fit 16 bits")
    return cfg


def setup_ports(cfg):
    for p in cfg["ports"]:
        bfrt.port.port.add(DEV_PORT=p["dev_port"], SPEED=p["speed"], FEC=p["fec"], PORT_ENABLE=True)
    rc = cfg["recirculation"]
    if rc.get("front_panel_loopback"):
        # A front-panel port in MAC loopback adds recirculation bandwidth.
        bfrt.port.port.add(DEV_PORT=rc["port"], SPEED="BF_SPEED_100G", FEC="BF_FEC_TYP_NONE", PORT_ENABLE=True)
        bfrt.port.port.mod(DEV_PORT=rc["port"], LOOPBACK_MODE="BF_LPBK_MAC_NEAR")


def setup_recirculation(cfg, p4):
    rc = cfg["recirculation"]
    # Packets from this port carry bolt_pass_h; front-panel packets never do.
    # The key of a value set over a plain bit type is named f1 by BF Runtime.
    p4.BoltIngressParser.recirculation_ports.add(f1=rc["port"], f1_mask=0x1FF)
    # The fork group: both copies of a pass that produces two packets recirculate.
    cont, spawn = rc["fork_nodes"]
    bfrt.pre.node.entry(multicast_node_id=cont, multicast_rid=RID_CONTINUE,
                        multicast_lag_id=[], dev_port=[rc["port"]]).push()
    bfrt.pre.node.entry(multicast_node_id=spawn, multicast_rid=RID_SPAWN,
                        multicast_lag_id=[], dev_port=[rc["port"]]).push()
    bfrt.pre.mgid.entry(mgid=rc["fork_group"], multicast_node_id=[cont, spawn],
                        multicast_node_l1_xid_valid=[False, False],
                        multicast_node_l1_xid=[0, 0]).push()
    # A bounce (one QUEUE_FULL per refused task) and the search after a full REFILL
    # batch leave a pass as ingress mirror copies, each cut to its layout's length.
    for sid, length in MIRROR_SESSIONS.items():
        bfrt.mirror.cfg.entry_with_normal(sid=sid, direction="INGRESS", session_enable=True,
                                          ucast_egress_port=rc["port"],
                                          ucast_egress_port_valid=True,
                                          max_pkt_len=length).push()


def setup_queue(cfg, pass_setup, front_panel):
    q = cfg["queue"]
    rc = cfg["recirculation"]
    pass_setup.queue_config.set_default_with_configure(
        priorities=q["priorities"], max_passes=q["max_passes"],
        recirc_port=rc["port"], fork_group=rc["fork_group"])
    # Registers live per pipe: every other pipe sends Bolt packets to the scheduler
    # pipe's recirculation port before their first pass.
    for pipe in range(cfg["pipes"]):
        if pipe != cfg["scheduler_pipe"]:
            front_panel.pipe_steer.add_with_steer(ig_md_ingress_pipe=pipe, port=rc["port"])


def setup_admission(cfg, pass_setup, front_panel):
    for addr in cfg["service_addresses"]:
        pass_setup.bolt_service.add_with_serve(hdr_ipv4_dst_addr=ip_int(addr))
        pass_setup.own_source.add_with_forged_source(hdr_ipv4_src_addr=ip_int(addr))
    for prefix in cfg["acl"]["client_prefixes"]:
        net = ipaddress.IPv4Network(prefix)
        front_panel.acl_clients.add_with_allow(hdr_ipv4_src_addr=int(net.network_address),
                                               hdr_ipv4_src_addr_p_length=net.prefixlen)
    # Addresses or prefixes (an address is its /32), as `bolt switch --executors`,
    # `--agents` and `--nodes` (both).
    acl = cfg["acl"]
    nodes = acl.get("nodes", [])
    for table, hosts in [(front_panel.acl_executors, acl.get("executors", []) + nodes),
                         (front_panel.acl_agents, acl.get("agents", []) + nodes)]:
        for host in hosts:
            net = ipaddress.IPv4Network(host)
            table.add_with_allow(hdr_ipv4_src_addr=int(net.network_address),
                                 hdr_ipv4_src_addr_p_length=net.prefixlen)


def setup_forwarding(cfg, outcome):
    # ipv4_route is keyed on the address a packet goes to: an answer's, or the
    # destination of a packet not for the scheduler (hdr.bridge.answer_ip both).
    for r in cfg["routes"]:
        net = ipaddress.IPv4Network(r["prefix"])
        outcome.ipv4_route.add_with_route(hdr_bridge_answer_ip=int(net.network_address),
                                          hdr_bridge_answer_ip_p_length=net.prefixlen,
                                          port=r["port"], dst_mac=mac_int(r["dst_mac"]),
                                          src_mac=mac_int(r["src_mac"]))
    for e in cfg.get("l2", []):
        outcome.l2_switch.add_with_l2_forward(hdr_ethernet_dst_addr=mac_int(e["mac"]), port=e["port"])


def main():
    cfg = load_config()
    p4 = getattr(bfrt, cfg["program"]).pipe
    # ingress.p4's sub-controls: pass_setup holds the configuration and the service
    # addresses, front_panel the access lists and steering, outcome the forwarding.
    ing = p4.BoltIngress
    setup_ports(cfg)
    setup_recirculation(cfg, p4)
    setup_queue(cfg, ing.pass_setup, ing.front_panel)
    setup_admission(cfg, ing.pass_setup, ing.front_panel)
    setup_forwarding(cfg, ing.outcome)
    bfrt.complete_operations()
    print("bolt: %d levels, %d passes per retrieval, recirculation port %d, %d service address(es)"
          % (cfg["queue"]["priorities"], cfg["queue"]["max_passes"], cfg["recirculation"]["port"],
             len(cfg["service_addresses"])))


main()
