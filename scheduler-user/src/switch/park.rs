//! Parked requests: a GET_TASK with WAIT, or a REFILL_REQ, that found nothing waits here
//! instead of being answered NOOP / empty REFILL, and is answered as soon as a task it
//! can take is enqueued, or at its deadline with the answer it would have had.
//!
//! Bounded (`max`): when the table is full a request is answered at once, as without
//! parking. One entry per executor socket and one per node: a newer request from the
//! same requester replaces the older one (whose answer the caller sends at once), so a
//! requester never holds two places and never gets two ASSIGNs for one wait.
//!
//! Indexed, because a switch at scale parks one request per idle executor (a hundred
//! thousand and more): each request gets a ticket in arrival order; the requester's
//! ticket is found by hash, and the requests that search the same levels with the same
//! resources form a [`Group`] kept in ticket order. Every operation is O(log n), and
//! the oldest request of a kind whose levels hold tasks is found among the few groups,
//! not by walking the table.

use std::collections::{BTreeMap, BTreeSet, HashMap};
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
        self.group().first_level(priorities)
    }

    /// The requests that search as this one does.
    pub fn group(&self) -> Group {
        match *self {
            Wanted::Task { rtrv_prio, exec_rsrc, .. } => {
                Group { task: true, waiting: false, rtrv_prio, rsrc: exec_rsrc }
            }
            Wanted::Refill { node_rsrc, .. } => {
                Group { task: false, waiting: self.host_waits(), rtrv_prio: 1, rsrc: node_rsrc }
            }
        }
    }

    /// A REFILL_REQ saying executors wait at its host (`waiting` > 0).
    pub fn host_waits(&self) -> bool {
        matches!(self, Wanted::Refill { req, .. } if req.waiting > 0)
    }

    /// The place it holds: its executor socket (GET_TASK) or its node (REFILL_REQ).
    fn place(&self, addr: SocketAddrV4) -> Place {
        match *self {
            Wanted::Task { .. } => Place::Executor(addr),
            Wanted::Refill { req, .. } => Place::Node(req.node()),
        }
    }
}

/// Parked requests that the pipeline answers alike: the same kind, the same first level
/// searched, the same resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Group {
    /// A GET_TASK (an executor), not a REFILL_REQ (a host).
    pub task: bool,
    /// A REFILL_REQ from a host where executors wait (its `waiting` is not zero).
    pub waiting: bool,
    /// The first priority searched (1 = from the top; a REFILL_REQ searches every level).
    pub rtrv_prio: u8,
    /// The executor's or node's resource bits.
    pub rsrc: u8,
}

impl Group {
    /// The first level (0-based) its requests search, given the levels in use.
    pub fn first_level(&self, priorities: u8) -> usize {
        (self.rtrv_prio.min(priorities).max(1) - 1) as usize
    }
}

/// A requester's one place in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Place {
    Executor(SocketAddrV4),
    Node(u16),
}

/// A parked request's position in arrival order.
pub type Ticket = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parked {
    pub addr: SocketAddrV4,
    pub wanted: Wanted,
    pub deadline: Instant,
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
    /// Every parked request by ticket: arrival order, and deadline order too (one park
    /// time for all).
    requests: BTreeMap<Ticket, Parked>,
    /// Each requester's ticket.
    places: HashMap<Place, Ticket>,
    /// The tickets of each group, oldest first.
    groups: BTreeMap<Group, BTreeSet<Ticket>>,
    next_ticket: Ticket,
    max: usize,
    park_for: Duration,
    pub stats: ParkStats,
}

impl ParkTable {
    pub fn new(max: usize, park_for: Duration) -> ParkTable {
        ParkTable {
            requests: BTreeMap::new(),
            places: HashMap::new(),
            groups: BTreeMap::new(),
            next_ticket: 0,
            max,
            park_for,
            stats: ParkStats::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Parks a request arriving `now`. Returns the request it replaced, if any (the
    /// caller answers that one empty at once), or `Full`.
    pub fn park(&mut self, addr: SocketAddrV4, wanted: Wanted, now: Instant) -> Result<Option<Parked>, Full> {
        let replaced = self.take_same(addr, &wanted);
        if replaced.is_none() && self.requests.len() >= self.max {
            self.stats.refused_park += 1;
            return Err(Full);
        }
        self.stats.parked += 1;
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.requests.insert(ticket, Parked { addr, wanted, deadline: now + self.park_for });
        self.places.insert(wanted.place(addr), ticket);
        self.groups.entry(wanted.group()).or_default().insert(ticket);
        self.stats.waiting = self.requests.len() as u64;
        Ok(replaced)
    }

    /// Removes the parked request of the same executor socket or node as `wanted`, if any.
    pub fn take_same(&mut self, addr: SocketAddrV4, wanted: &Wanted) -> Option<Parked> {
        let ticket = *self.places.get(&wanted.place(addr))?;
        let p = self.remove(ticket);
        self.stats.replaced += p.is_some() as u64;
        p
    }

    /// Removes and returns the next request whose deadline is at or before `now`.
    pub fn pop_expired(&mut self, now: Instant) -> Option<Parked> {
        let (&ticket, p) = self.requests.first_key_value()?;
        if p.deadline > now {
            return None;
        }
        self.stats.expired += 1;
        self.remove(ticket)
    }

    /// The oldest request with a ticket at or after `from` whose group passes `eligible`,
    /// with its ticket. `eligible` sees each group once per call, not each request.
    pub fn oldest_from(&self, from: Ticket, mut eligible: impl FnMut(Group) -> bool) -> Option<(Ticket, Parked)> {
        let ticket = self
            .groups
            .iter()
            .filter(|(g, _)| eligible(**g))
            .filter_map(|(_, tickets)| tickets.range(from..).next().copied())
            .min()?;
        Some((ticket, self.requests[&ticket]))
    }

    /// Removes the request holding `ticket`, answered with tasks.
    pub fn answered(&mut self, ticket: Ticket) -> Option<Parked> {
        let p = self.remove(ticket);
        self.stats.answered_from_park += p.is_some() as u64;
        p
    }

    /// The earliest deadline, to bound how long the packet loop may sleep.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.requests.first_key_value().map(|(_, p)| p.deadline)
    }

    fn remove(&mut self, ticket: Ticket) -> Option<Parked> {
        let p = self.requests.remove(&ticket)?;
        self.places.remove(&p.wanted.place(p.addr));
        let group = p.wanted.group();
        if let Some(tickets) = self.groups.get_mut(&group) {
            tickets.remove(&ticket);
            if tickets.is_empty() {
                self.groups.remove(&group);
            }
        }
        self.stats.waiting = self.requests.len() as u64;
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;
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
        assert_eq!(t.stats.waiting, 2);
        assert_eq!(t.pop_expired(t0 + Duration::from_millis(10)), None, "both arrived at t0 + 1 ms");
        let first = t.pop_expired(later + Duration::from_millis(10)).unwrap();
        assert_eq!(first.wanted, task(2), "arrival order");
        assert_eq!(
            t.stats,
            ParkStats { parked: 4, expired: 1, refused_park: 1, replaced: 2, waiting: 1, ..ParkStats::default() }
        );
    }

    #[test]
    fn the_oldest_request_of_an_eligible_group_is_found_from_a_ticket_on() {
        let t0 = Instant::now();
        let mut t = ParkTable::new(16, Duration::from_millis(10));
        let get = |port: u16, rtrv_prio, exec_rsrc| Wanted::Task {
            who: Requester::new(1, port, 1),
            rtrv_prio,
            exec_rsrc,
            want: 1,
        };
        t.park(addr(1), get(1, 1, 0b01), t0).unwrap();
        t.park(addr(2), Wanted::Refill { req: RefillRequest::new(3, 8), node_rsrc: 0b11 }, t0).unwrap();
        t.park(addr(3), get(3, 3, 0b01), t0).unwrap();
        t.park(addr(4), get(4, 1, 0b10), t0).unwrap();
        let executors = |g: Group| g.task;
        assert_eq!(t.oldest_from(0, executors).map(|(k, p)| (k, p.addr)), Some((0, addr(1))));
        assert_eq!(t.oldest_from(1, executors).map(|(k, p)| (k, p.addr)), Some((2, addr(3))));
        // Only levels from 3 on hold tasks: the request searching from level 3.
        assert_eq!(t.oldest_from(0, |g| g.task && g.first_level(4) >= 2).map(|(_, p)| p.addr), Some(addr(3)));
        assert_eq!(t.oldest_from(0, |g| !g.task).map(|(_, p)| p.addr), Some(addr(2)));
        assert_eq!(t.answered(2).map(|p| p.addr), Some(addr(3)));
        assert_eq!(t.oldest_from(1, executors).map(|(k, _)| k), Some(3));
        assert_eq!(t.oldest_from(4, |_| true), None);
        assert_eq!(t.stats.answered_from_park, 1);
    }

    /// The table as it was before the index: one list in arrival order, scanned.
    struct Scanned {
        queue: VecDeque<(Ticket, Parked)>,
        next: Ticket,
        max: usize,
        park_for: Duration,
        stats: ParkStats,
    }

    impl Scanned {
        fn same(p: &Parked, addr: SocketAddrV4, wanted: &Wanted) -> bool {
            match (p.wanted, wanted) {
                (Wanted::Task { .. }, Wanted::Task { .. }) => p.addr == addr,
                (Wanted::Refill { req: a, .. }, Wanted::Refill { req: b, .. }) => a.node() == b.node(),
                _ => false,
            }
        }

        fn park(&mut self, addr: SocketAddrV4, wanted: Wanted, now: Instant) -> Result<Option<Parked>, Full> {
            let replaced = self.take_same(addr, &wanted);
            if replaced.is_none() && self.queue.len() >= self.max {
                self.stats.refused_park += 1;
                return Err(Full);
            }
            self.stats.parked += 1;
            self.queue.push_back((self.next, Parked { addr, wanted, deadline: now + self.park_for }));
            self.next += 1;
            self.stats.waiting = self.queue.len() as u64;
            Ok(replaced)
        }

        fn take_same(&mut self, addr: SocketAddrV4, wanted: &Wanted) -> Option<Parked> {
            let i = self.queue.iter().position(|(_, p)| Self::same(p, addr, wanted))?;
            let p = self.queue.remove(i).map(|(_, p)| p);
            self.stats.replaced += 1;
            self.stats.waiting = self.queue.len() as u64;
            p
        }

        fn pop_expired(&mut self, now: Instant) -> Option<Parked> {
            if self.queue.front().is_some_and(|(_, p)| p.deadline <= now) {
                self.stats.expired += 1;
                let p = self.queue.pop_front().map(|(_, p)| p);
                self.stats.waiting = self.queue.len() as u64;
                return p;
            }
            None
        }

        fn oldest_from(&self, from: Ticket, eligible: impl Fn(Group) -> bool) -> Option<(Ticket, Parked)> {
            self.queue.iter().find(|(k, p)| *k >= from && eligible(p.wanted.group())).copied()
        }

        fn answered(&mut self, ticket: Ticket) -> Option<Parked> {
            let i = self.queue.iter().position(|(k, _)| *k == ticket)?;
            let p = self.queue.remove(i).map(|(_, p)| p);
            self.stats.answered_from_park += 1;
            self.stats.waiting = self.queue.len() as u64;
            p
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A request from requester `who` (executors 0..8 on ports, nodes 0..4), after `dt_us`.
        Park {
            who: u8,
            refill: bool,
            rtrv_prio: u8,
            rsrc: u8,
            dt_us: u16,
        },
        TakeSame {
            who: u8,
            refill: bool,
        },
        Expire {
            dt_us: u16,
        },
        /// A task arrives: walk the eligible requests oldest first, answering those the
        /// mask selects, as tier 2 serves its parked requests.
        Serve {
            task: bool,
            min_level: u8,
            rsrc: u8,
            answer_mask: u16,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12, any::<bool>(), 1u8..=4, 0u8..4, 0u16..3000)
                .prop_map(|(who, refill, rtrv_prio, rsrc, dt_us)| Op::Park { who, refill, rtrv_prio, rsrc, dt_us }),
            1 => (0u8..12, any::<bool>()).prop_map(|(who, refill)| Op::TakeSame { who, refill }),
            1 => (0u16..6000).prop_map(|dt_us| Op::Expire { dt_us }),
            2 => (any::<bool>(), 0u8..4, 0u8..4, any::<u16>())
                .prop_map(|(task, min_level, rsrc, answer_mask)| Op::Serve { task, min_level, rsrc, answer_mask }),
        ]
    }

    fn wanted(who: u8, refill: bool, rtrv_prio: u8, rsrc: u8) -> (SocketAddrV4, Wanted) {
        if refill {
            // Nodes 0..4, each from two agent ports: the node is the place, not the port.
            (
                addr(9000 + who as u16 % 2),
                Wanted::Refill { req: RefillRequest::new((who % 4) as u16, 8), node_rsrc: rsrc },
            )
        } else {
            (
                addr(who as u16),
                Wanted::Task { who: Requester::new(1, who as u16, 1), rtrv_prio, exec_rsrc: rsrc, want: 1 },
            )
        }
    }

    proptest! {
        #[test]
        fn the_indexed_table_answers_as_the_scanned_one_did(ops in proptest::collection::vec(op(), 1..200), max in 1usize..10) {
            let park_for = Duration::from_millis(5);
            let mut now = Instant::now();
            let mut indexed = ParkTable::new(max, park_for);
            let mut scanned = Scanned { queue: VecDeque::new(), next: 0, max, park_for, stats: ParkStats::default() };
            for op in ops {
                match op {
                    Op::Park { who, refill, rtrv_prio, rsrc, dt_us } => {
                        now += Duration::from_micros(dt_us as u64);
                        let (a, w) = wanted(who, refill, rtrv_prio, rsrc);
                        prop_assert_eq!(indexed.park(a, w, now), scanned.park(a, w, now));
                    }
                    Op::TakeSame { who, refill } => {
                        let (a, w) = wanted(who, refill, 1, 0);
                        prop_assert_eq!(indexed.take_same(a, &w), scanned.take_same(a, &w));
                    }
                    Op::Expire { dt_us } => {
                        now += Duration::from_micros(dt_us as u64);
                        loop {
                            let p = indexed.pop_expired(now);
                            prop_assert_eq!(p, scanned.pop_expired(now));
                            if p.is_none() { break; }
                        }
                    }
                    Op::Serve { task, min_level, rsrc, answer_mask } => {
                        let eligible = |g: Group| g.task == task && g.first_level(4) >= min_level as usize && g.rsrc & rsrc == rsrc;
                        let mut from = 0;
                        for i in 0..16 {
                            let found = indexed.oldest_from(from, eligible);
                            prop_assert_eq!(found, scanned.oldest_from(from, eligible));
                            let Some((ticket, _)) = found else { break };
                            if answer_mask & (1 << i) != 0 {
                                prop_assert_eq!(indexed.answered(ticket), scanned.answered(ticket));
                            }
                            from = ticket + 1;
                        }
                    }
                }
                prop_assert_eq!(&indexed.stats, &scanned.stats);
                prop_assert_eq!(indexed.next_deadline(), scanned.queue.front().map(|(_, p)| p.deadline));
                let order: Vec<_> = indexed.requests.iter().map(|(k, p)| (*k, *p)).collect();
                prop_assert_eq!(order, scanned.queue.iter().copied().collect::<Vec<_>>());
            }
        }
    }
}
