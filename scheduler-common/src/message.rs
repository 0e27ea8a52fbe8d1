//! Decoding and encoding of whole Bolt messages. Decoding borrows from the input
//! (no copies, no allocation) and validates everything a receiver relies on.

use crate::error::{DecodeError, EncodeError};
use crate::layout::*;

/// A validated Bolt v1 message from outside the switch pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Submit { job: JobRef, flags: u8, tasks: &'a [Task] },
    GetTask { rtrv_prio: u8, exec_rsrc: u8, from: Requester },
    Assign(&'a Entry),
    Noop(Requester),
    Complete(&'a Completion),
    QueueFull { job: JobRef, tasks: &'a [Task] },
    RefillReq { node_rsrc: u8, req: RefillRequest },
    Refill(&'a [Entry]),
    Return(&'a [Entry]),
}

impl Message<'_> {
    pub fn op(&self) -> Op {
        match self {
            Message::Submit { .. } => Op::Submit,
            Message::GetTask { .. } => Op::GetTask,
            Message::Assign(_) => Op::Assign,
            Message::Noop(_) => Op::Noop,
            Message::Complete(_) => Op::Complete,
            Message::QueueFull { .. } => Op::QueueFull,
            Message::RefillReq { .. } => Op::RefillReq,
            Message::Refill(_) => Op::Refill,
            Message::Return(_) => Op::Return,
        }
    }
}

/// How an op's body is laid out: a fixed part and a list of `item` bytes per entry,
/// with the counts the op allows.
struct Shape {
    fixed: usize,
    item: usize,
    min: u8,
    max: u8,
}

const fn shape(op: Op) -> Shape {
    let list = MAX_LIST as u8;
    match op {
        Op::Submit => Shape { fixed: JobRef::LEN, item: Task::LEN, min: 1, max: list },
        Op::GetTask | Op::Noop => Shape { fixed: Requester::LEN, item: 0, min: 0, max: 0 },
        Op::Assign => Shape { fixed: 0, item: Entry::LEN, min: 1, max: 1 },
        Op::Complete => Shape { fixed: Completion::LEN, item: 0, min: 0, max: 0 },
        Op::QueueFull => Shape { fixed: JobRef::LEN, item: Task::LEN, min: 1, max: list },
        Op::RefillReq => Shape { fixed: RefillRequest::LEN, item: 0, min: 0, max: 0 },
        Op::Refill => Shape { fixed: 0, item: Entry::LEN, min: 0, max: list },
        Op::Return => Shape { fixed: 0, item: Entry::LEN, min: 1, max: list },
        Op::Swap => Shape { fixed: SwapState::LEN, item: 0, min: 0, max: 0 },
        Op::Repair => Shape { fixed: RepairState::LEN, item: 0, min: 0, max: 0 },
    }
}

/// The exact length of a message of `op` listing `count` entries.
pub const fn message_len(op: Op, count: usize) -> usize {
    let s = shape(op);
    Header::LEN + s.fixed + s.item * count
}

/// The largest Bolt message (a full REFILL or RETURN).
pub const MAX_MESSAGE_LEN: usize = message_len(Op::Refill, MAX_LIST);

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

fn check_entries(es: &[Entry]) -> Result<(), DecodeError> {
    es.iter().try_for_each(|e| check_task(&e.task))
}

/// Checks the header alone: magic, version, op (external ops only), flags.
pub fn decode_header(buf: &[u8]) -> Result<(&Header, Op), DecodeError> {
    let h: &Header = view(buf).ok_or(DecodeError::Truncated)?;
    if h.magic_u16() != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if h.version != VERSION {
        return Err(DecodeError::BadVersion(h.version));
    }
    let op = Op::from_u8(h.op).ok_or(DecodeError::UnknownOp(h.op))?;
    if op.is_internal() {
        return Err(DecodeError::InternalOp(h.op));
    }
    if h.flags & !KNOWN_HEADER_FLAGS != 0 {
        return Err(DecodeError::UnknownFlags(h.flags));
    }
    Ok((h, op))
}

/// Decodes one message. `buf` must be exactly the UDP payload.
pub fn decode(buf: &[u8]) -> Result<Message<'_>, DecodeError> {
    let (h, op) = decode_header(buf)?;
    let s = shape(op);
    if h.count < s.min || h.count > s.max {
        return Err(DecodeError::BadCount(h.count));
    }
    let n = h.count as usize;
    let expected = Header::LEN + s.fixed + s.item * n;
    if buf.len() != expected {
        if buf.len() < Header::LEN + s.fixed {
            return Err(DecodeError::Truncated);
        }
        return Err(DecodeError::BadLength {
            expected: expected as u16,
            actual: buf.len().min(u16::MAX as usize) as u16,
        });
    }
    let body = &buf[Header::LEN..];
    let (fixed, list) = body.split_at(s.fixed);
    // The lengths were checked above, so these views cannot fail; map to an error anyway
    // rather than assume it.
    let bad = || DecodeError::Truncated;
    Ok(match op {
        Op::Submit => {
            let tasks = view_list::<Task>(list, n).ok_or_else(bad)?;
            check_tasks(tasks)?;
            Message::Submit { job: *view::<JobRef>(fixed).ok_or_else(bad)?, flags: h.flags, tasks }
        }
        Op::GetTask => {
            check_priority(h.prio)?;
            Message::GetTask { rtrv_prio: h.prio, exec_rsrc: h.rsrc, from: *view(fixed).ok_or_else(bad)? }
        }
        Op::Assign => {
            let e = view::<Entry>(list).ok_or_else(bad)?;
            check_task(&e.task)?;
            Message::Assign(e)
        }
        Op::Noop => Message::Noop(*view(fixed).ok_or_else(bad)?),
        Op::Complete => {
            let c = view::<Completion>(fixed).ok_or_else(bad)?;
            if c.status > STATUS_REFUSED {
                return Err(DecodeError::BadField);
            }
            Message::Complete(c)
        }
        Op::QueueFull => {
            let tasks = view_list::<Task>(list, n).ok_or_else(bad)?;
            check_tasks(tasks)?;
            Message::QueueFull { job: *view(fixed).ok_or_else(bad)?, tasks }
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
            Message::Refill(es)
        }
        Op::Return => {
            let es = view_list::<Entry>(list, n).ok_or_else(bad)?;
            check_entries(es)?;
            Message::Return(es)
        }
        Op::Swap | Op::Repair => return Err(DecodeError::InternalOp(h.op)),
    })
}

/// Writes header, fixed body and list into `buf`; returns the message length.
fn put(buf: &mut [u8], header: Header, fixed: &[u8], list: &[u8]) -> Result<usize, EncodeError> {
    let len = Header::LEN + fixed.len() + list.len();
    if buf.len() < len {
        return Err(EncodeError::BufferTooSmall { needed: len });
    }
    buf[..Header::LEN].copy_from_slice(as_bytes(&header));
    buf[Header::LEN..Header::LEN + fixed.len()].copy_from_slice(fixed);
    buf[Header::LEN + fixed.len()..len].copy_from_slice(list);
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

pub fn encode_get_task(buf: &mut [u8], rtrv_prio: u8, exec_rsrc: u8, from: Requester) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::GetTask, 0, rtrv_prio, exec_rsrc, 0), as_bytes(&from), &[])
}

pub fn encode_assign(buf: &mut [u8], entry: &Entry) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Assign, 1, 0, 0, 0), &[], as_bytes(entry))
}

pub fn encode_noop(buf: &mut [u8], to: Requester) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Noop, 0, 0, 0, 0), as_bytes(&to), &[])
}

pub fn encode_complete(buf: &mut [u8], c: &Completion) -> Result<usize, EncodeError> {
    put(buf, Header::new(Op::Complete, 0, 0, 0, 0), as_bytes(c), &[])
}

pub fn encode_queue_full(buf: &mut [u8], job: JobRef, tasks: &[Task]) -> Result<usize, EncodeError> {
    let n = list_count(Op::QueueFull, tasks.len())?;
    put(buf, Header::new(Op::QueueFull, n, 0, 0, 0), as_bytes(&job), slice_as_bytes(tasks))
}

pub fn encode_refill_req(buf: &mut [u8], node_rsrc: u8, req: RefillRequest) -> Result<usize, EncodeError> {
    if req.want == 0 {
        return Err(EncodeError::BadListLength(0));
    }
    put(buf, Header::new(Op::RefillReq, 0, 0, node_rsrc, 0), as_bytes(&req), &[])
}

pub fn encode_refill(buf: &mut [u8], entries: &[Entry]) -> Result<usize, EncodeError> {
    let n = list_count(Op::Refill, entries.len())?;
    put(buf, Header::new(Op::Refill, n, 0, 0, 0), &[], slice_as_bytes(entries))
}

pub fn encode_return(buf: &mut [u8], entries: &[Entry]) -> Result<usize, EncodeError> {
    let n = list_count(Op::Return, entries.len())?;
    put(buf, Header::new(Op::Return, n, 0, 0, 0), &[], slice_as_bytes(entries))
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
            encode_assign(&mut small, &Entry::default()),
            Err(EncodeError::BufferTooSmall { needed: 48 })
        ));
    }

    #[test]
    fn resource_matching_is_subset() {
        assert!(resources_match(0, 0));
        assert!(resources_match(0b01, 0b11));
        assert!(!resources_match(0b10, 0b01));
        assert!(!resources_match(0b11, 0b01));
    }
}
