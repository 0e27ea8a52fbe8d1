/* egress.p4: The egress: fork copies told apart, REPAIR bodies written.
 * Part of bolt.p4, which includes the parts in this order. */

/* ------------------------------------------------------------------------------------
 * Egress: tells the two copies of a fork apart and turns a spawned copy with a repair
 * into a REPAIR packet (op REPAIR, RepairState after the Bolt header).
 * ---------------------------------------------------------------------------------- */

struct egress_headers_t {
    bolt_pass_h    pass;
    ethernet_h     ethernet;
    ipv4_h         ipv4;
    udp_h          udp;
    bolt_h         bolt;
    repair_state_h repair_state;
}

parser BoltEgressParser(packet_in pkt,
                        out egress_headers_t hdr,
                        out egress_md_t eg_md,
                        out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.pass);
        transition select(hdr.pass.recirculate, hdr.pass.flags) {
            (1, PF_SPAWN_REPAIR &&& PF_SPAWN_REPAIR) : parse_ethernet;
            default                                   : accept;
        }
    }
    state parse_ethernet { pkt.extract(hdr.ethernet); transition parse_ipv4; }
    state parse_ipv4     { pkt.extract(hdr.ipv4);     transition parse_udp; }
    state parse_udp      { pkt.extract(hdr.udp);      transition parse_bolt; }
    state parse_bolt     { pkt.extract(hdr.bolt);     transition accept; }
}

control BoltEgress(inout egress_headers_t hdr,
                   inout egress_md_t eg_md,
                   in egress_intrinsic_metadata_t eg_intr_md,
                   in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                   inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                   inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply {
        if (hdr.pass.recirculate == 0) {
            hdr.pass.setInvalid();
        } else {
            if (eg_intr_md.egress_rid == RID_SPAWN) {
                hdr.pass.copy = PASS_SPAWN;
                hdr.pass.parse_path = hdr.pass.spawn_path;
            } else if (eg_intr_md.egress_rid == RID_CONTINUE) {
                hdr.pass.copy = PASS_CONTINUE;
            }
            if (hdr.pass.copy == PASS_SPAWN && (hdr.pass.flags & PF_SPAWN_REPAIR) != 0) {
                /* Packet::Repair (encode_repair): the pointer, its level, the value to
                 * restore; the header bytes REPAIR does not use are zero. */
                hdr.bolt.op = OP_REPAIR;
                hdr.bolt.count = 0;
                hdr.bolt.prio = hdr.pass.repair_level + 1;
                hdr.bolt.rsrc = 0;
                hdr.bolt.flags = 0;
                hdr.repair_state.setValid();
                hdr.repair_state.target = hdr.pass.repair_target;
                hdr.repair_state.pad = 0;
                hdr.repair_state.value = hdr.pass.repair_value;
            }
        }
    }
}

control BoltEgressDeparser(packet_out pkt,
                           inout egress_headers_t hdr,
                           in egress_md_t eg_md,
                           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        pkt.emit(hdr.pass);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bolt);
        pkt.emit(hdr.repair_state);
    }
}
