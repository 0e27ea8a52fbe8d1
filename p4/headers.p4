/* headers.p4: Protocol constants, queue geometry, the recirculation state, headers and metadata.
 * Part of bolt.p4, which includes the parts in this order. */

/* ------------------------------------------------------------------------------------
 * Protocol constants (scheduler-common/src/layout.rs)
 * ---------------------------------------------------------------------------------- */

const bit<16> BOLT_PORT          = 7171;    /* DEFAULT_PORT */
const bit<16> BOLT_MAGIC         = 0xB017;  /* MAGIC */
const bit<8>  BOLT_VERSION       = 5;       /* VERSION */
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
const bit<8> OP_HINT        = 14;   /* tier 2 -> agents: header only, prio = BEST */
const bit<8> OP_STEAL_PROBE = 15;   /* OP_STEAL_*: agent to agent only */
const bit<8> OP_STEAL_LOAD  = 16;
const bit<8> OP_STEAL_REQ   = 17;
const bit<8> OP_STEAL_GRANT = 18;
const bit<8> OP_STEAL_ACK   = 19;
const bit<8> OP_STEAL_DONE  = 20;
const bit<8> OP_PIN         = 21;   /* client to a host agent only */
const bit<8> OP_GET_BUNDLE  = 22;   /* GET_TASK for up to `want` tasks: answered with one */
const bit<8> OP_RECALL      = 23;   /* tier 2 -> an agent: give back prefetched tasks (never sent here) */

const bit<8> SUBMIT_FLAGS       = 0x03;   /* FLAG_RESUBMIT | FLAG_EXACTLY_ONCE: SUBMIT only */
const bit<8> GET_TASK_FLAGS     = 0x04;   /* FLAG_WAIT: GET_TASK and GET_BUNDLE only */
const bit<8> PIN_FLAGS          = 0x0b;   /* SUBMIT_FLAGS | FLAG_MOVABLE: PIN only */
const bit<8> KNOWN_TASK_FLAGS   = 0x03;   /* TASK_FLAG_EXACTLY_ONCE | TASK_FLAG_GANG */

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

/* Entries per priority level = 2^QUEUE_INDEX_BITS: 14 (16 K) by default, what four levels
 * can have next to their stateful ALUs on Tofino 1 and 2 (the thesis prototype: 17, 128 K).
 * The level is the high part of a slot index, so one array per field serves all levels.
 * Build with -DQUEUE_INDEX_BITS=N to change it; see the resource budget in README.md. */
#ifndef QUEUE_INDEX_BITS
#define QUEUE_INDEX_BITS 14
#endif
/* Levels compiled in: 2^QUEUE_LEVEL_BITS. The control plane runs 1 to that many. */
#ifndef QUEUE_LEVEL_BITS
#define QUEUE_LEVEL_BITS 2
#endif
#define QUEUE_SLOT_BITS (QUEUE_LEVEL_BITS + QUEUE_INDEX_BITS)

typedef bit<QUEUE_LEVEL_BITS> level_t;
typedef bit<QUEUE_SLOT_BITS>  slot_t;
typedef bit<32>               ptr_t;   /* <round, index>: high bits round, low bits index */

const bit<32> QUEUE_LEVELS   = 1 << QUEUE_LEVEL_BITS;
const bit<32> QUEUE_SLOTS    = 1 << QUEUE_SLOT_BITS;
/* DRIFT_LIMIT: retrieve_ptr is incremented only while less than this far past add_ptr.
 * A stateful ALU compares on 34-bit extended operands, not on a wrapped 32-bit difference,
 * so the test is made against the window [add_ptr + DRIFT_LIMIT, add_ptr + 2 * DRIFT_LIMIT)
 * computed before the ALU (queue/pipeline.rs DriftWindow). */
const int<32> DRIFT_LIMIT    = 1073741824;   /* 1 << 30 */
const ptr_t   DRIFT_LIMIT_PTR = (ptr_t)DRIFT_LIMIT;
const ptr_t   DRIFT_STOP_PTR  = DRIFT_LIMIT_PTR << 1;

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
const bit<8> STEP_CREDIT   = 7;  /* a RETURN's first pass: its sender's credit (credit.rs) */
/* pass_plan steps beyond STEP_*: a spawned REPAIR, by the pointer it resets. */
const bit<8> PLAN_REPAIR_ADD      = 8;
const bit<8> PLAN_REPAIR_RETRIEVE = 9;

/* bolt_pass_h.flags */
const bit<8> PF_BATCH_SENT    = 0x01;  /* Retrieval::batches_sent > 0 */
const bit<8> PF_SPAWN_REPAIR  = 0x04;  /* the fork's spawned copy is a REPAIR */
const bit<8> PF_MIRROR_BOUNCE = 0x08;  /* the mirrored copy is a QUEUE_FULL of one task */
const bit<8> PF_MIRROR_SEARCH = 0x10;  /* the mirrored copy searches on after a full batch */
const bit<8> PF_HOST          = 0x20;  /* the retrieval answers a host (REFILL_REQ) */
const bit<8> PF_ANSWER        = 0x40;  /* leaves as an answer: the egress sizes it */

/* bolt_pass_h.parse_path: the layout after the Bolt header on the next pass. At most one
 * list item is ever extracted: the rest of a list is payload the pass does not parse. */
const bit<8> PP_SUBMIT                    = 1;   /* JobRef, the first TASK */
const bit<8> PP_QUEUE_FULL                = 2;   /* JobRef, the one refused TASK */
const bit<8> PP_RETURN                    = 4;   /* the first ENTRY */
const bit<8> PP_GET                       = 6;
const bit<8> PP_REFILL                    = 8;   /* RefillRequest; the entries found are payload */
const bit<8> PP_SWAP_GET                  = 10;
const bit<8> PP_SWAP_REFILL               = 11;
const bit<8> PP_REPAIR                    = 12;
const bit<8> PP_BOUNCE_ENTRY              = 13;  /* the one ENTRY of a mirrored bounce */
const bit<8> PP_BOUNCE_HELD_GET           = 14;
const bit<8> PP_BOUNCE_HELD_REFILL        = 15;

/* Replication ids of the fork multicast group: both copies go to the recirculation port. */
const bit<16> RID_CONTINUE = 1;
const bit<16> RID_SPAWN    = 2;

/* Ingress mirror sessions (the control plane points each at the recirculation port and
 * truncates the copy to the layout's fixed length, bolt_pass_h included; p4/README.md
 * "One list item per pass"). The copy comes back as PASS_SPAWN (a bounce) or
 * PASS_CONTINUE (the search after a full REFILL batch). */
const MirrorType_t MIRROR_TYPE_BOLT   = 1;
const MirrorId_t MIRROR_SUBMIT_BOUNCE = 1;   /* 20 + 50 + JobRef 8 + TASK 24 = 102 B */
const MirrorId_t MIRROR_RETURN_BOUNCE = 2;   /* 20 + 50 + ENTRY 40 = 110 B */
const MirrorId_t MIRROR_HELD_GET      = 3;   /* 20 + 50 + SwapState 8 + ENTRY 40 + Requester 8 = 126 B */
const MirrorId_t MIRROR_HELD_REFILL   = 4;   /* 20 + 50 + SwapState 8 + ENTRY 40 + RefillRequest 4 = 122 B */
const MirrorId_t MIRROR_SEARCH_ON     = 5;   /* 20 + 50 + RefillRequest 4 = 74 B */

/* bolt_bridge_h.outcome: what the egress writes into the packet after the pass's one
 * decision (pass_outcome, ingress); the egress's BoltAnswer does it. */
const bit<8> OUT_NONE         = 0;   /* nothing to write: dropped, steered, forwarded, REPAIR */
const bit<8> OUT_ITEM_DONE    = 1;   /* SUBMIT/RETURN: the item tried leaves; the rest follows */
const bit<8> OUT_CREDIT_TAKEN = 2;   /* a RETURN's credit pass: its entries follow */
const bit<8> OUT_NEXT_LEVEL   = 3;   /* Pipeline::next_level: RTRV_PRIO + 1 */
const bit<8> OUT_SWAP         = 4;   /* start or go on with a SWAP search, holding the task found */
const bit<8> OUT_SWAP_SPENT   = 5;   /* the level's budget is spent: reinsert the held task */
const bit<8> OUT_SWAP_PAST_TAIL = 6; /* the search passed the tail: reinsert the held task */
const bit<8> OUT_SWAP_FILLED  = 7;   /* the held task filled a free slot: search from the head */
const bit<8> OUT_ASSIGN       = 8;   /* Pipeline::deliver to an executor */
const bit<8> OUT_REFILL_MORE  = 9;   /* an entry into the REFILL batch; the host wants more */
const bit<8> OUT_REFILL_FULL  = 10;  /* a full batch, sent by the next pass; the search goes on */
const bit<8> OUT_REFILL_DONE  = 11;  /* the host got all it asked for: the next pass sends it */
const bit<8> OUT_REFILL_LAST  = 12;  /* the search ended: the next pass sends the last batch */
const bit<8> OUT_NOOP         = 13;  /* Pipeline::finish for an executor */
const bit<8> OUT_QUEUE_FULL   = 14;  /* the one task refused, bounced or held: its QUEUE_FULL */
const bit<8> OUT_DELIVER      = 15;  /* send the answer this packet carries (a REFILL is built) */

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

/* BundleRequest (12 B) = the Requester followed by this: GET_BUNDLE body */
header bundle_h {
    bit<8>  want;
    bit<24> pad;
}

/* RefillRequest (4 B): REFILL_REQ body (and RECALL's, with waiting 0). waiting: the
 * host's executors waiting there; bolt.p4 parks nothing and does not read it. */
header refill_request_h {
    bit<16> node;
    bit<8>  want;
    bit<8>  waiting;
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

/* StealBody (12 B): every STEAL_* body; agent to agent, so the switch only validates
 * it before counting it as wrong direction. */
header steal_h {
    bit<16> node;
    bit<8>  want;
    bit<8>  verdict;
    bit<32> seq;
    bit<32> load;
}

/* Completion (40 B): COMPLETE body; parsed only to validate it (status, pads) */
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
    bit<64> output_len;
}

/* RepairState (8 B) */
header repair_state_h {
    bit<8>  target;
    bit<24> pad;
    bit<32> value;
}

/* Retrieval and chain state that the wire format does not carry (20 B). */
header bolt_pass_h {
    bit<8>  copy;          /* PASS_* */
    bit<8>  recirculate;   /* 1: egress keeps this header; 0: egress strips it */
    bit<8>  step;          /* STEP_* */
    bit<8>  origin;        /* the external op of the chain (Packet::origin) */
    bit<8>  parse_path;    /* PP_* for the packet itself */
    bit<8>  spawn_path;    /* PP_* for the mirror copy of a bounce */
    bit<8>  flags;         /* PF_* */
    bit<8>  listed;        /* REFILL_REQ: entries found in the batch being built (payload) */
    bit<16> budget;        /* Retrieval::budget */
    bit<16> want;          /* Retrieval::want */
    bit<8>  repair_target; /* RepairState.target of the spawned REPAIR */
    bit<8>  repair_level;  /* 0-based level of the spawned REPAIR */
    bit<8>  first_level;   /* the 0-based level the retrieval began at (BEST's mask) */
    bit<8>  covered;       /* RETURN: entries left that its sender's credit covers */
    bit<32> repair_value;  /* RepairState.value of the spawned REPAIR */
}

/* From the ingress to the egress of the same pass, never recirculated (22 B): the
 * outcome of the pass's one decision and what the egress writes the packet from. */
header bolt_bridge_h {
    bit<8>  outcome;       /* OUT_* */
    bit<8>  step;          /* the step the pass made (STEP_*) */
    bit<8>  best_sat;      /* BEST for a requester that got all it asked for */
    bit<8>  best_unsat;    /* BEST for one that got less */
    bit<16> max_passes;    /* QueueConfig::max_passes: a new level's budget */
    bit<16> answer_port;   /* where an answer goes (ipv4_route was looked up with answer_ip) */
    bit<32> answer_ip;
    bit<32> swap_idx;      /* SWAP: the next slot the search looks at */
    bit<32> swap_head;     /* SWAP: retrieve_ptr as the search last saw it */
    /* the ingress headers emitted after the Bolt header, for the egress parser */
    bit<1>  has_swap_state;
    bit<1>  has_swap_held;
    bit<1>  has_job_ref;
    bit<1>  has_requester;
    bit<1>  has_refill_request;
    bit<1>  has_task_cur;
    bit<1>  has_entry_cur;
    bit<1>  has_entry_out;
    bit<1>  forked;        /* the pass forked: an answer waits for the next pass */
    bit<7>  pad;
}

/* Put in front of an ingress mirror copy; its first byte takes the place of
 * bolt_pass_h.copy, so the egress parser tells the two apart by that byte. */
const bit<8> PASS_MIRRORED = 4;
header bolt_mirror_h {
    bit<8>  copy;          /* PASS_MIRRORED */
}

struct headers_t {
    bolt_pass_h               pass;
    bolt_bridge_h             bridge;         /* to this pass's egress only */
    ethernet_h                ethernet;
    ipv4_h                    ipv4;
    udp_h                     udp;
    bolt_h                    bolt;
    repair_state_h            repair_state;
    swap_state_h              swap_state;
    entry_h                   swap_held;
    job_ref_h                 job_ref;
    requester_h               requester;
    bundle_h                  bundle;         /* GET_BUNDLE, front panel: dropped at admission */
    refill_request_h          refill_request;
    completion_h              completion;     /* COMPLETE, front panel: validated, never answered */
    claim_h                   claim;          /* CLAIM, CLAIM_REPLY: validated, never answered */
    steal_h                   steal;          /* STEAL_*: validated, never answered */
    task_h                    task_cur;       /* SUBMIT: the first task left, which this pass enqueues */
    entry_h                   entry_cur;      /* RETURN: the first entry left; bounce */
    entry_h                   entry_out;      /* the entry a dequeue or swap took out; in a
                                               * REFILL it goes in front of those found
                                               * before, which follow as payload */
}

/* One slot of the RETURN credit (switch/credit.rs): the agent address that owns it and
 * what it may still return. */
const bit<32> CREDIT_SLOTS = 4096;   /* credit::CREDIT_SLOTS */
struct credit_pair_t {
    bit<32> owner;
    bit<32> count;
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
    bit<1>  forged;           /* from a front-panel port with this scheduler's address */
    bit<1>  first_look;       /* arrived on a front-panel port (set by the parser only) */
    bit<1>  allowed;
    bit<1>  steer;
    bit<2>  ingress_pipe;
    PortId_t steer_port;
    bit<16> expected_len;
    /* configuration (queue_config) */
    bit<8>  priorities;
    bit<16> max_passes;
    PortId_t recirc_port;
    MulticastGroupId_t fork_group;
    /* this pass */
    bit<8>  step;
    bit<8>  plan_step;        /* the step pass_plan is looked up with */
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
    ptr_t   drift_lo;         /* DriftWindow: add_ptr + 2^30 */
    ptr_t   drift_hi;         /* DriftWindow: add_ptr + 2^31 */
    ptr_t   drift;            /* retrieve_ptr read - add_ptr */
    ptr_t   at;               /* the pointer whose slot this pass touches */
    ptr_t   write_value;
    ptr_t   distance;         /* add_ptr - retrieve_ptr, wrapping */
    ptr_t   head_delta;       /* SWAP: retrieve_ptr - pkt_retrieve_ptr */
    ptr_t   past_add;         /* SWAP: at - add_ptr, wrapping */
    bit<16> udp_len_excess;   /* udp.length - the message's length */
    bit<8>  prio_room;        /* priorities - the task's prio */
    bit<8>  missing_rsrc;     /* TRSRC & ~EXEC_RSRC */
    bit<16> flag_hit;         /* flags_before & flag_mask */
    MirrorId_t mirror_session; /* MIRROR_* of the copy this pass mirrors */
    bit<8>  levels_left;      /* priorities - next_level */
    bit<1>  last_level;       /* no level after this one: the search ends here */
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
    bit<1>  matches;
    bit<1>  more;             /* SUBMIT/RETURN: items left after this one */
    bit<8>  next_level;
    /* where an answer of this pass, or a packet not for the scheduler, goes */
    PortId_t out_port;        /* ipv4_route / l2_switch */
    bit<3>  out_drop;         /* 1: no route */
    /* BEST (switch/levels.rs): the non-empty-level bitmap and the answer's stamp */
    bit<2>  nonempty_op;      /* 0 read, 1 set this level's bit, 2 clear it */
    bit<8>  level_bit;        /* 1 << level8 */
    bit<8>  level_clear;      /* ~level_bit */
    bit<8>  from_mask;        /* levels level8 and below in priority: ~(level_bit - 1) */
    bit<8>  below_mask;       /* levels above first_level: (1 << first_level) - 1 */
    bit<8>  keep_sat;         /* below_mask | from_mask */
    ptr_t   remaining;        /* add_ptr - retrieve_ptr after a retrieval */
    bit<8>  nonempty;         /* the bitmap after this pass's operation */
    bit<8>  bits_sat;         /* nonempty & keep_sat */
    bit<8>  bits_unsat;       /* nonempty & below_mask */
    bit<8>  best_sat;         /* BEST for a requester that got all it asked for */
    bit<8>  best_unsat;       /* BEST for one that got less */
    /* RETURN credit (switch/credit.rs) */
    bit<12> credit_slot;      /* CRC-32 of the agent's address, low 12 bits */
    bit<32> credit_addr;      /* the agent: a RETURN's source, a REFILL's destination */
    bit<32> credit_n;         /* entries returned (take) or sent (grant) */
    bit<32> credit_held;      /* the credit before a take (0 if another address owns the slot) */
    bit<32> credit_short;     /* credit_n - credit_held, saturating at 0 */
    bit<8>  credit_takeover;  /* 1: a grant took the slot from another address */
    bit<1>  over_credit;      /* this RETURN entry is beyond its sender's credit */
    /* Queued tasks per resource bit (queue/backlog.rs) */
    bit<32> backlog_delta;    /* 1: this pass queued a task; 0xffffffff: one left; 0: neither */
    bit<8>  backlog_rsrc;     /* that task's resource bitmap */
}

struct egress_md_t {
    bit<16> out_len;          /* message_len(op, count) of the answer the egress sizes */
    bit<8>  answer_best;      /* the BEST a delivered REFILL carries */
    bit<1>  counted;          /* not the fork's REPAIR copy: the pass is counted once */
}
