/* parser.p4: The ingress parser: front-panel validation and the recirculated layouts.
 * Part of bolt.p4, which includes the parts in this order. */

/* ------------------------------------------------------------------------------------
 * Ingress parser. Front-panel packets are validated as scheduler-common's decode()
 * does, up to the first list item; recirculated packets follow the layout their previous
 * pass wrote down, and each list item is validated by the pass that extracts it.
 * ---------------------------------------------------------------------------------- */

parser BoltIngressParser(packet_in pkt,
                         out headers_t hdr,
                         out ingress_md_t ig_md,
                         out ingress_intrinsic_metadata_t ig_intr_md) {
    /* Set by the control plane to the recirculation ports (bfrt: pvs). */
    value_set<PortId_t>(4) recirculation_ports;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        /* Every metadata field starts at zero: Tofino does not zero metadata by itself,
         * and a pass reads some fields (at, got_task_word, ...) only on some paths. */
        ig_md.malformed = 0; ig_md.decode_error = 0; ig_md.service = 0; ig_md.forged = 0; ig_md.first_look = 0; ig_md.allowed = 0;
        ig_md.steer = 0; ig_md.ingress_pipe = 0; ig_md.steer_port = 0;
        ig_md.expected_len = 0; ig_md.priorities = 0;
        ig_md.max_passes = 0; ig_md.recirc_port = 0; ig_md.fork_group = 0; ig_md.step = 0; ig_md.plan_step = 0;
        ig_md.pass_kind = 0; ig_md.origin_index = 0; ig_md.level8 = 0; ig_md.level = 0;
        ig_md.task_prio = 0; ig_md.clamped = 0; ig_md.exec_rsrc = 0; ig_md.add_op = 0;
        ig_md.retrieve_op = 0; ig_md.flag_op = 0; ig_md.valid_op = 0; ig_md.slot_op = 0;
        ig_md.flag_kind = 0; ig_md.flag_mask = 0; ig_md.add_ptr = 0; ig_md.retrieve_ptr = 0;
        ig_md.retrieve_stored = 0; ig_md.drift_lo = 0; ig_md.drift_hi = 0; ig_md.drift = 0;
        ig_md.at = 0; ig_md.write_value = 0; ig_md.distance = 0; ig_md.head_delta = 0;
        ig_md.past_add = 0; ig_md.udp_len_excess = 0; ig_md.prio_room = 0;
        ig_md.missing_rsrc = 0; ig_md.flag_hit = 0; ig_md.mirror_session = 0;
        ig_md.levels_left = 0; ig_md.last_level = 0; ig_md.full = 0; ig_md.behind = 0; ig_md.past_tail = 0;
        ig_md.head_moved = 0; ig_md.flags_before = 0; ig_md.flag_was_set = 0;
        ig_md.was_valid = 0; ig_md.slot = 0; ig_md.slot_rsrc = 0; ig_md.got_task_word = 0;
        ig_md.got_client_port_pad = 0; ig_md.entry_in.uid = 0; ig_md.entry_in.jid = 0;
        ig_md.entry_in.tid = 0; ig_md.entry_in.task_word = 0; ig_md.entry_in.desc_0 = 0;
        ig_md.entry_in.desc_1 = 0; ig_md.entry_in.desc_2 = 0; ig_md.entry_in.desc_3 = 0;
        ig_md.entry_in.client_ip = 0; ig_md.entry_in.client_port_pad = 0; ig_md.added = 0;
        ig_md.spawn_repair = 0; ig_md.matches = 0; ig_md.more = 0;
        ig_md.next_level = 0; ig_md.out_port = 0; ig_md.out_drop = 0;
        ig_md.nonempty_op = 0; ig_md.level_bit = 0; ig_md.level_clear = 0; ig_md.from_mask = 0;
        ig_md.below_mask = 0; ig_md.keep_sat = 0; ig_md.remaining = 0; ig_md.nonempty = 0;
        ig_md.bits_sat = 0; ig_md.bits_unsat = 0; ig_md.best_sat = 0; ig_md.best_unsat = 0;
        ig_md.credit_slot = 0; ig_md.credit_addr = 0; ig_md.credit_n = 0; ig_md.credit_held = 0;
        ig_md.credit_short = 0; ig_md.credit_takeover = 0; ig_md.over_credit = 0;
        ig_md.backlog_delta = 0; ig_md.backlog_rsrc = 0;
        transition select(ig_intr_md.ingress_port) {
            recirculation_ports : parse_pass;
            default             : parse_ethernet;
        }
    }

    /* ---------- front panel ---------- */

    state parse_ethernet {
        ig_md.first_look = 1;
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800  : parse_ipv4;
            default : accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 17) : parse_udp;
            default    : accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            BOLT_PORT : parse_bolt;
            default   : accept;
        }
    }

    /* decode(), in its order: check_header (magic, version, op, internal op, the op's
     * header flags), then frame (count; the length is checked by the control; header prio
     * and rsrc), then the body up to its first list item. Every op a client or executor
     * can send is parsed so, including those that do not go to a switch (counted as wrong
     * direction once valid). A list's later items are checked by the pass that extracts
     * each (SUBMIT, RETURN), or not at all (ops refused as wrong direction): one list
     * item in PHV per pass (p4/README.md, "One list item per pass"). */
    state parse_bolt {
        pkt.extract(hdr.bolt);
        transition select(hdr.bolt.magic, hdr.bolt.version) {
            (BOLT_MAGIC, BOLT_VERSION) : check_op;
            (BOLT_MAGIC, _)            : bad_version;
            default                    : bad_magic;
        }
    }

    state check_op {
        transition select(hdr.bolt.op) {
            1 .. 9  : check_flags;
            10 .. 11: internal_op;
            12 .. 23: check_flags;
            default : unknown_op;
        }
    }

    /* shape(op).flags: SUBMIT may carry SUBMIT_FLAGS, PIN may carry PIN_FLAGS, GET_TASK and GET_BUNDLE may carry GET_TASK_FLAGS
     * (WAIT; no bit of the complement), every other op none. */
    state check_flags {
        transition select(hdr.bolt.op, hdr.bolt.flags) {
            (OP_SUBMIT, 0x00 &&& ~SUBMIT_FLAGS)     : check_count;
            (OP_GET_TASK, 0x00 &&& ~GET_TASK_FLAGS) : check_count;
            (OP_GET_BUNDLE, 0x00 &&& ~GET_TASK_FLAGS) : check_count;
            (OP_PIN, 0x00 &&& ~PIN_FLAGS)           : check_list_count;
            (OP_ASSIGN, 0x00)                       : check_list_count;
            (_, 0x00)                  : check_count;
            default                    : unknown_flags;
        }
    }

    /* Shape::min..=max per op (message.rs shape()). */
    state check_count {
        transition select(hdr.bolt.op, hdr.bolt.count) {
            (OP_SUBMIT, 1 .. 16)     : check_header_bytes;
            (OP_GET_TASK, 0)         : check_header_bytes;
            (OP_GET_BUNDLE, 0)       : check_bundle_header_bytes;
            (OP_NOOP, 0)             : check_header_bytes;
            (OP_COMPLETE, 0)         : check_header_bytes;
            (OP_QUEUE_FULL, 1 .. 16) : check_header_bytes;
            (OP_REFILL_REQ, 0)       : check_header_bytes;
            (OP_REFILL, 0 .. 16)     : check_header_bytes;
            (OP_RETURN, 1 .. 16)     : check_header_bytes;
            (OP_CLAIM .. OP_HINT, 0) : check_header_bytes;   /* CLAIM, CLAIM_REPLY, HINT */
            (OP_RECALL, 0)           : check_header_bytes;
            (OP_STEAL_GRANT, 0 .. 16): check_header_bytes;
            (OP_STEAL_PROBE .. OP_STEAL_DONE, 0) : check_header_bytes;
            default                  : bad_count;
        }
    }

    /* PIN's and ASSIGN's count (1 .. 16), in a state of their own: check_count's arms fill a
     * state's 32 TCAM rows. */
    state check_list_count {
        transition select(hdr.bolt.count) {
            1 .. 16 : check_header_bytes;
            default : bad_count;
        }
    }

    /* frame(): header prio is a priority on GET_TASK (check_priority), BEST (0 ..
     * MAX_PRIORITIES, BadPriority above) on the ops tier 2 sends towards the hosts
     * (ASSIGN, NOOP, REFILL, HINT, RECALL), and 0 on every other external op; header rsrc
     * is free on GET_TASK, REFILL_REQ, RECALL (the waiting executor's resources) and
     * STEAL_REQ (the thief's resources) and 0 elsewhere. Then the op's body. */
    state check_header_bytes {
        transition select(hdr.bolt.op, hdr.bolt.prio, hdr.bolt.rsrc) {
            (OP_GET_TASK, 1 .. MAX_PRIORITIES, _)   : parse_requester;
            (OP_GET_TASK, _, _)        : bad_priority;
            (OP_REFILL_REQ, 0, _)      : parse_refill_request_first;
            (OP_SUBMIT, 0, 0)          : parse_submit_first;
            (OP_QUEUE_FULL, 0, 0)      : parse_submit_first;
            (OP_PIN, 0, 0)             : parse_submit_first;
            (OP_RETURN, 0, 0)          : parse_return_first;
            (OP_ASSIGN, 0 .. MAX_PRIORITIES, 0) : parse_return_first;
            (OP_REFILL, 0 .. MAX_PRIORITIES, 0) : parse_refill_first;
            (OP_NOOP, 0 .. MAX_PRIORITIES, 0)   : parse_requester;
            (OP_HINT, 0 .. MAX_PRIORITIES, 0)   : accept;
            (OP_RECALL, _, _)          : check_recall_best;
            (OP_COMPLETE, 0, 0)        : parse_completion;
            (OP_CLAIM .. OP_CLAIM_REPLY, 0, 0) : parse_claim;
            (OP_STEAL_REQ, 0, _)       : parse_steal;
            (OP_STEAL_PROBE .. OP_STEAL_DONE, 0, 0) : parse_steal;
            /* a BEST in range with a non-zero rsrc, or a prio where none belongs */
            (_, 0 .. MAX_PRIORITIES, _) : bad_field;
            (OP_ASSIGN, _, _)          : bad_priority;
            (OP_REFILL, _, _)          : bad_priority;
            (OP_NOOP, _, _)            : bad_priority;
            (OP_HINT, _, _)            : bad_priority;
            default                    : bad_field;
        }
    }

    /* STEAL_* (check_steal): want only on STEAL_REQ (1 .. MAX_LIST), verdict only on
     * STEAL_DONE (COMMIT 1, ABORT 2), load only on STEAL_LOAD; every other field zero. A
     * STEAL_GRANT's entries are then checked as a REFILL's, its first one here. */
    state parse_steal {
        pkt.extract(hdr.steal);
        transition select(hdr.bolt.op, hdr.steal.want, hdr.steal.verdict, hdr.steal.load) {
            (OP_STEAL_GRANT, 0, 0, 0)       : parse_refill_first;
            (OP_STEAL_LOAD, 0, 0, _)        : accept;
            (OP_STEAL_REQ, 1 .. MAX_LIST, 0, 0) : accept;
            (OP_STEAL_DONE, 0, 1 .. 2, 0)   : accept;
            (OP_STEAL_PROBE, 0, 0, 0)       : accept;
            (OP_STEAL_ACK, 0, 0, 0)         : accept;
            default                         : bad_field;
        }
    }

    state parse_requester {
        pkt.extract(hdr.requester);
        transition accept;
    }

    /* GET_BUNDLE's header bytes as GET_TASK's (prio a priority, rsrc free), in a state of
     * their own: check_header_bytes's arms fill a state's 32 TCAM rows. */
    state check_bundle_header_bytes {
        transition select(hdr.bolt.prio) {
            1 .. MAX_PRIORITIES : parse_bundle_requester;
            default             : bad_priority;
        }
    }

    /* GET_BUNDLE: GET_TASK's Requester, then want MIN_BUNDLE .. MAX_BUNDLE (2 .. 16) and
     * a zero pad (check_bundle_request()). */
    state parse_bundle_requester {
        pkt.extract(hdr.requester);
        pkt.extract(hdr.bundle);
        transition select(hdr.bundle.want, hdr.bundle.pad) {
            (2 .. 16, 0) : accept;
            default      : bad_field;
        }
    }

    /* REFILL_REQ: want 1..255 and a zero pad. */
    /* RECALL: BEST in the header's prio, then REFILL_REQ's body (node, want 1 .. 255,
     * waiting 0). In a state of its own: check_header_bytes's arms fill its 32 TCAM rows. */
    state check_recall_best {
        transition select(hdr.bolt.prio) {
            0 .. MAX_PRIORITIES : parse_refill_request_first;
            default             : bad_priority;
        }
    }

    state parse_refill_request_first {
        pkt.extract(hdr.refill_request);
        /* REFILL_REQ: any waiting count; RECALL: waiting 0. */
        transition select(hdr.bolt.op, hdr.refill_request.want, hdr.refill_request.waiting) {
            (OP_REFILL_REQ, 1 .. 255, _) : accept;
            (OP_RECALL, 1 .. 255, 0)     : accept;
            default                      : bad_field;
        }
    }

    /* COMPLETE: status STATUS_OK, STATUS_FAILED or STATUS_REFUSED, both pads zero. */
    state parse_completion {
        pkt.extract(hdr.completion);
        transition select(hdr.completion.status, hdr.completion.pad, hdr.completion.pad2) {
            (0 .. 2, 0, 0) : accept;
            default        : bad_field;
        }
    }

    /* CLAIM: verdict CLAIM_ASK (0) or CLAIM_RENEW (3, a lease renewal); CLAIM_REPLY:
     * CLAIM_GRANTED (1) or CLAIM_DENIED (2); the pad zero. */
    state parse_claim {
        pkt.extract(hdr.claim);
        transition select(hdr.bolt.op, hdr.claim.verdict, hdr.claim.pad) {
            (OP_CLAIM, 0, 0)            : accept;
            (OP_CLAIM, 3, 0)            : accept;
            (OP_CLAIM_REPLY, 1 .. 2, 0) : accept;
            default                     : bad_field;
        }
    }

    /* SUBMIT, QUEUE_FULL and PIN: the first task only, prio then flags, as check_task() does.
     * The rest of the list stays payload; each task is checked the same way by the pass
     * that extracts it (rc_task_cur), so a pass holds one list item. */
    state parse_submit_first {
        pkt.extract(hdr.job_ref);
        transition parse_task_cur;
    }

    state parse_task_cur {
        pkt.extract(hdr.task_cur);
        transition select(hdr.task_cur.prio, hdr.task_cur.flags) {
            (1 .. MAX_PRIORITIES, 0x00 &&& ~KNOWN_TASK_FLAGS) : accept;
            (1 .. MAX_PRIORITIES, _)             : unknown_flags;
            default                 : bad_priority;
        }
    }

    /* REFILL may list no entry. */
    state parse_refill_first {
        transition select(hdr.bolt.count) {
            0       : accept;
            default : parse_return_first;
        }
    }

    /* RETURN, ASSIGN (1 .. 16 entries since version 4) and REFILL: the first entry only, as check_entry() does: its task's
     * prio, then flags, then the pad, which must be zero. */
    state parse_return_first {
        pkt.extract(hdr.entry_cur);
        transition select(hdr.entry_cur.prio, hdr.entry_cur.flags, hdr.entry_cur.pad) {
            (1 .. MAX_PRIORITIES, 0x00 &&& ~KNOWN_TASK_FLAGS, 0) : accept;
            (1 .. MAX_PRIORITIES, 0x00 &&& ~KNOWN_TASK_FLAGS, _) : bad_field;
            (1 .. MAX_PRIORITIES, _, _)             : unknown_flags;
            default                    : bad_priority;
        }
    }

    state bad_magic     { ig_md.malformed = 1; ig_md.decode_error = DE_BAD_MAGIC;     transition accept; }
    state bad_version   { ig_md.malformed = 1; ig_md.decode_error = DE_BAD_VERSION;   transition accept; }
    state unknown_op    { ig_md.malformed = 1; ig_md.decode_error = DE_UNKNOWN_OP;    transition accept; }
    state internal_op   { ig_md.malformed = 1; ig_md.decode_error = DE_INTERNAL_OP;   transition accept; }
    state unknown_flags { ig_md.malformed = 1; ig_md.decode_error = DE_UNKNOWN_FLAGS; transition accept; }
    state bad_count     { ig_md.malformed = 1; ig_md.decode_error = DE_BAD_COUNT;     transition accept; }
    state bad_priority  { ig_md.malformed = 1; ig_md.decode_error = DE_BAD_PRIORITY;  transition accept; }
    state bad_field     { ig_md.malformed = 1; ig_md.decode_error = DE_BAD_FIELD;     transition accept; }

    /* ---------- recirculation port ---------- */

    state parse_pass {
        pkt.extract(hdr.pass);
        transition rc_ethernet;
    }

    state rc_ethernet { pkt.extract(hdr.ethernet); transition rc_ipv4; }
    state rc_ipv4     { pkt.extract(hdr.ipv4);     transition rc_udp; }
    state rc_udp      { pkt.extract(hdr.udp);      transition rc_bolt; }

    state rc_bolt {
        pkt.extract(hdr.bolt);
        transition select(hdr.pass.parse_path) {
            PP_SUBMIT                    : rc_submit;
            PP_QUEUE_FULL                : rc_queue_full;
            PP_RETURN                    : rc_entry_cur;
            PP_GET                       : parse_requester;
            PP_REFILL                    : rc_refill;
            PP_SWAP_GET                  : rc_swap_get;
            PP_SWAP_REFILL               : rc_swap_refill;
            PP_REPAIR                    : rc_repair;
            PP_BOUNCE_ENTRY              : rc_bounce_entry;
            PP_BOUNCE_HELD_GET           : rc_bounce_held_get;
            PP_BOUNCE_HELD_REFILL        : rc_bounce_held_refill;
            default                      : accept;
        }
    }

    /* SUBMIT: [JobRef][the first task left, checked here][the rest, payload] */
    state rc_submit { pkt.extract(hdr.job_ref); transition rc_task_cur; }
    state rc_task_cur {
        pkt.extract(hdr.task_cur);
        transition select(hdr.task_cur.prio, hdr.task_cur.flags) {
            (1 .. MAX_PRIORITIES, 0x00 &&& ~KNOWN_TASK_FLAGS) : accept;
            (1 .. MAX_PRIORITIES, _)             : unknown_flags;
            default                 : bad_priority;
        }
    }
    /* A mirrored QUEUE_FULL: [JobRef][the one task], cut there by its mirror session. */
    state rc_queue_full {
        pkt.extract(hdr.job_ref);
        pkt.extract(hdr.task_cur);
        transition accept;
    }

    /* RETURN: [the first entry left, checked here][the rest, payload] */
    state rc_entry_cur {
        pkt.extract(hdr.entry_cur);
        transition select(hdr.entry_cur.prio, hdr.entry_cur.flags, hdr.entry_cur.pad) {
            (1 .. MAX_PRIORITIES, 0x00 &&& ~KNOWN_TASK_FLAGS, 0) : accept;
            (1 .. MAX_PRIORITIES, 0x00 &&& ~KNOWN_TASK_FLAGS, _) : bad_field;
            (1 .. MAX_PRIORITIES, _, _)             : unknown_flags;
            default                    : bad_priority;
        }
    }

    /* REFILL_REQ: [RefillRequest][entries found so far, newest first: payload] */
    state rc_refill { pkt.extract(hdr.refill_request); transition accept; }

    /* SWAP: [SwapState][held Entry][the retrieval's own body] */
    state rc_swap_get {
        pkt.extract(hdr.swap_state);
        pkt.extract(hdr.swap_held);
        transition parse_requester;
    }
    state rc_swap_refill {
        pkt.extract(hdr.swap_state);
        pkt.extract(hdr.swap_held);
        transition rc_refill;
    }

    /* REPAIR: [RepairState]; whatever follows is payload the pass drops with the packet. */
    state rc_repair { pkt.extract(hdr.repair_state); transition accept; }

    /* A mirrored bounce: the one entry, everything after it cut by the mirror session. */
    state rc_bounce_entry { pkt.extract(hdr.entry_cur); transition accept; }
    state rc_bounce_held_get {
        pkt.extract(hdr.swap_state);
        pkt.extract(hdr.swap_held);
        pkt.advance(64);     /* Requester */
        transition accept;
    }
    state rc_bounce_held_refill {
        pkt.extract(hdr.swap_state);
        pkt.extract(hdr.swap_held);
        pkt.advance(32);     /* RefillRequest */
        transition accept;
    }
}
