//! The node's task rings as the agent sees them: the XDP program's BPF maps (pinned, so
//! they outlive the agent), or rings in this process's memory where BPF is not available.
//! The same operations either way, so that refilling, returning and the userspace
//! fallback do not care which.

use std::collections::VecDeque;

use anyhow::Context as _;
use scheduler_common::{
    maps::{Counter, Tier2Hint, RING_COUNT},
    Entry, MAX_PRIORITIES,
};

use crate::xdp::{PushError, XdpMaps};

/// What the XDP program has ingested from REFILL frames since it was loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelRefills {
    /// Valid REFILL frames from the switch (empty ones included).
    pub frames: u64,
    /// Tasks those frames carried: stored, overflowed, or bounced back as RETURN.
    pub tasks: u64,
}

/// Tasks kept in this process (userspace fallback without BPF): lost if the agent dies,
/// which is why the BPF maps are preferred whenever they can be created.
pub struct MemoryRings {
    rings: Vec<VecDeque<Entry>>,
    capacity: u32,
    hint: Tier2Hint,
}

impl MemoryRings {
    pub fn new(levels: u8, capacity: u32) -> MemoryRings {
        let levels = levels.clamp(1, RING_COUNT as u8) as usize;
        MemoryRings { rings: (0..levels).map(|_| VecDeque::new()).collect(), capacity, hint: Tier2Hint::default() }
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

    /// Tasks queued over all rings.
    pub fn total(&self) -> i64 {
        self.occupancy().iter().map(|&r| r.max(0)).sum()
    }

    /// Queues `entry` in its priority's ring (priorities past the levels in use go to the
    /// lowest ring). Returns the entry back when its ring is full, so the caller can
    /// RETURN it: a task is never dropped here.
    pub fn push(&mut self, entry: &Entry) -> anyhow::Result<Result<(), Entry>> {
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

    /// Takes the head of ring `prio` (1-based).
    pub fn pop(&mut self, prio: u8) -> anyhow::Result<Option<Entry>> {
        match self {
            Rings::Bpf(maps) => maps.pop(prio),
            Rings::Memory(m) => Ok(m.rings.get_mut((prio as usize).wrapping_sub(1)).and_then(|r| r.pop_front())),
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

    /// REFILL frames and tasks the XDP program has taken in (zero for memory rings, whose
    /// REFILLs all arrive at the agent's socket).
    pub fn kernel_refills(&self) -> anyhow::Result<KernelRefills> {
        match self {
            Rings::Bpf(maps) => {
                let c = maps.counters()?;
                Ok(KernelRefills {
                    frames: c.get(Counter::RefillFrames),
                    tasks: c.get(Counter::RefillTasks) + c.get(Counter::Overflow) + c.get(Counter::Bounced),
                })
            }
            Rings::Memory(_) => Ok(KernelRefills::default()),
        }
    }

    /// The first task, from ring `rtrv_prio` down to the lowest level in use, that an
    /// executor offering `exec_rsrc` can run: the XDP program's rule, for the userspace
    /// fallback. One pop per ring; a task that does not fit goes back to its ring's tail.
    /// A task that cannot go back (its ring filled meanwhile) is added to `unplaced` for
    /// the caller to RETURN.
    pub fn take_runnable(
        &mut self,
        rtrv_prio: u8,
        exec_rsrc: u8,
        unplaced: &mut Vec<Entry>,
    ) -> anyhow::Result<Option<Entry>> {
        for prio in rtrv_prio.max(1)..=self.levels() {
            let Some(entry) = self.pop(prio)? else { continue };
            if entry.task.runs_on(exec_rsrc) {
                return Ok(Some(entry));
            }
            if let Err(back) = self.push(&entry)? {
                unplaced.push(back);
            }
        }
        Ok(None)
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
    fn take_runnable_skips_what_the_executor_cannot_run_and_keeps_it() {
        let mut r = Rings::Memory(MemoryRings::new(4, 8));
        r.push(&entry(1, 1, 0b10)).unwrap().unwrap();
        r.push(&entry(2, 1, 0b01)).unwrap().unwrap();
        r.push(&entry(3, 3, 0b01)).unwrap().unwrap();
        let mut unplaced = Vec::new();
        // Ring 1's head needs 0b10: requeued; ring 3 serves.
        let got = r.take_runnable(1, 0b01, &mut unplaced).unwrap();
        assert_eq!(got.map(|e| e.task.tid()), Some(3));
        assert!(unplaced.is_empty());
        assert_eq!(r.occupancy()[0], 2);
        // Now ring 1's head is task 2 (task 1 went to the tail).
        assert_eq!(r.take_runnable(1, 0b01, &mut unplaced).unwrap().map(|e| e.task.tid()), Some(2));
        assert_eq!(r.take_runnable(2, 0b11, &mut unplaced).unwrap(), None);
        assert_eq!(r.take_runnable(1, 0b11, &mut unplaced).unwrap().map(|e| e.task.tid()), Some(1));
        assert_eq!(r.total(), 0);
    }
}
