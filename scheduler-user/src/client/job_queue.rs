//! BitMagic's job queue: resource inverted lists beside the state vectors, and the
//! selection queries over them. Every resource bit has one compressed vector of the task
//! ids that need it (R_r); a selection is set algebra on Pending and those vectors, so it
//! costs a few word operations per 2^16 ids whatever the number of tasks.
//!
//! - *Affinity* (the design's "Pending AND ResourceVector(s)"): Pending ∧ ⋁_{r ∈ agent} R_r,
//!   the tasks that need something the agent has.
//! - *Feasibility*: Pending ∧ ¬⋁_{r ∉ agent} R_r, the tasks that need nothing the agent
//!   lacks (what a Bolt executor may run: a task runs only where every bit it needs is
//!   offered).
//! - When affinity finds nothing, the design's greedy fallback: the first Pending task
//!   (the oldest id). (The design then associates the agent with that task's resources;
//!   the client keeps no per-agent state, so that part is left to whoever dispatches.)
//!
//! Ids are never reused and bits are never cleared from R_r: every query is intersected
//! with a state vector, so a finished task's resource bits cost a few compressed bytes
//! and no wrong answer.

use std::ops::Range;

use roaring::RoaringBitmap;

/// Resource bits of a task or an agent (scheduler-common's 8-bit resource bitmap).
pub const RESOURCE_BITS: usize = 8;

/// One roaring bitmap per resource bit: the tasks that need it.
#[derive(Clone, Debug, Default)]
pub struct ResourceIndex {
    needs: [RoaringBitmap; RESOURCE_BITS],
}

/// What [`ResourceIndex::select`] chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Up to k tasks with affinity to the agent, oldest first.
    Affinity(Vec<u32>),
    /// Nothing had affinity: the oldest Pending task, whatever it needs.
    FirstPending(u32),
    /// Nothing is Pending.
    Empty,
}

impl ResourceIndex {
    pub fn new() -> ResourceIndex {
        ResourceIndex::default()
    }

    /// Records that tasks `tids` need `resources`.
    pub fn register(&mut self, tids: Range<u32>, resources: u8) {
        for bit in bits(resources) {
            self.needs[bit].insert_range(tids.clone());
        }
    }

    /// The vector of tasks that need resource bit `bit` (0..8).
    pub fn needing(&self, bit: usize) -> &RoaringBitmap {
        &self.needs[bit]
    }

    /// Affinity: the tasks of `candidates` that need at least one resource the agent has.
    /// Each R_r is intersected with the candidates before the union, so the work follows
    /// the candidates (a recent id range), not the whole history R_r spans.
    pub fn affinity(&self, candidates: &RoaringBitmap, agent: u8) -> RoaringBitmap {
        bits(agent).fold(RoaringBitmap::new(), |acc, bit| acc | (&self.needs[bit] & candidates))
    }

    /// Feasibility: the tasks of `candidates` that need no resource the agent lacks
    /// (the candidates less each R_r the agent lacks, in place).
    pub fn feasible(&self, candidates: &RoaringBitmap, agent: u8) -> RoaringBitmap {
        bits(!agent).fold(candidates.clone(), |mut acc, bit| {
            acc -= &self.needs[bit];
            acc
        })
    }

    /// How many of `candidates` need resource bit `bit`, for every bit.
    pub fn count_per_resource(&self, candidates: &RoaringBitmap) -> [u64; RESOURCE_BITS] {
        std::array::from_fn(|bit| self.needs[bit].intersection_len(candidates))
    }

    /// The design's selection: up to `k` Pending tasks with affinity to `agent`, oldest
    /// first; when there are none, the first Pending task.
    ///
    /// The affinity query runs over windows of Pending from its oldest id, the first of
    /// 2^16 ids and each next one twice as wide, and stops once `k` are found: a small
    /// selection costs a few containers, not the whole Pending vector.
    pub fn select(&self, pending: &RoaringBitmap, agent: u8, k: usize) -> Selection {
        let (Some(first), Some(last)) = (pending.min(), pending.max()) else { return Selection::Empty };
        let mut chosen = Vec::new();
        let (mut lo, mut span) = (first as u64, 1u64 << 16);
        while lo <= last as u64 && chosen.len() < k {
            let hi = (lo + span).min(last as u64 + 1);
            let mut window = RoaringBitmap::new();
            window.insert_range(lo as u32..=(hi - 1) as u32);
            window &= pending;
            chosen.extend(self.affinity(&window, agent).iter().take(k - chosen.len()));
            (lo, span) = (hi, span * 2);
        }
        if chosen.is_empty() {
            Selection::FirstPending(first)
        } else {
            Selection::Affinity(chosen)
        }
    }

    /// Bytes the vectors take when serialized.
    pub fn serialized_bytes(&self) -> usize {
        self.needs.iter().map(|v| v.serialized_size()).sum()
    }
}

/// The indices of the bits set in `resources`.
fn bits(resources: u8) -> impl Iterator<Item = usize> {
    (0..RESOURCE_BITS).filter(move |&b| resources & (1 << b) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const APPLE: u8 = 0b01;
    const CHERRY: u8 = 0b10;

    /// The design's picture: jobs 6, 7, 8, 9 … 47 and 56; apple needed by 6, 8 and 56,
    /// cherry by 7 and 56, the others need neither.
    fn worked_example() -> (ResourceIndex, RoaringBitmap) {
        let mut index = ResourceIndex::new();
        index.register(6..7, APPLE);
        index.register(7..8, CHERRY);
        index.register(8..9, APPLE);
        index.register(56..57, APPLE | CHERRY);
        let pending: RoaringBitmap = (6..48).chain([56]).collect();
        (index, pending)
    }

    fn ids(v: &RoaringBitmap) -> Vec<u32> {
        v.iter().collect()
    }

    #[test]
    fn worked_example_affinity_gives_cherry_7_56_and_apple_6_8_56() {
        let (index, pending) = worked_example();
        assert_eq!(ids(&index.affinity(&pending, CHERRY)), [7, 56]);
        assert_eq!(ids(&index.affinity(&pending, APPLE)), [6, 8, 56]);
        assert_eq!(index.select(&pending, CHERRY, 16), Selection::Affinity(vec![7, 56]));
        assert_eq!(index.select(&pending, APPLE, 2), Selection::Affinity(vec![6, 8]));
    }

    #[test]
    fn worked_example_less_those_no_longer_pending() {
        let (index, mut pending) = worked_example();
        // 56 started running and 8 is done.
        pending.remove(56);
        pending.remove(8);
        assert_eq!(ids(&index.affinity(&pending, CHERRY)), [7]);
        assert_eq!(ids(&index.affinity(&pending, APPLE)), [6]);
        pending.remove(7);
        pending.remove(6);
        // No affinity left: the greedy fallback hands out the oldest Pending task.
        assert_eq!(index.select(&pending, APPLE, 16), Selection::FirstPending(9));
        assert_eq!(index.select(&RoaringBitmap::new(), APPLE, 16), Selection::Empty);
    }

    /// Selections that span several windows, and ids at the very top of the id space.
    #[test]
    fn selection_crosses_windows_in_id_order() {
        let mut index = ResourceIndex::new();
        let tids = [3, 70_000, 200_000, 1_000_000, u32::MAX - 1, u32::MAX];
        // Apple is bit 0; `register` takes half-open ranges, which cannot hold u32::MAX.
        index.needs[0].extend(tids);
        let pending: RoaringBitmap = (0..10).chain(tids).collect();
        assert_eq!(index.select(&pending, APPLE, 3), Selection::Affinity(vec![3, 70_000, 200_000]));
        assert_eq!(index.select(&pending, APPLE, 100), Selection::Affinity(tids.to_vec()));
        assert_eq!(index.select(&pending, CHERRY, 1), Selection::FirstPending(0));
    }

    #[test]
    fn feasibility_excludes_tasks_needing_what_the_agent_lacks() {
        let (index, pending) = worked_example();
        let neutral: Vec<u32> = (9..48).collect();
        // The cherry agent cannot run 6, 8 or 56 (they need apple).
        let cherry = ids(&index.feasible(&pending, CHERRY));
        assert_eq!(cherry, [7].into_iter().chain(neutral.iter().copied()).collect::<Vec<_>>());
        let apple = ids(&index.feasible(&pending, APPLE));
        assert_eq!(apple, [6, 8].into_iter().chain(neutral.iter().copied()).collect::<Vec<_>>());
        // An agent with both runs everything; one with neither only the neutral tasks.
        assert_eq!(index.feasible(&pending, APPLE | CHERRY), pending);
        assert_eq!(ids(&index.feasible(&pending, 0)), neutral);
    }

    #[test]
    fn counts_pending_per_resource() {
        let (index, pending) = worked_example();
        let counts = index.count_per_resource(&pending);
        assert_eq!(counts[0], 3);
        assert_eq!(counts[1], 2);
        assert!(counts[2..].iter().all(|&c| c == 0));
    }
}
