//! Byte layouts of the Bolt protocol: the header, TASK, ENTRY and the fixed message
//! bodies. All multi-byte integers are big-endian; every struct has alignment 1.

/// The UDP port Bolt listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7171;
/// First two bytes of every Bolt message.
pub const MAGIC: u16 = 0xB017;
/// Protocol version carried in every header.
pub const VERSION: u8 = 5;
/// The most entries one message may list, so P4 and XDP parse it without loops.
pub const MAX_LIST: usize = 16;
/// Priority levels the wire format can name (1 = highest). A switch runs 1..=this many.
pub const MAX_PRIORITIES: u8 = 8;
/// Priority levels a switch runs unless configured otherwise (as in the thesis prototype).
pub const DEFAULT_PRIORITIES: u8 = 4;

/// Operation codes (header byte 3).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Submit = 1,
    GetTask = 2,
    Assign = 3,
    Noop = 4,
    Complete = 5,
    QueueFull = 6,
    RefillReq = 7,
    Refill = 8,
    Return = 9,
    /// Internal to tier 2 (resource-constraint swap); never accepted from outside.
    Swap = 10,
    /// Internal to tier 2 (pointer repair); never accepted from outside.
    Repair = 11,
    /// Executor → client: may I run this exactly-once task?
    Claim = 12,
    /// Client → executor: the answer to a CLAIM.
    ClaimReply = 13,
    /// Tier 2 → registered hosts: a priority level has just become non-empty
    /// (header prio = BEST, no body).
    Hint = 14,
    /// Thief agent → victim agent: how many stealable tasks do you hold?
    StealProbe = 15,
    /// Victim → thief: the answer to a STEAL_PROBE (body `load`).
    StealLoad = 16,
    /// Thief → victim: give me up to `want` tasks.
    StealReq = 17,
    /// Victim → thief: the tasks it holds for this steal until the thief confirms.
    StealGrant = 18,
    /// Thief → victim: the granted tasks are held here; commit.
    StealAck = 19,
    /// Victim → thief: the steal's verdict (COMMIT or ABORT).
    StealDone = 20,
    /// Client → a host's agent: queue these tasks in that host's dedicated ring (body as
    /// SUBMIT); refused tasks come back as QUEUE_FULL.
    Pin = 21,
    /// Executor → tier 1 / tier 2: GET_TASK asking for up to `want` tasks in one ASSIGN
    /// (version 4; body [`BundleRequest`]).
    GetBundle = 22,
    /// Tier 2 → a host's agent: an executor waits at tier 2 with nothing to run; give
    /// back up to `want` prefetched tasks that `rsrc` can run (version 5; body
    /// [`RefillRequest`], header prio = BEST).
    Recall = 23,
}

impl Op {
    pub const ALL: [Op; 23] = [
        Op::Submit,
        Op::GetTask,
        Op::Assign,
        Op::Noop,
        Op::Complete,
        Op::QueueFull,
        Op::RefillReq,
        Op::Refill,
        Op::Return,
        Op::Swap,
        Op::Repair,
        Op::Claim,
        Op::ClaimReply,
        Op::Hint,
        Op::StealProbe,
        Op::StealLoad,
        Op::StealReq,
        Op::StealGrant,
        Op::StealAck,
        Op::StealDone,
        Op::Pin,
        Op::GetBundle,
        Op::Recall,
    ];

    pub const fn from_u8(v: u8) -> Option<Op> {
        match v {
            1 => Some(Op::Submit),
            2 => Some(Op::GetTask),
            3 => Some(Op::Assign),
            4 => Some(Op::Noop),
            5 => Some(Op::Complete),
            6 => Some(Op::QueueFull),
            7 => Some(Op::RefillReq),
            8 => Some(Op::Refill),
            9 => Some(Op::Return),
            10 => Some(Op::Swap),
            11 => Some(Op::Repair),
            12 => Some(Op::Claim),
            13 => Some(Op::ClaimReply),
            14 => Some(Op::Hint),
            15 => Some(Op::StealProbe),
            16 => Some(Op::StealLoad),
            17 => Some(Op::StealReq),
            18 => Some(Op::StealGrant),
            19 => Some(Op::StealAck),
            20 => Some(Op::StealDone),
            21 => Some(Op::Pin),
            22 => Some(Op::GetBundle),
            23 => Some(Op::Recall),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Op::Submit => "SUBMIT",
            Op::GetTask => "GET_TASK",
            Op::Assign => "ASSIGN",
            Op::Noop => "NOOP",
            Op::Complete => "COMPLETE",
            Op::QueueFull => "QUEUE_FULL",
            Op::RefillReq => "REFILL_REQ",
            Op::Refill => "REFILL",
            Op::Return => "RETURN",
            Op::Swap => "SWAP",
            Op::Repair => "REPAIR",
            Op::Claim => "CLAIM",
            Op::ClaimReply => "CLAIM_REPLY",
            Op::Hint => "HINT",
            Op::StealProbe => "STEAL_PROBE",
            Op::StealLoad => "STEAL_LOAD",
            Op::StealReq => "STEAL_REQ",
            Op::StealGrant => "STEAL_GRANT",
            Op::StealAck => "STEAL_ACK",
            Op::StealDone => "STEAL_DONE",
            Op::Pin => "PIN",
            Op::GetBundle => "GET_BUNDLE",
            Op::Recall => "RECALL",
        }
    }

    /// Operations agents exchange between hosts (work stealing); never for a switch.
    pub const fn is_steal(self) -> bool {
        matches!(self, Op::StealProbe | Op::StealLoad | Op::StealReq | Op::StealGrant | Op::StealAck | Op::StealDone)
    }

    /// Operations that exist only inside the switch pipeline.
    pub const fn is_internal(self) -> bool {
        matches!(self, Op::Swap | Op::Repair)
    }
}

/// Header flag: this SUBMIT resends tasks the client timed out on.
pub const FLAG_RESUBMIT: u8 = 0x01;
/// Header flag: the sender asks for exactly-once execution (claim before run).
pub const FLAG_EXACTLY_ONCE: u8 = 0x02;
/// Header flag on GET_TASK and GET_BUNDLE: if tier 2 has nothing for the executor, it parks the request
/// and answers it when a task arrives (or with NOOP when the park time runs out).
pub const FLAG_WAIT: u8 = 0x04;
/// Header flag on PIN: the host's FLDS monitor may move these tasks from its dedicated
/// ring to its shared rings (the job's placement policy is FLDS).
pub const FLAG_MOVABLE: u8 = 0x08;
/// The header flags SUBMIT may carry.
pub const SUBMIT_FLAGS: u8 = FLAG_RESUBMIT | FLAG_EXACTLY_ONCE;
/// The header flags PIN may carry: SUBMIT's and MOVABLE.
pub const PIN_FLAGS: u8 = SUBMIT_FLAGS | FLAG_MOVABLE;
/// The header flags GET_TASK and GET_BUNDLE may carry.
pub const GET_TASK_FLAGS: u8 = FLAG_WAIT;
/// Every header flag the protocol defines; a header with a bit outside its op's own
/// flags is rejected.
pub const KNOWN_HEADER_FLAGS: u8 = PIN_FLAGS | GET_TASK_FLAGS;

/// TASK flag: execute at most once (the executor claims it from its client first).
pub const TASK_FLAG_EXACTLY_ONCE: u8 = 0x01;
/// TASK flag: one task of a gang job, whose tasks start together. The executor claims it
/// as an exactly-once task and waits for the answer, which the client sends to every
/// member at once when the whole gang has claimed (docs/protocol.md, "Gang jobs").
pub const TASK_FLAG_GANG: u8 = 0x02;
/// Every TASK flag the protocol defines.
pub const KNOWN_TASK_FLAGS: u8 = TASK_FLAG_EXACTLY_ONCE | TASK_FLAG_GANG;

/// COMPLETE status codes.
pub const STATUS_OK: u8 = 0;
/// The handler ran and failed (non-zero exit, error).
pub const STATUS_FAILED: u8 = 1;
/// The executor refused the task: unknown handler, command not allowed, bad descriptor.
pub const STATUS_REFUSED: u8 = 2;

macro_rules! be_field {
    ($get:ident, $set:ident, $field:ident, u32) => {
        #[inline(always)]
        pub fn $get(&self) -> u32 {
            u32::from_be_bytes(self.$field)
        }
        #[inline(always)]
        pub fn $set(&mut self, v: u32) {
            self.$field = v.to_be_bytes();
        }
    };
    ($get:ident, $set:ident, $field:ident, u16) => {
        #[inline(always)]
        pub fn $get(&self) -> u16 {
            u16::from_be_bytes(self.$field)
        }
        #[inline(always)]
        pub fn $set(&mut self, v: u16) {
            self.$field = v.to_be_bytes();
        }
    };
    ($get:ident, $set:ident, $field:ident, u64) => {
        #[inline(always)]
        pub fn $get(&self) -> u64 {
            u64::from_be_bytes(self.$field)
        }
        #[inline(always)]
        pub fn $set(&mut self, v: u64) {
            self.$field = v.to_be_bytes();
        }
    };
}

/// The 8-byte header that starts every Bolt message.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub magic: [u8; 2],
    pub version: u8,
    pub op: u8,
    /// Number of list entries that follow the fixed body (TASK or ENTRY).
    pub count: u8,
    /// RTRV_PRIO on GET_TASK and GET_BUNDLE: the highest priority level to search from (1 = highest).
    /// BEST on HINT and on the ASSIGN, NOOP and REFILL tier 2 sends: the highest level
    /// tier 2 holds tasks in after this answer (0: it believes every level empty).
    pub prio: u8,
    /// EXEC_RSRC on GET_TASK, GET_BUNDLE and REFILL_REQ: the requester's 8-bit resource bitmap.
    pub rsrc: u8,
    pub flags: u8,
}

impl Header {
    pub const LEN: usize = 8;

    pub const fn new(op: Op, count: u8, prio: u8, rsrc: u8, flags: u8) -> Header {
        let m = MAGIC.to_be_bytes();
        Header { magic: m, version: VERSION, op: op as u8, count, prio, rsrc, flags }
    }
    be_field!(magic_u16, set_magic_u16, magic, u16);
}

/// TASK_INFO: one task as a client submits it (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Task {
    pub tid: [u8; 4],
    /// TPRIO, 1 = highest.
    pub prio: u8,
    /// TRSRC: the resources the task needs, as an 8-bit bitmap.
    pub rsrc: u8,
    /// Task class, for learned allocation and per-class accounting.
    pub class: u8,
    pub flags: u8,
    /// Handler id and arguments (see [`crate::descriptor`]).
    pub desc: [u8; 16],
}

impl Task {
    pub const LEN: usize = 24;
    be_field!(tid, set_tid, tid, u32);

    /// True when an executor with resources `exec_rsrc` can run this task.
    #[inline(always)]
    pub fn runs_on(&self, exec_rsrc: u8) -> bool {
        resources_match(self.rsrc, exec_rsrc)
    }
}

/// A task needing `task_rsrc` may run where `exec_rsrc` offers every bit of it.
#[inline(always)]
pub const fn resources_match(task_rsrc: u8, exec_rsrc: u8) -> bool {
    task_rsrc & !exec_rsrc == 0
}

/// ENTRY: a queued task with the identity of the client that owns it (40 bytes).
/// This is also the value type of the XDP program's task rings.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Entry {
    pub uid: [u8; 4],
    pub jid: [u8; 4],
    pub task: Task,
    /// IPv4 address the executor reports COMPLETE to.
    pub client_ip: [u8; 4],
    pub client_port: [u8; 2],
    /// Zero on the wire. While the entry sits in a tier-1 ring it holds the lease stamp
    /// (see [`crate::maps::ring_stamp`]).
    pub pad: [u8; 2],
}

impl Entry {
    pub const LEN: usize = 40;
    be_field!(uid, set_uid, uid, u32);
    be_field!(jid, set_jid, jid, u32);
    be_field!(client_ip_u32, set_client_ip_u32, client_ip, u32);
    be_field!(client_port, set_client_port, client_port, u16);

    pub fn new(uid: u32, jid: u32, task: Task, client_ip: [u8; 4], client_port: u16) -> Entry {
        Entry {
            uid: uid.to_be_bytes(),
            jid: jid.to_be_bytes(),
            task,
            client_ip,
            client_port: client_port.to_be_bytes(),
            pad: [0; 2],
        }
    }

    /// This entry without the lease stamp it carries in `pad` while it sits in a tier-1
    /// ring (`maps::ring_stamp`): as it must leave the host (ASSIGN, RETURN, STEAL_GRANT).
    pub const fn unstamped(&self) -> Entry {
        Entry { pad: [0; 2], ..*self }
    }
}

/// SUBMIT and QUEUE_FULL fixed body: the job the listed tasks belong to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobRef {
    pub uid: [u8; 4],
    pub jid: [u8; 4],
}

impl JobRef {
    pub const LEN: usize = 8;
    be_field!(uid, set_uid, uid, u32);
    be_field!(jid, set_jid, jid, u32);
    pub fn new(uid: u32, jid: u32) -> JobRef {
        JobRef { uid: uid.to_be_bytes(), jid: jid.to_be_bytes() }
    }
}

/// GET_TASK and NOOP body: who asks, and a sequence number echoed in NOOP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Requester {
    pub node: [u8; 2],
    pub executor: [u8; 2],
    pub seq: [u8; 4],
}

impl Requester {
    pub const LEN: usize = 8;
    be_field!(node, set_node, node, u16);
    be_field!(executor, set_executor, executor, u16);
    be_field!(seq, set_seq, seq, u32);
    pub fn new(node: u16, executor: u16, seq: u32) -> Requester {
        Requester { node: node.to_be_bytes(), executor: executor.to_be_bytes(), seq: seq.to_be_bytes() }
    }
}

/// The fewest tasks a GET_BUNDLE may ask for: one task is a GET_TASK.
pub const MIN_BUNDLE: u8 = 2;
/// The most tasks a GET_BUNDLE may ask for: one ASSIGN lists at most [`MAX_LIST`].
pub const MAX_BUNDLE: u8 = MAX_LIST as u8;

/// GET_BUNDLE body (12 bytes): who asks, as in GET_TASK, and how many tasks it takes
/// at most (MIN_BUNDLE..=MAX_BUNDLE). The answer is one ASSIGN of 1..=`want` entries, or
/// NOOP; `want` is an upper bound, so a tier that hands out one task at a time (tier 1,
/// bolt.p4) answers correctly with one.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BundleRequest {
    pub from: Requester,
    pub want: u8,
    pub pad: [u8; 3],
}

impl BundleRequest {
    pub const LEN: usize = 12;
    pub fn new(from: Requester, want: u8) -> BundleRequest {
        BundleRequest { from, want, pad: [0; 3] }
    }
}

/// COMPLETE body (40 bytes): which task finished, where, how long it took, and how
/// large its output is. `node` names the host whose object store holds the output.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub uid: [u8; 4],
    pub jid: [u8; 4],
    pub tid: [u8; 4],
    /// STATUS_OK, STATUS_FAILED or STATUS_REFUSED.
    pub status: u8,
    pub pad: u8,
    pub node: [u8; 2],
    pub executor: [u8; 2],
    pub pad2: [u8; 2],
    /// How long the handler ran, in nanoseconds (saturating).
    pub run_ns: [u8; 4],
    /// Wall-clock time (Unix epoch, ns) at which the executor started the task.
    pub start_unix_ns: [u8; 8],
    /// Version 3: bytes of the task's output in node's object store (0 = no output).
    pub output_len: [u8; 8],
}

impl Completion {
    pub const LEN: usize = 40;
    be_field!(uid, set_uid, uid, u32);
    be_field!(jid, set_jid, jid, u32);
    be_field!(tid, set_tid, tid, u32);
    be_field!(node, set_node, node, u16);
    be_field!(executor, set_executor, executor, u16);
    be_field!(run_ns, set_run_ns, run_ns, u32);
    be_field!(start_unix_ns, set_start_unix_ns, start_unix_ns, u64);
    be_field!(output_len, set_output_len, output_len, u64);
}

/// CLAIM verdicts: ASK or RENEW in a CLAIM (a question); GRANTED or DENIED in a
/// CLAIM_REPLY.
pub const CLAIM_ASK: u8 = 0;
/// Run it: this executor holds the task's only claim for the current attempt.
pub const CLAIM_GRANTED: u8 = 1;
/// Do not run it: it is claimed already, Done, or unknown to the client.
pub const CLAIM_DENIED: u8 = 2;
/// Version 2: the holder of a claim asks to extend its lease (GRANTED: extended by the
/// client's lease period; DENIED: the lease is gone, expired or the task final).
pub const CLAIM_RENEW: u8 = 3;
/// How often an executor renews the lease of a claimed task while it runs it. A client
/// must grant leases of at least [`MIN_CLAIM_LEASE_MS`], so two renewals in a row can
/// be lost before a live executor loses its lease.
pub const CLAIM_RENEW_INTERVAL_MS: u64 = 250;
/// The shortest lease a client grants: three renewal intervals.
pub const MIN_CLAIM_LEASE_MS: u64 = 3 * CLAIM_RENEW_INTERVAL_MS;

/// CLAIM and CLAIM_REPLY body (20 bytes): an executor asks the client that owns task
/// (uid, jid, tid) for the right to run it; the client answers with the same body and
/// its verdict. The claim is per attempt (a resubmission opens a new one) and leased: it
/// lapses unless its holder renews it (CLAIM_RENEW), and a lapsed claim can be granted
/// again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    pub uid: [u8; 4],
    pub jid: [u8; 4],
    pub tid: [u8; 4],
    pub node: [u8; 2],
    pub executor: [u8; 2],
    /// CLAIM_ASK or CLAIM_RENEW in a CLAIM, CLAIM_GRANTED or CLAIM_DENIED in a CLAIM_REPLY.
    pub verdict: u8,
    pub pad: [u8; 3],
}

impl Claim {
    pub const LEN: usize = 20;
    be_field!(uid, set_uid, uid, u32);
    be_field!(jid, set_jid, jid, u32);
    be_field!(tid, set_tid, tid, u32);
    be_field!(node, set_node, node, u16);
    be_field!(executor, set_executor, executor, u16);

    /// The question an executor asks about `entry`'s task.
    pub fn of(entry: &Entry, node: u16, executor: u16) -> Claim {
        Claim {
            uid: entry.uid,
            jid: entry.jid,
            tid: entry.task.tid,
            node: node.to_be_bytes(),
            executor: executor.to_be_bytes(),
            verdict: CLAIM_ASK,
            pad: [0; 3],
        }
    }

    /// The renewal of this claim's lease.
    pub fn renewal(&self) -> Claim {
        Claim { verdict: CLAIM_RENEW, ..*self }
    }

    /// The same claim answered with `verdict`.
    pub fn answered(&self, verdict: u8) -> Claim {
        Claim { verdict, ..*self }
    }
}

/// REFILL_REQ body: a host asks for up to `want` tasks its node can run
/// (the header's rsrc carries the node's resources); `waiting` of its executors wait at
/// the host for a task (docs/xdp.md, "Waiting at the host"), `want` counting one for
/// each. A switch that parks the request serves those before hosts that only prefetch,
/// and the rest of `want` after every such host's waiters (docs/protocol.md,
/// REFILL_REQ). RECALL has the same body with `waiting` zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefillRequest {
    pub node: [u8; 2],
    pub want: u8,
    pub waiting: u8,
}

impl RefillRequest {
    pub const LEN: usize = 4;
    be_field!(node, set_node, node, u16);
    pub fn new(node: u16, want: u8) -> RefillRequest {
        RefillRequest { node: node.to_be_bytes(), want, waiting: 0 }
    }

    /// This request from a host where `waiting` executors wait.
    pub fn with_waiting(self, waiting: u8) -> RefillRequest {
        RefillRequest { waiting, ..self }
    }
}

/// STEAL_DONE verdicts: the victim dropped its copy; the thief keeps the tasks.
pub const STEAL_COMMIT: u8 = 1;
/// The victim put the tasks back in its rings; the thief discards its tentative copy.
pub const STEAL_ABORT: u8 = 2;

/// Body of every STEAL_* message (12 bytes). `seq` names one steal (chosen by the thief,
/// echoed by the victim); fields an op does not use are zero: PROBE and ACK carry node
/// and seq, LOAD adds `load`, REQ adds `want` (1..=MAX_LIST), GRANT carries node and seq
/// followed by 0..=MAX_LIST ENTRY, DONE adds `verdict`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StealBody {
    /// The sender's node id.
    pub node: [u8; 2],
    /// STEAL_REQ: how many tasks the thief asks for.
    pub want: u8,
    /// STEAL_DONE: STEAL_COMMIT or STEAL_ABORT.
    pub verdict: u8,
    /// The steal's id, chosen by the thief.
    pub seq: [u8; 4],
    /// STEAL_LOAD: stealable (prefetched) tasks the victim holds.
    pub load: [u8; 4],
}

impl StealBody {
    pub const LEN: usize = 12;
    be_field!(node, set_node, node, u16);
    be_field!(seq, set_seq, seq, u32);
    be_field!(load, set_load, load, u32);

    /// A body with node and seq set and every other field zero.
    pub fn new(node: u16, seq: u32) -> StealBody {
        StealBody { node: node.to_be_bytes(), seq: seq.to_be_bytes(), ..StealBody::default() }
    }

    pub fn with_load(self, load: u32) -> StealBody {
        StealBody { load: load.to_be_bytes(), ..self }
    }

    pub fn with_want(self, want: u8) -> StealBody {
        StealBody { want, ..self }
    }

    pub fn with_verdict(self, verdict: u8) -> StealBody {
        StealBody { verdict, ..self }
    }
}

/// Bridged body of the tier-2-internal SWAP packet (thesis §3.4.2): the task held,
/// the slot to swap with next, and the retrieve pointer seen when the search began.
/// Header prio = the queue searched, header rsrc = EXEC_RSRC.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapState {
    pub swap_idx: [u8; 4],
    pub pkt_retrieve_ptr: [u8; 4],
    pub held: Entry,
}

impl SwapState {
    pub const LEN: usize = 48;
    be_field!(swap_idx, set_swap_idx, swap_idx, u32);
    be_field!(pkt_retrieve_ptr, set_pkt_retrieve_ptr, pkt_retrieve_ptr, u32);
}

/// Which pointer a REPAIR packet resets.
pub const REPAIR_ADD_PTR: u8 = 0;
pub const REPAIR_RETRIEVE_PTR: u8 = 1;

/// Bridged body of the tier-2-internal REPAIR packet (thesis §3.2.5).
/// Header prio = the queue whose pointer is reset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairState {
    /// REPAIR_ADD_PTR or REPAIR_RETRIEVE_PTR.
    pub target: u8,
    pub pad: [u8; 3],
    pub value: [u8; 4],
}

impl RepairState {
    pub const LEN: usize = 8;
    be_field!(value, set_value, value, u32);
}

// The layouts are part of the protocol: fail the build if one drifts.
const _: () = {
    assert!(core::mem::size_of::<Header>() == Header::LEN);
    assert!(core::mem::size_of::<Task>() == Task::LEN);
    assert!(core::mem::size_of::<Entry>() == Entry::LEN);
    assert!(core::mem::size_of::<JobRef>() == JobRef::LEN);
    assert!(core::mem::size_of::<Requester>() == Requester::LEN);
    assert!(core::mem::size_of::<Completion>() == Completion::LEN);
    assert!(core::mem::size_of::<Claim>() == Claim::LEN);
    assert!(core::mem::size_of::<RefillRequest>() == RefillRequest::LEN);
    assert!(core::mem::size_of::<BundleRequest>() == BundleRequest::LEN);
    assert!(core::mem::size_of::<SwapState>() == SwapState::LEN);
    assert!(core::mem::size_of::<RepairState>() == RepairState::LEN);
    assert!(core::mem::size_of::<StealBody>() == StealBody::LEN);
    assert!(core::mem::align_of::<Header>() == 1);
    assert!(core::mem::align_of::<Task>() == 1);
    assert!(core::mem::align_of::<Entry>() == 1);
    assert!(core::mem::align_of::<Completion>() == 1);
    assert!(core::mem::align_of::<Claim>() == 1);
};

/// Marker for the layout types above: `#[repr(C)]`, alignment 1, made only of byte
/// arrays, so every bit pattern is a valid value and any byte slice of the right length
/// can be viewed as one.
///
/// # Safety
/// Implement only for types with exactly those properties.
pub unsafe trait Wire: Copy + 'static {}
unsafe impl Wire for Header {}
unsafe impl Wire for Task {}
unsafe impl Wire for Entry {}
unsafe impl Wire for JobRef {}
unsafe impl Wire for Requester {}
unsafe impl Wire for Completion {}
unsafe impl Wire for Claim {}
unsafe impl Wire for RefillRequest {}
unsafe impl Wire for BundleRequest {}
unsafe impl Wire for SwapState {}
unsafe impl Wire for RepairState {}
unsafe impl Wire for StealBody {}

/// Views the first `size_of::<T>()` bytes of `bytes` as a `T`.
#[inline(always)]
pub fn view<T: Wire>(bytes: &[u8]) -> Option<&T> {
    if bytes.len() < core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: T is Wire (alignment 1, any bit pattern valid) and the length was checked.
    Some(unsafe { &*(bytes.as_ptr() as *const T) })
}

/// Views `bytes` as exactly `n` consecutive `T`s.
#[inline(always)]
pub fn view_list<T: Wire>(bytes: &[u8], n: usize) -> Option<&[T]> {
    if bytes.len() != n * core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: as in `view`; the slice covers exactly n elements.
    Some(unsafe { core::slice::from_raw_parts(bytes.as_ptr() as *const T, n) })
}

/// The bytes of a layout value, as they go on the wire.
#[inline(always)]
pub fn as_bytes<T: Wire>(v: &T) -> &[u8] {
    // SAFETY: T is Wire: no padding, no invalid bytes.
    unsafe { core::slice::from_raw_parts(v as *const T as *const u8, core::mem::size_of::<T>()) }
}

/// The bytes of a list of layout values.
#[inline(always)]
pub fn slice_as_bytes<T: Wire>(v: &[T]) -> &[u8] {
    // SAFETY: as in `as_bytes`.
    unsafe { core::slice::from_raw_parts(v.as_ptr() as *const u8, core::mem::size_of_val(v)) }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain byte arrays, repr(C), no padding.
    unsafe impl aya::Pod for super::Entry {}
    unsafe impl aya::Pod for super::Task {}
}
