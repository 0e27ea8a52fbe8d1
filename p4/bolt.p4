/* bolt.p4: tier 2 of Bolt, the in-network task scheduler, for Tofino (TNA).
 *
 * This program mirrors the executable model in scheduler-user/src/queue (the software
 * switch runs the same algorithm). Every register action below names the model function
 * it mirrors; p4/README.md has the full mapping, the pass-by-pass layouts and the
 * resource budget. Wire layouts and constants mirror scheduler-common/src/layout.rs and
 * message.rs; scheduler-user/tests/p4_consistency.rs fails when they disagree.
 *
 * A packet meets the register arrays once per pass, in the model's stage order
 * (queue/registers.rs): add_ptr, retrieve_ptr, repairing, valid, rsrc, entry words.
 * Everything that needs another look is recirculated: the rest of a SUBMIT or RETURN,
 * a GET_TASK or REFILL_REQ moving one priority level down (RTRV_PRIO + 1), a SWAP step,
 * a REPAIR. State that is not on the wire travels in bolt_pass_h, a header that exists
 * only between this pipeline's egress and its ingress.
 */

#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

/* ------------------------------------------------------------------------------------
 * Protocol constants (scheduler-common/src/layout.rs)
 * ---------------------------------------------------------------------------------- */

const bit<16> BOLT_PORT          = 7171;    /* DEFAULT_PORT */
const bit<16> BOLT_MAGIC         = 0xB017;  /* MAGIC */
const bit<8>  BOLT_VERSION       = 1;       /* VERSION */
const bit<8>  MAX_LIST           = 16;      /* MAX_LIST */
const bit<8>  MAX_PRIORITIES     = 8;       /* MAX_PRIORITIES */
const bit<8>  DEFAULT_PRIORITIES = 4;       /* DEFAULT_PRIORITIES */

const bit<8> OP_SUBMIT     = 1;
const bit<8> OP_GET_TASK   = 2;
const bit<8> OP_ASSIGN     = 3;
const bit<8> OP_NOOP       = 4;
const bit<8> OP_COMPLETE   = 5;
const bit<8> OP_QUEUE_FULL = 6;
const bit<8> OP_REFILL_REQ = 7;
const bit<8> OP_REFILL     = 8;
const bit<8> OP_RETURN     = 9;
const bit<8> OP_SWAP       = 10;
const bit<8> OP_REPAIR     = 11;
const bit<8> OP_CLAIM      = 12;
const bit<8> OP_CLAIM_REPLY = 13;

const bit<8> KNOWN_HEADER_FLAGS = 0x03;   /* FLAG_RESUBMIT | FLAG_EXACTLY_ONCE */
const bit<8> KNOWN_TASK_FLAGS   = 0x01;   /* TASK_FLAG_EXACTLY_ONCE */

const bit<8> REPAIR_ADD_PTR      = 0;
const bit<8> REPAIR_RETRIEVE_PTR = 1;

/* DecodeError::index (scheduler-common/src/error.rs): the malformed counter's index. */
const bit<4> DE_TRUNCATED     = 0;
const bit<4> DE_BAD_MAGIC     = 1;
const bit<4> DE_BAD_VERSION   = 2;
const bit<4> DE_UNKNOWN_OP    = 3;
const bit<4> DE_INTERNAL_OP   = 4;
const bit<4> DE_UNKNOWN_FLAGS = 5;
const bit<4> DE_BAD_COUNT     = 6;
const bit<4> DE_BAD_LENGTH    = 7;
const bit<4> DE_BAD_PRIORITY  = 8;
const bit<4> DE_BAD_FIELD     = 9;
const bit<32> DECODE_ERROR_KINDS = 10;

/* ------------------------------------------------------------------------------------
 * Queue geometry (scheduler-user/src/queue/pipeline.rs, pointer.rs)
 * ---------------------------------------------------------------------------------- */

/* Entries per priority level = 2^QUEUE_INDEX_BITS (the thesis prototype: 17 bits, 128 K).
 * The level is the high part of a slot index, so one array per field serves all levels.
 * Build with -DQUEUE_INDEX_BITS=N to change it; see the resource budget in README.md. */
#ifndef QUEUE_INDEX_BITS
#define QUEUE_INDEX_BITS 17
#endif
/* Levels compiled in: 2^QUEUE_LEVEL_BITS. The control plane runs 1 to that many. */
#ifndef QUEUE_LEVEL_BITS
#define QUEUE_LEVEL_BITS 2
#endif
#define QUEUE_SLOT_BITS (QUEUE_LEVEL_BITS + QUEUE_INDEX_BITS)

typedef bit<QUEUE_LEVEL_BITS> level_t;
typedef bit<QUEUE_SLOT_BITS>  slot_t;
typedef bit<32>               ptr_t;   /* <round, index>: high bits round, low bits index */

const bit<32> QUEUE_CAPACITY = 1 << QUEUE_INDEX_BITS;
const bit<32> QUEUE_LEVELS   = 1 << QUEUE_LEVEL_BITS;
const bit<32> QUEUE_SLOTS    = 1 << QUEUE_SLOT_BITS;
/* DRIFT_LIMIT: retrieve_ptr is incremented only while less than this far past add_ptr. */
const int<32> DRIFT_LIMIT    = 1073741824;   /* 1 << 30 */

/* ------------------------------------------------------------------------------------
 * Recirculation state (P4 only; never on a front-panel port)
 * ---------------------------------------------------------------------------------- */

/* bolt_pass_h.copy */
const bit<8> PASS_LOCAL    = 0;  /* set on arrival from a front-panel port */
const bit<8> PASS_STEERED  = 1;  /* first pass, sent over from another pipe (ACL done there) */
const bit<8> PASS_CONTINUE = 2;  /* the packet itself, back for its next pass */
const bit<8> PASS_SPAWN    = 3;  /* an extra packet a pass produced (REPAIR, bounce, REFILL) */

/* bolt_pass_h.step: what a CONTINUE pass does. */
const bit<8> STEP_SUBMIT   = 1;  /* submit_pass */
const bit<8> STEP_RETURN   = 2;  /* return_pass */
const bit<8> STEP_RETRIEVE = 3;  /* retrieve_pass */
const bit<8> STEP_SWAP     = 4;  /* swap_pass */
const bit<8> STEP_REINSERT = 5;  /* reinsert_pass */
const bit<8> STEP_DELIVER  = 6;  /* send the finished answer this packet carries */

/* bolt_pass_h.flags */
const bit<8> PF_BATCH_SENT    = 0x01;  /* Retrieval::batches_sent > 0 */
const bit<8> PF_FINISH_AFTER  = 0x02;  /* REINSERT then finish (Retrieval level = priorities) */
const bit<8> PF_SPAWN_REPAIR  = 0x04;  /* the spawned copy is a REPAIR */
const bit<8> PF_SPAWN_BOUNCE  = 0x08;  /* the spawned copy bounces an entry in QUEUE_FULL */
const bit<8> PF_SPAWN_REFILL  = 0x10;  /* the spawned copy is a full REFILL batch */
const bit<8> PF_HOST          = 0x20;  /* the retrieval answers a host (REFILL_REQ) */

/* bolt_pass_h.parse_path: the layout after the Bolt header on the next pass. */
const bit<8> PP_SUBMIT                    = 1;
const bit<8> PP_QUEUE_FULL                = 2;
const bit<8> PP_RETURN                    = 3;
const bit<8> PP_RETURN_SKIP_FIRST         = 4;
const bit<8> PP_GET                       = 5;
const bit<8> PP_GET_SKIP_SWAP             = 6;
const bit<8> PP_REFILL                    = 7;
const bit<8> PP_REFILL_SKIP_SWAP          = 8;
const bit<8> PP_REFILL_SKIP_FOUND         = 9;
const bit<8> PP_SWAP_GET                  = 10;
const bit<8> PP_SWAP_REFILL               = 11;
const bit<8> PP_REPAIR                    = 12;
const bit<8> PP_REPAIR_BOUNCE_ENTRY       = 13;
const bit<8> PP_REPAIR_BOUNCE_HELD_GET    = 14;
const bit<8> PP_REPAIR_BOUNCE_HELD_REFILL = 15;
const bit<8> PP_BOUNCE_ENTRY              = 16;
const bit<8> PP_BOUNCE_HELD_GET           = 17;
const bit<8> PP_BOUNCE_HELD_REFILL        = 18;

/* Replication ids of the fork multicast group: both copies go to the recirculation port. */
const bit<16> RID_CONTINUE = 1;
const bit<16> RID_SPAWN    = 2;

/* op_passes index = origin << 2 | kind */
const bit<2> PASS_KIND_FIRST = 0;  /* QueueStats cost.packets */
const bit<2> PASS_KIND_MODEL = 1;  /* a pass the model also makes: cost.recirculations */
const bit<2> PASS_KIND_EXTRA = 2;  /* P4 only: steering, delivering a forked answer */

/* enqueue_results index = kind << 2 | result */
const bit<2> ENQ_SUBMIT   = 0;
const bit<2> ENQ_RETURN   = 1;
const bit<2> ENQ_REINSERT = 2;
const bit<2> ENQ_ADDED    = 0;
const bit<2> ENQ_FULL     = 1;
const bit<2> ENQ_OCCUPIED = 2;

/* ------------------------------------------------------------------------------------
 * Headers
 * ---------------------------------------------------------------------------------- */

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* Header (8 B) */
header bolt_h {
    bit<16> magic;
    bit<8>  version;
    bit<8>  op;
    bit<8>  count;
    bit<8>  prio;     /* RTRV_PRIO */
    bit<8>  rsrc;     /* EXEC_RSRC */
    bit<8>  flags;
}

/* JobRef (8 B): SUBMIT and QUEUE_FULL fixed body */
header job_ref_h {
    bit<32> uid;
    bit<32> jid;
}

/* Task (24 B): TASK_INFO */
header task_h {
    bit<32> tid;
    bit<8>  prio;
    bit<8>  rsrc;
    bit<8>  class;
    bit<8>  flags;
    bit<32> desc_0;
    bit<32> desc_1;
    bit<32> desc_2;
    bit<32> desc_3;
}

/* Entry (40 B): uid, jid, the Task, the client's address */
header entry_h {
    bit<32> uid;
    bit<32> jid;
    bit<32> tid;
    bit<8>  prio;
    bit<8>  rsrc;
    bit<8>  class;
    bit<8>  flags;
    bit<32> desc_0;
    bit<32> desc_1;
    bit<32> desc_2;
    bit<32> desc_3;
    bit<32> client_ip;
    bit<16> client_port;
    bit<16> pad;
}

/* Requester (8 B): GET_TASK and NOOP body */
header requester_h {
    bit<16> node;
    bit<16> executor;
    bit<32> seq;
}

/* RefillRequest (4 B): REFILL_REQ body */
header refill_request_h {
    bit<16> node;
    bit<8>  want;
    bit<8>  pad;
}

/* SwapState (48 B) = swap_state_h (8 B) followed by the held Entry (entry_h) */
header swap_state_h {
    bit<32> swap_idx;
    bit<32> pkt_retrieve_ptr;
}

/* Claim (20 B): exactly-once claims between executor and client; the switch only
 * validates them before counting them as wrong direction. */
header claim_h {
    bit<32> uid;
    bit<32> jid;
    bit<32> tid;
    bit<16> node;
    bit<16> executor;
    bit<8>  verdict;
    bit<24> pad;
}

/* Completion (32 B): COMPLETE body; parsed only to validate it (status, pads) */
header completion_h {
    bit<32> uid;
    bit<32> jid;
    bit<32> tid;
    bit<8>  status;
    bit<8>  pad;
    bit<16> node;
    bit<16> executor;
    bit<16> pad2;
    bit<32> run_ns;
    bit<64> start_unix_ns;
}

/* RepairState (8 B) */
header repair_state_h {
    bit<8>  target;
    bit<24> pad;
    bit<32> value;
}

/* Retrieval and chain state that the wire format does not carry (16 B). */
header bolt_pass_h {
    bit<8>  copy;          /* PASS_* */
    bit<8>  recirculate;   /* 1: egress keeps this header; 0: egress strips it */
    bit<8>  step;          /* STEP_* */
    bit<8>  origin;        /* the external op of the chain (Packet::origin) */
    bit<8>  parse_path;    /* PP_* for the packet itself */
    bit<8>  spawn_path;    /* PP_* for the spawned copy of a fork */
    bit<8>  flags;         /* PF_* */
    bit<8>  listed;        /* SUBMIT: tasks refused so far; REFILL: entries found; bounce: entries after it */
    bit<16> budget;        /* Retrieval::budget */
    bit<16> want;          /* Retrieval::want */
    bit<8>  repair_target; /* RepairState.target of the spawned REPAIR */
    bit<8>  repair_level;  /* 0-based level of the spawned REPAIR */
    bit<16> pad;
    bit<32> repair_value;  /* RepairState.value of the spawned REPAIR */
}

struct headers_t {
    bolt_pass_h               pass;
    ethernet_h                ethernet;
    ipv4_h                    ipv4;
    udp_h                     udp;
    bolt_h                    bolt;
    repair_state_h            repair_state;
    swap_state_h              swap_state;
    entry_h                   swap_held;
    job_ref_h                 job_ref;
    requester_h               requester;
    refill_request_h          refill_request;
    completion_h              completion;     /* COMPLETE, front panel: validated, never answered */
    claim_h                   claim;          /* CLAIM, CLAIM_REPLY: validated, never answered */
    task_h[MAX_LIST]          tasks_before;   /* SUBMIT: tasks refused so far, in order */
    task_h                    task_cur;       /* SUBMIT: the task this pass enqueues */
    task_h[MAX_LIST - 1]      tasks_after;    /* SUBMIT, first pass: the rest, validated */
    entry_h                   entry_cur;      /* RETURN: the entry this pass enqueues; bounce */
    entry_h[MAX_LIST]         entries;        /* RETURN first pass: the rest; REFILL: found */
    entry_h                   entry_out;      /* the entry a dequeue or swap took out */
}

/* The ENTRY being written by an enqueue or swap, as the register words hold it. */
struct entry_words_t {
    bit<32> uid;
    bit<32> jid;
    bit<32> tid;
    bit<32> task_word;        /* prio | rsrc | class | flags */
    bit<32> desc_0;
    bit<32> desc_1;
    bit<32> desc_2;
    bit<32> desc_3;
    bit<32> client_ip;
    bit<32> client_port_pad;  /* client_port | pad */
}

struct ingress_md_t {
    /* admission */
    bit<1>  malformed;
    bit<4>  decode_error;
    bit<1>  service;          /* addressed to this scheduler */
    bit<1>  allowed;
    bit<1>  steer;
    bit<2>  ingress_pipe;
    PortId_t steer_port;
    bit<16> expected_len;
    bit<16> out_len;
    /* configuration (queue_config) */
    bit<8>  priorities;
    bit<16> max_passes;
    PortId_t recirc_port;
    MulticastGroupId_t fork_group;
    /* this pass */
    bit<8>  step;
    bit<2>  pass_kind;
    bit<2>  origin_index;
    bit<8>  level8;           /* 0-based level */
    level_t level;
    bit<8>  task_prio;
    bit<1>  clamped;
    bit<8>  exec_rsrc;
    /* register operations chosen for this pass */
    bit<2>  add_op;           /* 0 none, 1 read, 2 read_and_increment, 3 write */
    bit<2>  retrieve_op;      /* 0 none, 1 read, 2 read_and_increment (bounded), 3 write */
    bit<2>  flag_op;          /* 0 none, 1 test_and_set, 2 clear */
    bit<2>  valid_op;         /* 0 none, 1 read_and_set, 2 read_and_clear */
    bit<2>  slot_op;          /* rsrc and entry words: 0 none, 1 read, 2 exchange */
    bit<1>  flag_kind;        /* 0 add_ptr flag, 1 retrieve_ptr flag */
    bit<16> flag_mask;
    /* register values */
    ptr_t   add_ptr;
    ptr_t   retrieve_ptr;
    ptr_t   retrieve_stored;
    ptr_t   at;               /* the pointer whose slot this pass touches */
    ptr_t   write_value;
    int<32> distance;         /* add_ptr - retrieve_ptr */
    bit<1>  full;
    bit<1>  behind;
    bit<1>  past_tail;        /* SWAP: Ring::at_or_past(at, add_ptr) */
    bit<1>  head_moved;       /* SWAP: retrieve_ptr != pkt_retrieve_ptr */
    bit<16> flags_before;
    bit<1>  flag_was_set;
    bit<1>  was_valid;
    slot_t  slot;
    bit<8>  slot_rsrc;
    bit<32> got_task_word;
    bit<32> got_client_port_pad;
    entry_words_t entry_in;
    /* decisions */
    bit<1>  added;
    bit<1>  spawn_repair;
    bit<1>  bounce;
    bit<1>  matches;
    bit<1>  more;             /* SUBMIT/RETURN: items left after this one */
    bit<8>  next_level;
    /* answer */
    bit<2>  route;            /* 0 drop, 1 output, 2 recirculate, 3 fork */
    bit<1>  to_entry_client;  /* answer goes to the bounced entry's client */
    bit<32> answer_ip;
    bit<16> answer_port;
    bit<1>  forward;          /* plain L2/L3 forwarding */
}

struct egress_md_t {}

/* ------------------------------------------------------------------------------------
 * Ingress parser. Front-panel packets are validated as scheduler-common's decode()
 * does; recirculated packets follow the layout their previous pass wrote down.
 * ---------------------------------------------------------------------------------- */

parser BoltIngressParser(packet_in pkt,
                         out headers_t hdr,
                         out ingress_md_t ig_md,
                         out ingress_intrinsic_metadata_t ig_intr_md) {
    /* Set by the control plane to the recirculation ports (bfrt: pvs). */
    value_set<PortId_t>(4) recirculation_ports;
    ParserCounter() items;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        ig_md.malformed = 0;
        ig_md.decode_error = 0;
        transition select(ig_intr_md.ingress_port) {
            recirculation_ports : parse_pass;
            default             : parse_ethernet;
        }
    }

    /* ---------- front panel ---------- */

    state parse_ethernet {
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
     * and rsrc), then the body. Every op a client or executor can send is parsed to the
     * end, including those that do not go to a switch (counted as wrong direction once
     * valid), so that what passes here is exactly what decode() accepts. */
    state parse_bolt {
        pkt.extract(hdr.bolt);
        items.set(hdr.bolt.count);
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
            12 .. 13: check_flags;
            default : unknown_op;
        }
    }

    /* shape(op).flags: SUBMIT may carry KNOWN_HEADER_FLAGS (0xFC = its complement),
     * every other op none. */
    state check_flags {
        transition select(hdr.bolt.op, hdr.bolt.flags) {
            (OP_SUBMIT, 0x00 &&& 0xFC) : check_count;
            (_, 0x00)                  : check_count;
            default                    : unknown_flags;
        }
    }

    /* Shape::min..=max per op (message.rs shape()). */
    state check_count {
        transition select(hdr.bolt.op, hdr.bolt.count) {
            (OP_SUBMIT, 1 .. 16)     : check_header_bytes;
            (OP_GET_TASK, 0)         : check_header_bytes;
            (OP_ASSIGN, 1)           : check_header_bytes;
            (OP_NOOP, 0)             : check_header_bytes;
            (OP_COMPLETE, 0)         : check_header_bytes;
            (OP_QUEUE_FULL, 1 .. 16) : check_header_bytes;
            (OP_REFILL_REQ, 0)       : check_header_bytes;
            (OP_REFILL, 0 .. 16)     : check_header_bytes;
            (OP_RETURN, 1 .. 16)     : check_header_bytes;
            (OP_CLAIM, 0)            : check_header_bytes;
            (OP_CLAIM_REPLY, 0)      : check_header_bytes;
            default                  : bad_count;
        }
    }

    /* frame(): header prio is a priority on GET_TASK (check_priority) and 0 on every
     * other external op; header rsrc is free on GET_TASK and REFILL_REQ and 0 elsewhere.
     * Then the op's body. */
    state check_header_bytes {
        transition select(hdr.bolt.op, hdr.bolt.prio, hdr.bolt.rsrc) {
            (OP_GET_TASK, 1 .. 8, _)   : parse_requester;
            (OP_GET_TASK, _, _)        : bad_priority;
            (OP_REFILL_REQ, 0, _)      : parse_refill_request_first;
            (OP_SUBMIT, 0, 0)          : parse_submit_first;
            (OP_QUEUE_FULL, 0, 0)      : parse_submit_first;
            (OP_RETURN, 0, 0)          : parse_return_first;
            (OP_ASSIGN, 0, 0)          : parse_return_first;
            (OP_REFILL, 0, 0)          : parse_refill_first;
            (OP_NOOP, 0, 0)            : parse_requester;
            (OP_COMPLETE, 0, 0)        : parse_completion;
            (OP_CLAIM, 0, 0)           : parse_claim;
            (OP_CLAIM_REPLY, 0, 0)     : parse_claim;
            default                    : bad_field;
        }
    }

    state parse_requester {
        pkt.extract(hdr.requester);
        transition accept;
    }

    /* REFILL_REQ: want 1..255 and a zero pad. */
    state parse_refill_request_first {
        pkt.extract(hdr.refill_request);
        transition select(hdr.refill_request.want, hdr.refill_request.pad) {
            (1 .. 255, 0) : accept;
            default       : bad_field;
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

    /* SUBMIT and QUEUE_FULL: every task is checked before any is queued, as decode()
     * does: prio, then flags. */
    state parse_submit_first {
        pkt.extract(hdr.job_ref);
        pkt.extract(hdr.task_cur);
        items.decrement(1);
        transition select(hdr.task_cur.prio, hdr.task_cur.flags) {
            (1 .. 8, 0x00 &&& 0xFE) : submit_rest;
            (1 .. 8, _)             : unknown_flags;
            default                 : bad_priority;
        }
    }

    state submit_rest {
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : parse_task_after;
        }
    }

    state parse_task_after {
        pkt.extract(hdr.tasks_after.next);
        items.decrement(1);
        transition select(hdr.tasks_after.last.prio, hdr.tasks_after.last.flags) {
            (1 .. 8, 0x00 &&& 0xFE) : submit_rest;
            (1 .. 8, _)             : unknown_flags;
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

    /* RETURN, ASSIGN and REFILL: every entry is checked first, as check_entry() does:
     * its task's prio, then flags, then the pad, which must be zero. */
    state parse_return_first {
        pkt.extract(hdr.entry_cur);
        items.decrement(1);
        transition select(hdr.entry_cur.prio, hdr.entry_cur.flags, hdr.entry_cur.pad) {
            (1 .. 8, 0x00 &&& 0xFE, 0) : return_rest;
            (1 .. 8, 0x00 &&& 0xFE, _) : bad_field;
            (1 .. 8, _, _)             : unknown_flags;
            default                    : bad_priority;
        }
    }

    state return_rest {
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : parse_entry_after;
        }
    }

    state parse_entry_after {
        pkt.extract(hdr.entries.next);
        items.decrement(1);
        transition select(hdr.entries.last.prio, hdr.entries.last.flags, hdr.entries.last.pad) {
            (1 .. 8, 0x00 &&& 0xFE, 0) : return_rest;
            (1 .. 8, 0x00 &&& 0xFE, _) : bad_field;
            (1 .. 8, _, _)             : unknown_flags;
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
        items.set(hdr.pass.listed);
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
            PP_RETURN_SKIP_FIRST         : rc_return_skip_first;
            PP_GET                       : parse_requester;
            PP_GET_SKIP_SWAP             : rc_get_skip_swap;
            PP_REFILL                    : rc_refill;
            PP_REFILL_SKIP_SWAP          : rc_refill_skip_swap;
            PP_REFILL_SKIP_FOUND         : rc_refill_skip_found;
            PP_SWAP_GET                  : rc_swap_get;
            PP_SWAP_REFILL               : rc_swap_refill;
            PP_REPAIR                    : rc_repair;
            PP_REPAIR_BOUNCE_ENTRY       : rc_repair_bounce_entry;
            PP_REPAIR_BOUNCE_HELD_GET    : rc_repair_bounce_held_get;
            PP_REPAIR_BOUNCE_HELD_REFILL : rc_repair_bounce_held_refill;
            PP_BOUNCE_ENTRY              : rc_bounce_entry;
            PP_BOUNCE_HELD_GET           : rc_bounce_held_get;
            PP_BOUNCE_HELD_REFILL        : rc_bounce_held_refill;
            default                      : accept;
        }
    }

    /* SUBMIT: [JobRef][refused so far][current][rest, left as payload] */
    state rc_submit {
        pkt.extract(hdr.job_ref);
        transition select((bit<1>)items.is_zero()) {
            1 : rc_task_cur;
            default : rc_task_before;
        }
    }
    state rc_task_before {
        pkt.extract(hdr.tasks_before.next);
        items.decrement(1);
        transition select((bit<1>)items.is_zero()) {
            1 : rc_task_cur;
            default : rc_task_before;
        }
    }
    state rc_task_cur { pkt.extract(hdr.task_cur); transition accept; }

    /* QUEUE_FULL to deliver: [JobRef][refused tasks] */
    state rc_queue_full {
        pkt.extract(hdr.job_ref);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_task_refused;
        }
    }
    state rc_task_refused {
        pkt.extract(hdr.tasks_before.next);
        items.decrement(1);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_task_refused;
        }
    }

    /* RETURN: the entry a forked pass bounced is dropped here (advance = delete). */
    state rc_return_skip_first { pkt.advance(320); transition rc_entry_cur; }
    state rc_entry_cur { pkt.extract(hdr.entry_cur); transition accept; }

    state rc_get_skip_swap { pkt.advance(384); transition parse_requester; }

    /* REFILL_REQ: [RefillRequest][entries found so far] */
    state rc_refill_skip_swap { pkt.advance(384); transition rc_refill; }
    state rc_refill {
        pkt.extract(hdr.refill_request);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_found;
        }
    }
    state rc_found {
        pkt.extract(hdr.entries.next);
        items.decrement(1);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_found;
        }
    }
    /* A full batch left in the other copy of a fork: drop it from this one. */
    state rc_refill_skip_found {
        pkt.extract(hdr.refill_request);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_skip_entry;
        }
    }
    state rc_skip_entry {
        pkt.advance(320);
        items.decrement(1);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_skip_entry;
        }
    }

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

    /* REPAIR: [RepairState], then the entry it also bounces, if any. */
    state rc_repair { pkt.extract(hdr.repair_state); transition accept; }
    state rc_repair_bounce_entry {
        pkt.extract(hdr.repair_state);
        transition rc_bounce_entry;
    }
    state rc_repair_bounce_held_get {
        pkt.extract(hdr.repair_state);
        transition rc_bounce_held_get;
    }
    state rc_repair_bounce_held_refill {
        pkt.extract(hdr.repair_state);
        transition rc_bounce_held_refill;
    }

    /* A bounce keeps the one entry and deletes what follows it. */
    state rc_bounce_entry {
        pkt.extract(hdr.entry_cur);
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_skip_entry;
        }
    }
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
        transition select((bit<1>)items.is_zero()) {
            1 : accept;
            default : rc_skip_entry;
        }
    }
}

/* ------------------------------------------------------------------------------------
 * Ingress: admission, the queue registers, the pass logic, forwarding.
 * ---------------------------------------------------------------------------------- */

control BoltIngress(inout headers_t hdr,
                    inout ingress_md_t ig_md,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    /* ---------------- counters (QueueStats, SwitchStats) ---------------- */

    /* Per origin (SUBMIT, GET_TASK, REFILL_REQ, RETURN) x PASS_KIND_*: OpCost. */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) op_passes;
    /* Per ENQ_* kind x result: enqueued, slot_occupied, queue_full tasks, returned, reinserts. */
    Counter<bit<64>, bit<4>>(12, CounterType_t.PACKETS) enqueue_results;
    /* 0 add_ptr, 1 retrieve_ptr: repairs_add, repairs_retrieve (REPAIR packets spawned). */
    Counter<bit<64>, bit<1>>(2, CounterType_t.PACKETS) repairs_spawned;
    /* 0 ASSIGN, 1 into a REFILL batch: decisions, assigns, refill_tasks. */
    Counter<bit<64>, bit<1>>(2, CounterType_t.PACKETS) deliveries;
    /* Answers sent, by op: noops, queue_full_packets, refill_packets (assigns too). */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) answers;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) swaps;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) budget_exhausted;
    Counter<bit<64>, bit<1>>(1, CounterType_t.PACKETS) priority_clamped;
    /* SwitchStats.malformed, by DecodeError::index. */
    Counter<bit<64>, bit<4>>(DECODE_ERROR_KINDS, CounterType_t.PACKETS) malformed;
    /* Valid messages that do not go to a switch, by op. */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) wrong_direction;
    /* Refused by the ACLs, by op. */
    Counter<bit<64>, bit<4>>(16, CounterType_t.PACKETS) acl_denied;

    /* ---------------- registers (queue/registers.rs Stage order) ---------------- */

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
    /* Pipeline::retrieve_read_and_increment: stops DRIFT_LIMIT past add_ptr (safeguard 2) */
    RegisterAction<ptr_t, level_t, ptr_t>(retrieve_ptr) retrieve_read_and_increment = {
        void apply(inout ptr_t value, out ptr_t read) {
            read = value;
            if ((int<32>)(value - ig_md.add_ptr) < DRIFT_LIMIT) {
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

    /* ---------------- tables: configuration, ACLs, forwarding ---------------- */

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
        default_action = configure(DEFAULT_PRIORITIES, 1024, 68, 1);
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

    /* SUBMIT only from allowed client prefixes. */
    action allow() { ig_md.allowed = 1; }
    table acl_clients {
        key = { hdr.ipv4.src_addr : lpm; }
        actions = { allow; NoAction; }
        default_action = NoAction();
        size = 1024;
    }
    /* GET_TASK, REFILL_REQ and RETURN only from registered worker nodes: addresses
     * (/32) or prefixes, as `bolt switch --nodes` (switch/admission.rs AccessRules). */
    table acl_workers {
        key = { hdr.ipv4.src_addr : lpm; }
        actions = { allow; NoAction; }
        default_action = NoAction();
        size = 16384;
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
    /* The same lengths for the answer this pass sends. */
    action set_out_length(bit<16> len) { ig_md.out_len = len; }
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

    /* L3 forwarding, and L2 for what is not IPv4. */
    action route(PortId_t port, bit<48> dst_mac, bit<48> src_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
    }
    action unroutable() { ig_dprsr_md.drop_ctl = 1; }
    table ipv4_route {
        key = { hdr.ipv4.dst_addr : lpm; }
        actions = { route; unroutable; }
        default_action = unroutable();
        size = 4096;
    }
    action l2_forward(PortId_t port) { ig_tm_md.ucast_egress_port = port; }
    table l2_switch {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { l2_forward; unroutable; }
        default_action = unroutable();
        size = 4096;
    }

    /* ---------------- answers ---------------- */

    /* Addresses an answer from this scheduler to (ip, port) and sizes it. */
    action address_answer(bit<32> ip, bit<16> port) {
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = ip;
        hdr.ipv4.ttl = 64;
        hdr.udp.dst_port = port;
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

    /* QUEUE_FULL for one entry (Pipeline::bounce): its job and its task, to its client. */
    action bounce_entry_cur() {
        ig_md.answer_ip = hdr.entry_cur.client_ip;
        ig_md.answer_port = hdr.entry_cur.client_port;
        hdr.job_ref.setValid();
        hdr.job_ref.uid = hdr.entry_cur.uid;
        hdr.job_ref.jid = hdr.entry_cur.jid;
        hdr.task_cur.setValid();
        hdr.task_cur.tid = hdr.entry_cur.tid;
        hdr.task_cur.prio = hdr.entry_cur.prio;
        hdr.task_cur.rsrc = hdr.entry_cur.rsrc;
        hdr.task_cur.class = hdr.entry_cur.class;
        hdr.task_cur.flags = hdr.entry_cur.flags;
        hdr.task_cur.desc_0 = hdr.entry_cur.desc_0;
        hdr.task_cur.desc_1 = hdr.entry_cur.desc_1;
        hdr.task_cur.desc_2 = hdr.entry_cur.desc_2;
        hdr.task_cur.desc_3 = hdr.entry_cur.desc_3;
        hdr.entry_cur.setInvalid();
    }
    action held_to_entry_cur() {
        hdr.entry_cur = hdr.swap_held;
        hdr.entry_cur.setValid();
        hdr.swap_held.setInvalid();
        hdr.swap_state.setInvalid();
    }

    /* ---------------- the pass ---------------- */

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
            hdr.pass.pad = 0;
            hdr.pass.repair_value = 0;
        }
        if (hdr.pass.copy != PASS_SPAWN) {
            /* what a pass spawns is decided afresh each pass */
            hdr.pass.flags = hdr.pass.flags & (PF_BATCH_SENT | PF_FINISH_AFTER | PF_HOST);
            hdr.pass.spawn_path = 0;
            if (hdr.pass.copy == PASS_CONTINUE && hdr.pass.parse_path == PP_REFILL_SKIP_FOUND) {
                /* the parser dropped the batch the other copy sent */
                hdr.pass.listed = 0;
            }
        }
        hdr.pass.recirculate = 0;
        ig_md.forward = 0;
        ig_md.expected_len = 0;
        ig_md.route = 0;
        ig_md.to_entry_client = 0;
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
        ig_md.bounce = 0;
        ig_md.was_valid = 0;
        ig_md.flag_was_set = 0;
        ig_md.clamped = 0;

        if (hdr.bolt.isValid()) {
            bolt_service.apply();
        }

        if (ig_md.service == 0) {
            /* Not for the scheduler: an L2/L3 switch. */
            ig_md.forward = 1;
        } else if (hdr.pass.copy == PASS_LOCAL) {
            /* ---------- admission: the first look at a front-panel packet ---------- */
            if (ig_prsr_md.parser_err != 0) {
                ig_md.malformed = 1;
                ig_md.decode_error = DE_TRUNCATED;
            }
            if (ig_md.malformed == 0) {
                if (!message_length_in.apply().hit) {
                    ig_md.malformed = 1;
                    ig_md.decode_error = DE_BAD_COUNT;
                } else if (hdr.udp.length != ig_md.expected_len + 8) {
                    ig_md.malformed = 1;
                    ig_md.decode_error = DE_BAD_LENGTH;
                }
            }
            if (ig_md.malformed == 1) {
                malformed.count(ig_md.decode_error);
                ig_dprsr_md.drop_ctl = 1;
            } else if (hdr.bolt.op != OP_SUBMIT && hdr.bolt.op != OP_GET_TASK &&
                       hdr.bolt.op != OP_REFILL_REQ && hdr.bolt.op != OP_RETURN) {
                /* NotForSwitch::WrongDirection */
                wrong_direction.count(hdr.bolt.op[3:0]);
                ig_dprsr_md.drop_ctl = 1;
            } else {
                if (hdr.bolt.op == OP_SUBMIT) {
                    acl_clients.apply();
                } else {
                    acl_workers.apply();
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
                        ig_md.step = STEP_RETURN;
                    } else if (hdr.bolt.op == OP_GET_TASK) {
                        ig_md.step = STEP_RETRIEVE;
                        /* RTRV_PRIO below the configured levels starts at the lowest. */
                        if (hdr.bolt.prio > ig_md.priorities) {
                            hdr.bolt.prio = ig_md.priorities;
                        }
                    } else {
                        ig_md.step = STEP_RETRIEVE;
                        hdr.bolt.prio = 1;
                        hdr.pass.flags = PF_HOST;
                        hdr.pass.want = (bit<16>)hdr.refill_request.want;
                    }
                    ig_md.pass_kind = PASS_KIND_FIRST;
                    ig_md.ingress_pipe = ig_intr_md.ingress_port[8:7];
                    pipe_steer.apply();
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
        } else if (hdr.pass.copy == PASS_STEERED) {
            /* The first pass proper, on the scheduler pipe. */
            ig_md.pass_kind = PASS_KIND_FIRST;
            if (hdr.bolt.op == OP_SUBMIT) {
                ig_md.step = STEP_SUBMIT;
            } else if (hdr.bolt.op == OP_RETURN) {
                ig_md.step = STEP_RETURN;
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

        /* ---------- OpCost ---------- */
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

        /* ---------- which queue, which register operations (one per array) ---------- */
        ig_md.exec_rsrc = hdr.bolt.rsrc;
        if (ig_md.step == STEP_SUBMIT || ig_md.step == STEP_RETURN) {
            /* Pipeline::level_of */
            if (ig_md.step == STEP_SUBMIT) {
                ig_md.task_prio = hdr.task_cur.prio;
            } else {
                ig_md.task_prio = hdr.entry_cur.prio;
            }
            if (ig_md.task_prio > ig_md.priorities) {
                ig_md.clamped = 1;
                ig_md.level8 = ig_md.priorities - 1;
            } else {
                ig_md.level8 = ig_md.task_prio - 1;
            }
        } else {
            ig_md.level8 = hdr.bolt.prio - 1;
        }
        ig_md.level = ig_md.level8[QUEUE_LEVEL_BITS - 1:0];
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

        if (ig_md.step == STEP_SUBMIT || ig_md.step == STEP_RETURN || ig_md.step == STEP_REINSERT) {
            /* Pipeline::enqueue */
            ig_md.add_op = 2;
            ig_md.retrieve_op = 1;
        } else if (ig_md.step == STEP_RETRIEVE) {
            /* Pipeline::retrieve_pass */
            ig_md.add_op = 1;
            ig_md.retrieve_op = 2;
        } else if (ig_md.step == STEP_SWAP && hdr.pass.budget != 0) {
            /* Pipeline::swap_pass (a spent budget touches no register) */
            ig_md.add_op = 1;
            ig_md.retrieve_op = 1;
        } else if (hdr.pass.copy == PASS_SPAWN && hdr.bolt.op == OP_REPAIR) {
            /* Pipeline::repair_pass */
            ig_md.write_value = hdr.repair_state.value;
            ig_md.flag_op = 2;
            if (hdr.repair_state.target == REPAIR_ADD_PTR) {
                ig_md.add_op = 3;
                ig_md.flag_kind = 0;
            } else {
                ig_md.retrieve_op = 3;
                ig_md.flag_kind = 1;
            }
        }

        /* Stage::AddPtr */
        if (ig_md.add_op == 2) {
            ig_md.add_ptr = add_read_and_increment.execute(ig_md.level);
        } else if (ig_md.add_op == 1) {
            ig_md.add_ptr = add_read.execute(ig_md.level);
        } else if (ig_md.add_op == 3) {
            add_write.execute(ig_md.level);
        }

        /* Stage::RetrievePtr */
        if (ig_md.retrieve_op == 2) {
            ig_md.retrieve_ptr = retrieve_read_and_increment.execute(ig_md.level);
            /* The value the action stored, recomputed with its own test. */
            if ((int<32>)(ig_md.retrieve_ptr - ig_md.add_ptr) < DRIFT_LIMIT) {
                ig_md.retrieve_stored = ig_md.retrieve_ptr + 1;
            } else {
                ig_md.retrieve_stored = ig_md.retrieve_ptr;
            }
        } else if (ig_md.retrieve_op == 1) {
            ig_md.retrieve_ptr = retrieve_read.execute(ig_md.level);
        } else if (ig_md.retrieve_op == 3) {
            retrieve_write.execute(ig_md.level);
        }

        /* Between the pointers and the flags: full, behind, the slot. */
        ig_md.distance = (int<32>)(ig_md.add_ptr - ig_md.retrieve_ptr);
        ig_md.full = 0;
        ig_md.behind = 0;
        ig_md.past_tail = 0;
        ig_md.head_moved = 0;
        if (ig_md.add_op == 2) {
            ig_md.at = ig_md.add_ptr;
            if (ig_md.distance >= (int<32>)QUEUE_CAPACITY) {
                ig_md.full = 1;
                ig_md.flag_op = 1;
                ig_md.flag_kind = 0;
            } else {
                if (ig_md.distance < 0) {
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
            if (ig_md.retrieve_ptr != hdr.swap_state.pkt_retrieve_ptr) {
                ig_md.head_moved = 1;
                ig_md.at = ig_md.retrieve_ptr;
            } else {
                ig_md.at = hdr.swap_state.swap_idx;
            }
            if ((int<32>)(ig_md.at - ig_md.add_ptr) >= 0) {
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
            if ((ig_md.flags_before & ig_md.flag_mask) != 0) {
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
        if ((ig_md.slot_rsrc & ~ig_md.exec_rsrc) == 0) {
            ig_md.matches = 1;
        } else {
            ig_md.matches = 0;
        }

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
            if (ig_md.added == 0 && ig_md.step != STEP_SUBMIT) {
                ig_md.bounce = 1;
            }
        }

        /* ---------- what each pass does with what it found ---------- */

        if (ig_md.step == STEP_SUBMIT) {
            /* submit_pass: refused tasks stay, in order, for the QUEUE_FULL */
            ig_md.more = 0;
            if (hdr.bolt.count - hdr.pass.listed > 1) {
                ig_md.more = 1;
            }
            if (ig_md.added == 1) {
                hdr.task_cur.setInvalid();
                hdr.bolt.count = hdr.bolt.count - 1;
            } else {
                hdr.pass.listed = hdr.pass.listed + 1;
            }
            if (ig_md.more == 1) {
                hdr.pass.step = STEP_SUBMIT;
                hdr.pass.parse_path = PP_SUBMIT;
                ig_md.route = 2;
            } else if (hdr.pass.listed != 0) {
                /* the last task: QUEUE_FULL with every task not added */
                answer_header(OP_QUEUE_FULL, hdr.pass.listed);
                hdr.pass.step = STEP_DELIVER;
                hdr.pass.parse_path = PP_QUEUE_FULL;
                ig_md.route = 1;
            }
        } else if (ig_md.step == STEP_RETURN) {
            /* return_pass: one entry per pass; an entry not queued goes back to its client */
            ig_md.more = 0;
            if (hdr.bolt.count > 1) {
                ig_md.more = 1;
            }
            hdr.bolt.count = hdr.bolt.count - 1;
            hdr.pass.listed = hdr.bolt.count;
            hdr.pass.step = STEP_RETURN;
            if (ig_md.added == 1) {
                hdr.entry_cur.setInvalid();
                hdr.pass.parse_path = PP_RETURN;
            } else {
                hdr.pass.parse_path = PP_RETURN_SKIP_FIRST;
                hdr.pass.flags = hdr.pass.flags | PF_SPAWN_BOUNCE;
                hdr.pass.spawn_path = PP_BOUNCE_ENTRY;
            }
            if (ig_md.more == 1) {
                ig_md.route = 2;
            } else if (ig_md.bounce == 1 && ig_md.spawn_repair == 0) {
                /* the last entry bounces: this packet is the QUEUE_FULL */
                bounce_entry_cur();
                answer_header(OP_QUEUE_FULL, 1);
                ig_md.to_entry_client = 1;
                ig_md.bounce = 0;
                ig_md.route = 1;
            }
        } else if (ig_md.step == STEP_RETRIEVE || ig_md.step == STEP_SWAP || ig_md.step == STEP_REINSERT) {
            bit<1> deliver = 0;
            bit<1> next_level = 0;
            bit<1> finish = 0;
            if (ig_md.step == STEP_RETRIEVE) {
                if (ig_md.was_valid == 0) {
                    next_level = 1;
                } else if (ig_md.matches == 1) {
                    deliver = 1;
                } else {
                    /* start a SWAP search holding the dequeued task */
                    swaps.count(0);
                    hdr.bolt.op = OP_SWAP;
                    hdr.swap_state.setValid();
                    hdr.swap_state.swap_idx = ig_md.retrieve_ptr + 1;
                    hdr.swap_state.pkt_retrieve_ptr = ig_md.retrieve_stored;
                    hdr.swap_held = hdr.entry_out;
                    hdr.swap_held.setValid();
                    hdr.pass.step = STEP_SWAP;
                    ig_md.route = 2;
                }
            } else if (ig_md.step == STEP_SWAP) {
                if (hdr.pass.budget == 0) {
                    budget_exhausted.count(0);
                    hdr.pass.step = STEP_REINSERT;
                    hdr.pass.flags = hdr.pass.flags | PF_FINISH_AFTER;
                    ig_md.route = 2;
                } else {
                    hdr.pass.budget = hdr.pass.budget - 1;
                    if (ig_md.past_tail == 1) {
                        hdr.pass.step = STEP_REINSERT;
                        ig_md.route = 2;
                    } else if (ig_md.was_valid == 0) {
                        /* the held task filled a free slot: search again from the head */
                        hdr.bolt.op = hdr.pass.origin;
                        hdr.swap_state.setInvalid();
                        hdr.swap_held.setInvalid();
                        hdr.pass.step = STEP_RETRIEVE;
                        ig_md.route = 2;
                    } else if (ig_md.matches == 1) {
                        hdr.swap_state.setInvalid();
                        hdr.swap_held.setInvalid();
                        deliver = 1;
                    } else {
                        swaps.count(0);
                        hdr.swap_held = hdr.entry_out;
                        hdr.swap_held.setValid();
                        hdr.swap_state.swap_idx = ig_md.at + 1;
                        if (ig_md.head_moved == 1) {
                            hdr.swap_state.pkt_retrieve_ptr = ig_md.retrieve_ptr;
                        }
                        ig_md.route = 2;
                    }
                }
            } else {
                /* reinsert_pass: the held task went back to its queue; then one level down */
                if ((hdr.pass.flags & PF_FINISH_AFTER) != 0) {
                    finish = 1;
                } else {
                    next_level = 1;
                }
                if (ig_md.bounce == 1) {
                    hdr.pass.flags = hdr.pass.flags | PF_SPAWN_BOUNCE;
                }
            }

            if (next_level == 1) {
                /* Pipeline::next_level: RTRV_PRIO + 1, or the end of the search */
                ig_md.next_level = ig_md.level8 + 1;
                if (ig_md.next_level >= ig_md.priorities || hdr.pass.budget == 0) {
                    if (hdr.pass.budget == 0 && ig_md.next_level < ig_md.priorities) {
                        budget_exhausted.count(0);
                    }
                    finish = 1;
                } else {
                    hdr.bolt.prio = hdr.bolt.prio + 1;
                    hdr.pass.budget = hdr.pass.budget - 1;
                    hdr.bolt.op = hdr.pass.origin;
                    hdr.pass.step = STEP_RETRIEVE;
                    ig_md.route = 2;
                }
            }

            if (deliver == 1) {
                /* Pipeline::deliver */
                hdr.entry_out.setValid();
                if ((hdr.pass.flags & PF_HOST) == 0) {
                    deliveries.count(0);
                    hdr.requester.setInvalid();
                    answer_header(OP_ASSIGN, 1);
                    ig_md.route = 1;
                } else {
                    deliveries.count(1);
                    hdr.bolt.op = OP_REFILL_REQ;
                    hdr.pass.listed = hdr.pass.listed + 1;
                    hdr.pass.want = hdr.pass.want - 1;
                    if (hdr.pass.listed == MAX_LIST) {
                        /* a full batch goes out now (send_refill) */
                        hdr.pass.flags = hdr.pass.flags | PF_BATCH_SENT;
                        if (hdr.pass.want == 0 || hdr.pass.budget == 0) {
                            hdr.refill_request.setInvalid();
                            answer_header(OP_REFILL, MAX_LIST);
                            ig_md.route = 1;
                        } else {
                            /* fork: this copy searches on, the other carries the batch */
                            hdr.pass.budget = hdr.pass.budget - 1;
                            hdr.pass.step = STEP_RETRIEVE;
                            hdr.pass.parse_path = PP_REFILL_SKIP_FOUND;
                            hdr.pass.flags = hdr.pass.flags | PF_SPAWN_REFILL;
                            hdr.pass.spawn_path = PP_REFILL;
                            ig_md.route = 3;
                        }
                    } else if (hdr.pass.want == 0 || hdr.pass.budget == 0) {
                        finish = 1;
                    } else {
                        hdr.pass.budget = hdr.pass.budget - 1;
                        hdr.pass.step = STEP_RETRIEVE;
                        ig_md.route = 2;
                    }
                }
            }

            if (finish == 1) {
                /* Pipeline::finish: NOOP, or the last REFILL batch (an empty one if none) */
                if ((hdr.pass.flags & PF_HOST) == 0) {
                    answer_header(OP_NOOP, 0);
                    ig_md.route = 1;
                } else if (hdr.pass.listed != 0 || (hdr.pass.flags & PF_BATCH_SENT) == 0) {
                    hdr.refill_request.setInvalid();
                    answer_header(OP_REFILL, hdr.pass.listed);
                    ig_md.route = 1;
                } else {
                    ig_md.route = 0;
                }
            }

            /* The layout the next pass of this packet parses. */
            if (ig_md.route == 2) {
                if (hdr.pass.step == STEP_SWAP || hdr.pass.step == STEP_REINSERT) {
                    if ((hdr.pass.flags & PF_HOST) == 0) {
                        hdr.pass.parse_path = PP_SWAP_GET;
                    } else {
                        hdr.pass.parse_path = PP_SWAP_REFILL;
                    }
                } else if ((hdr.pass.flags & PF_HOST) == 0) {
                    hdr.pass.parse_path = PP_GET;
                } else {
                    hdr.pass.parse_path = PP_REFILL;
                }
            }

            /* reinsert_pass: the bounce and REPAIR leave in the spawned copy. */
            if (ig_md.step == STEP_REINSERT && (ig_md.bounce == 1 || ig_md.spawn_repair == 1)) {
                if (ig_md.bounce == 1 && (hdr.pass.flags & PF_HOST) == 0) {
                    hdr.pass.spawn_path = PP_BOUNCE_HELD_GET;
                } else if (ig_md.bounce == 1) {
                    hdr.pass.spawn_path = PP_BOUNCE_HELD_REFILL;
                }
                if (ig_md.route == 0 && ig_md.spawn_repair == 0) {
                    /* nothing else to send: this packet is the QUEUE_FULL */
                    held_to_entry_cur();
                    bounce_entry_cur();
                    answer_header(OP_QUEUE_FULL, 1);
                    hdr.requester.setInvalid();
                    hdr.refill_request.setInvalid();
                    ig_md.to_entry_client = 1;
                    ig_md.bounce = 0;
                    ig_md.route = 1;
                } else {
                    /* the swap state stays for the spawned copy; this one skips it */
                    if (ig_md.route == 2) {
                        if ((hdr.pass.flags & PF_HOST) == 0) {
                            hdr.pass.parse_path = PP_GET_SKIP_SWAP;
                        } else {
                            hdr.pass.parse_path = PP_REFILL_SKIP_SWAP;
                        }
                    } else if (ig_md.route == 1) {
                        /* the NOOP or REFILL is delivered by this copy's next pass */
                        hdr.pass.step = STEP_DELIVER;
                        if ((hdr.pass.flags & PF_HOST) == 0) {
                            hdr.pass.parse_path = PP_GET_SKIP_SWAP;
                        } else {
                            hdr.pass.parse_path = PP_REFILL_SKIP_SWAP;
                            hdr.refill_request.setValid();
                        }
                        ig_md.route = 2;
                    }
                }
            } else if (ig_md.step == STEP_REINSERT) {
                hdr.swap_state.setInvalid();
                hdr.swap_held.setInvalid();
            }
        } else if (hdr.pass.copy == PASS_SPAWN) {
            /* repair_pass (op REPAIR), then the bounce or batch this copy carries */
            if ((hdr.pass.flags & PF_SPAWN_REFILL) != 0) {
                hdr.refill_request.setInvalid();
                answer_header(OP_REFILL, hdr.pass.listed);
                ig_md.route = 1;
            } else if ((hdr.pass.flags & PF_SPAWN_BOUNCE) != 0) {
                if (hdr.swap_held.isValid()) {
                    held_to_entry_cur();
                }
                bounce_entry_cur();
                hdr.repair_state.setInvalid();
                answer_header(OP_QUEUE_FULL, 1);
                ig_md.to_entry_client = 1;
                ig_md.route = 1;
            }
        } else if (ig_md.step == STEP_DELIVER) {
            /* an answer a fork left to this copy: NOOP, REFILL or QUEUE_FULL */
            if (hdr.bolt.op == OP_REFILL) {
                hdr.refill_request.setInvalid();
            }
            ig_md.route = 1;
        }

        /* A spawned packet: a REPAIR and/or a bounce, alone or next to this one. */
        if (ig_md.spawn_repair == 1 || ig_md.bounce == 1) {
            if (ig_md.spawn_repair == 1) {
                hdr.pass.flags = hdr.pass.flags | PF_SPAWN_REPAIR;
                if (hdr.pass.spawn_path == PP_BOUNCE_ENTRY) {
                    hdr.pass.spawn_path = PP_REPAIR_BOUNCE_ENTRY;
                } else if (hdr.pass.spawn_path == PP_BOUNCE_HELD_GET) {
                    hdr.pass.spawn_path = PP_REPAIR_BOUNCE_HELD_GET;
                } else if (hdr.pass.spawn_path == PP_BOUNCE_HELD_REFILL) {
                    hdr.pass.spawn_path = PP_REPAIR_BOUNCE_HELD_REFILL;
                } else {
                    hdr.pass.spawn_path = PP_REPAIR;
                }
            }
            if (ig_md.route == 2 || ig_md.route == 1) {
                /* fork; an answer on the main copy is delivered on its next pass */
                if (ig_md.route == 1) {
                    hdr.pass.step = STEP_DELIVER;
                }
                ig_md.route = 3;
            } else {
                /* alone: this packet becomes the spawned one */
                hdr.pass.copy = PASS_SPAWN;
                hdr.pass.parse_path = hdr.pass.spawn_path;
                ig_md.route = 2;
            }
        }

        /* ---------- send ---------- */
        if (ig_md.service == 1 && ig_md.steer == 0 && ig_dprsr_md.drop_ctl == 0) {
            if (ig_md.route == 0) {
                ig_dprsr_md.drop_ctl = 1;
            } else if (ig_md.route == 1) {
                answers.count(hdr.bolt.op[3:0]);
                if (ig_md.to_entry_client == 0) {
                    ig_md.answer_ip = hdr.ipv4.src_addr;
                    ig_md.answer_port = hdr.udp.src_port;
                }
                address_answer(ig_md.answer_ip, ig_md.answer_port);
                message_length_out.apply();
                hdr.udp.length = ig_md.out_len + 8;
                hdr.ipv4.total_len = ig_md.out_len + 28;
                hdr.entry_cur.setInvalid();
                ig_md.forward = 1;
            } else if (ig_md.route == 2) {
                if (hdr.pass.copy != PASS_SPAWN) {
                    hdr.pass.copy = PASS_CONTINUE;
                }
                hdr.pass.recirculate = 1;
                ig_tm_md.ucast_egress_port = ig_md.recirc_port;
            } else {
                hdr.pass.copy = PASS_CONTINUE;
                hdr.pass.recirculate = 1;
                ig_tm_md.mcast_grp_a = ig_md.fork_group;
            }
        } else if (ig_md.steer == 1) {
            hdr.pass.recirculate = 1;
        }

        if (ig_md.forward == 1) {
            if (hdr.ipv4.isValid()) {
                ipv4_route.apply();
            } else {
                l2_switch.apply();
            }
        }
    }
}

control BoltIngressDeparser(packet_out pkt,
                            inout headers_t hdr,
                            in ingress_md_t ig_md,
                            in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        hdr.ipv4.hdr_checksum = ipv4_checksum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        /* bridged to egress on every packet; egress keeps it only for recirculation */
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
        pkt.emit(hdr.completion);
        pkt.emit(hdr.tasks_before);
        pkt.emit(hdr.task_cur);
        pkt.emit(hdr.tasks_after);
        pkt.emit(hdr.entry_cur);
        pkt.emit(hdr.entries);
        pkt.emit(hdr.entry_out);
    }
}

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

Pipeline(BoltIngressParser(),
         BoltIngress(),
         BoltIngressDeparser(),
         BoltEgressParser(),
         BoltEgress(),
         BoltEgressDeparser()) pipe;

Switch(pipe) main;
