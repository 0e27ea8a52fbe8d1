//! A worker host's tier 1: the XDP program's per-priority FIFO rings (served from
//! RTRV_PRIO down), and the agent's policies, the project's own state machines:
//! [`RefillController`] (when and how much to ask tier 2), [`PrefetchSizer`] (Little's
//! law on the measured drain) and, for stealing, [`Stealer`].

use std::collections::VecDeque;

use scheduler_common::maps::{Tier2Hint, DEFAULT_LEASE_MS, RING_COUNT};
use scheduler_common::Entry;

use super::clock::Nanos;
use crate::agent::policy::hint::{HintReaction, DEFAULT_PERSIST};
use crate::agent::policy::lease::LeaseKeeper;
use crate::agent::policy::prefetch::PrefetchSizer;
use crate::agent::policy::recall::{PendingRecalls, Uptake};
use crate::agent::policy::steal::Stealer;
use crate::agent::refill::{Progress, RefillController};

pub struct Host {
    /// One FIFO per priority level, index 0 = priority 1.
    pub rings: Vec<VecDeque<Entry>>,
    pub refill: Option<RefillController>,
    pub sizer: Option<PrefetchSizer>,
    pub progress: Progress,
    /// Tasks served from each ring (the XDP hit counters).
    pub served: [u64; RING_COUNT],
    /// Tasks tier 2 handed this host's executors directly, per level (the program's
    /// `tier2_assign` counters).
    pub tier2_served: [u64; RING_COUNT],
    /// The last BEST read from a tier-2 answer or HINT, with the simulated time it was
    /// read (`RingStates::tier2_hint`).
    pub hint: Tier2Hint,
    /// GET_TASKs passed on to tier 2 by the bypass rule, and on a miss.
    pub bypasses: u64,
    pub misses: u64,
    pub refill_reqs: u64,
    pub hint_reaction: HintReaction,
    /// Tasks RETURNed by the hint reaction.
    pub hint_returned: u64,
    /// Tasks RETURNed in answer to tier 2's RECALLs, the RECALLs still waiting for ring
    /// heads old enough, and when they are tried again (`Nanos::MAX`: not scheduled).
    pub recalled: u64,
    pub pending_recalls: PendingRecalls,
    pub recall_retry: Nanos,
    /// When the executors last took a task, as the agent sees it.
    pub uptake: Uptake,
    pub lease: LeaseKeeper,
    /// Tasks RETURNed because their lease expired in a ring.
    pub lease_returned: u64,
    pub stealer: Option<Stealer<u32>>,
    /// Executors waiting for local work (MATRIX, Sparrow).
    pub idle: Vec<u32>,
    /// Two-level: executors whose GET_TASK found the rings empty, waiting at the host
    /// (docs/xdp.md, "Waiting at the host"), oldest first, with when the agent answers
    /// them NOOP.
    pub waiters: VecDeque<(u32, Nanos)>,
    /// Waiters answered with a task, and answered NOOP at the end of the host wait.
    pub waiters_served: u64,
    pub waiters_expired: u64,
    /// When a wake-up is scheduled (`Nanos::MAX`: none).
    pub wake: Nanos,
    /// Whether the answer to the last REFILL_REQ wakes the agent at its first frame: it
    /// announced no waiting executors (`REFILL_ARMED_WAKE`, docs/xdp.md, "Events").
    pub answer_wakes: bool,
}

impl Host {
    pub fn new(levels: u8) -> Host {
        Host {
            rings: (0..levels.max(1)).map(|_| VecDeque::new()).collect(),
            refill: None,
            sizer: None,
            progress: Progress::default(),
            served: [0; RING_COUNT],
            tier2_served: [0; RING_COUNT],
            hint: Tier2Hint::default(),
            bypasses: 0,
            misses: 0,
            refill_reqs: 0,
            hint_reaction: HintReaction::new(DEFAULT_PERSIST),
            hint_returned: 0,
            recalled: 0,
            pending_recalls: PendingRecalls::default(),
            uptake: Uptake::default(),
            recall_retry: Nanos::MAX,
            lease: LeaseKeeper::new(DEFAULT_LEASE_MS),
            lease_returned: 0,
            stealer: None,
            idle: Vec::new(),
            waiters: VecDeque::new(),
            waiters_served: 0,
            waiters_expired: 0,
            wake: Nanos::MAX,
            answer_wakes: true,
        }
    }

    /// The ring (0-based) of a priority: one past the levels goes to the lowest, as the
    /// XDP program clamps it.
    pub fn level_of(&self, prio: u8) -> usize {
        (prio.max(1) as usize - 1).min(self.rings.len() - 1)
    }

    /// Stores an entry in the ring of its priority.
    pub fn push(&mut self, entry: Entry) {
        let level = self.level_of(entry.task.prio);
        self.rings[level].push_back(entry);
    }

    /// Every task of each level this host's executors got, from the rings and from tier
    /// 2 directly: the drain the agent sizes its prefetch by.
    pub fn served_all(&self) -> [u64; RING_COUNT] {
        std::array::from_fn(|i| self.served[i] + self.tier2_served[i])
    }

    /// A GET_TASK with RTRV_PRIO 1: the head of the highest-priority non-empty ring.
    pub fn pop(&mut self) -> Option<Entry> {
        for (level, ring) in self.rings.iter_mut().enumerate() {
            if let Some(e) = ring.pop_front() {
                self.served[level] += 1;
                return Some(e);
            }
        }
        None
    }

    /// Up to `n` entries for a thief, from the lowest priority's tail (the work the host
    /// would run last).
    pub fn take_for_thief(rings: &mut [VecDeque<Entry>], n: usize) -> Vec<Entry> {
        let mut out = Vec::with_capacity(n);
        for ring in rings.iter_mut().rev() {
            while out.len() < n {
                match ring.pop_back() {
                    Some(e) => out.push(e),
                    None => break,
                }
            }
        }
        out
    }

    pub fn queued(&self) -> usize {
        self.rings.iter().map(|r| r.len()).sum()
    }

    pub fn occupancy(&self) -> [i64; RING_COUNT] {
        let mut o = [0; RING_COUNT];
        for (i, r) in self.rings.iter().enumerate() {
            o[i] = r.len() as i64;
        }
        o
    }
}
