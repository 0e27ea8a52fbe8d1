//! Reaction to priority hints: while tier 2 holds higher-priority work than this node's
//! rings, the node should not sit on lower-priority prefetched tasks.
//!
//! The XDP program passes a GET_TASK on to tier 2 ("bypass") when tier 2's last hint names
//! a level that outranks every non-empty local ring the request would search. Single
//! bypasses are normal (a hint arrives, the next REFILL brings the level). When bypasses
//! keep happening for longer than `persist` while the rings hold tasks of lower priority
//! than the hinted level, the prefetch is stale: the agent RETURNs the lower-priority
//! tasks (they go to the tail of their level at tier 2) and its next REFILL brings the
//! higher level, which tier 2 serves first.
//!
//! The input is [`HintObservation`]: the program's cumulative bypass counter, the level
//! its last hint named, and the rings' occupancy.

use std::time::{Duration, Instant};

use scheduler_common::maps::RING_COUNT;

/// How long bypasses must go on before lower-priority prefetch is given back: a few
/// REFILL round trips, so that one answer in flight can fix it first.
pub const DEFAULT_PERSIST: Duration = Duration::from_millis(5);
/// Without a bypass for this long, the condition has ended.
pub const QUIET: Duration = Duration::from_millis(2);

/// What the agent reads for the hint reaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintObservation {
    /// GET_TASKs the XDP program passed to tier 2 because of a hint (cumulative).
    pub bypasses: u64,
    /// The level tier 2 last named as its best (1 = highest; 0: none).
    pub hinted_best: u8,
    /// Tasks per ring (index 0 = priority 1).
    pub occupancy: [i64; RING_COUNT],
}

/// Give back every prefetched task of a priority lower (a larger number) than `above`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReturnBelow {
    pub above: u8,
}

#[derive(Clone, Debug)]
pub struct HintReaction {
    persist: Duration,
    last_bypasses: Option<u64>,
    last_bypass_at: Option<Instant>,
    since: Option<Instant>,
    /// Times lower-priority prefetch was given back.
    pub reactions: u64,
}

impl HintReaction {
    pub fn new(persist: Duration) -> HintReaction {
        HintReaction { persist, last_bypasses: None, last_bypass_at: None, since: None, reactions: 0 }
    }

    /// Takes an observation; says when lower-priority prefetch should go back.
    pub fn observe(&mut self, now: Instant, obs: &HintObservation) -> Option<ReturnBelow> {
        let grew = self.last_bypasses.is_some_and(|b| obs.bypasses > b);
        self.last_bypasses = Some(obs.bypasses);
        if grew {
            self.last_bypass_at = Some(now);
        }
        let recent = self.last_bypass_at.is_some_and(|t| now.saturating_duration_since(t) < QUIET);
        let best = obs.hinted_best as usize;
        let holds_lower = best >= 1 && obs.occupancy.iter().skip(best).any(|&n| n > 0);
        if !(recent && holds_lower) {
            self.since = None;
            return None;
        }
        let since = *self.since.get_or_insert(now);
        if now.saturating_duration_since(since) < self.persist {
            return None;
        }
        self.since = None;
        self.reactions += 1;
        Some(ReturnBelow { above: obs.hinted_best })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(bypasses: u64, best: u8, occ: &[i64]) -> HintObservation {
        let mut occupancy = [0; RING_COUNT];
        occupancy[..occ.len()].copy_from_slice(occ);
        HintObservation { bypasses, hinted_best: best, occupancy }
    }

    #[test]
    fn persistent_bypasses_give_back_lower_priority_prefetch() {
        let mut h = HintReaction::new(Duration::from_millis(5));
        let t0 = Instant::now();
        assert_eq!(h.observe(t0, &obs(0, 1, &[0, 0, 8])), None);
        let mut fired = None;
        for ms in 1..=10u64 {
            let at = t0 + Duration::from_millis(ms);
            if let Some(r) = h.observe(at, &obs(ms, 1, &[0, 0, 8])) {
                fired = Some((ms, r));
                break;
            }
        }
        // First bypass at 1 ms, condition held for 5 ms.
        assert_eq!(fired, Some((6, ReturnBelow { above: 1 })));
        assert_eq!(h.reactions, 1);
    }

    #[test]
    fn a_single_bypass_or_no_lower_work_does_nothing() {
        let mut h = HintReaction::new(Duration::from_millis(5));
        let t0 = Instant::now();
        h.observe(t0, &obs(0, 2, &[0, 0, 4]));
        assert_eq!(h.observe(t0 + Duration::from_millis(1), &obs(1, 2, &[0, 0, 4])), None);
        // No further bypass: the condition ends after QUIET.
        for ms in 2..20 {
            assert_eq!(h.observe(t0 + Duration::from_millis(ms), &obs(1, 2, &[0, 0, 4])), None);
        }
        // Bypasses go on but the rings hold nothing below the hinted level.
        let mut h = HintReaction::new(Duration::from_millis(5));
        for ms in 0..20 {
            assert_eq!(h.observe(t0 + Duration::from_millis(ms), &obs(ms, 2, &[3, 1, 0])), None);
        }
        // No hint at all.
        let mut h = HintReaction::new(Duration::from_millis(5));
        for ms in 0..20 {
            assert_eq!(h.observe(t0 + Duration::from_millis(ms), &obs(ms, 0, &[0, 0, 9])), None);
        }
    }
}
