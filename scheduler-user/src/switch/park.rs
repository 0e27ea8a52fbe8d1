//! Parked requests: a GET_TASK with WAIT, or a REFILL_REQ, that found nothing waits here
//! instead of being answered NOOP / empty REFILL, and is answered as soon as a task it
//! can take is enqueued, or at its deadline with the answer it would have had.
//!
//! Bounded (`max`): when the table is full a request is answered at once, as without
//! parking. One entry per executor socket and one per node: a newer request from the
//! same requester replaces the older one (whose answer the caller sends at once), so a
//! requester never holds two places and never gets two ASSIGNs for one wait.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use scheduler_common::{Message, RefillRequest, Requester};
use serde::Serialize;

/// What a parked request asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// GET_TASK with WAIT (`want` 1), or GET_BUNDLE with WAIT (`want` 2..=16).
    Task { who: Requester, rtrv_prio: u8, exec_rsrc: u8, want: u8 },
    /// REFILL_REQ.
    Refill { req: RefillRequest, node_rsrc: u8 },
}

impl Wanted {
    /// The message that runs this request through the pipeline again.
    pub fn message(&self) -> Message<'static> {
        match *self {
            Wanted::Task { who, rtrv_prio, exec_rsrc, want: 1 } => {
                Message::GetTask { rtrv_prio, exec_rsrc, from: who, wait: true }
            }
            Wanted::Task { who, rtrv_prio, exec_rsrc, want } => {
                Message::GetBundle { rtrv_prio, exec_rsrc, from: who, want, wait: true }
            }
            Wanted::Refill { req, node_rsrc } => Message::RefillReq { node_rsrc, req },
        }
    }

    /// The first level (0-based) the request searches, given the levels in use.
    pub fn first_level(&self, priorities: u8) -> usize {
        match *self {
            Wanted::Task { rtrv_prio, .. } => (rtrv_prio.min(priorities) - 1) as usize,
            Wanted::Refill { .. } => 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parked {
    pub addr: SocketAddrV4,
    pub wanted: Wanted,
    pub deadline: Instant,
}

impl Parked {
    /// Two requests hold the same place: the same executor socket, or the same node.
    fn same_requester(&self, addr: SocketAddrV4, wanted: &Wanted) -> bool {
        match (self.wanted, wanted) {
            (Wanted::Task { .. }, Wanted::Task { .. }) => self.addr == addr,
            (Wanted::Refill { req: a, .. }, Wanted::Refill { req: b, .. }) => a.node() == b.node(),
            _ => false,
        }
    }
}

/// Counters of the park table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ParkStats {
    /// Requests parked (GET_TASK with WAIT, REFILL_REQ) instead of answered empty.
    pub parked: u64,
    /// Parked requests answered with tasks when tasks arrived.
    pub answered_from_park: u64,
    /// Parked requests answered empty (NOOP, empty REFILL) at their deadline.
    pub expired: u64,
    /// Requests answered empty at once because the table was full.
    pub refused_park: u64,
    /// Parked requests replaced by a newer one from the same executor or node.
    pub replaced: u64,
    /// Requests waiting now.
    pub waiting: u64,
}

/// Why a request could not be parked.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

pub struct ParkTable {
    /// Arrival order; deadlines are in the same order (one park time for all).
    queue: VecDeque<Parked>,
    max: usize,
    park_for: Duration,
    pub stats: ParkStats,
}

impl ParkTable {
    pub fn new(max: usize, park_for: Duration) -> ParkTable {
        ParkTable { queue: VecDeque::with_capacity(max.min(4096)), max, park_for, stats: ParkStats::default() }
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Parks a request arriving `now`. Returns the request it replaced, if any (the
    /// caller answers that one empty at once), or `Full`.
    pub fn park(&mut self, addr: SocketAddrV4, wanted: Wanted, now: Instant) -> Result<Option<Parked>, Full> {
        let replaced = self.take_same(addr, &wanted);
        if replaced.is_none() && self.queue.len() >= self.max {
            self.stats.refused_park += 1;
            return Err(Full);
        }
        self.stats.parked += 1;
        self.queue.push_back(Parked { addr, wanted, deadline: now + self.park_for });
        self.stats.waiting = self.queue.len() as u64;
        Ok(replaced)
    }

    /// Removes the parked request of the same executor socket or node as `wanted`, if any.
    pub fn take_same(&mut self, addr: SocketAddrV4, wanted: &Wanted) -> Option<Parked> {
        let i = self.queue.iter().position(|p| p.same_requester(addr, wanted))?;
        let p = self.queue.remove(i);
        self.stats.replaced += 1;
        self.stats.waiting = self.queue.len() as u64;
        p
    }

    /// Removes and returns the next request whose deadline is at or before `now`.
    pub fn pop_expired(&mut self, now: Instant) -> Option<Parked> {
        if self.queue.front().is_some_and(|p| p.deadline <= now) {
            self.stats.expired += 1;
            let p = self.queue.pop_front();
            self.stats.waiting = self.queue.len() as u64;
            return p;
        }
        None
    }

    /// The request at position `i` in arrival order.
    pub fn get(&self, i: usize) -> Option<&Parked> {
        self.queue.get(i)
    }

    /// Removes the request at position `i`, answered with tasks.
    pub fn answered(&mut self, i: usize) -> Option<Parked> {
        let p = self.queue.remove(i);
        self.stats.answered_from_park += p.is_some() as u64;
        self.stats.waiting = self.queue.len() as u64;
        p
    }

    /// The earliest deadline, to bound how long the packet loop may sleep.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.queue.front().map(|p| p.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn addr(port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
    }

    fn task(seq: u32) -> Wanted {
        Wanted::Task { who: Requester::new(1, 1, seq), rtrv_prio: 1, exec_rsrc: 0, want: 1 }
    }

    #[test]
    fn bounded_replacing_and_expiring_in_arrival_order() {
        let t0 = Instant::now();
        let mut t = ParkTable::new(2, Duration::from_millis(10));
        assert_eq!(t.park(addr(1), task(1), t0), Ok(None));
        let refill = Wanted::Refill { req: RefillRequest::new(4, 8), node_rsrc: 0 };
        assert_eq!(t.park(addr(2), refill, t0), Ok(None));
        assert_eq!(t.park(addr(3), task(1), t0), Err(Full), "full");
        // The same executor socket asks again: its old request leaves, the new one waits.
        let later = t0 + Duration::from_millis(1);
        let old = t.park(addr(1), task(2), later).unwrap().expect("replaced");
        assert_eq!(old.wanted, task(1));
        // The same node, from another port: still one place per node.
        let refill2 = Wanted::Refill { req: RefillRequest::new(4, 16), node_rsrc: 0 };
        assert!(t.park(addr(9), refill2, later).unwrap().is_some());
        assert_eq!(t.len(), 2);
        assert_eq!(t.pop_expired(t0 + Duration::from_millis(10)), None, "both arrived at t0 + 1 ms");
        let first = t.pop_expired(later + Duration::from_millis(10)).unwrap();
        assert_eq!(first.wanted, task(2), "arrival order");
        assert_eq!(
            t.stats,
            ParkStats { parked: 4, expired: 1, refused_park: 1, replaced: 2, waiting: 1, ..ParkStats::default() }
        );
    }
}
