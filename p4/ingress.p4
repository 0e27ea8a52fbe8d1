/* ingress.p4: The ingress control: admission, the queue registers and pass logic, answers, forwarding;
 * and its deparser.
 * Part of bolt.p4, which includes the parts in this order. */

/* ------------------------------------------------------------------------------------
 * Ingress: sub-controls in pipeline order, each with the tables, registers and counters
 * it alone uses. They share the headers and ingress_md_t: the pass setup fills in the
 * configuration, service, forged and the step of a recirculated pass; the front panel
 * admits a first look (malformed, allowed, steer, the step); the queue pass reads step
 * and priority and fills in the register values, the enqueue results (added,
 * spawn_repair, was_valid, matches, past_tail) and the flags the decision reads (more,
 * last_level); the outcome reads those, makes the pass's one decision and sends the
 * packet, leaving what to write into it to the egress (bolt_bridge_h); the backlog
 * counts what the queue pass queued or handed out.
 * ---------------------------------------------------------------------------------- */

/* Every pass: the configuration, the pass header, whether the packet is for the
 * scheduler (or forged), and the step of a recirculated pass. */
control BoltPassSetup(inout headers_t hdr,
                      inout ingress_md_t ig_md,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* Front-panel packets carrying one of the scheduler's own addresses as source. */
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) forged;
    /* QueueConfig at run time: levels in use, the pass budget, where to recirculate. */
    action configure(bit<8> priorities, bit<16> max_passes, PortId_t recirc_port,
                     MulticastGroupId_t fork_group) {
        ig_md.priorities = priorities;
        ig_md.max_passes = max_passes;
        ig_md.recirc_port = recirc_port;
        ig_md.fork_group = fork_group;
    }
    table queue_config {
        actions = { configure; }
        default_action = configure(DEFAULT_PRIORITIES, 1024, DEFAULT_RECIRC_PORT, 1);
        size = 1;
    }
    /* The addresses this scheduler answers on (IPv4, UDP port BOLT_PORT). */
    action serve() { ig_md.service = 1; }
    table bolt_service {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { serve; NoAction; }
        default_action = NoAction();
        size = 16;
    }
    /* The same addresses as sources: a front-panel packet from one of them is forged
     * (tier 2's own packets, REFILL above all, leave from the pipeline, never arrive on a
     * port), and is dropped before it reaches an agent or the queues. */
    action forged_source() { ig_md.forged = 1; }
    table own_source {
        key = { hdr.ipv4.src_addr : exact; }
        actions = { forged_source; NoAction; }
        default_action = NoAction();
        size = 16;
    }

    apply {
        queue_config.apply();
        if (!hdr.pass.isValid()) {
            hdr.pass.setValid();
            hdr.pass.copy = PASS_LOCAL;
            hdr.pass.step = 0;
            hdr.pass.origin = 0;
            hdr.pass.parse_path = 0;
            hdr.pass.spawn_path = 0;
            hdr.pass.flags = 0;
            hdr.pass.listed = 0;
            hdr.pass.budget = 0;
            hdr.pass.want = 0;
            hdr.pass.repair_target = 0;
            hdr.pass.repair_level = 0;
            hdr.pass.first_level = 0;
            hdr.pass.covered = 0;
            hdr.pass.repair_value = 0;
        }
        if (hdr.pass.copy != PASS_SPAWN) {
            /* what a pass spawns is decided afresh each pass */
            hdr.pass.flags = hdr.pass.flags & (PF_BATCH_SENT | PF_HOST);
            hdr.pass.spawn_path = 0;
        }
        hdr.pass.recirculate = 0;
        /* what this pass tells its egress: nothing unless the pass decides */
        hdr.bridge.setValid();
        hdr.bridge.outcome = OUT_NONE;
        hdr.bridge.step = 0;
        hdr.bridge.best_sat = 0;
        hdr.bridge.best_unsat = 0;
        hdr.bridge.max_passes = 0;
        hdr.bridge.answer_port = 0;
        hdr.bridge.answer_ip = 0;
        hdr.bridge.swap_idx = 0;
        hdr.bridge.swap_head = 0;
        hdr.bridge.has_swap_state = 0;
        hdr.bridge.has_swap_held = 0;
        hdr.bridge.has_job_ref = 0;
        hdr.bridge.has_requester = 0;
        hdr.bridge.has_refill_request = 0;
        hdr.bridge.has_task_cur = 0;
        hdr.bridge.has_entry_cur = 0;
        hdr.bridge.has_entry_out = 0;
        hdr.bridge.forked = 0;
        hdr.bridge.pad = 0;
        ig_md.expected_len = 0;
        ig_md.allowed = 0;
        ig_md.service = 0;
        ig_md.steer = 0;
        ig_md.step = 0;
        ig_md.pass_kind = PASS_KIND_MODEL;
        ig_md.add_op = 0;
        ig_md.retrieve_op = 0;
        ig_md.flag_op = 0;
        ig_md.valid_op = 0;
        ig_md.slot_op = 0;
        ig_md.added = 0;
        ig_md.spawn_repair = 0;
        ig_md.was_valid = 0;
        ig_md.flag_was_set = 0;
        ig_md.clamped = 0;

        if (hdr.bolt.isValid()) {
            bolt_service.apply();
        }
        ig_md.forged = 0;
        if (hdr.ipv4.isValid() && hdr.pass.copy == PASS_LOCAL) {
            own_source.apply();
        }

        if (ig_md.forged == 1) {
            forged.count(0);
            ig_dprsr_md.drop_ctl = 1;
        } else if (ig_md.service == 0) {
            /* Not for the scheduler: an L2/L3 switch (BoltOutcome forwards it). */
        } else if (hdr.pass.copy == PASS_LOCAL) {
            /* a front-panel packet: BoltFrontPanel admits it */
        } else if (hdr.pass.copy == PASS_STEERED) {
            /* The first pass proper, on the scheduler pipe. */
            ig_md.pass_kind = PASS_KIND_FIRST;
            if (hdr.bolt.op == OP_SUBMIT) {
                ig_md.step = STEP_SUBMIT;
            } else if (hdr.bolt.op == OP_RETURN) {
                ig_md.step = STEP_CREDIT;
            } else {
                ig_md.step = STEP_RETRIEVE;
            }
        } else if (hdr.pass.copy == PASS_SPAWN) {
            /* A REPAIR is a pass of the model; bounces and batches are P4 deliveries. */
            if (hdr.bolt.op == OP_REPAIR) {
                ig_md.pass_kind = PASS_KIND_MODEL;
            } else {
                ig_md.pass_kind = PASS_KIND_EXTRA;
            }
        } else {
            ig_md.step = hdr.pass.step;
            if (ig_md.step == STEP_DELIVER) {
                ig_md.pass_kind = PASS_KIND_EXTRA;
            }
        }
    }
}

/* Admission of a front-panel packet (decode() and the access lists), then steering:
 * to the scheduler pipe, and with ADMISSION_OWN_PASS always to the recirculation port,
 * so that the queue step is the next pass. */
control BoltFrontPanel(inout headers_t hdr,
                       inout ingress_md_t ig_md,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* SwitchStats.malformed, by DecodeError::index. */
    Counter<bit<64>, bit<4>>(DECODE_ERROR_KINDS, CounterType_t.PACKETS) malformed;
    /* Valid messages that do not go to a switch, by op (ops run to OP_RECALL = 23). */
    Counter<bit<64>, bit<5>>(32, CounterType_t.PACKETS) wrong_direction;
    /* Refused by the ACLs, by op. */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) acl_denied;
    /* SUBMIT only from allowed client prefixes. Each ACL is an LPM on the source
     * address; an address is its /32. Sizes fit one stage's 24 TCAM blocks together
     * (512 32-bit keys per block: 2 + 8 + 8); a cluster with more hosts than that lists
     * them by prefix. */
    action allow() { ig_md.allowed = 1; }
    table acl_clients {
        key = { hdr.ipv4.src_addr : lpm; }
        actions = { allow; NoAction; }
        default_action = NoAction();
        size = 1024;
    }
    /* GET_TASK only from executors (`bolt switch --executors`, and --nodes). */
    table acl_executors {
        key = { hdr.ipv4.src_addr : lpm; }
        actions = { allow; NoAction; }
        default_action = NoAction();
        size = 4096;
    }
    /* REFILL_REQ and RETURN only from host agents (`bolt switch --agents`, and --nodes):
     * an executor cannot queue tasks in anyone's name nor aim QUEUE_FULL at anyone. */
    table acl_agents {
        key = { hdr.ipv4.src_addr : lpm; }
        actions = { allow; NoAction; }
        default_action = NoAction();
        size = 4096;
    }
    /* Registers live per pipe: Bolt packets arriving on another pipe are sent over to
     * the scheduler pipe's recirculation port before their first pass. */
    action steer(PortId_t port) {
        ig_md.steer = 1;
        ig_md.steer_port = port;
    }
    table pipe_steer {
        key = { ig_md.ingress_pipe : exact; }
        actions = { steer; NoAction; }
        default_action = NoAction();
        size = 4;
    }
    /* message_len(op, count) (message.rs): the length a message must have. */
    action set_expected_length(bit<16> len) { ig_md.expected_len = len; }
    table message_length_in {
        key = { hdr.bolt.op : exact; hdr.bolt.count : exact; }
        actions = { set_expected_length; NoAction; }
        default_action = NoAction();
        size = 128;
        const entries = {
#define set_message_length set_expected_length
#include "message_lengths.p4inc"
#undef set_message_length
        }
    }

    apply {
        if (ig_md.service == 1 && ig_md.forged == 0) {
            /* ---------- admission: the first look at a front-panel packet ---------- */
            if (ig_prsr_md.parser_err != 0) {
                ig_md.malformed = 1;
                ig_md.decode_error = DE_TRUNCATED;
            }
            if (ig_md.malformed == 0) {
                if (!message_length_in.apply().hit) {
                    ig_md.malformed = 1;
                    ig_md.decode_error = DE_BAD_COUNT;
                } else {
                    /* the UDP header's 8 bytes on top of the message: a difference, then
                     * a compare with a constant the gateway can make */
                    ig_md.udp_len_excess = hdr.udp.length - ig_md.expected_len;
                    if (ig_md.udp_len_excess != 8) {
                        ig_md.malformed = 1;
                        ig_md.decode_error = DE_BAD_LENGTH;
                    }
                }
            }
            if (ig_md.malformed == 0 && hdr.bolt.op == OP_GET_BUNDLE) {
                /* A bundle of one (`want` is an upper bound; p4/README.md, "Bundles"):
                 * from here on the request is a GET_TASK. */
                hdr.bolt.op = OP_GET_TASK;
                hdr.bundle.setInvalid();
            }
            if (ig_md.malformed == 1) {
                malformed.count(ig_md.decode_error);
                ig_dprsr_md.drop_ctl = 1;
            } else if (hdr.bolt.op != OP_SUBMIT && hdr.bolt.op != OP_GET_TASK &&
                       hdr.bolt.op != OP_REFILL_REQ && hdr.bolt.op != OP_RETURN) {
                /* NotForSwitch::WrongDirection */
                wrong_direction.count(hdr.bolt.op[4:0]);
                ig_dprsr_md.drop_ctl = 1;
            } else {
                if (hdr.bolt.op == OP_SUBMIT) {
                    acl_clients.apply();
                } else if (hdr.bolt.op == OP_GET_TASK) {
                    acl_executors.apply();
                } else {
                    acl_agents.apply();
                }
                if (ig_md.allowed == 0) {
                    acl_denied.count(hdr.bolt.op[3:0]);
                    ig_dprsr_md.drop_ctl = 1;
                } else {
                    /* Scheduler::admit */
                    hdr.pass.origin = hdr.bolt.op;
                    hdr.pass.budget = ig_md.max_passes;
                    hdr.pass.want = 1;
                    if (hdr.bolt.op == OP_SUBMIT) {
                        ig_md.step = STEP_SUBMIT;
                    } else if (hdr.bolt.op == OP_RETURN) {
                        ig_md.step = STEP_CREDIT;
                    } else if (hdr.bolt.op == OP_GET_TASK) {
                        ig_md.step = STEP_RETRIEVE;
                        /* RTRV_PRIO below the configured levels starts at the lowest. */
                        ig_md.prio_room = ig_md.priorities - hdr.bolt.prio;
                        if (ig_md.prio_room[7:7] == 1) {
                            hdr.bolt.prio = ig_md.priorities;
                        }
                        hdr.pass.first_level = hdr.bolt.prio - 1;
                    } else {
                        ig_md.step = STEP_RETRIEVE;
                        hdr.bolt.prio = 1;
                        hdr.pass.flags = PF_HOST;
                        hdr.pass.want = (bit<16>)hdr.refill_request.want;
                    }
                    ig_md.pass_kind = PASS_KIND_FIRST;
                    ig_md.ingress_pipe = ig_intr_md.ingress_port[8:7];
                    pipe_steer.apply();
#if ADMISSION_OWN_PASS
                    if (ig_md.steer == 0) {
                        /* admission is a pass of its own: the queue step is the next */
                        ig_md.steer = 1;
                        ig_md.steer_port = ig_md.recirc_port;
                    }
#endif
                    if (ig_md.steer == 1) {
                        /* Registers are per pipe: go to the scheduler pipe first. */
                        ig_md.pass_kind = PASS_KIND_EXTRA;
                        ig_md.step = 0;
                        hdr.pass.copy = PASS_STEERED;
                        hdr.pass.recirculate = 1;
                        hdr.pass.step = ig_md.step;
                        hdr.pass.listed = 0;
                        if (hdr.bolt.op == OP_SUBMIT) {
                            hdr.pass.parse_path = PP_SUBMIT;
                        } else if (hdr.bolt.op == OP_RETURN) {
                            hdr.pass.parse_path = PP_RETURN;
                        } else if (hdr.bolt.op == OP_GET_TASK) {
                            hdr.pass.parse_path = PP_GET;
                        } else {
                            hdr.pass.parse_path = PP_REFILL;
                        }
                        ig_tm_md.ucast_egress_port = ig_md.steer_port;
                    }
                }
            }
        }
    }
}


/* The queue step: level, register operations in Stage order, enqueue results. */
control BoltQueuePass(inout headers_t hdr,
                      inout ingress_md_t ig_md,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* Per ENQ_* kind x result: enqueued, slot_occupied, queue_full tasks, returned, reinserts. */
    Counter<bit<64>, bit<4>>(12, CounterType_t.PACKETS) enqueue_results;
    /* 0 add_ptr, 1 retrieve_ptr: repairs_add, repairs_retrieve (REPAIR packets spawned). */
    Counter<bit<64>, bit<1>>(2, CounterType_t.PACKETS) repairs_spawned;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) priority_clamped;
    /* Stage::AddPtr: add_ptr[level] */
    Register<ptr_t, level_t>(QUEUE_LEVELS, 0) add_ptr;
    /* Pipeline::add_read_and_increment */
    RegisterAction<ptr_t, level_t, ptr_t>(add_ptr) add_read_and_increment = {
        void apply(inout ptr_t value, out ptr_t read) {
            read = value;
            value = value + 1;
        }
    };
    /* Pipeline::add_read */
    RegisterAction<ptr_t, level_t, ptr_t>(add_ptr) add_read = {
        void apply(inout ptr_t value, out ptr_t read) {
            read = value;
        }
    };
    /* Pipeline::add_write (repair_pass) */
    RegisterAction<ptr_t, level_t, ptr_t>(add_ptr) add_write = {
        void apply(inout ptr_t value) {
            value = ig_md.write_value;
        }
    };
    /* Stage::RetrievePtr: retrieve_ptr[level] */
    Register<ptr_t, level_t>(QUEUE_LEVELS, 0) retrieve_ptr;
    /* Pipeline::retrieve_read_and_increment: stops DRIFT_LIMIT past add_ptr (safeguard 2).
     * DriftWindow::allows_increment, one action per shape of the window: only unsigned
     * compares of the register with drift_lo and drift_hi, which the ALU makes exactly. */
    RegisterAction<ptr_t, level_t, ptr_t>(retrieve_ptr) retrieve_read_and_increment = {
        void apply(inout ptr_t value, out ptr_t read) {
            read = value;
            if (value < ig_md.drift_lo || value >= ig_md.drift_hi) {
                value = value + 1;
            }
        }
    };
    /* The same when drift_hi wrapped past 2^32 (drift_lo's two high bits set). */
    RegisterAction<ptr_t, level_t, ptr_t>(retrieve_ptr) retrieve_read_and_increment_wrapped = {
        void apply(inout ptr_t value, out ptr_t read) {
            read = value;
            if (value < ig_md.drift_lo && value >= ig_md.drift_hi) {
                value = value + 1;
            }
        }
    };
    /* Pipeline::retrieve_read */
    RegisterAction<ptr_t, level_t, ptr_t>(retrieve_ptr) retrieve_read = {
        void apply(inout ptr_t value, out ptr_t read) {
            read = value;
        }
    };
    /* Pipeline::retrieve_write (repair_pass) */
    RegisterAction<ptr_t, level_t, ptr_t>(retrieve_ptr) retrieve_write = {
        void apply(inout ptr_t value) {
            value = ig_md.write_value;
        }
    };
    /* Stage::RepairFlags: is_repairing, bit 2l = add_ptr of level l, bit 2l+1 = retrieve_ptr
     * (thesis ch. 4: all flags in one register). */
    Register<bit<16>, bit<1>>(1, 0) repairing;
    /* Pipeline::repairing_test_and_set */
    RegisterAction<bit<16>, bit<1>, bit<16>>(repairing) repairing_test_and_set = {
        void apply(inout bit<16> value, out bit<16> read) {
            read = value;
            value = value | ig_md.flag_mask;
        }
    };
    /* Pipeline::repairing_clear */
    RegisterAction<bit<16>, bit<1>, bit<16>>(repairing) repairing_clear = {
        void apply(inout bit<16> value) {
            value = value & ~ig_md.flag_mask;
        }
    };
    /* Stage::Valid: is_valid[level][index] */
    Register<bit<1>, slot_t>(QUEUE_SLOTS, 0) valid;
    /* Pipeline::valid_read_and_set (safeguard 1: an enqueue never overwrites) */
    RegisterAction<bit<1>, slot_t, bit<1>>(valid) valid_read_and_set = {
        void apply(inout bit<1> value, out bit<1> read) {
            read = value;
            value = 1;
        }
    };
    /* Pipeline::valid_read_and_clear (no task handed out twice) */
    RegisterAction<bit<1>, slot_t, bit<1>>(valid) valid_read_and_clear = {
        void apply(inout bit<1> value, out bit<1> read) {
            read = value;
            value = 0;
        }
    };
    /* Stage::Rsrc: task_rsrc[level][index] (TRSRC) */
    Register<bit<8>, slot_t>(QUEUE_SLOTS, 0) task_rsrc;
    /* Pipeline::rsrc_read */
    RegisterAction<bit<8>, slot_t, bit<8>>(task_rsrc) rsrc_read = {
        void apply(inout bit<8> value, out bit<8> read) {
            read = value;
        }
    };
    /* Pipeline::rsrc_exchange */
    RegisterAction<bit<8>, slot_t, bit<8>>(task_rsrc) rsrc_exchange = {
        void apply(inout bit<8> value, out bit<8> read) {
            read = value;
            value = ig_md.entry_in.task_word[23:16];
        }
    };
    /* Stage::Entry: the ENTRY spread over ten 32-bit arrays. Each has a read
     * (Pipeline::entry_read) and an exchange (Pipeline::entry_exchange). */
#define ENTRY_WORD(NAME)                                                              \
    Register<bit<32>, slot_t>(QUEUE_SLOTS, 0) entry_##NAME;                           \
    RegisterAction<bit<32>, slot_t, bit<32>>(entry_##NAME) entry_##NAME##_read = {    \
        void apply(inout bit<32> value, out bit<32> read) {                           \
            read = value;                                                             \
        }                                                                             \
    };                                                                                \
    RegisterAction<bit<32>, slot_t, bit<32>>(entry_##NAME) entry_##NAME##_exchange = {\
        void apply(inout bit<32> value, out bit<32> read) {                           \
            read = value;                                                             \
            value = ig_md.entry_in.NAME;                                              \
        }                                                                             \
    };
    ENTRY_WORD(uid)
    ENTRY_WORD(jid)
    ENTRY_WORD(tid)
    ENTRY_WORD(task_word)
    ENTRY_WORD(desc_0)
    ENTRY_WORD(desc_1)
    ENTRY_WORD(desc_2)
    ENTRY_WORD(desc_3)
    ENTRY_WORD(client_ip)
    ENTRY_WORD(client_port_pad)
    /* The plan of the pass, one exact match instead of chains of conditions: the level
     * (Pipeline::level_of) and the operation each pointer and the flags register get,
     * from the step, the priority and the configured levels (pass_plan.p4inc). */
    action plan(bit<8> level8, bit<1> clamped, bit<2> add_op, bit<2> retrieve_op,
                bit<2> flag_op, bit<1> flag_kind) {
        ig_md.level8 = level8;
        ig_md.clamped = clamped;
        ig_md.add_op = add_op;
        ig_md.retrieve_op = retrieve_op;
        ig_md.flag_op = flag_op;
        ig_md.flag_kind = flag_kind;
    }
    table pass_plan {
        key = { ig_md.plan_step : exact; ig_md.task_prio : exact; ig_md.priorities : exact; }
        actions = { plan; NoAction; }
        default_action = NoAction();
        size = 512;
        const entries = {
#include "pass_plan.p4inc"
        }
    }

    /* Levels (switch/levels.rs): bit l set while level l is believed to hold tasks. One
     * RegisterAction per pass: an enqueue sets its level's bit, a retrieval that leaves
     * its level empty clears it, every other pass reads. */
    Register<bit<8>, bit<1>>(1, 0) nonempty;
    /* Levels::set */
    RegisterAction<bit<8>, bit<1>, bit<8>>(nonempty) nonempty_set = {
        void apply(inout bit<8> value, out bit<8> read) {
            value = value | ig_md.level_bit;
            read = value;
        }
    };
    /* Levels::after_retrieval, for the level this pass searched */
    RegisterAction<bit<8>, bit<1>, bit<8>>(nonempty) nonempty_clear = {
        void apply(inout bit<8> value, out bit<8> read) {
            value = value & ig_md.level_clear;
            read = value;
        }
    };
    RegisterAction<bit<8>, bit<1>, bit<8>>(nonempty) nonempty_read = {
        void apply(inout bit<8> value, out bit<8> read) {
            read = value;
        }
    };
    /* RETURN credit (switch/credit.rs ReturnCredit): per agent address, what tier 2
     * REFILLed to it minus what it RETURNed. 4096 {owner, count} pairs at the CRC-32 of
     * the address (credit::slot); one RegisterAction per pass: a grant on the pass that
     * sends a REFILL (STEP_DELIVER of a host's retrieval), a take on a RETURN's first. */
    Register<credit_pair_t, bit<12>>(CREDIT_SLOTS) credit;
    Hash<bit<12>>(HashAlgorithm_t.CRC32) credit_hash;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) credit_takeovers;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) return_over_credit;
    /* ReturnCredit::grant: a REFILL of credit_n tasks to credit_addr. Read 1 when the
     * slot changes owner (the former owner's credit is gone). */
    RegisterAction<credit_pair_t, bit<12>, bit<8>>(credit) credit_grant = {
        void apply(inout credit_pair_t value, out bit<8> read) {
            if (value.owner == ig_md.credit_addr) {
                value.count = value.count |+| ig_md.credit_n;
                read = 0;
            } else {
                value.owner = ig_md.credit_addr;
                value.count = ig_md.credit_n;
                read = 1;
            }
        }
    };
    /* ReturnCredit::take: the credit before (0 for another owner's slot), less what is
     * returned, at least 0; covered = min(credit_n, read) is taken after. */
    RegisterAction<credit_pair_t, bit<12>, bit<32>>(credit) credit_take = {
        void apply(inout credit_pair_t value, out bit<32> read) {
            if (value.owner == ig_md.credit_addr) {
                read = value.count;
                value.count = value.count |-| ig_md.credit_n;
            } else {
                read = 0;
            }
        }
    };
    /* The level's bit, its complement, and the levels from it down (BEST's masks). */
    action set_level_masks(bit<8> level_bit, bit<8> level_clear, bit<8> from_mask) {
        ig_md.level_bit = level_bit;
        ig_md.level_clear = level_clear;
        ig_md.from_mask = from_mask;
    }
    table level_masks {
        key = { ig_md.level8 : exact; }
        actions = { set_level_masks; }
        default_action = set_level_masks(0, 0xff, 0);
        size = 8;
        const entries = {
            0 : set_level_masks(0x01, 0xfe, 0xff);
            1 : set_level_masks(0x02, 0xfd, 0xfe);
            2 : set_level_masks(0x04, 0xfb, 0xfc);
            3 : set_level_masks(0x08, 0xf7, 0xf8);
            4 : set_level_masks(0x10, 0xef, 0xf0);
            5 : set_level_masks(0x20, 0xdf, 0xe0);
            6 : set_level_masks(0x40, 0xbf, 0xc0);
            7 : set_level_masks(0x80, 0x7f, 0x80);
        }
    }
    /* The levels above the one the retrieval began at: they stay in its BEST. */
    action set_below_mask(bit<8> below_mask) { ig_md.below_mask = below_mask; }
    table first_level_mask {
        key = { hdr.pass.first_level : exact; }
        actions = { set_below_mask; }
        default_action = set_below_mask(0);
        size = 8;
        const entries = {
            0 : set_below_mask(0x00);
            1 : set_below_mask(0x01);
            2 : set_below_mask(0x03);
            3 : set_below_mask(0x07);
            4 : set_below_mask(0x0f);
            5 : set_below_mask(0x1f);
            6 : set_below_mask(0x3f);
            7 : set_below_mask(0x7f);
        }
    }
    /* Levels::best: the lowest set bit as a wire priority, 0 for none (best_levels.p4inc),
     * once per candidate mask so that the answer only picks one. */
    action set_best_sat(bit<8> best) { ig_md.best_sat = best; }
    table best_of_sat {
        key = { ig_md.bits_sat : exact; }
        actions = { set_best_sat; }
        default_action = set_best_sat(0);
        size = 256;
        const entries = {
#define set_best set_best_sat
#include "best_levels.p4inc"
#undef set_best
        }
    }
    action set_best_unsat(bit<8> best) { ig_md.best_unsat = best; }
    table best_of_unsat {
        key = { ig_md.bits_unsat : exact; }
        actions = { set_best_unsat; }
        default_action = set_best_unsat(0);
        size = 256;
        const entries = {
#define set_best set_best_unsat
#include "best_levels.p4inc"
#undef set_best
        }
    }

    /* add_flag(level) = bit 2l, retrieve_flag(level) = bit 2l+1 (pipeline.rs). */
    action set_flag_mask(bit<16> mask) { ig_md.flag_mask = mask; }
    table repair_flag_mask {
        key = { ig_md.level8 : exact; ig_md.flag_kind : exact; }
        actions = { set_flag_mask; }
        default_action = set_flag_mask(0);
        size = 16;
        const entries = {
            (0, 0) : set_flag_mask(0x0001);  (0, 1) : set_flag_mask(0x0002);
            (1, 0) : set_flag_mask(0x0004);  (1, 1) : set_flag_mask(0x0008);
            (2, 0) : set_flag_mask(0x0010);  (2, 1) : set_flag_mask(0x0020);
            (3, 0) : set_flag_mask(0x0040);  (3, 1) : set_flag_mask(0x0080);
            (4, 0) : set_flag_mask(0x0100);  (4, 1) : set_flag_mask(0x0200);
            (5, 0) : set_flag_mask(0x0400);  (5, 1) : set_flag_mask(0x0800);
            (6, 0) : set_flag_mask(0x1000);  (6, 1) : set_flag_mask(0x2000);
            (7, 0) : set_flag_mask(0x4000);  (7, 1) : set_flag_mask(0x8000);
        }
    }

    apply {
        /* ---------- which queue, which register operations (one per array) ---------- */
        ig_md.exec_rsrc = hdr.bolt.rsrc;
        /* The priority the pass works at: the task's on an enqueue of a SUBMIT or RETURN
         * item, otherwise the queue the Bolt header names (RTRV_PRIO, SWAP, REINSERT,
         * REPAIR). */
        if (ig_md.step == STEP_SUBMIT) {
            ig_md.task_prio = hdr.task_cur.prio;
        } else if (ig_md.step == STEP_RETURN) {
            ig_md.task_prio = hdr.entry_cur.prio;
        } else {
            ig_md.task_prio = hdr.bolt.prio;
        }
        /* Stage 0: the RETURN credit. A RETURN's first pass (STEP_CREDIT, no queue
         * access) takes from its source's credit and carries what it covers; each RETURN
         * pass then enqueues its entry while some is covered, or refuses it. The pass that
         * sends a REFILL (STEP_DELIVER of a host's retrieval: every REFILL leaves so)
         * grants its entries to the address it goes to, the request's source. */
        ig_md.credit_addr = hdr.ipv4.src_addr;
        ig_md.credit_slot = credit_hash.get({ hdr.ipv4.src_addr });
        if (ig_md.step == STEP_CREDIT) {
            ig_md.credit_n = (bit<32>)hdr.bolt.count;
            ig_md.credit_held = credit_take.execute(ig_md.credit_slot);
            ig_md.credit_short = ig_md.credit_n |-| ig_md.credit_held;
            if (ig_md.credit_short == 0) {
                hdr.pass.covered = hdr.bolt.count;
            } else {
                hdr.pass.covered = ig_md.credit_held[7:0];
            }
        } else if (ig_md.step == STEP_DELIVER && (hdr.pass.flags & PF_HOST) != 0) {
            ig_md.credit_n = (bit<32>)hdr.pass.listed;
            ig_md.credit_takeover = credit_grant.execute(ig_md.credit_slot);
            if (ig_md.credit_takeover == 1 && hdr.pass.listed != 0) {
                credit_takeovers.count(0);
            }
        }

        /* The step the plan is looked up with: a SWAP whose budget is spent touches no
         * register (Pipeline::swap_pass); a REPAIR names its pointer (repair_pass); a
         * RETURN entry beyond its sender's credit touches none and bounces. */
        ig_md.plan_step = ig_md.step;
        if (ig_md.step == STEP_RETURN) {
            if (hdr.pass.covered == 0) {
                ig_md.plan_step = 0;
                ig_md.over_credit = 1;
                return_over_credit.count(0);
            } else {
                hdr.pass.covered = hdr.pass.covered - 1;
            }
        } else if (ig_md.step == STEP_SWAP && hdr.pass.budget == 0) {
            ig_md.plan_step = 0;
        } else if (hdr.pass.copy == PASS_SPAWN && hdr.bolt.op == OP_REPAIR) {
            ig_md.write_value = hdr.repair_state.value;
            if (hdr.repair_state.target == REPAIR_ADD_PTR) {
                ig_md.plan_step = PLAN_REPAIR_ADD;
            } else {
                ig_md.plan_step = PLAN_REPAIR_RETRIEVE;
            }
        }
        pass_plan.apply();
        ig_md.level = ig_md.level8[QUEUE_LEVEL_BITS - 1:0];
        level_masks.apply();
        first_level_mask.apply();
        ig_md.keep_sat = ig_md.below_mask | ig_md.from_mask;
        if (ig_md.clamped == 1) {
            priority_clamped.count(0);
        }

        /* The ENTRY an enqueue or swap writes. Its pad is stored as zero whatever the
         * packet held (the parser refuses a non-zero one), so none is ever sent. */
        if (ig_md.step == STEP_SUBMIT) {
            /* Entry::new(job.uid, job.jid, task, client ip, client port) */
            ig_md.entry_in.uid = hdr.job_ref.uid;
            ig_md.entry_in.jid = hdr.job_ref.jid;
            ig_md.entry_in.tid = hdr.task_cur.tid;
            ig_md.entry_in.task_word = hdr.task_cur.prio ++ hdr.task_cur.rsrc ++
                                       hdr.task_cur.class ++ hdr.task_cur.flags;
            ig_md.entry_in.desc_0 = hdr.task_cur.desc_0;
            ig_md.entry_in.desc_1 = hdr.task_cur.desc_1;
            ig_md.entry_in.desc_2 = hdr.task_cur.desc_2;
            ig_md.entry_in.desc_3 = hdr.task_cur.desc_3;
            ig_md.entry_in.client_ip = hdr.ipv4.src_addr;
            ig_md.entry_in.client_port_pad = hdr.udp.src_port ++ 16w0;
        } else if (ig_md.step == STEP_RETURN) {
            ig_md.entry_in.uid = hdr.entry_cur.uid;
            ig_md.entry_in.jid = hdr.entry_cur.jid;
            ig_md.entry_in.tid = hdr.entry_cur.tid;
            ig_md.entry_in.task_word = hdr.entry_cur.prio ++ hdr.entry_cur.rsrc ++
                                       hdr.entry_cur.class ++ hdr.entry_cur.flags;
            ig_md.entry_in.desc_0 = hdr.entry_cur.desc_0;
            ig_md.entry_in.desc_1 = hdr.entry_cur.desc_1;
            ig_md.entry_in.desc_2 = hdr.entry_cur.desc_2;
            ig_md.entry_in.desc_3 = hdr.entry_cur.desc_3;
            ig_md.entry_in.client_ip = hdr.entry_cur.client_ip;
            ig_md.entry_in.client_port_pad = hdr.entry_cur.client_port ++ 16w0;
        } else {
            ig_md.entry_in.uid = hdr.swap_held.uid;
            ig_md.entry_in.jid = hdr.swap_held.jid;
            ig_md.entry_in.tid = hdr.swap_held.tid;
            ig_md.entry_in.task_word = hdr.swap_held.prio ++ hdr.swap_held.rsrc ++
                                       hdr.swap_held.class ++ hdr.swap_held.flags;
            ig_md.entry_in.desc_0 = hdr.swap_held.desc_0;
            ig_md.entry_in.desc_1 = hdr.swap_held.desc_1;
            ig_md.entry_in.desc_2 = hdr.swap_held.desc_2;
            ig_md.entry_in.desc_3 = hdr.swap_held.desc_3;
            ig_md.entry_in.client_ip = hdr.swap_held.client_ip;
            ig_md.entry_in.client_port_pad = hdr.swap_held.client_port ++ 16w0;
        }

        /* Stage::AddPtr */
        if (ig_md.add_op == 2) {
            ig_md.add_ptr = add_read_and_increment.execute(ig_md.level);
        } else if (ig_md.add_op == 1) {
            ig_md.add_ptr = add_read.execute(ig_md.level);
        } else if (ig_md.add_op == 3) {
            add_write.execute(ig_md.level);
        }

        /* DriftWindow of the add_ptr just read, for the ALU test below */
        ig_md.drift_lo = ig_md.add_ptr + DRIFT_LIMIT_PTR;
        ig_md.drift_hi = ig_md.add_ptr + DRIFT_STOP_PTR;

        /* Stage::RetrievePtr */
        if (ig_md.retrieve_op == 2) {
            if (ig_md.drift_lo[31:30] == 2w3) {
                ig_md.retrieve_ptr = retrieve_read_and_increment_wrapped.execute(ig_md.level);
            } else {
                ig_md.retrieve_ptr = retrieve_read_and_increment.execute(ig_md.level);
            }
            /* The value the action stored: not incremented when (read - add_ptr) has the
             * high bits 01, i.e. lies in [DRIFT_LIMIT, 2 * DRIFT_LIMIT). */
            ig_md.drift = ig_md.retrieve_ptr - ig_md.add_ptr;
            if (ig_md.drift[31:30] == 2w1) {
                ig_md.retrieve_stored = ig_md.retrieve_ptr;
            } else {
                ig_md.retrieve_stored = ig_md.retrieve_ptr + 1;
            }
        } else if (ig_md.retrieve_op == 1) {
            ig_md.retrieve_ptr = retrieve_read.execute(ig_md.level);
        } else if (ig_md.retrieve_op == 3) {
            retrieve_write.execute(ig_md.level);
        }

        /* Between the pointers and the flags: full, behind, the slot. */
        /* add_ptr - retrieve_ptr read as signed: bit 31 says negative; below 2^31, full
         * is any bit from QUEUE_INDEX_BITS to 30 (the distance is at least the capacity) */
        ig_md.distance = ig_md.add_ptr - ig_md.retrieve_ptr;
        ig_md.full = 0;
        ig_md.behind = 0;
        ig_md.past_tail = 0;
        ig_md.head_moved = 0;
        if (ig_md.add_op == 2) {
            ig_md.at = ig_md.add_ptr;
            if (ig_md.distance[31:31] == 0 && ig_md.distance[30:QUEUE_INDEX_BITS] != 0) {
                ig_md.full = 1;
                ig_md.flag_op = 1;
                ig_md.flag_kind = 0;
            } else {
                if (ig_md.distance[31:31] == 1) {
                    ig_md.behind = 1;
                    ig_md.flag_op = 1;
                    ig_md.flag_kind = 1;
                }
                ig_md.valid_op = 1;
            }
        } else if (ig_md.retrieve_op == 2) {
            ig_md.at = ig_md.retrieve_ptr;
            ig_md.valid_op = 2;
        } else if (ig_md.step == STEP_SWAP && ig_md.add_op == 1) {
            /* restart from the head when retrieve_ptr moved since the search began */
            ig_md.head_delta = ig_md.retrieve_ptr - hdr.swap_state.pkt_retrieve_ptr;
            if (ig_md.head_delta != 0) {
                ig_md.head_moved = 1;
                ig_md.at = ig_md.retrieve_ptr;
            } else {
                ig_md.at = hdr.swap_state.swap_idx;
            }
            ig_md.past_add = ig_md.at - ig_md.add_ptr;
            if (ig_md.past_add[31:31] == 0) {
                ig_md.past_tail = 1;
            } else {
                ig_md.valid_op = 1;
                ig_md.slot_op = 2;
            }
        }
        ig_md.slot = ig_md.level ++ ig_md.at[QUEUE_INDEX_BITS - 1:0];

        /* Stage::RepairFlags */
        if (ig_md.flag_op != 0) {
            repair_flag_mask.apply();
        }
        if (ig_md.flag_op == 1) {
            ig_md.flags_before = repairing_test_and_set.execute(0);
            ig_md.flag_hit = ig_md.flags_before & ig_md.flag_mask;
            if (ig_md.flag_hit != 0) {
                ig_md.flag_was_set = 1;
            }
        } else if (ig_md.flag_op == 2) {
            repairing_clear.execute(0);
        }

        /* Stage::Valid */
        if (ig_md.valid_op == 1) {
            ig_md.was_valid = valid_read_and_set.execute(ig_md.slot);
        } else if (ig_md.valid_op == 2) {
            ig_md.was_valid = valid_read_and_clear.execute(ig_md.slot);
        }
        if (ig_md.add_op == 2 && ig_md.full == 0 && ig_md.was_valid == 0) {
            ig_md.added = 1;
            ig_md.slot_op = 2;    /* enqueue writes the slot */
        }
        if (ig_md.retrieve_op == 2 && ig_md.was_valid == 1) {
            ig_md.slot_op = 1;    /* dequeue reads it */
        }

        /* Stage::Rsrc */
        if (ig_md.slot_op == 1) {
            ig_md.slot_rsrc = rsrc_read.execute(ig_md.slot);
        } else if (ig_md.slot_op == 2) {
            ig_md.slot_rsrc = rsrc_exchange.execute(ig_md.slot);
        }

        /* Stage::Entry */
        if (ig_md.slot_op == 1) {
            hdr.entry_out.uid    = entry_uid_read.execute(ig_md.slot);
            hdr.entry_out.jid    = entry_jid_read.execute(ig_md.slot);
            hdr.entry_out.tid    = entry_tid_read.execute(ig_md.slot);
            ig_md.got_task_word  = entry_task_word_read.execute(ig_md.slot);
            hdr.entry_out.desc_0 = entry_desc_0_read.execute(ig_md.slot);
            hdr.entry_out.desc_1 = entry_desc_1_read.execute(ig_md.slot);
            hdr.entry_out.desc_2 = entry_desc_2_read.execute(ig_md.slot);
            hdr.entry_out.desc_3 = entry_desc_3_read.execute(ig_md.slot);
            hdr.entry_out.client_ip = entry_client_ip_read.execute(ig_md.slot);
            ig_md.got_client_port_pad = entry_client_port_pad_read.execute(ig_md.slot);
        } else if (ig_md.slot_op == 2) {
            hdr.entry_out.uid    = entry_uid_exchange.execute(ig_md.slot);
            hdr.entry_out.jid    = entry_jid_exchange.execute(ig_md.slot);
            hdr.entry_out.tid    = entry_tid_exchange.execute(ig_md.slot);
            ig_md.got_task_word  = entry_task_word_exchange.execute(ig_md.slot);
            hdr.entry_out.desc_0 = entry_desc_0_exchange.execute(ig_md.slot);
            hdr.entry_out.desc_1 = entry_desc_1_exchange.execute(ig_md.slot);
            hdr.entry_out.desc_2 = entry_desc_2_exchange.execute(ig_md.slot);
            hdr.entry_out.desc_3 = entry_desc_3_exchange.execute(ig_md.slot);
            hdr.entry_out.client_ip = entry_client_ip_exchange.execute(ig_md.slot);
            ig_md.got_client_port_pad = entry_client_port_pad_exchange.execute(ig_md.slot);
        }
        hdr.entry_out.prio  = ig_md.got_task_word[31:24];
        hdr.entry_out.rsrc  = ig_md.got_task_word[23:16];
        hdr.entry_out.class = ig_md.got_task_word[15:8];
        hdr.entry_out.flags = ig_md.got_task_word[7:0];
        hdr.entry_out.client_port = ig_md.got_client_port_pad[31:16];
        hdr.entry_out.pad = 0;

        /* resources_match(task_rsrc, exec_rsrc): task_rsrc & !exec_rsrc == 0 */
        ig_md.missing_rsrc = ig_md.slot_rsrc & ~ig_md.exec_rsrc;
        if (ig_md.missing_rsrc == 0) {
            ig_md.matches = 1;
        } else {
            ig_md.matches = 0;
        }

        /* Stage::Levels, after the match: the bitmap and this pass's two BEST candidates.
         * A retrieval clears its level's bit when it leaves the level empty (add_ptr -
         * retrieve_ptr <= 0 after the pass), unless it holds the task it found for a SWAP
         * (that task goes back to the level). */
        ig_md.remaining = ig_md.add_ptr - ig_md.retrieve_stored;
        ig_md.nonempty_op = 0;
        if (ig_md.add_op == 2) {
            ig_md.nonempty_op = 1;
        } else if (ig_md.step == STEP_RETRIEVE && ig_md.retrieve_op == 2) {
            if (ig_md.remaining == 0 || ig_md.remaining[31:31] == 1) {
                if (ig_md.was_valid == 0 || ig_md.matches == 1) {
                    ig_md.nonempty_op = 2;
                }
            }
        }
        if (ig_md.nonempty_op == 1) {
            ig_md.nonempty = nonempty_set.execute(0);
        } else if (ig_md.nonempty_op == 2) {
            ig_md.nonempty = nonempty_clear.execute(0);
        } else {
            ig_md.nonempty = nonempty_read.execute(0);
        }
        ig_md.bits_sat = ig_md.nonempty & ig_md.keep_sat;
        ig_md.bits_unsat = ig_md.nonempty & ig_md.below_mask;
        best_of_sat.apply();
        best_of_unsat.apply();

        /* The REPAIR an enqueue spawns: the first to find the pointer wrong. */
        if (ig_md.add_op == 2 && (ig_md.full == 1 || ig_md.behind == 1) && ig_md.flag_was_set == 0) {
            ig_md.spawn_repair = 1;
            repairs_spawned.count(ig_md.flag_kind);
            hdr.pass.repair_level = ig_md.level8;
            hdr.pass.repair_value = ig_md.add_ptr;
            if (ig_md.full == 1) {
                hdr.pass.repair_target = REPAIR_ADD_PTR;
            } else {
                hdr.pass.repair_target = REPAIR_RETRIEVE_PTR;
            }
        }
        if (ig_md.add_op == 2) {
            bit<2> enq_kind = ENQ_REINSERT;
            if (ig_md.step == STEP_SUBMIT) {
                enq_kind = ENQ_SUBMIT;
            } else if (ig_md.step == STEP_RETURN) {
                enq_kind = ENQ_RETURN;
            }
            bit<2> result = ENQ_ADDED;
            if (ig_md.full == 1) {
                result = ENQ_FULL;
            } else if (ig_md.added == 0) {
                result = ENQ_OCCUPIED;
            }
            enqueue_results.count(enq_kind ++ result);
            /* ResourceBacklog: a SUBMIT or RETURN task queued counts up; a held task a
             * reinsert cannot queue leaves for its client and counts down. */
            ig_md.backlog_rsrc = ig_md.entry_in.task_word[23:16];
            if (ig_md.step == STEP_REINSERT) {
                if (ig_md.added == 0) {
                    ig_md.backlog_delta = 0xffffffff;
                }
            } else if (ig_md.added == 1) {
                ig_md.backlog_delta = 1;
            }
        }
        /* The task a retrieval or swap took out travels to the egress, which hands it
         * out or holds it for the SWAP search. */
        if (ig_md.add_op == 1 && ig_md.was_valid == 1) {
            hdr.entry_out.setValid();
        }
        /* The task a retrieval or swap found and the executor can run leaves the queue
         * (Pipeline::deliver): ResourceBacklog counts down. */
        if (ig_md.add_op == 1 && ig_md.was_valid == 1 && ig_md.matches == 1) {
            ig_md.backlog_rsrc = hdr.entry_out.rsrc;
            ig_md.backlog_delta = 0xffffffff;
        }
        /* What the decision (BoltOutcome) reads besides the queue's results: items left
         * in a SUBMIT or RETURN, whether this level is the last the search may visit
         * (Pipeline::next_level), and the SWAP state the egress writes if the pass holds
         * the task it found: the next slot, and the head as this pass saw it. */
        ig_md.more = 0;
        if (hdr.bolt.count > 1) {
            ig_md.more = 1;
        }
        ig_md.next_level = ig_md.level8 + 1;
        ig_md.levels_left = ig_md.priorities - ig_md.next_level;
        ig_md.last_level = 0;
        if (ig_md.levels_left == 0 || ig_md.levels_left[7:7] == 1) {
            ig_md.last_level = 1;
        }
        hdr.bridge.swap_idx = ig_md.at + 1;
        if (ig_md.step == STEP_RETRIEVE) {
            hdr.bridge.swap_head = ig_md.retrieve_stored;
        } else if (ig_md.head_moved == 1) {
            hdr.bridge.swap_head = ig_md.retrieve_ptr;
        } else if (hdr.swap_state.isValid()) {
            hdr.bridge.swap_head = hdr.swap_state.pkt_retrieve_ptr;
        }
    }
}

/* The pass's one decision, and where its packet goes. What the queue pass found (or the
 * step alone, for a credit, a delivery or a spawned copy) picks one row of pass_outcome
 * (pass_outcomes.p4inc), whose action sends the packet (recirculation, the fork group, an
 * answer port, a mirror copy, a drop) and names the outcome the egress writes into it
 * (BoltAnswer, egress.p4): the next step, the answer header, the SWAP state. The answer's
 * address, its route and OpCost do not depend on the queue pass and sit beside it. */
control BoltOutcome(inout headers_t hdr,
                    inout ingress_md_t ig_md,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* Per origin (SUBMIT, GET_TASK, REFILL_REQ, RETURN) x PASS_KIND_*: OpCost. */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) op_passes;
    /* L3 forwarding, and L2 for what is not IPv4: of an answer this pass may send (to
     * its requester, or to the client of a bounced entry or held task), or of a packet
     * not for the scheduler. A miss drops only a packet that goes out. */
    action route(PortId_t port, bit<48> dst_mac, bit<48> src_mac) {
        ig_md.out_port = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
    }
    action unroutable() { ig_md.out_drop = 1; }
    table ipv4_route {
        key = { hdr.bridge.answer_ip : lpm; }
        actions = { route; unroutable; }
        default_action = unroutable();
        size = 4096;
    }
    action l2_forward(PortId_t port) { ig_md.out_port = port; }
    table l2_switch {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { l2_forward; unroutable; }
        default_action = unroutable();
        size = 4096;
    }

    /* The actions of pass_outcome: where the packet goes, and the outcome for the egress.
     * A mirror copy (a bounce: the QUEUE_FULL of the one task it is cut after) is made
     * by the ingress deparser from the packet as this ingress leaves it. */
    action drop_pass() {
        ig_dprsr_md.drop_ctl = 1;
    }
    action answer(bit<8> outcome) {
        hdr.bridge.outcome = outcome;
        hdr.pass.flags = hdr.pass.flags | PF_ANSWER;
        ig_tm_md.ucast_egress_port = ig_md.out_port;
        ig_dprsr_md.drop_ctl = ig_md.out_drop;
    }
    action answer_bounce(bit<8> outcome, MirrorId_t session, bit<8> spawn_path) {
        hdr.bridge.outcome = outcome;
        hdr.pass.flags = hdr.pass.flags | (PF_ANSWER | PF_MIRROR_BOUNCE);
        hdr.pass.spawn_path = spawn_path;
        ig_md.mirror_session = session;
        ig_dprsr_md.mirror_type = MIRROR_TYPE_BOLT;
        ig_tm_md.ucast_egress_port = ig_md.out_port;
        ig_dprsr_md.drop_ctl = ig_md.out_drop;
    }
    action recirculate(bit<8> outcome) {
        hdr.bridge.outcome = outcome;
        hdr.pass.copy = PASS_CONTINUE;
        hdr.pass.recirculate = 1;
        ig_tm_md.ucast_egress_port = ig_md.recirc_port;
    }
    action recirculate_bounce(bit<8> outcome, MirrorId_t session, bit<8> spawn_path) {
        hdr.bridge.outcome = outcome;
        hdr.pass.copy = PASS_CONTINUE;
        hdr.pass.recirculate = 1;
        hdr.pass.flags = hdr.pass.flags | PF_MIRROR_BOUNCE;
        hdr.pass.spawn_path = spawn_path;
        ig_md.mirror_session = session;
        ig_dprsr_md.mirror_type = MIRROR_TYPE_BOLT;
        ig_tm_md.ucast_egress_port = ig_md.recirc_port;
    }
    /* A full REFILL batch while the host wants more: this packet sends the batch on its
     * next pass; a mirror copy cut back to the RefillRequest searches on. The copy is
     * what this ingress emits, so the request's state for the search (want less the
     * entry found, a batch sent, no SWAP state before the request; from a SWAP step, the
     * budget less this pass) is written here. */
    action search_on(bit<8> outcome) {
        hdr.bridge.outcome = outcome;
        hdr.bridge.has_swap_state = 0;
        hdr.bridge.has_swap_held = 0;
        hdr.swap_state.setInvalid();
        hdr.swap_held.setInvalid();
        hdr.bolt.op = OP_REFILL_REQ;
        hdr.pass.want = hdr.pass.want - 1;
        hdr.pass.copy = PASS_CONTINUE;
        hdr.pass.recirculate = 1;
        hdr.pass.flags = hdr.pass.flags | (PF_MIRROR_SEARCH | PF_BATCH_SENT);
        ig_md.mirror_session = MIRROR_SEARCH_ON;
        ig_dprsr_md.mirror_type = MIRROR_TYPE_BOLT;
        ig_tm_md.ucast_egress_port = ig_md.recirc_port;
    }
    action search_on_from_swap(bit<8> outcome) {
        search_on(outcome);
        hdr.pass.budget = hdr.pass.budget - 1;
    }
    /* A REPAIR spawned next to the packet that goes on: both copies of the fork group
     * recirculate; the egress makes the RID_SPAWN copy the REPAIR. */
    action fork(bit<8> outcome) {
        hdr.bridge.outcome = outcome;
        hdr.bridge.forked = 1;
        hdr.pass.copy = PASS_CONTINUE;
        hdr.pass.recirculate = 1;
        hdr.pass.flags = hdr.pass.flags | PF_SPAWN_REPAIR;
        ig_tm_md.mcast_grp_a = ig_md.fork_group;
    }
    action fork_bounce(bit<8> outcome, MirrorId_t session, bit<8> spawn_path) {
        hdr.bridge.outcome = outcome;
        hdr.bridge.forked = 1;
        hdr.pass.copy = PASS_CONTINUE;
        hdr.pass.recirculate = 1;
        hdr.pass.flags = hdr.pass.flags | (PF_SPAWN_REPAIR | PF_MIRROR_BOUNCE);
        hdr.pass.spawn_path = spawn_path;
        ig_md.mirror_session = session;
        ig_dprsr_md.mirror_type = MIRROR_TYPE_BOLT;
        ig_tm_md.mcast_grp_a = ig_md.fork_group;
    }
    /* Nothing else to send: this packet becomes the REPAIR. */
    action repair_alone() {
        hdr.pass.copy = PASS_SPAWN;
        hdr.pass.recirculate = 1;
        hdr.pass.flags = hdr.pass.flags | PF_SPAWN_REPAIR;
        ig_tm_md.ucast_egress_port = ig_md.recirc_port;
    }
    action repair_alone_bounce(MirrorId_t session, bit<8> spawn_path) {
        hdr.pass.copy = PASS_SPAWN;
        hdr.pass.recirculate = 1;
        hdr.pass.flags = hdr.pass.flags | (PF_SPAWN_REPAIR | PF_MIRROR_BOUNCE);
        hdr.pass.spawn_path = spawn_path;
        ig_md.mirror_session = session;
        ig_dprsr_md.mirror_type = MIRROR_TYPE_BOLT;
        ig_tm_md.ucast_egress_port = ig_md.recirc_port;
    }
    /* One ternary match instead of the chains of conditions of submit_pass,
     * return_pass, retrieve_pass, swap_pass, reinsert_pass, next_level, deliver and
     * finish: every key is a flag the queue pass set or a pass-header field against a
     * constant. */
    table pass_outcome {
        key = {
            ig_md.step         : ternary;
            hdr.pass.copy      : ternary;
            hdr.pass.flags     : ternary;   /* PF_HOST, PF_BATCH_SENT, PF_MIRROR_BOUNCE */
            ig_md.more         : ternary;
            ig_md.added        : ternary;
            ig_md.spawn_repair : ternary;
            ig_md.was_valid    : ternary;
            ig_md.matches      : ternary;
            ig_md.past_tail    : ternary;
            hdr.pass.budget    : ternary;
            ig_md.last_level   : ternary;
            hdr.pass.listed    : ternary;
            hdr.pass.want      : ternary;
        }
        actions = {
            drop_pass; answer; answer_bounce; recirculate; recirculate_bounce; search_on;
            search_on_from_swap; fork; fork_bounce; repair_alone; repair_alone_bounce;
        }
        default_action = drop_pass();
        size = 128;
        const entries = {
#include "pass_outcomes.p4inc"
        }
    }

    apply {
        /* ---------- OpCost: every pass of a scheduler packet, whatever it finds ---------- */
        if (ig_md.service == 1 && ig_dprsr_md.drop_ctl == 0) {
            if (hdr.pass.origin == OP_SUBMIT) {
                ig_md.origin_index = 0;
            } else if (hdr.pass.origin == OP_GET_TASK) {
                ig_md.origin_index = 1;
            } else if (hdr.pass.origin == OP_REFILL_REQ) {
                ig_md.origin_index = 2;
            } else {
                ig_md.origin_index = 3;
            }
            op_passes.count(ig_md.origin_index ++ ig_md.pass_kind);
        }

        /* ---------- where an answer of this pass goes, found beside the queue pass ---------- */
        if (ig_md.service == 0) {
            if (hdr.ipv4.isValid()) {
                hdr.bridge.answer_ip = hdr.ipv4.dst_addr;
            }
        } else if (hdr.entry_cur.isValid() && (ig_md.step == STEP_RETURN || hdr.pass.copy == PASS_SPAWN)) {
            /* a bounced entry goes back to its own client (Pipeline::bounce) */
            hdr.bridge.answer_ip = hdr.entry_cur.client_ip;
            hdr.bridge.answer_port = hdr.entry_cur.client_port;
        } else if (hdr.swap_held.isValid() && hdr.pass.copy == PASS_SPAWN) {
            hdr.bridge.answer_ip = hdr.swap_held.client_ip;
            hdr.bridge.answer_port = hdr.swap_held.client_port;
        } else if (hdr.swap_held.isValid() && ig_md.step == STEP_REINSERT && (hdr.pass.flags & PF_HOST) != 0) {
            /* a host's search answers from the reinsert pass only with the held task's
             * QUEUE_FULL (its REFILLs leave from a delivering pass) */
            hdr.bridge.answer_ip = hdr.swap_held.client_ip;
            hdr.bridge.answer_port = hdr.swap_held.client_port;
        } else if (hdr.ipv4.isValid() && hdr.udp.isValid()) {
            hdr.bridge.answer_ip = hdr.ipv4.src_addr;
            hdr.bridge.answer_port = hdr.udp.src_port;
        }
        if (hdr.ipv4.isValid()) {
            ipv4_route.apply();
        } else {
            l2_switch.apply();
        }

        if (ig_md.service == 0) {
            /* Not for the scheduler: an L2/L3 switch. */
            if (ig_md.forged == 0) {
                ig_tm_md.ucast_egress_port = ig_md.out_port;
                ig_dprsr_md.drop_ctl = ig_md.out_drop;
            }
        } else if (ig_md.steer == 0 && ig_dprsr_md.drop_ctl == 0) {
            /* ---------- the decision ---------- */
            hdr.bridge.step = ig_md.step;
            hdr.bridge.best_sat = ig_md.best_sat;
            hdr.bridge.best_unsat = ig_md.best_unsat;
            hdr.bridge.max_passes = ig_md.max_passes;
            /* the headers emitted after the Bolt header, for the egress parser */
            if (hdr.swap_state.isValid()) {
                hdr.bridge.has_swap_state = 1;
            }
            if (hdr.swap_held.isValid()) {
                hdr.bridge.has_swap_held = 1;
            }
            if (hdr.job_ref.isValid()) {
                hdr.bridge.has_job_ref = 1;
            }
            if (hdr.requester.isValid()) {
                hdr.bridge.has_requester = 1;
            }
            if (hdr.refill_request.isValid()) {
                hdr.bridge.has_refill_request = 1;
            }
            if (hdr.task_cur.isValid()) {
                hdr.bridge.has_task_cur = 1;
            }
            if (hdr.entry_cur.isValid()) {
                hdr.bridge.has_entry_cur = 1;
            }
            if (hdr.entry_out.isValid()) {
                hdr.bridge.has_entry_out = 1;
            }
            pass_outcome.apply();
        }
    }
}

/* Queued tasks per resource bit (queue/backlog.rs ResourceBacklog): one register per
 * bit and one for tasks that need none, each added to at most once per pass by the
 * delta the queue pass or the answer set (a pass queues a task or hands one out, never
 * both). The control plane reads them as `bolt switch stats` reads the software switch. */
control BoltBacklog(inout headers_t hdr,
                    inout ingress_md_t ig_md,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_0;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_0) queued_rsrc_0_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_1;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_1) queued_rsrc_1_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_2;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_2) queued_rsrc_2_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_3;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_3) queued_rsrc_3_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_4;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_4) queued_rsrc_4_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_5;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_5) queued_rsrc_5_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_6;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_6) queued_rsrc_6_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_rsrc_7;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_rsrc_7) queued_rsrc_7_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };
    Register<bit<32>, bit<1>>(1, 0) queued_unconstrained;
    RegisterAction<bit<32>, bit<1>, bit<32>>(queued_unconstrained) queued_unconstrained_add = {
        void apply(inout bit<32> value) {
            value = value + ig_md.backlog_delta;
        }
    };

    apply {
        if (ig_md.backlog_delta != 0) {
            if (ig_md.backlog_rsrc == 0) {
                queued_unconstrained_add.execute(0);
            }
            if (ig_md.backlog_rsrc[0:0] == 1) { queued_rsrc_0_add.execute(0); }
            if (ig_md.backlog_rsrc[1:1] == 1) { queued_rsrc_1_add.execute(0); }
            if (ig_md.backlog_rsrc[2:2] == 1) { queued_rsrc_2_add.execute(0); }
            if (ig_md.backlog_rsrc[3:3] == 1) { queued_rsrc_3_add.execute(0); }
            if (ig_md.backlog_rsrc[4:4] == 1) { queued_rsrc_4_add.execute(0); }
            if (ig_md.backlog_rsrc[5:5] == 1) { queued_rsrc_5_add.execute(0); }
            if (ig_md.backlog_rsrc[6:6] == 1) { queued_rsrc_6_add.execute(0); }
            if (ig_md.backlog_rsrc[7:7] == 1) { queued_rsrc_7_add.execute(0); }
        }
    }
}

control BoltIngress(inout headers_t hdr,
                    inout ingress_md_t ig_md,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    BoltPassSetup() pass_setup;
    BoltFrontPanel() front_panel;
    BoltQueuePass() queue_pass;
    BoltOutcome() outcome;
    BoltBacklog() backlog;

    apply {
        pass_setup.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
        /* A list item the parser of a recirculated pass refused (malformed) is counted
         * and dropped by the front panel's checks, with what is left of its list: the
         * items before it are queued already (p4/README.md, "One list item per pass"). */
#if ADMISSION_OWN_PASS
        /* Admission and the queue step in exclusive branches: the compiler can give them
         * the same stages. first_look is set by the parser and written by no control. */
        if (ig_md.first_look == 1 || ig_md.malformed == 1) {
            front_panel.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
        } else {
            queue_pass.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
        }
#else
        if (ig_md.first_look == 1 || ig_md.malformed == 1) {
            front_panel.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
        }
        if (ig_md.malformed == 0) {
            queue_pass.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
        }
#endif
        if (ig_md.malformed == 0) {
            outcome.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
            backlog.apply(hdr, ig_md, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
        }
    }
}

control BoltIngressDeparser(packet_out pkt,
                            inout headers_t hdr,
                            in ingress_md_t ig_md,
                            in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    Mirror() mirror;

    apply {
        if (ig_dprsr_md.mirror_type == MIRROR_TYPE_BOLT) {
            /* a bounce or the search after a full batch: the session cuts the copy */
            mirror.emit<bolt_mirror_h>(ig_md.mirror_session, { PASS_MIRRORED });
        }
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        /* bridged to egress on every packet; egress keeps it only for recirculation */
        pkt.emit(hdr.pass);
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bolt);
        pkt.emit(hdr.repair_state);
        pkt.emit(hdr.swap_state);
        pkt.emit(hdr.swap_held);
        pkt.emit(hdr.job_ref);
        pkt.emit(hdr.requester);
        pkt.emit(hdr.bundle);
        pkt.emit(hdr.refill_request);
        pkt.emit(hdr.completion);
        pkt.emit(hdr.claim);
        pkt.emit(hdr.steal);
        /* at most one list item: the rest of a list follows as payload */
        pkt.emit(hdr.task_cur);
        pkt.emit(hdr.entry_cur);
        pkt.emit(hdr.entry_out);
    }
}
