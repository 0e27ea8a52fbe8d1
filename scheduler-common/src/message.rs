//! Decoding and encoding of whole Bolt messages. Decoding borrows from the input
//! (no copies, no allocation) and validates everything a receiver relies on.

use crate::error::{DecodeError, EncodeError};
use crate::layout::*;

/// A validated Bolt message from outside the switch pipeline.
///
/// `best` on ASSIGN, NOOP, REFILL and HINT is the header's BEST stamp: the highest
/// priority level tier 2 holds tasks in after sending it, 0 when it believes every
/// level empty, and always 0 from tier 1. `wait` on GET_TASK and GET_BUNDLE is the WAIT
/// flag: tier 2 may park the request instead of answering NOOP at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Submit {
        job: JobRef,
        flags: u8,
        tasks: &'a [Task],
    },
    GetTask {
        rtrv_prio: u8,
        exec_rsrc: u8,
        from: Requester,
        wait: bool,
    },
    /// One entry, or up to a GET_BUNDLE's `want` from tier 2, in the order they are to
    /// run.
    Assign {
        entries: &'a [Entry],
        best: u8,
    },
    Noop {
        to: Requester,
        best: u8,
    },
    Complete(&'a Completion),
    QueueFull {
        job: JobRef,
        tasks: &'a [Task],
    },
    RefillReq {
        node_rsrc: u8,
        req: RefillRequest,
    },
    Refill {
        entries: &'a [Entry],
        best: u8,
    },
    Return(&'a [Entry]),
    Claim(&'a Claim),
    ClaimReply(&'a Claim),
    Hint {
        best: u8,
    },
    /// Tier 2 asks `req.node`'s agent for up to `req.want` prefetched tasks back, ones
    /// `exec_rsrc` (the waiting executor's resources) covers.
    Recall {
        exec_rsrc: u8,
        req: RefillRequest,
        best: u8,
    },
    StealProbe(StealBody),
    StealLoad(StealBody),
    /// `thief_rsrc` (header rsrc): the thief node's resources; the victim gives only tasks
    /// they cover.
    StealReq {
        steal: StealBody,
        thief_rsrc: u8,
    },
    StealGrant {
        steal: StealBody,
        entries: &'a [Entry],
    },
    StealAck(StealBody),
    StealDone(StealBody),
    /// Client → a host's agent: tasks for that host's dedicated ring. `flags` may carry
    /// SUBMIT's flags and MOVABLE.
    Pin {
        job: JobRef,
        flags: u8,
        tasks: &'a [Task],
    },
    /// GET_TASK for up to `want` (MIN_BUNDLE..=MAX_BUNDLE) tasks in one ASSIGN.
    GetBundle {
        rtrv_prio: u8,
        exec_rsrc: u8,
        from: Requester,
        want: u8,
        wait: bool,
    },
}

impl Message<'_> {
    pub fn op(&self) -> Op {
        match self {
            Message::Submit { .. } => Op::Submit,
            Message::GetTask { .. } => Op::GetTask,
            Message::Assign { .. } => Op::Assign,
            Message::Noop { .. } => Op::Noop,
            Message::Complete(_) => Op::Complete,
            Message::QueueFull { .. } => Op::QueueFull,
            Message::RefillReq { .. } => Op::RefillReq,
            Message::Refill { .. } => Op::Refill,
            Message::Return(_) => Op::Return,
            Message::Claim(_) => Op::Claim,
            Message::ClaimReply(_) => Op::ClaimReply,
            Message::Hint { .. } => Op::Hint,
            Message::Recall { .. } => Op::Recall,
            Message::StealProbe(_) => Op::StealProbe,
            Message::StealLoad(_) => Op::StealLoad,
            Message::StealReq { .. } => Op::StealReq,
            Message::StealGrant { .. } => Op::StealGrant,
            Message::StealAck(_) => Op::StealAck,
            Message::StealDone(_) => Op::StealDone,
            Message::Pin { .. } => Op::Pin,
            Message::GetBundle { .. } => Op::GetBundle,
        }
    }
}

/// How an op's body is laid out: a fixed part and a list of `item` bytes per entry,
/// the counts the op allows, and which header bytes it gives a meaning. Header bytes an
/// op does not use must be zero, so that every message has exactly one encoding and no
/// two tiers can read meaning into bytes the others ignore.
struct Shape {
    fixed: usize,
    item: usize,
    min: u8,
    max: u8,
    /// Header prio is a priority (1..=MAX_PRIORITIES) rather than zero.
    uses_prio: bool,
    /// Header prio is BEST (0..=MAX_PRIORITIES): ops tier 2 sends towards the hosts.
    carries_best: bool,
    /// Header rsrc is a resource bitmap rather than zero.
    uses_rsrc: bool,
    /// Header flag bits this op may carry.
    flags: u8,
}

const fn fixed_body(fixed: usize) -> Shape {
    Shape { fixed, item: 0, min: 0, max: 0, uses_prio: false, carries_best: false, uses_rsrc: false, flags: 0 }
}

const fn list_body(fixed: usize, item: usize, min: u8, max: u8) -> Shape {
    Shape { fixed, item, min, max, uses_prio: false, carries_best: false, uses_rsrc: false, flags: 0 }
}

const fn shape(op: Op) -> Shape {
    let list = MAX_LIST as u8;
    match op {
        Op::Submit => Shape { flags: SUBMIT_FLAGS, ..list_body(JobRef::LEN, Task::LEN, 1, list) },
        Op::GetTask => Shape { uses_prio: true, uses_rsrc: true, flags: GET_TASK_FLAGS, ..fixed_body(Requester::LEN) },
        Op::Noop => Shape { carries_best: true, ..fixed_body(Requester::LEN) },
        Op::GetBundle => {
            Shape { uses_prio: true, uses_rsrc: true, flags: GET_TASK_FLAGS, ..fixed_body(BundleRequest::LEN) }
        }
        Op::Assign => Shape { carries_best: true, ..list_body(0, Entry::LEN, 1, list) },
        Op::Complete => fixed_body(Completion::LEN),
        Op::QueueFull => list_body(JobRef::LEN, Task::LEN, 1, list),
        Op::Pin => Shape { flags: PIN_FLAGS, ..list_body(JobRef::LEN, Task::LEN, 1, list) },
        Op::RefillReq => Shape { uses_rsrc: true, ..fixed_body(RefillRequest::LEN) },
        Op::Refill => Shape { carries_best: true, ..list_body(0, Entry::LEN, 0, list) },
        Op::Return => list_body(0, Entry::LEN, 1, list),
        Op::Swap => Shape { uses_prio: true, uses_rsrc: true, ..fixed_body(SwapState::LEN) },
        Op::Repair => Shape { uses_prio: true, ..fixed_body(RepairState::LEN) },
        Op::Claim | Op::ClaimReply => fixed_body(Claim::LEN),
        Op::Hint => Shape { carries_best: true, ..fixed_body(0) },
        Op::Recall => Shape { carries_best: true, uses_rsrc: true, ..fixed_body(RefillRequest::LEN) },
        Op::StealReq => Shape { uses_rsrc: true, ..fixed_body(StealBody::LEN) },
        Op::StealProbe | Op::StealLoad | Op::StealAck | Op::StealDone => fixed_body(StealBody::LEN),
        Op::StealGrant => list_body(StealBody::LEN, Entry::LEN, 0, list),
    }
}

/// True for the ops whose header prio is tier 2's BEST stamp (ASSIGN, NOOP, REFILL, HINT).
pub const fn carries_best(op: Op) -> bool {
    shape(op).carries_best
}

/// The list counts `op` allows, inclusive.
pub const fn count_range(op: Op) -> (u8, u8) {
    let s = shape(op);
    (s.min, s.max)
}

/// The exact length of a message of `op` listing `count` entries.
pub const fn message_len(op: Op, count: usize) -> usize {
    let s = shape(op);
    Header::LEN + s.fixed + s.item * count
}

/// The largest Bolt message (a full STEAL_GRANT: a full REFILL's 16 entries behind a
/// 12-byte body).
pub const MAX_MESSAGE_LEN: usize = message_len(Op::StealGrant, MAX_LIST);

fn check_priority(p: u8) -> Result<(), DecodeError> {
    if p == 0 || p > MAX_PRIORITIES {
        return Err(DecodeError::BadPriority(p));
    }
    Ok(())
}

fn check_task(t: &Task) -> Result<(), DecodeError> {
    check_priority(t.prio)?;
    if t.flags & !KNOWN_TASK_FLAGS != 0 {
        return Err(DecodeError::UnknownFlags(t.flags));
    }
    Ok(())
}

fn check_tasks(ts: &[Task]) -> Result<(), DecodeError> {
    ts.iter().try_for_each(check_task)
}

fn check_entry(e: &Entry) -> Result<(), DecodeError> {
    check_task(&e.task)?;
    if e.pad != [0; 2] {
        return Err(DecodeError::BadField);
    }
    Ok(())
}

fn check_entries(es: &[Entry]) -> Result<(), DecodeError> {
    es.iter().try_for_each(check_entry)
}

/// Magic, version, op and the op's flags. Internal ops pass only when `allow_internal`.
fn check_header(buf: &[u8], allow_internal: bool) -> Result<(&Header, Op), DecodeError> {
    let h: &Header = view(buf).ok_or(DecodeError::Truncated)?;
    if h.magic_u16() != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if h.version != VERSION {
        return Err(DecodeError::BadVersion(h.version));
    }
    let op = Op::from_u8(h.op).ok_or(DecodeError::UnknownOp(h.op))?;
    if op.is_internal() && !allow_internal {
        return Err(DecodeError::InternalOp(h.op));
    }
    if h.flags & !shape(op).flags != 0 {
        return Err(DecodeError::UnknownFlags(h.flags));
    }
    Ok((h, op))
}

/// Checks the header alone: magic, version, op (external ops only), and that the flags
/// are ones this op defines (SUBMIT_FLAGS on SUBMIT, GET_TASK_FLAGS on GET_TASK and GET_BUNDLE).
pub fn decode_header(buf: &[u8]) -> Result<(&Header, Op), DecodeError> {
    check_header(buf, false)
}

/// A message split into its fixed body and its list of `count` items, once count,
/// length and the op's use of the header's prio and rsrc bytes are checked.
struct Framed<'a> {
    fixed: &'a [u8],
    list: &'a [u8],
    count: usize,
}

fn frame<'a>(buf: &'a [u8], h: &Header, op: Op) -> Result<Framed<'a>, DecodeError> {
    let s = shape(op);
    if h.count < s.min || h.count > s.max {
        return Err(DecodeError::BadCount(h.count));
    }
    let count = h.count as usize;
    let expected = Header::LEN + s.fixed + s.item * count;
    if buf.len() != expected {
        if buf.len() < Header::LEN + s.fixed {
            return Err(DecodeError::Truncated);
        }
        return Err(DecodeError::BadLength {
            expected: expected as u16,
            actual: buf.len().min(u16::MAX as usize) as u16,
        });
    }
    if s.uses_prio {
        check_priority(h.prio)?;
    } else if s.carries_best {
        if h.prio > MAX_PRIORITIES {
            return Err(DecodeError::BadPriority(h.prio));
        }
    } else if h.prio != 0 {
        return Err(DecodeError::BadField);
    }
    if !s.uses_rsrc && h.rsrc != 0 {
        return Err(DecodeError::BadField);
    }
    let (fixed, list) = buf[Header::LEN..].split_at(s.fixed);
    Ok(Framed { fixed, list, count })
}

/// Decodes one message. `buf` must be exactly the UDP payload. SWAP and REPAIR are
/// refused: a receiver facing the network never accepts them.
pub fn decode(buf: &[u8]) -> Result<Message<'_>, DecodeError> {
    let (h, op) = check_header(buf, false)?;
    let f = frame(buf, h, op)?;
    decode_external(h, op, &f)
}

fn decode_external<'a>(h: &Header, op: Op, f: &Framed<'a>) -> Result<Message<'a>, DecodeError> {
    // The lengths were checked by `frame`, so these views cannot fail; map to an error
    // anyway rather than assume it.
    let bad = || DecodeError::Truncated;
    let (fixed, list, n) = (f.fixed, f.list, f.count);
    Ok(match op {
        Op::Submit => {
            let tasks = view_list::<Task>(list, n).ok_or_else(bad)?;
            check_tasks(tasks)?;
            Message::Submit { job: *view::<JobRef>(fixed).ok_or_else(bad)?, flags: h.flags, tasks }
        }
        Op::GetTask => Message::GetTask {
            rtrv_prio: h.prio,
            exec_rsrc: h.rsrc,
            from: *view(fixed).ok_or_else(bad)?,
            wait: h.flags & FLAG_WAIT != 0,
        },
        Op::GetBundle => {
            let req = view::<BundleRequest>(fixed).ok_or_else(bad)?;
            check_bundle_request(req)?;
            Message::GetBundle {
                rtrv_prio: h.prio,
                exec_rsrc: h.rsrc,
                from: req.from,
                want: req.want,
                wait: h.flags & FLAG_WAIT != 0,
            }
        }
        Op::Assign => {
            let es = view_list::<Entry>(list, n).ok_or_else(bad)?;
            check_entries(es)?;
            Message::Assign { entries: es, best: h.prio }
        }
        Op::Noop => Message::Noop { to: *view(fixed).ok_or_else(bad)?, best: h.prio },
        Op::Complete => {
            let c = view::<Completion>(fixed).ok_or_else(bad)?;
            if c.status > STATUS_REFUSED || c.pad != 0 || c.pad2 != [0; 2] {
                return Err(DecodeError::BadField);
            }
            Message::Complete(c)
        }
        Op::QueueFull => {
            let tasks = view_list::<Task>(list, n).ok_or_else(bad)?;
            check_tasks(tasks)?;
            Message::QueueFull { job: *view(fixed).ok_or_else(bad)?, tasks }
        }
        Op::Pin => {
            let tasks = view_list::<Task>(list, n).ok_or_else(bad)?;
            check_tasks(tasks)?;
            Message::Pin { job: *view(fixed).ok_or_else(bad)?, flags: h.flags, tasks }
        }
        Op::RefillReq => {
            let req = *view::<RefillRequest>(fixed).ok_or_else(bad)?;
            if req.want == 0 {
                return Err(DecodeError::BadField);
            }
            Message::RefillReq { node_rsrc: h.rsrc, req }
        }
        Op::Refill => {
            let es = view_list::<Entry>(list, n).ok_or_else(bad)?;
            check_entries(es)?;
            Message::Refill { entries: es, best: h.prio }
        }
        Op::Return => {
            let es = view_list::<Entry>(list, n).ok_or_else(bad)?;
            check_entries(es)?;
            Message::Return(es)
        }
        Op::Claim | Op::ClaimReply => {
            let c = view::<Claim>(fixed).ok_or_else(bad)?;
            let verdict_ok = match op {
                Op::Claim => c.verdict == CLAIM_ASK || c.verdict == CLAIM_RENEW,
                _ => c.verdict == CLAIM_GRANTED || c.verdict == CLAIM_DENIED,
            };
            if !verdict_ok || c.pad != [0; 3] {
                return Err(DecodeError::BadField);
            }
            if op == Op::Claim {
                Message::Claim(c)
            } else {
                Message::ClaimReply(c)
            }
        }
        Op::Hint => Message::Hint { best: h.prio },
        Op::Recall => {
            let req = *view::<RefillRequest>(fixed).ok_or_else(bad)?;
            if req.want == 0 || req.waiting != 0 {
                return Err(DecodeError::BadField);
            }
            Message::Recall { exec_rsrc: h.rsrc, req, best: h.prio }
        }
        Op::StealGrant => {
            let steal = check_steal(op, view::<StealBody>(fixed).ok_or_else(bad)?)?;
            let entries = view_list::<Entry>(list, n).ok_or_else(bad)?;
            check_entries(entries)?;
            Message::StealGrant { steal, entries }
        }
        Op::StealProbe | Op::StealLoad | Op::StealReq | Op::StealAck | Op::StealDone => {
            let steal = check_steal(op, view::<StealBody>(fixed).ok_or_else(bad)?)?;
            match op {
                Op::StealProbe => Message::StealProbe(steal),
                Op::StealLoad => Message::StealLoad(steal),
                Op::StealReq => Message::StealReq { steal, thief_rsrc: h.rsrc },
                Op::StealAck => Message::StealAck(steal),
                _ => Message::StealDone(steal),
            }
        }
        Op::Swap | Op::Repair => return Err(DecodeError::InternalOp(h.op)),
    })
}

/// A GET_BUNDLE asks for MIN_BUNDLE..=MAX_BUNDLE tasks (one is a GET_TASK; more do not
/// fit one ASSIGN) and its pad is zero.
fn check_bundle_request(req: &BundleRequest) -> Result<(), DecodeError> {
    if req.want < MIN_BUNDLE || req.want > MAX_BUNDLE || req.pad != [0; 3] {
        return Err(DecodeError::BadField);
    }
    Ok(())
}

/// A STEAL body is valid for `op` when the fields the op uses are in range and every
/// other field is zero: `want` only on STEAL_REQ (1..=MAX_LIST), `verdict` only on
/// STEAL_DONE (COMMIT or ABORT), `load` only on STEAL_LOAD.
fn check_steal(op: Op, b: &StealBody) -> Result<StealBody, DecodeError> {
    let want_ok = match op {
        Op::StealReq => b.want >= 1 && b.want as usize <= MAX_LIST,
        _ => b.want == 0,
    };
    let verdict_ok = match op {
        Op::StealDone => b.verdict == STEAL_COMMIT || b.verdict == STEAL_ABORT,
        _ => b.verdict == 0,
    };
    let load_ok = op == Op::StealLoad || b.load == [0; 4];
    if want_ok && verdict_ok && load_ok {
        Ok(*b)
    } else {
        Err(DecodeError::BadField)
    }
}

/// A packet as the switch pipeline sees it: a message from outside, or one of the
/// internal packets it recirculates to itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    External(Message<'a>),
    /// Resource-constraint search in the queue of priority `queue_prio` for an
    /// executor offering `exec_rsrc`.
    Swap {
        queue_prio: u8,
        exec_rsrc: u8,
        state: &'a SwapState,
    },
    /// Reset of one pointer of the queue of priority `queue_prio`.
    Repair {
        queue_prio: u8,
        state: &'a RepairState,
    },
}

/// Decodes a packet inside the switch pipeline, where SWAP and REPAIR are legal. Only
/// recirculated packets may go through this; packets from a port go through [`decode`].
pub fn decode_packet(buf: &[u8]) -> Result<Packet<'_>, DecodeError> {
    let (h, op) = check_header(buf, true)?;
    let f = frame(buf, h, op)?;
    let bad = || DecodeError::Truncated;
    Ok(match op {
        Op::Swap => {
            let state = view::<SwapState>(f.fixed).ok_or_else(bad)?;
            check_entry(&state.held)?;
            Packet::Swap { queue_prio: h.prio, exec_rsrc: h.rsrc, state }
        }
        Op::Repair => {
            let state = view::<RepairState>(f.fixed).ok_or_else(bad)?;
            if state.target > REPAIR_RETRIEVE_PTR || state.pad != [0; 3] {
                return Err(DecodeError::BadField);
            }
            Packet::Repair { queue_prio: h.prio, state }
        }
        _ => Packet::External(decode_external(h, op, &f)?),
    })
}

/// Writes header, fixed body and list into `buf` and returns the message length. The
/// result goes through the decoder before it is handed out, so an encoder never emits
/// bytes a receiver would refuse (a priority of 0, an unknown flag, a bad status...).
fn put(buf: &mut [u8], header: Header, fixed: &[u8], list: &[u8]) -> Result<usize, EncodeError> {
    let len = Header::LEN + fixed.len() + list.len();
    if buf.len() < len {
        return Err(EncodeError::BufferTooSmall { needed: len });
    }
    buf[..Header::LEN].copy_from_slice(as_bytes(&header));
    buf[Header::LEN..Header::LEN + fixed.len()].copy_from_slice(fixed);
    buf[Header::LEN + fixed.len()..len].copy_from_slice(list);
    decode_packet(&buf[..len]).map_err(EncodeError::Invalid)?;
    Ok(len)
}

fn list_count(op: Op, n: usize) -> Result<u8, EncodeError> {
    let s = shape(op);
    if n < s.min as usize || n > s.max as usize {
        return Err(EncodeError::BadListLength(n));
    }
    Ok(n as u8)
}

pub fn encode_submit(buf: &mut [u8], job: JobRef, flags: u8, tasks: &[Task]) -> Result<usize, EncodeError> {
    let n = list_count(Op::Submit, tasks.len())?;
    put(buf, Header::new(Op::Submit, n, 0, 0, flags), as_bytes(&job), slice_as_bytes(tasks))
}

/// A GET_TASK; `wait` sets FLAG_WAIT (tier 2 may park it instead of answering NOOP).
pub fn encode_get_task(
    buf: &mut [u8],
    rtrv_prio: u8,
    exec_rsrc: u8,
    from: Requester,
    wait: bool,
) -> Result<usize, EncodeError> {
    let flags = if wait { FLAG_WAIT } else { 0 };
    put(buf, Header::new(Op::GetTask, 0, rtrv_prio, exec_rsrc, flags), as_bytes(&from), &[])
}

/// A GET_BUNDLE for up to `want` tasks; `wait` sets FLAG_WAIT as on GET_TASK.
pub fn encode_get_bundle(
    buf: &mut [u8],
    rtrv_prio: u8,
    exec_rsrc: u8,
    from: Requester,
    want: u8,
    wait: bool,
) -> Result<usize, EncodeError> {
    let flags = if wait { FLAG_WAIT } else { 0 };
    let body = BundleRequest::new(from, want);
    put(buf, Header::new(Op::GetBundle, 0, rtrv_prio, exec_rsrc, flags), as_bytes(&body), &[])
}

/// An ASSIGN of one entry; `best` is tier 2's BEST stamp (0 from tier 1).
pub fn encode_assign(buf: &mut [u8], entry: &Entry, best: u8) -> Result<usize, EncodeError> {
    encode_assign_list(buf, core::slice::from_ref(entry), best)
}

/// An ASSIGN of 1..=MAX_LIST entries, in the order they are to run: tier 2's answer to a
/// GET_BUNDLE.
pub fn encode_assign_list(buf: &mut [u8], entries: &[Entry], best: u8) -> Result<usize, EncodeError> {
    let n = list_count(Op::Assign, entries.len())?;
    put(buf, Header::new(Op::Assign, n, best, 0, 0), &[], slice_as_bytes(entries))
}

/// A NOOP; `best` is tier 2's BEST stamp (0 from tier 1).
pub fn encode_noop(buf: &mut [u8], to: Requester, best: u8) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Noop, 0, best, 0, 0), as_bytes(&to), &[])
}

/// A HINT: tier 2 tells a host that it holds tasks from level `best` on.
pub fn encode_hint(buf: &mut [u8], best: u8) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Hint, 0, best, 0, 0), &[], &[])
}

/// A RECALL: tier 2 asks `req.node`'s agent for up to `req.want` prefetched tasks back
/// that `exec_rsrc` covers; `best` is tier 2's BEST stamp.
pub fn encode_recall(buf: &mut [u8], exec_rsrc: u8, req: RefillRequest, best: u8) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Recall, 0, best, exec_rsrc, 0), as_bytes(&req), &[])
}

pub fn encode_complete(buf: &mut [u8], c: &Completion) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Complete, 0, 0, 0, 0), as_bytes(c), &[])
}

/// A PIN: `tasks` for the dedicated ring of the host it is sent to. `flags` may carry
/// SUBMIT's flags and [`FLAG_MOVABLE`].
pub fn encode_pin(buf: &mut [u8], job: JobRef, flags: u8, tasks: &[Task]) -> Result<usize, EncodeError> {
    let n = list_count(Op::Pin, tasks.len())?;
    put(buf, Header::new(Op::Pin, n, 0, 0, flags), as_bytes(&job), slice_as_bytes(tasks))
}

pub fn encode_queue_full(buf: &mut [u8], job: JobRef, tasks: &[Task]) -> Result<usize, EncodeError> {
    let n = list_count(Op::QueueFull, tasks.len())?;
    put(buf, Header::new(Op::QueueFull, n, 0, 0, 0), as_bytes(&job), slice_as_bytes(tasks))
}

pub fn encode_refill_req(buf: &mut [u8], node_rsrc: u8, req: RefillRequest) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::RefillReq, 0, 0, node_rsrc, 0), as_bytes(&req), &[])
}

/// A REFILL may list no entry: the switch's answer that it has nothing for this node.
/// `best` is tier 2's BEST stamp.
pub fn encode_refill(buf: &mut [u8], entries: &[Entry], best: u8) -> Result<usize, EncodeError> {
    let n = list_count(Op::Refill, entries.len())?;
    put(buf, Header::new(Op::Refill, n, best, 0, 0), &[], slice_as_bytes(entries))
}

pub fn encode_return(buf: &mut [u8], entries: &[Entry]) -> Result<usize, EncodeError> {
    let n = list_count(Op::Return, entries.len())?;
    put(buf, Header::new(Op::Return, n, 0, 0, 0), &[], slice_as_bytes(entries))
}

/// A CLAIM: the executor asks the task's client for the right to run it (verdict CLAIM_ASK)
/// or to extend the lease of a claim it holds (CLAIM_RENEW).
pub fn encode_claim(buf: &mut [u8], c: &Claim) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Claim, 0, 0, 0, 0), as_bytes(c), &[])
}

/// The client's answer to a CLAIM (verdict CLAIM_GRANTED or CLAIM_DENIED).
pub fn encode_claim_reply(buf: &mut [u8], c: &Claim) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::ClaimReply, 0, 0, 0, 0), as_bytes(c), &[])
}

/// Encodes a STEAL_PROBE, STEAL_LOAD, STEAL_REQ, STEAL_ACK or STEAL_DONE (the STEAL
/// messages without entries); any other op is refused. A STEAL_REQ gets resources 0 here:
/// a thief names its resources with [`encode_steal_req`].
pub fn encode_steal(buf: &mut [u8], op: Op, body: &StealBody) -> Result<usize, EncodeError> {
    if !op.is_steal() || op == Op::StealGrant {
        return Err(EncodeError::Invalid(DecodeError::UnknownOp(op as u8)));
    }
    put(buf, Header::new(op, 0, 0, 0, 0), as_bytes(body), &[])
}

/// A STEAL_REQ from a thief whose node has resources `thief_rsrc` (header rsrc): the
/// victim gives only tasks those resources cover.
pub fn encode_steal_req(buf: &mut [u8], body: &StealBody, thief_rsrc: u8) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::StealReq, 0, 0, thief_rsrc, 0), as_bytes(body), &[])
}

/// A STEAL_GRANT: the victim's body and the 0..=MAX_LIST entries it holds for the thief.
pub fn encode_steal_grant(buf: &mut [u8], body: &StealBody, entries: &[Entry]) -> Result<usize, EncodeError> {
    let n = list_count(Op::StealGrant, entries.len())?;
    put(buf, Header::new(Op::StealGrant, n, 0, 0, 0), as_bytes(body), slice_as_bytes(entries))
}

/// Encodes a SWAP packet; only the switch pipeline sends these (to itself).
pub fn encode_swap(buf: &mut [u8], queue_prio: u8, exec_rsrc: u8, state: &SwapState) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Swap, 0, queue_prio, exec_rsrc, 0), as_bytes(state), &[])
}

/// Encodes a REPAIR packet; only the switch pipeline sends these (to itself).
pub fn encode_repair(buf: &mut [u8], queue_prio: u8, state: &RepairState) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Repair, 0, queue_prio, 0, 0), as_bytes(state), &[])
}

impl Message<'_> {
    /// Encodes this message with the encoder of its op.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        match *self {
            Message::Submit { job, flags, tasks } => encode_submit(buf, job, flags, tasks),
            Message::GetTask { rtrv_prio, exec_rsrc, from, wait } => {
                encode_get_task(buf, rtrv_prio, exec_rsrc, from, wait)
            }
            Message::GetBundle { rtrv_prio, exec_rsrc, from, want, wait } => {
                encode_get_bundle(buf, rtrv_prio, exec_rsrc, from, want, wait)
            }
            Message::Assign { entries, best } => encode_assign_list(buf, entries, best),
            Message::Noop { to, best } => encode_noop(buf, to, best),
            Message::Complete(c) => encode_complete(buf, c),
            Message::QueueFull { job, tasks } => encode_queue_full(buf, job, tasks),
            Message::Pin { job, flags, tasks } => encode_pin(buf, job, flags, tasks),
            Message::RefillReq { node_rsrc, req } => encode_refill_req(buf, node_rsrc, req),
            Message::Refill { entries, best } => encode_refill(buf, entries, best),
            Message::Return(es) => encode_return(buf, es),
            Message::Claim(c) => encode_claim(buf, c),
            Message::ClaimReply(c) => encode_claim_reply(buf, c),
            Message::Hint { best } => encode_hint(buf, best),
            Message::Recall { exec_rsrc, req, best } => encode_recall(buf, exec_rsrc, req, best),
            Message::StealGrant { steal, entries } => encode_steal_grant(buf, &steal, entries),
            Message::StealReq { steal, thief_rsrc } => encode_steal_req(buf, &steal, thief_rsrc),
            Message::StealProbe(b) | Message::StealLoad(b) | Message::StealAck(b) | Message::StealDone(b) => {
                encode_steal(buf, self.op(), &b)
            }
        }
    }
}

impl Packet<'_> {
    /// Encodes this packet with the encoder of its op.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        match *self {
            Packet::External(m) => m.encode(buf),
            Packet::Swap { queue_prio, exec_rsrc, state } => encode_swap(buf, queue_prio, exec_rsrc, state),
            Packet::Repair { queue_prio, state } => encode_repair(buf, queue_prio, state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(tid: u32, prio: u8, rsrc: u8) -> Task {
        let mut t = Task { prio, rsrc, ..Task::default() };
        t.set_tid(tid);
        t
    }

    #[test]
    fn submit_round_trips() {
        let tasks = [task(1, 1, 0), task(2, 4, 0b101)];
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_submit(&mut buf, JobRef::new(7, 9), FLAG_RESUBMIT, &tasks).unwrap();
        assert_eq!(n, message_len(Op::Submit, 2));
        match decode(&buf[..n]).unwrap() {
            Message::Submit { job, flags, tasks: got } => {
                assert_eq!((job.uid(), job.jid(), flags), (7, 9, FLAG_RESUBMIT));
                assert_eq!(got, &tasks);
            }
            other => panic!("decoded as {other:?}"),
        }
    }

    #[test]
    fn pin_round_trips_with_submit_flags_and_movable_only() {
        let tasks = [task(5, 2, 0b1)];
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_pin(&mut buf, JobRef::new(3, 4), FLAG_MOVABLE | FLAG_EXACTLY_ONCE, &tasks).unwrap();
        assert_eq!(n, message_len(Op::Submit, 1));
        match decode(&buf[..n]).unwrap() {
            Message::Pin { job, flags, tasks: got } => {
                assert_eq!((job.uid(), job.jid(), flags), (3, 4, FLAG_MOVABLE | FLAG_EXACTLY_ONCE));
                assert_eq!(got, &tasks);
            }
            other => panic!("decoded as {other:?}"),
        }
        assert!(encode_pin(&mut buf, JobRef::new(3, 4), FLAG_WAIT, &tasks).is_err());
        assert!(encode_pin(&mut buf, JobRef::new(3, 4), 0, &[]).is_err());
        // MOVABLE belongs to PIN: a SUBMIT carrying it is refused.
        let n = encode_pin(&mut buf, JobRef::new(3, 4), FLAG_MOVABLE, &tasks).unwrap();
        buf[3] = Op::Submit as u8;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::UnknownFlags(FLAG_MOVABLE)));
    }

    #[test]
    fn every_prefix_of_a_valid_message_is_rejected() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_submit(&mut buf, JobRef::new(1, 1), 0, &[task(1, 1, 0); 3]).unwrap();
        for cut in 0..n {
            assert!(decode(&buf[..cut]).is_err(), "prefix of {cut} bytes accepted");
        }
    }

    #[test]
    fn internal_ops_are_refused() {
        let mut buf = [0u8; 64];
        let h = Header::new(Op::Swap, 0, 1, 0, 0);
        buf[..8].copy_from_slice(as_bytes(&h));
        assert_eq!(decode(&buf[..8 + SwapState::LEN]), Err(DecodeError::InternalOp(10)));
    }

    #[test]
    fn encode_refuses_bad_lists() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        assert_eq!(encode_submit(&mut buf, JobRef::new(1, 1), 0, &[]), Err(EncodeError::BadListLength(0)));
        let many = [task(1, 1, 0); MAX_LIST + 1];
        assert_eq!(encode_submit(&mut buf, JobRef::new(1, 1), 0, &many), Err(EncodeError::BadListLength(17)));
        let mut small = [0u8; 10];
        assert!(matches!(
            encode_assign(&mut small, &Entry::default(), 0),
            Err(EncodeError::BufferTooSmall { needed: 48 })
        ));
    }

    fn entry(tid: u32) -> Entry {
        Entry::new(1, 2, task(tid, 1, 0), [192, 0, 2, 9], 5000)
    }

    #[test]
    fn header_bytes_an_op_does_not_use_must_be_zero() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_assign(&mut buf, &entry(1), 0).unwrap();
        for (at, v, want) in [
            (5, 9, DecodeError::BadPriority(9)), // BEST beyond the levels
            (6, 0x80, DecodeError::BadField),    // rsrc on ASSIGN
            (7, FLAG_RESUBMIT, DecodeError::UnknownFlags(FLAG_RESUBMIT)), // flags only on SUBMIT
            (7, FLAG_WAIT, DecodeError::UnknownFlags(FLAG_WAIT)), // WAIT only on GET_TASK
        ] {
            let mut b = buf;
            b[at] = v;
            assert_eq!(decode(&b[..n]), Err(want), "byte {at} = {v}");
        }
        let n = encode_complete(&mut buf, &Completion::default()).unwrap();
        buf[5] = 2;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::BadField), "prio on COMPLETE");
    }

    #[test]
    fn pad_bytes_must_be_zero() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_refill(&mut buf, &[entry(1), entry(2)], 0).unwrap();
        // The second entry's pad: header, one entry, then 38 bytes into the second.
        buf[Header::LEN + Entry::LEN + 38] = 1;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::BadField));
        let c = Completion { pad2: [0, 1], ..Completion::default() };
        assert_eq!(encode_complete(&mut buf, &c), Err(EncodeError::Invalid(DecodeError::BadField)));
        // RECALL's last body byte is a pad; REFILL_REQ's is how many executors wait.
        let r = RefillRequest::new(1, 4).with_waiting(1);
        assert_eq!(encode_recall(&mut buf, 0, r, 0), Err(EncodeError::Invalid(DecodeError::BadField)));
        let n = encode_refill_req(&mut buf, 0, r).unwrap();
        assert_eq!(decode(&buf[..n]), Ok(Message::RefillReq { node_rsrc: 0, req: r }));
    }

    #[test]
    fn encoders_refuse_what_decoders_refuse() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let from = Requester::new(1, 2, 3);
        assert_eq!(
            encode_get_task(&mut buf, 0, 0, from, false),
            Err(EncodeError::Invalid(DecodeError::BadPriority(0)))
        );
        assert_eq!(encode_hint(&mut buf, 9), Err(EncodeError::Invalid(DecodeError::BadPriority(9))));
        assert_eq!(encode_noop(&mut buf, from, 9), Err(EncodeError::Invalid(DecodeError::BadPriority(9))));
        assert_eq!(
            encode_submit(&mut buf, JobRef::new(1, 1), 0x80, &[task(1, 1, 0)]),
            Err(EncodeError::Invalid(DecodeError::UnknownFlags(0x80)))
        );
        assert_eq!(
            encode_return(&mut buf, &[Entry::default()]),
            Err(EncodeError::Invalid(DecodeError::BadPriority(0)))
        );
        assert_eq!(
            encode_refill_req(&mut buf, 0, RefillRequest::new(1, 0)),
            Err(EncodeError::Invalid(DecodeError::BadField))
        );
    }

    #[test]
    fn empty_refill_is_a_message() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_refill(&mut buf, &[], 0).unwrap();
        assert_eq!(n, Header::LEN);
        assert_eq!(decode(&buf[..n]), Ok(Message::Refill { entries: &[], best: 0 }));
        assert_eq!(encode_return(&mut buf, &[]), Err(EncodeError::BadListLength(0)));
    }

    #[test]
    fn pipeline_decodes_internal_packets() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let mut swap = SwapState { held: entry(5), ..SwapState::default() };
        swap.set_swap_idx(12);
        swap.set_pkt_retrieve_ptr(0x0001_000b);
        let n = encode_swap(&mut buf, 2, 0b11, &swap).unwrap();
        assert_eq!(decode_packet(&buf[..n]), Ok(Packet::Swap { queue_prio: 2, exec_rsrc: 0b11, state: &swap }));
        assert_eq!(decode(&buf[..n]), Err(DecodeError::InternalOp(Op::Swap as u8)));

        let mut repair = RepairState { target: REPAIR_RETRIEVE_PTR, ..RepairState::default() };
        repair.set_value(77);
        let n = encode_repair(&mut buf, 4, &repair).unwrap();
        assert_eq!(decode_packet(&buf[..n]), Ok(Packet::Repair { queue_prio: 4, state: &repair }));
        buf[Header::LEN] = 2;
        assert_eq!(decode_packet(&buf[..n]), Err(DecodeError::BadField));

        let n = encode_noop(&mut buf, Requester::new(1, 2, 3), 0).unwrap();
        let noop = Message::Noop { to: Requester::new(1, 2, 3), best: 0 };
        assert_eq!(decode_packet(&buf[..n]), Ok(Packet::External(noop)));
    }

    #[test]
    fn a_recall_round_trips_and_refuses_a_zero_want_a_pad_or_a_bad_best() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let req = RefillRequest::new(7, 3);
        let n = encode_recall(&mut buf, 0b101, req, 2).unwrap();
        assert_eq!(n, Header::LEN + RefillRequest::LEN);
        assert_eq!((buf[3], buf[5], buf[6]), (Op::Recall as u8, 2, 0b101));
        assert_eq!(decode(&buf[..n]), Ok(Message::Recall { exec_rsrc: 0b101, req, best: 2 }));
        let mut bytes = buf;
        bytes[Header::LEN + 2] = 0;
        assert_eq!(decode(&bytes[..n]), Err(DecodeError::BadField), "want 0");
        let mut bytes = buf;
        bytes[Header::LEN + 3] = 1;
        assert_eq!(decode(&bytes[..n]), Err(DecodeError::BadField), "pad");
        assert_eq!(
            encode_recall(&mut buf, 0, req, MAX_PRIORITIES + 1),
            Err(EncodeError::Invalid(DecodeError::BadPriority(MAX_PRIORITIES + 1)))
        );
        assert!(decode(&buf[..n - 1]).is_err(), "short");
    }

    #[test]
    fn best_stamp_and_wait_flag_round_trip() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode_hint(&mut buf, 2).unwrap();
        assert_eq!((n, buf[5]), (Header::LEN, 2));
        assert_eq!(decode(&buf[..n]), Ok(Message::Hint { best: 2 }));
        let e = entry(4);
        for best in 0..=MAX_PRIORITIES {
            let n = encode_assign(&mut buf, &e, best).unwrap();
            assert_eq!(decode(&buf[..n]), Ok(Message::Assign { entries: core::slice::from_ref(&e), best }));
            let n = encode_refill(&mut buf, &[], best).unwrap();
            assert_eq!(decode(&buf[..n]), Ok(Message::Refill { entries: &[], best }));
        }
        let from = Requester::new(1, 2, 3);
        let n = encode_get_task(&mut buf, 1, 0, from, true).unwrap();
        assert_eq!(buf[7], FLAG_WAIT);
        assert_eq!(decode(&buf[..n]), Ok(Message::GetTask { rtrv_prio: 1, exec_rsrc: 0, from, wait: true }));
        buf[7] = FLAG_WAIT | 0x08;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::UnknownFlags(FLAG_WAIT | 0x08)));
        // A HINT has no body; its rsrc is unused.
        let n = encode_hint(&mut buf, 1).unwrap();
        buf[6] = 1;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::BadField));
        assert!(carries_best(Op::Refill) && carries_best(Op::Hint) && !carries_best(Op::GetTask));
    }

    #[test]
    fn steal_messages_round_trip_and_refuse_fields_they_do_not_use() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let probe = StealBody::new(3, 77);
        let cases = [
            (Op::StealProbe, probe),
            (Op::StealLoad, probe.with_load(40)),
            (Op::StealReq, probe.with_want(16)),
            (Op::StealAck, probe),
            (Op::StealDone, probe.with_verdict(STEAL_COMMIT)),
            (Op::StealDone, probe.with_verdict(STEAL_ABORT)),
        ];
        // A thief's resources travel in the STEAL_REQ header.
        let n = encode_steal_req(&mut buf, &probe.with_want(2), 0b101).unwrap();
        assert_eq!(decode(&buf[..n]), Ok(Message::StealReq { steal: probe.with_want(2), thief_rsrc: 0b101 }));
        for (op, body) in cases {
            let n = encode_steal(&mut buf, op, &body).unwrap();
            assert_eq!(n, Header::LEN + StealBody::LEN);
            let m = decode(&buf[..n]).unwrap();
            assert_eq!((m.op(), m), (op, m));
            let mut again = [0u8; MAX_MESSAGE_LEN];
            assert_eq!(m.encode(&mut again), Ok(n));
            assert_eq!(buf[..n], again[..n]);
        }
        let bad = [
            (Op::StealProbe, probe.with_load(1)),
            (Op::StealProbe, probe.with_want(1)),
            (Op::StealLoad, probe.with_verdict(1)),
            (Op::StealReq, probe),
            (Op::StealReq, probe.with_want(17)),
            (Op::StealAck, probe.with_want(2)),
            (Op::StealDone, probe),
            (Op::StealDone, probe.with_verdict(3)),
        ];
        for (op, body) in bad {
            assert_eq!(
                encode_steal(&mut buf, op, &body),
                Err(EncodeError::Invalid(DecodeError::BadField)),
                "{op:?} {body:?}"
            );
        }
        assert!(encode_steal(&mut buf, Op::StealGrant, &probe).is_err());
        assert!(encode_steal(&mut buf, Op::Noop, &probe).is_err());
    }

    #[test]
    fn steal_grant_carries_up_to_sixteen_entries_with_zero_stamps() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let body = StealBody::new(2, 9);
        let n = encode_steal_grant(&mut buf, &body, &[]).unwrap();
        assert_eq!(decode(&buf[..n]), Ok(Message::StealGrant { steal: body, entries: &[] }));
        let es = [entry(1); MAX_LIST];
        let n = encode_steal_grant(&mut buf, &body, &es).unwrap();
        assert_eq!(n, message_len(Op::StealGrant, MAX_LIST));
        assert_eq!(decode(&buf[..n]), Ok(Message::StealGrant { steal: body, entries: &es }));
        // A stamp left in an entry is refused like any non-zero pad.
        buf[Header::LEN + StealBody::LEN + 38] = 5;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::BadField));
        assert_eq!(encode_steal_grant(&mut buf, &body, &[entry(1); MAX_LIST + 1]), Err(EncodeError::BadListLength(17)));
    }

    #[test]
    fn get_bundle_round_trips_and_refuses_a_want_outside_two_to_sixteen() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let from = Requester::new(3, 4, 5);
        for want in [MIN_BUNDLE, 10, MAX_BUNDLE] {
            let n = encode_get_bundle(&mut buf, 2, 0b11, from, want, true).unwrap();
            assert_eq!(n, 20);
            assert_eq!(&buf[..8], &[0xB0, 0x17, VERSION, 22, 0, 2, 0b11, FLAG_WAIT]);
            assert_eq!(buf[16], want);
            let m = decode(&buf[..n]).unwrap();
            assert_eq!(m, Message::GetBundle { rtrv_prio: 2, exec_rsrc: 0b11, from, want, wait: true });
            let mut again = [0u8; MAX_MESSAGE_LEN];
            assert_eq!(m.encode(&mut again), Ok(n));
        }
        for want in [0, 1, MAX_BUNDLE + 1, 255] {
            assert_eq!(
                encode_get_bundle(&mut buf, 1, 0, from, want, false),
                Err(EncodeError::Invalid(DecodeError::BadField)),
                "want {want}"
            );
        }
        let n = encode_get_bundle(&mut buf, 1, 0, from, 4, false).unwrap();
        for (at, v, want) in [
            (16, 1, DecodeError::BadField), // want 1: that is a GET_TASK
            (17, 1, DecodeError::BadField), // pad
            (5, 0, DecodeError::BadPriority(0)),
            (7, FLAG_RESUBMIT, DecodeError::UnknownFlags(FLAG_RESUBMIT)),
        ] {
            let mut b = buf;
            b[at] = v;
            assert_eq!(decode(&b[..n]), Err(want), "byte {at} = {v}");
        }
        // A GET_TASK's length under op 22 is truncated, not read past.
        let n = encode_get_task(&mut buf, 1, 0, from, false).unwrap();
        buf[3] = Op::GetBundle as u8;
        assert_eq!(decode(&buf[..n]), Err(DecodeError::Truncated));
    }

    #[test]
    fn assign_lists_one_to_sixteen_entries_in_order() {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let es: [Entry; MAX_LIST] = core::array::from_fn(|i| entry(i as u32 + 1));
        for n_entries in [1, 2, MAX_LIST] {
            let n = encode_assign_list(&mut buf, &es[..n_entries], 3).unwrap();
            assert_eq!(n, message_len(Op::Assign, n_entries));
            assert_eq!(decode(&buf[..n]), Ok(Message::Assign { entries: &es[..n_entries], best: 3 }));
        }
        assert_eq!(encode_assign_list(&mut buf, &[], 0), Err(EncodeError::BadListLength(0)));
        let many = [entry(1); MAX_LIST + 1];
        assert_eq!(encode_assign_list(&mut buf, &many, 0), Err(EncodeError::BadListLength(17)));
        // One entry is what encode_assign writes.
        let n = encode_assign(&mut buf, &es[0], 0).unwrap();
        let mut again = [0u8; MAX_MESSAGE_LEN];
        assert_eq!(encode_assign_list(&mut again, &es[..1], 0), Ok(n));
        assert_eq!(buf[..n], again[..n]);
    }

    #[test]
    fn resource_matching_is_subset() {
        assert!(resources_match(0, 0));
        assert!(resources_match(0b01, 0b11));
        assert!(!resources_match(0b10, 0b01));
        assert!(!resources_match(0b11, 0b01));
    }
}
