//! Per-CPU counters: one lookup per packet, then plain increments of this CPU's copy.

use scheduler_common::maps::{Counter, Counters};

use crate::maps::BOLT_COUNTERS;

pub struct Tally {
    counters: *mut Counters,
}

impl Tally {
    #[inline(always)]
    pub fn this_cpu() -> Option<Tally> {
        BOLT_COUNTERS.get_ptr_mut(0).map(|counters| Tally { counters })
    }

    #[inline(always)]
    pub fn add(&mut self, c: Counter) {
        self.add_n(c, 1);
    }

    #[inline(always)]
    pub fn add_n(&mut self, c: Counter, n: u64) {
        // SAFETY: the pointer came from a successful lookup of a per-CPU slot, which only
        // this CPU writes while the program runs (preemption is off in XDP).
        unsafe { (*self.counters).values[c as usize] += n };
    }

    /// Counts a hit on ring `prio` (1-based, checked by the caller).
    #[inline(always)]
    pub fn hit(&mut self, prio: u32) {
        let i = Counter::HitP1 as u32 + prio - 1;
        if (i as usize) < scheduler_common::maps::RING_COUNT {
            // SAFETY: as in `add_n`; the index is bounded just above.
            unsafe { (*self.counters).values[i as usize] += 1 };
        }
    }

    /// Counts an ASSIGN of a priority-`prio` task (1-based) from tier 2 to an executor.
    #[inline(always)]
    pub fn tier2_assign(&mut self, prio: u8) {
        // Widened before any arithmetic: a u8 wrap would be a mask the verifier cannot
        // relate back to `prio`, whose bound then does not cover the access.
        let level = prio as usize;
        if level == 0 || level > scheduler_common::maps::RING_COUNT {
            return;
        }
        // SAFETY: as in `add_n`; the index is below COUNTER_COUNT by the check above.
        unsafe { (*self.counters).values[Counter::Tier2AssignP1 as usize + level - 1] += 1 };
    }
}
