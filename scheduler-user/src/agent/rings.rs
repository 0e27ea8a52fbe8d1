//! The node's task rings as the agent sees them: the XDP program's BPF maps (pinned, so
//! they outlive the agent), or rings in this process's memory where BPF is not available.
//! The same operations either way, so that refilling, returning and the userspace
//! fallback do not care which.

use std::collections::VecDeque;

use anyhow::Context as _;
use scheduler_common::{
    maps::{ring_stamp, Counter, Counters, Tier2Hint, DEDICATED_CAPACITY, RING_COUNT},
    Entry, MAX_PRIORITIES,
};

use crate::clock::monotonic_ns;
use crate::xdp::{PushError, XdpMaps};

/// What the XDP program has ingested from REFILL frames since it was loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelRefills {
    /// Valid REFILL frames from the switch (empty ones included).
    pub frames: u64,
    /// Tasks those frames carried: stored, overflowed, or bounced back as RETURN.
    pub tasks: u64,
}

impl KernelRefills {
    /// The REFILL tally in a snapshot of the program's counters.
    pub fn of(c: &Counters) -> KernelRefills {
        KernelRefills {
            frames: c.get(Counter::RefillFrames),
            // A task handed straight to a waiting executor arrived all the same.
            tasks: c.get(Counter::RefillTasks)
                + c.get(Counter::Overflow)
                + c.get(Counter::Bounced)
                + c.get(Counter::Handoffs),
        }
    }
}

/// Milliseconds of CLOCK_MONOTONIC: the lease clock (the XDP program's
/// `bpf_ktime_get_coarse_ns` counts on the same base).
pub fn monotonic_ms() -> u64 {
    monotonic_ns() / 1_000_000
}

/// Pops of the dedicated ring one pass makes at most: its capacity and one more, so that a
/// pass over a ring the program keeps serving ends.
pub const DEDICATED_POP_BOUND: usize = DEDICATED_CAPACITY as usize + 1;

/// Tasks kept in this process (userspace fallback without BPF): lost if the agent dies,
/// which is why the BPF maps are preferred whenever they can be created.
pub struct MemoryRings {
    rings: Vec<VecDeque<Entry>>,
    dedicated: VecDeque<Entry>,
    capacity: u32,
    hint: Tier2Hint,
}

impl MemoryRings {
    pub fn new(levels: u8, capacity: u32) -> MemoryRings {
        let levels = levels.clamp(1, RING_COUNT as u8) as usize;
        MemoryRings {
            rings: (0..levels).map(|_| VecDeque::new()).collect(),
            dedicated: VecDeque::new(),
            capacity,
            hint: Tier2Hint::default(),
        }
    }
}

/// The node's rings.
pub enum Rings {
    /// The XDP program's maps (it may or may not be attached: see the agent's mode).
    Bpf(Box<XdpMaps>),
    Memory(MemoryRings),
}

impl Rings {
    /// Priority levels in use: rings 1..=levels hold tasks.
    pub fn levels(&self) -> u8 {
        match self {
            Rings::Bpf(maps) => maps.config().map(|c| c.levels.clamp(1, RING_COUNT as u8)).unwrap_or(1),
            Rings::Memory(m) => m.rings.len() as u8,
        }
    }

    /// Tasks one ring holds.
    pub fn capacity(&self) -> u32 {
        match self {
            Rings::Bpf(maps) => maps.config().map(|c| c.ring_capacity).unwrap_or(0),
            Rings::Memory(m) => m.capacity,
        }
    }

    /// Slots taken in each ring (index 0 = priority 1): queued tasks plus any the XDP
    /// program is moving at this instant.
    pub fn occupancy(&self) -> [i64; RING_COUNT] {
        match self {
            Rings::Bpf(maps) => maps.occupancy(),
            Rings::Memory(m) => std::array::from_fn(|i| m.rings.get(i).map_or(0, |r| r.len() as i64)),
        }
    }

    /// True when no ring and no overflow queue holds a task (read in place; a ring or
    /// queue that cannot be read counts as holding some).
    pub fn is_empty(&self) -> bool {
        match self {
            Rings::Bpf(maps) => {
                matches!(maps.peek_overflow(), Ok(None))
                    && matches!(maps.peek_dedicated(), Ok(None))
                    && (1..=self.levels()).all(|p| matches!(maps.peek_ring(p), Ok(None)))
            }
            Rings::Memory(m) => m.rings.iter().all(|r| r.is_empty()) && m.dedicated.is_empty(),
        }
    }

    /// Tier 2's last BEST stamp: in the program's state map (shared with it), or here.
    pub fn tier2_hint(&self) -> Tier2Hint {
        match self {
            Rings::Bpf(maps) => maps.tier2_hint(),
            Rings::Memory(m) => m.hint,
        }
    }

    /// Records a BEST stamp read from a tier-2 packet.
    pub fn record_tier2_hint(&mut self, hint: Tier2Hint) {
        match self {
            Rings::Bpf(maps) => maps.record_tier2_hint(hint),
            Rings::Memory(m) => m.hint = hint,
        }
    }

    /// Before a REFILL_REQ: asks the program for an event at the first frame of its
    /// answer (EVENT_REFILL_ANSWER), waking the agent or, with `wake` false, recorded for
    /// its next wake-up. In-memory rings are filled by the agent from its socket, whose
    /// frames wake it anyway.
    pub fn arm_refill_answer(&self, wake: bool) {
        if let Rings::Bpf(maps) = self {
            maps.arm_refill_answer(wake);
        }
    }

    /// Tasks queued over all rings.
    pub fn total(&self) -> i64 {
        self.occupancy().iter().map(|&r| r.max(0)).sum()
    }

    /// Queues `entry` in its priority's ring (priorities past the levels in use go to the
    /// lowest ring), stamped with the time it entered (its lease starts now). Returns the
    /// entry back (unstamped) when its ring is full, so the caller can RETURN it: a task
    /// is never dropped here.
    pub fn push(&mut self, entry: &Entry) -> anyhow::Result<Result<(), Entry>> {
        let stamped = Entry { pad: ring_stamp(monotonic_ms()), ..*entry };
        Ok(self.put_back(&stamped)?.map_err(|_| entry.unstamped()))
    }

    /// Queues `entry` as it is, lease stamp included: for a task popped from a ring that
    /// goes back (not runnable by this executor, an aborted steal), whose lease goes on.
    pub fn put_back(&mut self, entry: &Entry) -> anyhow::Result<Result<(), Entry>> {
        match self {
            Rings::Bpf(maps) => match maps.push(entry) {
                Ok(_) => Ok(Ok(())),
                Err(PushError::Full(_)) | Err(PushError::BadPriority(_)) => Ok(Err(*entry)),
                Err(PushError::Map(e)) => Err(e).context("pushing into a BPF ring"),
            },
            Rings::Memory(m) => {
                let prio = entry.task.prio;
                if prio == 0 || prio > MAX_PRIORITIES {
                    return Ok(Err(*entry));
                }
                let ring = (prio as usize).min(m.rings.len()) - 1;
                if m.rings[ring].len() >= m.capacity as usize {
                    return Ok(Err(*entry));
                }
                m.rings[ring].push_back(*entry);
                Ok(Ok(()))
            }
        }
    }

    /// Queues `entry` as it is at the tail of the dedicated ring (PINned tasks); returns
    /// it back when the ring is full.
    pub fn push_dedicated(&mut self, entry: &Entry) -> anyhow::Result<Result<(), Entry>> {
        match self {
            Rings::Bpf(maps) => Ok(if maps.push_dedicated(entry)? { Ok(()) } else { Err(*entry) }),
            Rings::Memory(m) => {
                if m.dedicated.len() >= DEDICATED_CAPACITY as usize {
                    return Ok(Err(*entry));
                }
                m.dedicated.push_back(*entry);
                Ok(Ok(()))
            }
        }
    }

    /// Tasks in the dedicated ring, where that can be read without taking them out (the
    /// memory rings); a BPF queue cannot be counted in place.
    /// Whether the dedicated ring holds a task (read in place).
    pub fn has_pinned(&self) -> bool {
        match self {
            Rings::Bpf(maps) => matches!(maps.peek_dedicated(), Ok(Some(_))),
            Rings::Memory(m) => !m.dedicated.is_empty(),
        }
    }

    pub fn dedicated_len(&self) -> Option<usize> {
        match self {
            Rings::Bpf(_) => None,
            Rings::Memory(m) => Some(m.dedicated.len()),
        }
    }

    /// Takes the head of the dedicated ring.
    pub fn pop_dedicated(&mut self) -> anyhow::Result<Option<Entry>> {
        match self {
            Rings::Bpf(maps) => maps.pop_dedicated(),
            Rings::Memory(m) => Ok(m.dedicated.pop_front()),
        }
    }

    /// Takes the head of ring `prio` (1-based).
    pub fn pop(&mut self, prio: u8) -> anyhow::Result<Option<Entry>> {
        match self {
            Rings::Bpf(maps) => maps.pop(prio),
            Rings::Memory(m) => Ok(m.rings.get_mut((prio as usize).wrapping_sub(1)).and_then(|r| r.pop_front())),
        }
    }

    /// The head of ring `prio` (1-based), without taking it.
    pub fn peek(&self, prio: u8) -> anyhow::Result<Option<Entry>> {
        match self {
            Rings::Bpf(maps) => maps.peek_ring(prio),
            Rings::Memory(m) => Ok(m.rings.get((prio as usize).wrapping_sub(1)).and_then(|r| r.front()).copied()),
        }
    }

    /// The lease stamp of ring `prio`'s head (1-based), without taking it.
    pub fn peek_stamp(&self, prio: u8) -> anyhow::Result<Option<[u8; 2]>> {
        Ok(self.peek(prio)?.map(|e| e.pad))
    }

    /// The XDP program's counters (summed over CPUs) since it was loaded; all zero for
    /// memory rings, whose tasks the agent serves and counts itself.
    pub fn kernel_counters(&self) -> anyhow::Result<Counters> {
        match self {
            Rings::Bpf(maps) => Ok(maps.counters()?.0),
            Rings::Memory(_) => Ok(Counters::default()),
        }
    }

    /// Takes a task the XDP program could not fit in its ring (the memory rings never
    /// overflow: a full ring hands the task back to the caller at once).
    pub fn pop_overflow(&mut self) -> anyhow::Result<Option<Entry>> {
        match self {
            Rings::Bpf(maps) => maps.pop_overflow(),
            Rings::Memory(_) => Ok(None),
        }
    }

    /// The oldest task in the overflow queue, left there.
    pub fn peek_overflow(&self) -> anyhow::Result<Option<Entry>> {
        match self {
            Rings::Bpf(maps) => maps.peek_overflow(),
            Rings::Memory(_) => Ok(None),
        }
    }

    /// REFILL frames and tasks the XDP program has taken in (zero for memory rings, whose
    /// REFILLs all arrive at the agent's socket).
    pub fn kernel_refills(&self) -> anyhow::Result<KernelRefills> {
        Ok(KernelRefills::of(&self.kernel_counters()?))
    }

    /// The first task, from ring `rtrv_prio` down to the lowest level in use, that an
    /// executor offering `exec_rsrc` can run: the XDP program's rule, for the userspace
    /// fallback. One pop per ring; a task that does not fit goes back to its ring's tail.
    /// A task that cannot go back (its ring filled meanwhile, or a map error) is added to
    /// `unplaced` for the caller to RETURN; a ring that cannot be popped is skipped.
    /// Errors are counted in `errors`, never returned: no task is dropped with one.
    pub fn take_runnable(
        &mut self,
        rtrv_prio: u8,
        exec_rsrc: u8,
        unplaced: &mut Vec<Entry>,
        errors: &mut u64,
    ) -> Option<Entry> {
        // Pinned tasks first, as the program does; one that does not fit goes to the tail.
        match self.pop_dedicated() {
            Ok(Some(entry)) if entry.task.runs_on(exec_rsrc) => return Some(entry),
            // Should the ring have filled meanwhile, the task goes to tier 2 (RETURN): it
            // then runs anywhere, or comes back to its client as QUEUE_FULL.
            Ok(Some(entry)) => match self.push_dedicated(&entry) {
                Ok(Ok(())) => {}
                Ok(Err(back)) => unplaced.push(back),
                Err(e) => {
                    *errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "putting a task back into the dedicated ring failed");
                    unplaced.push(entry);
                }
            },
            Ok(None) => {}
            Err(e) => {
                *errors += 1;
                tracing::warn!(error = format!("{e:#}"), "popping the dedicated ring failed");
            }
        }
        for prio in rtrv_prio.max(1)..=self.levels() {
            let entry = match self.pop(prio) {
                Ok(Some(e)) => e,
                Ok(None) => continue,
                Err(e) => {
                    *errors += 1;
                    tracing::warn!(prio, error = format!("{e:#}"), "popping a ring failed; ring skipped");
                    continue;
                }
            };
            if entry.task.runs_on(exec_rsrc) {
                return Some(entry);
            }
            self.put_back_or_hand_back(&entry, unplaced, errors);
        }
        None
    }

    /// Up to `n` tasks an executor with resources `rsrc` can run, for a thief: from the
    /// highest priority down, each ring taken from its head and only while the head is
    /// runnable there, so that what stays keeps its FIFO order. The XDP program may take
    /// a head between the look and the pop: a popped task that is not runnable there goes
    /// back to its ring's tail, or into `unplaced` (for RETURN) when the ring is full.
    pub fn take_heads_for(&mut self, rsrc: u8, n: usize, unplaced: &mut Vec<Entry>, errors: &mut u64) -> Vec<Entry> {
        self.take_heads_where(n, |e| e.task.runs_on(rsrc), unplaced, errors)
    }

    /// As [`Rings::take_heads_for`], for heads that `take` accepts (it sees the entry with
    /// its lease stamp); a popped head it refuses goes back as there.
    pub fn take_heads_where(
        &mut self,
        n: usize,
        take: impl Fn(&Entry) -> bool,
        unplaced: &mut Vec<Entry>,
        errors: &mut u64,
    ) -> Vec<Entry> {
        let mut got = Vec::with_capacity(n);
        for prio in 1..=self.levels() {
            while got.len() < n {
                match self.peek(prio) {
                    Ok(Some(head)) if take(&head) => {}
                    Ok(_) => break,
                    Err(e) => {
                        *errors += 1;
                        tracing::warn!(prio, error = format!("{e:#}"), "reading a ring's head failed");
                        break;
                    }
                }
                match self.pop(prio) {
                    Ok(Some(e)) if take(&e) => got.push(e),
                    Ok(Some(e)) => {
                        self.put_back_or_hand_back(&e, unplaced, errors);
                        break;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        *errors += 1;
                        tracing::warn!(prio, error = format!("{e:#}"), "popping a ring failed");
                        break;
                    }
                }
            }
        }
        got
    }

    /// Queues a newly arrived `entry` (lease stamp: now), or adds it to `unplaced` when its
    /// ring is full or the push fails (counted in `errors`), so that the caller RETURNs it.
    pub fn push_or_hand_back(&mut self, entry: &Entry, unplaced: &mut Vec<Entry>, errors: &mut u64) {
        let pushed = self.push(entry);
        Self::hand_back_unless_queued(pushed, entry, unplaced, errors);
    }

    /// As [`Rings::push_or_hand_back`] for a task popped from a ring that goes back: its
    /// lease stamp, and so its lease, is kept.
    pub fn put_back_or_hand_back(&mut self, entry: &Entry, unplaced: &mut Vec<Entry>, errors: &mut u64) {
        let queued = self.put_back(entry);
        Self::hand_back_unless_queued(queued, entry, unplaced, errors);
    }

    fn hand_back_unless_queued(
        queued: anyhow::Result<Result<(), Entry>>,
        entry: &Entry,
        unplaced: &mut Vec<Entry>,
        errors: &mut u64,
    ) {
        match queued {
            Ok(Ok(())) => {}
            Ok(Err(back)) => unplaced.push(back),
            Err(e) => {
                *errors += 1;
                tracing::warn!(error = format!("{e:#}"), "pushing into a ring failed; the task goes back to tier 2");
                unplaced.push(*entry);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::Task;

    fn entry(tid: u32, prio: u8, rsrc: u8) -> Entry {
        let mut task = Task { prio, rsrc, ..Task::default() };
        task.set_tid(tid);
        Entry::new(1, 1, task, [127, 0, 0, 1], 9)
    }

    #[test]
    fn pinned_tasks_are_served_first_and_never_given_to_a_thief() {
        let mut r = Rings::Memory(MemoryRings::new(2, 8));
        r.push(&entry(1, 1, 0)).unwrap().unwrap();
        r.push_dedicated(&entry(10, 2, 0b10)).unwrap().unwrap();
        r.push_dedicated(&entry(11, 2, 0)).unwrap().unwrap();
        let (mut unplaced, mut errors) = (Vec::new(), 0);
        // A thief gets the shared task only, whatever it can run.
        let stolen = r.take_heads_for(0xff, 16, &mut unplaced, &mut errors);
        assert_eq!(stolen.iter().map(|e| e.task.tid()).collect::<Vec<_>>(), [1]);
        r.push(&entry(2, 1, 0)).unwrap().unwrap();
        // The dedicated head needs resource 0b10: an executor without it gets the shared
        // task, and that pinned task goes to the dedicated tail, behind the next one.
        assert_eq!(r.take_runnable(1, 0, &mut unplaced, &mut errors).map(|e| e.task.tid()), Some(2));
        assert_eq!(r.take_runnable(1, 0, &mut unplaced, &mut errors).map(|e| e.task.tid()), Some(11));
        assert_eq!(r.take_runnable(1, 0b10, &mut unplaced, &mut errors).map(|e| e.task.tid()), Some(10));
        assert!(r.is_empty() && unplaced.is_empty() && errors == 0);
    }

    #[test]
    fn the_dedicated_ring_hands_back_when_full() {
        let mut r = Rings::Memory(MemoryRings::new(1, 8));
        for tid in 0..DEDICATED_CAPACITY {
            r.push_dedicated(&entry(tid, 1, 0)).unwrap().unwrap();
        }
        assert_eq!(r.push_dedicated(&entry(99_999, 1, 0)).unwrap(), Err(entry(99_999, 1, 0)));
    }

    #[test]
    fn memory_rings_keep_priority_order_and_hand_back_when_full() {
        let mut r = Rings::Memory(MemoryRings::new(2, 2));
        assert_eq!(r.push(&entry(1, 2, 0)).unwrap(), Ok(()));
        // Priority 5 queues in the lowest ring in use (2).
        assert_eq!(r.push(&entry(2, 5, 0)).unwrap(), Ok(()));
        assert_eq!(r.push(&entry(3, 2, 0)).unwrap(), Err(entry(3, 2, 0)));
        assert_eq!(r.push(&entry(4, 1, 0)).unwrap(), Ok(()));
        assert_eq!(r.occupancy()[..3], [1, 2, 0]);
        assert_eq!(r.total(), 3);
        assert_eq!(r.pop(1).unwrap().map(|e| e.task.tid()), Some(4));
        assert_eq!(r.pop(2).unwrap().map(|e| e.task.tid()), Some(1));
        assert_eq!(r.pop(3).unwrap(), None);
        assert_eq!(r.pop(0).unwrap(), None);
    }

    #[test]
    fn a_thief_gets_only_heads_it_can_run_and_the_rest_keeps_its_order() {
        let mut r = Rings::Memory(MemoryRings::new(2, 8));
        for (tid, prio, rsrc) in [(1, 1, 0b01), (2, 1, 0b10), (3, 1, 0b01), (4, 2, 0b01), (5, 2, 0b01)] {
            r.push(&entry(tid, prio, rsrc)).unwrap().unwrap();
        }
        let (mut unplaced, mut errors) = (Vec::new(), 0);
        let tids = |es: &[Entry]| es.iter().map(|e| e.task.tid()).collect::<Vec<_>>();
        // Ring 1 stops at task 2 (needs bit 1); ring 2 gives its heads.
        let got = r.take_heads_for(0b01, 3, &mut unplaced, &mut errors);
        assert_eq!(tids(&got), [1, 4, 5]);
        assert_eq!((unplaced.len(), errors), (0, 0));
        assert_eq!(r.pop(1).unwrap().map(|e| e.task.tid()), Some(2), "order kept");
        assert_eq!(r.pop(1).unwrap().map(|e| e.task.tid()), Some(3));
        // A node that can run nothing here gets nothing.
        r.push(&entry(6, 1, 0b100)).unwrap().unwrap();
        assert!(r.take_heads_for(0b011, 4, &mut unplaced, &mut errors).is_empty());
        assert_eq!(r.total(), 1);
    }

    #[test]
    fn a_push_stamps_the_lease_and_a_put_back_keeps_it() {
        let mut r = Rings::Memory(MemoryRings::new(2, 4));
        let before = monotonic_ms();
        r.push(&entry(1, 1, 0b10)).unwrap().unwrap();
        let stamp = r.peek_stamp(1).unwrap().expect("a head");
        let age = scheduler_common::maps::stamp_age_ms(stamp, monotonic_ms()).expect("stamped");
        assert!(age as u64 <= monotonic_ms() - before + 1, "stamped now, age {age}");
        // Not runnable here: popped and put back with the same stamp.
        let (mut unplaced, mut errors) = (Vec::new(), 0);
        assert_eq!(r.take_runnable(1, 0b01, &mut unplaced, &mut errors), None);
        assert_eq!((unplaced.len(), errors), (0, 0));
        assert_eq!(r.peek_stamp(1).unwrap(), Some(stamp));
        // A full ring hands the entry back unstamped, ready for a RETURN.
        let mut full = Rings::Memory(MemoryRings::new(1, 1));
        full.push(&entry(2, 1, 0)).unwrap().unwrap();
        assert_eq!(full.push(&entry(3, 1, 0)).unwrap(), Err(entry(3, 1, 0)));
        assert_eq!(full.peek_stamp(2).unwrap(), None, "no ring 2");
    }

    #[test]
    fn take_runnable_skips_what_the_executor_cannot_run_and_keeps_it() {
        let mut r = Rings::Memory(MemoryRings::new(4, 8));
        r.push(&entry(1, 1, 0b10)).unwrap().unwrap();
        r.push(&entry(2, 1, 0b01)).unwrap().unwrap();
        r.push(&entry(3, 3, 0b01)).unwrap().unwrap();
        let mut unplaced = Vec::new();
        let mut errors = 0;
        // Ring 1's head needs 0b10: requeued; ring 3 serves.
        let got = r.take_runnable(1, 0b01, &mut unplaced, &mut errors);
        assert_eq!(got.map(|e| e.task.tid()), Some(3));
        assert!(unplaced.is_empty());
        assert_eq!(r.occupancy()[0], 2);
        // Now ring 1's head is task 2 (task 1 went to the tail).
        assert_eq!(r.take_runnable(1, 0b01, &mut unplaced, &mut errors).map(|e| e.task.tid()), Some(2));
        assert_eq!(r.take_runnable(2, 0b11, &mut unplaced, &mut errors), None);
        assert_eq!(r.take_runnable(1, 0b11, &mut unplaced, &mut errors).map(|e| e.task.tid()), Some(1));
        assert_eq!(r.total(), 0);
        assert_eq!(errors, 0);
    }
}
