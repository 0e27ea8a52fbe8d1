/* egress.p4: The egress: fork and mirror copies told apart, REPAIR bodies and answer lengths written.
 * Part of bolt.p4, which includes the parts in this order. */

/* ------------------------------------------------------------------------------------
 * Egress: tells the two copies of a fork apart, turns a spawned copy with a repair into
 * a REPAIR packet (op REPAIR, RepairState after the Bolt header), and tells a mirror
 * copy (a bounce, or the search after a full REFILL batch) what it is.
 * ---------------------------------------------------------------------------------- */

struct egress_headers_t {
    bolt_mirror_h  mirror;
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
        eg_md.out_len = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            PASS_MIRRORED : parse_mirror;
            default       : parse_pass;
        }
    }
    state parse_mirror { pkt.extract(hdr.mirror); transition parse_pass; }
    state parse_pass {
        pkt.extract(hdr.pass);
        transition select(hdr.pass.recirculate, hdr.pass.flags) {
            (1, PF_SPAWN_REPAIR &&& PF_SPAWN_REPAIR) : parse_ethernet;
            (0, PF_ANSWER &&& PF_ANSWER)             : parse_ethernet;
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
    /* message_len(op, count) (message.rs) of an answer, sized here rather than at the
     * end of the ingress pass that decided it. */
    action set_out_length(bit<16> len) { eg_md.out_len = len; }
    table message_length_out {
        key = { hdr.bolt.op : exact; hdr.bolt.count : exact; }
        actions = { set_out_length; NoAction; }
        default_action = NoAction();
        size = 128;
        const entries = {
#define set_message_length set_out_length
#include "message_lengths.p4inc"
#undef set_message_length
        }
    }

    apply {
        if (hdr.mirror.isValid()) {
            /* a mirror copy, cut by its session, back to the recirculation port */
            hdr.mirror.setInvalid();
            hdr.pass.recirculate = 1;
            if ((hdr.pass.flags & PF_MIRROR_SEARCH) != 0) {
                /* the search after a full batch: cut back to the request, nothing found */
                hdr.pass.copy = PASS_CONTINUE;
                hdr.pass.step = STEP_RETRIEVE;
                hdr.pass.listed = 0;
                hdr.pass.parse_path = PP_REFILL;
                hdr.pass.flags = hdr.pass.flags & (PF_BATCH_SENT | PF_HOST);
            } else {
                /* a bounce: the QUEUE_FULL of the one item it was cut after */
                hdr.pass.copy = PASS_SPAWN;
                hdr.pass.parse_path = hdr.pass.spawn_path;
                hdr.pass.flags = hdr.pass.flags & (PF_BATCH_SENT | PF_HOST | PF_MIRROR_BOUNCE);
            }
        } else if (hdr.pass.recirculate == 0) {
            if ((hdr.pass.flags & PF_ANSWER) != 0) {
                message_length_out.apply();
                hdr.udp.length = eg_md.out_len + 8;
                hdr.ipv4.total_len = eg_md.out_len + 28;
            }
            hdr.pass.setInvalid();
        } else {
            if (eg_intr_md.egress_rid == RID_SPAWN) {
                hdr.pass.copy = PASS_SPAWN;
                hdr.pass.parse_path = PP_REPAIR;
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
                /* a mirror copy of the same pass carries the bounce, not this one */
                hdr.pass.flags = hdr.pass.flags & (PF_BATCH_SENT | PF_HOST | PF_SPAWN_REPAIR);
            }
        }
    }
}

control BoltEgressDeparser(packet_out pkt,
                           inout egress_headers_t hdr,
                           in egress_md_t eg_md,
                           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        /* an answer's lengths changed here */
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        pkt.emit(hdr.pass);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bolt);
        pkt.emit(hdr.repair_state);
    }
}
