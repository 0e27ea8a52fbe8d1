/* egress.p4: The egress: what a pass decided, written into its packet (BoltAnswer); fork
 * and mirror copies told apart, REPAIR bodies, answer lengths.
 * Part of bolt.p4, which includes the parts in this order. */

/* ------------------------------------------------------------------------------------
 * Egress: writes the outcome the ingress decided (the next step and layout, the SWAP
 * state, the answer header and address), tells the two copies of a fork apart, turns a
 * spawned copy with a repair into a REPAIR packet (op REPAIR, RepairState after the Bolt
 * header), tells a mirror copy (a bounce, or the search after a full REFILL batch) what
 * it is, and sizes an answer.
 * ---------------------------------------------------------------------------------- */

struct egress_headers_t {
    bolt_mirror_h    mirror;
    bolt_pass_h      pass;
    bolt_bridge_h    bridge;
    ethernet_h       ethernet;
    ipv4_h           ipv4;
    udp_h            udp;
    bolt_h           bolt;
    repair_state_h   repair_state;
    swap_state_h     swap_state;
    entry_h          swap_held;
    job_ref_h        job_ref;
    requester_h      requester;
    refill_request_h refill_request;
    task_h           task_cur;
    entry_h          entry_cur;
    entry_h          entry_out;
}

/* The ingress deparser's layout: bolt_pass_h, the bridge, Ethernet to Bolt, then the
 * headers the bridge lists, in the ingress deparser's order; what follows is payload. */
parser BoltEgressParser(packet_in pkt,
                        out egress_headers_t hdr,
                        out egress_md_t eg_md,
                        out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        eg_md.out_len = 0;
        eg_md.answer_best = 0;
        eg_md.counted = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            PASS_MIRRORED : parse_mirror;
            default       : parse_pass;
        }
    }
    /* a mirror copy: only its pass header is rewritten (the copy is cut by its session) */
    state parse_mirror {
        pkt.extract(hdr.mirror);
        pkt.extract(hdr.pass);
        pkt.extract(hdr.bridge);
        transition accept;
    }
    state parse_pass {
        pkt.extract(hdr.pass);
        pkt.extract(hdr.bridge);
        transition select(hdr.bridge.outcome, hdr.pass.flags) {
            (OUT_NONE, PF_SPAWN_REPAIR &&& PF_SPAWN_REPAIR) : parse_ethernet;
            (OUT_NONE, _)                                     : accept;
            default                                           : parse_ethernet;
        }
    }
    state parse_ethernet { pkt.extract(hdr.ethernet); transition parse_ipv4; }
    state parse_ipv4     { pkt.extract(hdr.ipv4);     transition parse_udp; }
    state parse_udp      { pkt.extract(hdr.udp);      transition parse_bolt; }
    state parse_bolt {
        pkt.extract(hdr.bolt);
        transition select(hdr.bridge.has_swap_state) { 1 : parse_swap_state; default : ask_swap_held; }
    }
    state parse_swap_state { pkt.extract(hdr.swap_state); transition ask_swap_held; }
    state ask_swap_held {
        transition select(hdr.bridge.has_swap_held) { 1 : parse_swap_held; default : ask_job_ref; }
    }
    state parse_swap_held { pkt.extract(hdr.swap_held); transition ask_job_ref; }
    state ask_job_ref {
        transition select(hdr.bridge.has_job_ref) { 1 : parse_job_ref; default : ask_requester; }
    }
    state parse_job_ref { pkt.extract(hdr.job_ref); transition ask_requester; }
    state ask_requester {
        transition select(hdr.bridge.has_requester) { 1 : parse_requester; default : ask_refill_request; }
    }
    state parse_requester { pkt.extract(hdr.requester); transition ask_refill_request; }
    state ask_refill_request {
        transition select(hdr.bridge.has_refill_request) { 1 : parse_refill_request; default : ask_task_cur; }
    }
    state parse_refill_request { pkt.extract(hdr.refill_request); transition ask_task_cur; }
    state ask_task_cur {
        transition select(hdr.bridge.has_task_cur) { 1 : parse_task_cur; default : ask_entry_cur; }
    }
    state parse_task_cur { pkt.extract(hdr.task_cur); transition ask_entry_cur; }
    state ask_entry_cur {
        transition select(hdr.bridge.has_entry_cur) { 1 : parse_entry_cur; default : ask_entry_out; }
    }
    state parse_entry_cur { pkt.extract(hdr.entry_cur); transition ask_entry_out; }
    state ask_entry_out {
        transition select(hdr.bridge.has_entry_out) { 1 : parse_entry_out; default : accept; }
    }
    state parse_entry_out { pkt.extract(hdr.entry_out); transition accept; }
}

/* What the pass does with what it found, written into the packet from the outcome the
 * ingress decided (bolt_bridge_h.outcome): the next step (and the layout its pass
 * parses), the SWAP state, the REFILL batch, the answer header, BEST, the answer's
 * address. Its counters count each pass once: never on the fork's REPAIR copy. */
control BoltAnswer(inout egress_headers_t hdr,
                   inout egress_md_t eg_md,
                   in egress_intrinsic_metadata_t eg_intr_md) {
    /* 0 ASSIGN, 1 into a REFILL batch: decisions, assigns, refill_tasks. */
    Counter<bit<64>, bit<1>>(2, CounterType_t.PACKETS) deliveries;
    /* Answers sent, by op: noops, queue_full_packets, refill_packets (assigns too). */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) answers;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) swaps;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) budget_exhausted;

    /* Addresses an answer from this scheduler to the address the ingress routed it by. */
    action address_answer() {
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.bridge.answer_ip;
        hdr.ipv4.ttl = 64;
        hdr.udp.dst_port = hdr.bridge.answer_port;
        hdr.udp.src_port = BOLT_PORT;
        hdr.udp.checksum = 0;   /* optional in IPv4; the body was rebuilt */
    }
    action answer_header(bit<8> op, bit<8> count) {
        hdr.bolt.op = op;
        hdr.bolt.count = count;
        hdr.bolt.prio = 0;
        hdr.bolt.rsrc = 0;
        hdr.bolt.flags = 0;
    }
    /* QUEUE_FULL for one entry (Pipeline::bounce): its job and its task; the entry is a
     * bounced RETURN entry or the task a SWAP search held (reinsert_pass). */
    action queue_full_of(in entry_h e) {
        hdr.job_ref.setValid();
        hdr.job_ref.uid = e.uid;
        hdr.job_ref.jid = e.jid;
        hdr.task_cur.setValid();
        hdr.task_cur.tid = e.tid;
        hdr.task_cur.prio = e.prio;
        hdr.task_cur.rsrc = e.rsrc;
        hdr.task_cur.class = e.class;
        hdr.task_cur.flags = e.flags;
        hdr.task_cur.desc_0 = e.desc_0;
        hdr.task_cur.desc_1 = e.desc_1;
        hdr.task_cur.desc_2 = e.desc_2;
        hdr.task_cur.desc_3 = e.desc_3;
    }
    /* The layout the next pass of this packet parses, by its step and requester. */
    action set_parse_path(bit<8> parse_path) { hdr.pass.parse_path = parse_path; }
    table next_layout {
        key = { hdr.pass.step : exact; hdr.pass.flags : ternary; }
        actions = { set_parse_path; NoAction; }
        default_action = NoAction();
        size = 16;
        const entries = {
            (STEP_SUBMIT,   _)                  : set_parse_path(PP_SUBMIT);
            (STEP_RETURN,   _)                  : set_parse_path(PP_RETURN);
            (STEP_RETRIEVE, 0 &&& PF_HOST)       : set_parse_path(PP_GET);
            (STEP_RETRIEVE, PF_HOST &&& PF_HOST) : set_parse_path(PP_REFILL);
            (STEP_DELIVER,  0 &&& PF_HOST)       : set_parse_path(PP_GET);
            (STEP_DELIVER,  PF_HOST &&& PF_HOST) : set_parse_path(PP_REFILL);
            (STEP_SWAP,     0 &&& PF_HOST)       : set_parse_path(PP_SWAP_GET);
            (STEP_SWAP,     PF_HOST &&& PF_HOST) : set_parse_path(PP_SWAP_REFILL);
            (STEP_REINSERT, 0 &&& PF_HOST)       : set_parse_path(PP_SWAP_GET);
            (STEP_REINSERT, PF_HOST &&& PF_HOST) : set_parse_path(PP_SWAP_REFILL);
        }
    }

    apply {
        /* swap_pass: a SWAP step with budget left spends one */
        if (hdr.bridge.step == STEP_SWAP && hdr.bridge.outcome != OUT_SWAP_SPENT) {
            hdr.pass.budget = hdr.pass.budget - 1;
        }

        if (hdr.bridge.outcome == OUT_ITEM_DONE) {
            /* submit_pass, return_pass: the item tried leaves this packet, queued or in
             * the mirror copy of its bounce; the rest of the list follows */
            hdr.bolt.count = hdr.bolt.count - 1;
            hdr.pass.step = hdr.bridge.step;
            hdr.task_cur.setInvalid();
            hdr.entry_cur.setInvalid();
        } else if (hdr.bridge.outcome == OUT_CREDIT_TAKEN) {
            /* the credit is taken: the entries follow, one per pass (P4 only) */
            hdr.pass.step = STEP_RETURN;
        } else if (hdr.bridge.outcome == OUT_NEXT_LEVEL) {
            /* Pipeline::next_level: RTRV_PRIO + 1 with a fresh budget */
            hdr.bolt.prio = hdr.bolt.prio + 1;
            hdr.pass.budget = hdr.bridge.max_passes;
            hdr.bolt.op = hdr.pass.origin;
            hdr.pass.step = STEP_RETRIEVE;
        } else if (hdr.bridge.outcome == OUT_SWAP) {
            /* hold the task found; search on from the next slot */
            hdr.bolt.op = OP_SWAP;
            hdr.swap_state.setValid();
            hdr.swap_state.swap_idx = hdr.bridge.swap_idx;
            hdr.swap_state.pkt_retrieve_ptr = hdr.bridge.swap_head;
            hdr.swap_held = hdr.entry_out;
            hdr.swap_held.setValid();
            hdr.entry_out.setInvalid();
            hdr.pass.step = STEP_SWAP;
        } else if (hdr.bridge.outcome == OUT_SWAP_SPENT || hdr.bridge.outcome == OUT_SWAP_PAST_TAIL) {
            /* the held task to the tail, then one level down */
            hdr.pass.step = STEP_REINSERT;
        } else if (hdr.bridge.outcome == OUT_SWAP_FILLED) {
            /* the held task filled a free slot: search again from the head */
            hdr.bolt.op = hdr.pass.origin;
            hdr.pass.step = STEP_RETRIEVE;
        } else if (hdr.bridge.outcome == OUT_ASSIGN) {
            /* Pipeline::deliver to an executor: the entry found */
            hdr.requester.setInvalid();
            answer_header(OP_ASSIGN, 1);
            hdr.bolt.prio = hdr.bridge.best_sat;
        } else if (hdr.bridge.outcome == OUT_REFILL_MORE) {
            /* The entry found goes in front of those found before, which follow as
             * payload: a batch is built newest first (Pipeline::deliver). The level's
             * budget carries over to the next search from the head. */
            hdr.bolt.op = OP_REFILL_REQ;
            hdr.pass.listed = hdr.pass.listed + 1;
            hdr.pass.want = hdr.pass.want - 1;
            hdr.pass.step = STEP_RETRIEVE;
        } else if (hdr.bridge.outcome == OUT_REFILL_FULL) {
            /* a full batch (send_refill), sent by the next pass; want and the batch flag
             * were written in the ingress, for the mirror copy that searches on */
            hdr.bolt.op = OP_REFILL_REQ;
            hdr.pass.listed = hdr.pass.listed + 1;
            hdr.pass.step = STEP_DELIVER;
        } else if (hdr.bridge.outcome == OUT_REFILL_DONE) {
            /* the host got all it asked for: the last batch, sent by the next pass, which
             * grants its credit; BEST rides in the header prio until then */
            hdr.bolt.op = OP_REFILL_REQ;
            hdr.pass.listed = hdr.pass.listed + 1;
            hdr.pass.want = hdr.pass.want - 1;
            hdr.bolt.prio = hdr.bridge.best_sat;
            hdr.pass.step = STEP_DELIVER;
        } else if (hdr.bridge.outcome == OUT_REFILL_LAST) {
            /* Pipeline::finish for a host: the last REFILL (an empty one if none),
             * sent by the next pass (it grants the credit) */
            hdr.pass.step = STEP_DELIVER;
        } else if (hdr.bridge.outcome == OUT_NOOP) {
            /* Pipeline::finish for an executor */
            answer_header(OP_NOOP, 0);
            hdr.bolt.prio = hdr.bridge.best_unsat;
            if (hdr.bridge.forked == 1) {
                /* a REPAIR went with it: sent by this packet's next pass */
                hdr.pass.step = STEP_DELIVER;
            }
        } else if (hdr.bridge.outcome == OUT_QUEUE_FULL) {
            /* the one task refused (submit_pass), bounced (Pipeline::bounce) or held
             * (reinsert_pass): a QUEUE_FULL lists one task */
            if (hdr.swap_held.isValid()) {
                queue_full_of(hdr.swap_held);
            } else if (hdr.entry_cur.isValid()) {
                queue_full_of(hdr.entry_cur);
                hdr.entry_cur.setInvalid();
            }
            hdr.requester.setInvalid();
            hdr.refill_request.setInvalid();
            answer_header(OP_QUEUE_FULL, 1);
        } else if (hdr.bridge.outcome == OUT_DELIVER) {
            /* an answer a fork or a full batch left to this packet: NOOP (written), REFILL */
            if ((hdr.pass.flags & PF_HOST) != 0) {
                /* BEST: carried in the header prio from the pass that found the last task
                 * when the host got all it asked for; otherwise (a batch before the last,
                 * or fewer than wanted) best_unsat, 0 for a retrieval from level 0 */
                eg_md.answer_best = hdr.bridge.best_unsat;
                if (hdr.pass.want == 0) {
                    eg_md.answer_best = hdr.bolt.prio;
                }
                hdr.refill_request.setInvalid();
                answer_header(OP_REFILL, hdr.pass.listed);
                hdr.bolt.prio = eg_md.answer_best;
            }
        }

        /* The SWAP state stays only while a search holds a task. */
        if (hdr.bridge.outcome != OUT_SWAP && hdr.bridge.outcome != OUT_SWAP_SPENT &&
            hdr.bridge.outcome != OUT_SWAP_PAST_TAIL) {
            hdr.swap_state.setInvalid();
            hdr.swap_held.setInvalid();
        }

        /* one count site per counter; the fork's REPAIR copy counts nothing */
        if (eg_md.counted == 1) {
            if (hdr.bridge.outcome == OUT_SWAP) {
                swaps.count(0);
            }
            if (hdr.bridge.outcome == OUT_SWAP_SPENT) {
                budget_exhausted.count(0);
            }
            if (hdr.bridge.outcome == OUT_ASSIGN || hdr.bridge.outcome == OUT_REFILL_MORE ||
                hdr.bridge.outcome == OUT_REFILL_FULL || hdr.bridge.outcome == OUT_REFILL_DONE) {
                /* Pipeline::deliver: index 0 ASSIGN, 1 REFILL (PF_HOST is bit 5) */
                deliveries.count(hdr.pass.flags[5:5]);
            }
        }

        if (hdr.pass.recirculate == 1) {
            next_layout.apply();
        } else if ((hdr.pass.flags & PF_ANSWER) != 0) {
            answers.count(hdr.bolt.op[3:0]);
            address_answer();
        }
    }
}

control BoltEgress(inout egress_headers_t hdr,
                   inout egress_md_t eg_md,
                   in egress_intrinsic_metadata_t eg_intr_md,
                   in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                   inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                   inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    BoltAnswer() answer;
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
        } else {
            if (eg_intr_md.egress_rid != RID_SPAWN) {
                eg_md.counted = 1;
            }
            if (hdr.bridge.outcome != OUT_NONE) {
                answer.apply(hdr, eg_md, eg_intr_md);
            }
            if (hdr.pass.recirculate == 0) {
                if ((hdr.pass.flags & PF_ANSWER) != 0) {
                    message_length_out.apply();
                    hdr.udp.length = eg_md.out_len + 8;
                    hdr.ipv4.total_len = eg_md.out_len + 28;
                }
                hdr.pass.setInvalid();
            } else {
                if (eg_intr_md.egress_rid == RID_SPAWN) {
                    hdr.pass.copy = PASS_SPAWN;
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
                    hdr.pass.parse_path = PP_REPAIR;
                    /* a mirror copy of the same pass carries the bounce, not this one */
                    hdr.pass.flags = hdr.pass.flags & (PF_BATCH_SENT | PF_HOST | PF_SPAWN_REPAIR);
                }
            }
        }
    }
}

/* Emits what the pass header and the answer left valid; the bridge and the mirror
 * header end here. */
control BoltEgressDeparser(packet_out pkt,
                           inout egress_headers_t hdr,
                           in egress_md_t eg_md,
                           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        /* an answer's addresses and lengths changed here */
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
        pkt.emit(hdr.swap_state);
        pkt.emit(hdr.swap_held);
        pkt.emit(hdr.job_ref);
        pkt.emit(hdr.requester);
        pkt.emit(hdr.refill_request);
        pkt.emit(hdr.task_cur);
        pkt.emit(hdr.entry_cur);
        pkt.emit(hdr.entry_out);
    }
}
