//! Helpers shared by the integration tests of this crate.
#![allow(dead_code)] // each test binary uses its own subset

use scheduler_common::*;

/// A message or internal packet that owns its lists, so vectors can be built from JSON.
#[derive(Clone, Debug)]
pub enum Owned {
    Submit {
        job: JobRef,
        flags: u8,
        tasks: Vec<Task>,
    },
    GetTask {
        rtrv_prio: u8,
        exec_rsrc: u8,
        from: Requester,
        wait: bool,
    },
    Assign {
        entries: Vec<Entry>,
        best: u8,
    },
    GetBundle {
        rtrv_prio: u8,
        exec_rsrc: u8,
        from: Requester,
        want: u8,
        wait: bool,
    },
    Noop {
        to: Requester,
        best: u8,
    },
    Complete(Completion),
    QueueFull {
        job: JobRef,
        tasks: Vec<Task>,
    },
    Pin {
        job: JobRef,
        flags: u8,
        tasks: Vec<Task>,
    },
    RefillReq {
        node_rsrc: u8,
        req: RefillRequest,
    },
    Refill {
        entries: Vec<Entry>,
        best: u8,
    },
    Return(Vec<Entry>),
    Claim(Claim),
    ClaimReply(Claim),
    Hint {
        best: u8,
    },
    Recall {
        exec_rsrc: u8,
        req: RefillRequest,
        best: u8,
    },
    /// A STEAL_* message without entries (PROBE, LOAD, REQ, ACK, DONE).
    Steal(Op, StealBody),
    StealGrant(StealBody, Vec<Entry>),
    /// A STEAL_REQ naming the thief's resources.
    StealReqFrom(StealBody, u8),
    Swap {
        queue_prio: u8,
        exec_rsrc: u8,
        state: SwapState,
    },
    Repair {
        queue_prio: u8,
        state: RepairState,
    },
}

impl Owned {
    pub fn packet(&self) -> Packet<'_> {
        Packet::External(match self {
            Owned::Submit { job, flags, tasks } => Message::Submit { job: *job, flags: *flags, tasks },
            Owned::GetTask { rtrv_prio, exec_rsrc, from, wait } => {
                Message::GetTask { rtrv_prio: *rtrv_prio, exec_rsrc: *exec_rsrc, from: *from, wait: *wait }
            }
            Owned::Assign { entries, best } => Message::Assign { entries, best: *best },
            Owned::GetBundle { rtrv_prio, exec_rsrc, from, want, wait } => Message::GetBundle {
                rtrv_prio: *rtrv_prio,
                exec_rsrc: *exec_rsrc,
                from: *from,
                want: *want,
                wait: *wait,
            },
            Owned::Noop { to, best } => Message::Noop { to: *to, best: *best },
            Owned::Complete(c) => Message::Complete(c),
            Owned::QueueFull { job, tasks } => Message::QueueFull { job: *job, tasks },
            Owned::Pin { job, flags, tasks } => Message::Pin { job: *job, flags: *flags, tasks },
            Owned::RefillReq { node_rsrc, req } => Message::RefillReq { node_rsrc: *node_rsrc, req: *req },
            Owned::Refill { entries, best } => Message::Refill { entries, best: *best },
            Owned::Return(es) => Message::Return(es),
            Owned::Claim(c) => Message::Claim(c),
            Owned::ClaimReply(c) => Message::ClaimReply(c),
            Owned::Hint { best } => Message::Hint { best: *best },
            Owned::Recall { exec_rsrc, req, best } => Message::Recall { exec_rsrc: *exec_rsrc, req: *req, best: *best },
            Owned::Steal(op, b) => match op {
                Op::StealProbe => Message::StealProbe(*b),
                Op::StealLoad => Message::StealLoad(*b),
                Op::StealReq => Message::StealReq { steal: *b, thief_rsrc: 0 },
                Op::StealAck => Message::StealAck(*b),
                Op::StealDone => Message::StealDone(*b),
                other => panic!("{other:?} is not a STEAL message without entries"),
            },
            Owned::StealGrant(b, es) => Message::StealGrant { steal: *b, entries: es },
            Owned::StealReqFrom(b, rsrc) => Message::StealReq { steal: *b, thief_rsrc: *rsrc },
            Owned::Swap { queue_prio, exec_rsrc, state } => {
                return Packet::Swap { queue_prio: *queue_prio, exec_rsrc: *exec_rsrc, state }
            }
            Owned::Repair { queue_prio, state } => return Packet::Repair { queue_prio: *queue_prio, state },
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = self.packet().encode(&mut buf).unwrap_or_else(|e| panic!("encoding {self:?}: {e}"));
        buf[..n].to_vec()
    }
}

pub fn packet_op(p: &Packet<'_>) -> Op {
    match p {
        Packet::External(m) => m.op(),
        Packet::Swap { .. } => Op::Swap,
        Packet::Repair { .. } => Op::Repair,
    }
}
