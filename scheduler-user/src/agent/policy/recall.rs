//! RECALL (tier 2 → agent): which ring heads may be called back, and the RECALLs that
//! wait until some may.
//!
//! A RECALL the rings cannot answer in full yet, because their heads arrived less than
//! [`RECALL_MIN_AGE_MS`] ago, waits ([`PendingRecalls`]) and is tried again each
//! millisecond for up to [`RECALL_HOLD_MS`]: tier 2 recalls at most as many tasks of a
//! REFILL as it carried, so a RECALL dropped for being early was one of those spent, and
//! the task it was for stayed behind busy executors for a whole task length (the
//! simulator's SW1 at 60 %, two-level: 3,061 RECALLs, none answered, p99 10.2 ms).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use scheduler_common::maps::lease_expired;

/// A task RECALL may take has waited in the rings at least this long (milliseconds of the
/// lease stamp, so between 1 and 2 ms for a task the agent stamped; the XDP program
/// stamps with the coarse clock, a tick behind at most, so 0 to 2 ms for the tasks it
/// stored: docs/agent.md, "The age is read on another clock than the program stamps
/// with"). A task that has just arrived is about to be
/// taken by this host's executors; called back, it would go to the tail of its level at
/// tier 2 and, when the executor it was called back for got another task first, into
/// the next host's REFILL and be called back from there again: with every executor of
/// the demo parking between tasks, priority-1 tasks went round that loop until their
/// median delay was ten times priority 2's.
pub const RECALL_MIN_AGE_MS: u16 = 2;

/// Whether a ring entry stamped `stamp` may be recalled at `now_ms`, on a host whose
/// executors have been `quiet` ([`Uptake::quiet`]) (one rule for the agent and the
/// simulator).
pub fn recallable(stamp: [u8; 2], now_ms: u64, quiet: bool) -> bool {
    quiet || lease_expired(stamp, now_ms, RECALL_MIN_AGE_MS)
}

/// How long a host's executors must have taken no task before its ring heads may be
/// recalled at any age: their tasks end in a wave (SW1's jobs start together, and end
/// together a task length later), a wave's executors free within a few hundred
/// microseconds of each other, and a head still there once they are all busy waits for
/// the next wave, milliseconds away. Young heads taken back sooner were about to be
/// taken here (the reason for [`RECALL_MIN_AGE_MS`]).
pub const QUIET_AFTER: Duration = Duration::from_micros(300);

/// When this host's executors last took a task, as far as the agent has seen: the
/// executors of a host that has taken nothing for [`QUIET_AFTER`] are all busy, and the
/// heads of its rings wait for one of them to finish however young they are. Time and
/// the count of tasks taken (every way: from the rings, from waiting, from tier 2) are
/// passed in.
#[derive(Clone, Copy, Debug)]
pub struct Uptake {
    quiet_after: Duration,
    taken: u64,
    changed_at: Option<Instant>,
}

impl Default for Uptake {
    fn default() -> Uptake {
        Uptake::new(QUIET_AFTER)
    }
}

impl Uptake {
    /// Quiet after `quiet_after` without a task taken ([`QUIET_AFTER`] by default).
    pub fn new(quiet_after: Duration) -> Uptake {
        Uptake { quiet_after, taken: 0, changed_at: None }
    }

    /// The executors have taken `taken` tasks in all, as read at `now`.
    pub fn observe(&mut self, now: Instant, taken: u64) {
        if self.changed_at.is_none() || taken != self.taken {
            self.taken = taken;
            self.changed_at = Some(now);
        }
    }

    /// True when nothing was taken for the quiet time before `now`.
    pub fn quiet(&self, now: Instant) -> bool {
        self.quiet_at().is_some_and(|at| now >= at)
    }

    /// When the host turns quiet if its executors take nothing more.
    pub fn quiet_at(&self) -> Option<Instant> {
        self.changed_at.map(|t| t + self.quiet_after)
    }
}

/// How long a RECALL waits for ring heads to become old enough, ms: enough for a head
/// that arrived just before the RECALL to reach [`RECALL_MIN_AGE_MS`] (stamps count whole
/// milliseconds: two retries). With 2, SW1's 10-ms tail stays in the simulator; longer
/// holds call back more tasks where the pipeline is the bound (docs/benchmarks.md,
/// "RECALLs that wait").
pub const RECALL_HOLD_MS: u64 = 3;

/// At most this many RECALLs wait; a newer one pushes out the oldest.
pub const MAX_PENDING_RECALLS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PendingRecall {
    exec_rsrc: u8,
    want: u8,
    until_ms: u64,
}

/// RECALLs not yet answered in full: the state machine the agent and the simulator both
/// run. Time (`now_ms`, the lease stamps' clock) and the rings (`take`) are passed in:
/// `take(n, exec_rsrc)` gives back up to `n` recallable ring heads `exec_rsrc` covers
/// and says how many it gave.
#[derive(Debug, Default)]
pub struct PendingRecalls {
    waiting: VecDeque<PendingRecall>,
    /// RECALLs dropped unanswered: past their hold, or pushed out.
    pub expired: u64,
}

impl PendingRecalls {
    /// A RECALL for `want` tasks arriving at `now_ms`: asks `take` at once; what it could
    /// not give waits. Returns the tasks taken.
    pub fn recall(&mut self, exec_rsrc: u8, want: u8, now_ms: u64, mut take: impl FnMut(usize, u8) -> usize) -> usize {
        let got = take(want as usize, exec_rsrc).min(want as usize);
        let left = want - got as u8;
        if left > 0 {
            if self.waiting.len() == MAX_PENDING_RECALLS {
                self.waiting.pop_front();
                self.expired += 1;
            }
            self.waiting.push_back(PendingRecall { exec_rsrc, want: left, until_ms: now_ms + RECALL_HOLD_MS });
        }
        got
    }

    /// Asks `take` again for every waiting RECALL, oldest first, dropping those past
    /// their hold. Returns the tasks taken.
    pub fn retry(&mut self, now_ms: u64, mut take: impl FnMut(usize, u8) -> usize) -> usize {
        let before = self.waiting.len();
        self.waiting.retain(|p| p.until_ms > now_ms);
        self.expired += (before - self.waiting.len()) as u64;
        let mut taken = 0;
        for p in self.waiting.iter_mut() {
            let got = take(p.want as usize, p.exec_rsrc).min(p.want as usize);
            p.want -= got as u8;
            taken += got;
        }
        self.waiting.retain(|p| p.want > 0);
        taken
    }

    /// When to retry next: ring stamps age in whole milliseconds, so one from now while
    /// any RECALL waits.
    pub fn next_retry_ms(&self, now_ms: u64) -> Option<u64> {
        (!self.waiting.is_empty()).then_some(now_ms + 1)
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::maps::ring_stamp;

    /// A ring of lease stamps; `take` gives heads old enough at `now_ms`.
    fn taker(ring: &mut Vec<[u8; 2]>, now_ms: u64) -> impl FnMut(usize, u8) -> usize + '_ {
        move |n, _| {
            let k = ring.iter().take(n).take_while(|s| recallable(**s, now_ms, false)).count();
            ring.drain(..k);
            k
        }
    }

    #[test]
    fn a_recall_too_early_waits_and_is_answered_once_its_heads_are_old_enough() {
        let mut ring = vec![ring_stamp(100), ring_stamp(100), ring_stamp(101)];
        let mut p = PendingRecalls::default();
        assert_eq!(p.recall(0, 2, 100, taker(&mut ring, 100)), 0, "nothing is 2 ms old");
        assert_eq!((p.len(), p.next_retry_ms(100)), (1, Some(101)));
        assert_eq!(p.retry(101, taker(&mut ring, 101)), 0);
        assert_eq!(p.retry(102, taker(&mut ring, 102)), 2, "both heads stamped at 100 may go");
        assert!(p.is_empty() && p.next_retry_ms(102).is_none(), "answered in full, nothing waits");
        assert_eq!((ring.len(), p.expired), (1, 0));
    }

    #[test]
    fn a_recall_answered_in_part_waits_for_the_rest_until_its_hold_ends() {
        let mut ring = vec![ring_stamp(0), ring_stamp(50)];
        let mut p = PendingRecalls::default();
        assert_eq!(p.recall(0, 3, 50, taker(&mut ring, 50)), 1);
        assert_eq!(p.retry(52, taker(&mut ring, 52)), 1, "the second head has aged");
        assert_eq!(p.len(), 1, "one task still wanted");
        assert_eq!(p.retry(50 + RECALL_HOLD_MS - 1, taker(&mut ring, 59)), 0);
        assert_eq!(p.retry(50 + RECALL_HOLD_MS, taker(&mut ring, 60)), 0);
        assert!(p.is_empty(), "dropped at the end of its hold");
        assert_eq!(p.expired, 1);
    }

    #[test]
    fn a_host_whose_executors_took_nothing_for_a_while_gives_up_young_heads() {
        let t0 = Instant::now();
        let mut u = Uptake::default();
        assert!(!u.quiet(t0) && u.quiet_at().is_none(), "nothing seen yet: not quiet");
        u.observe(t0, 10);
        let young = ring_stamp(100);
        assert!(!recallable(young, 100, u.quiet(t0 + QUIET_AFTER / 2)), "taking tasks a moment ago");
        u.observe(t0 + QUIET_AFTER / 2, 10);
        assert_eq!(u.quiet_at(), Some(t0 + QUIET_AFTER), "an unchanged count does not restart the clock");
        assert!(recallable(young, 100, u.quiet(t0 + QUIET_AFTER)));
        u.observe(t0 + QUIET_AFTER, 11);
        assert!(!u.quiet(t0 + QUIET_AFTER), "one more taken: busy freeing again");
        assert!(recallable(young, 102, false), "old enough whatever the executors do");
    }

    #[test]
    fn waiting_recalls_are_bounded_and_the_oldest_gives_way() {
        let mut p = PendingRecalls::default();
        for i in 0..MAX_PENDING_RECALLS as u64 + 3 {
            p.recall(0, 1, i, |_, _| 0);
        }
        assert_eq!((p.len(), p.expired), (MAX_PENDING_RECALLS, 3));
        // The oldest left waits since 3: it ends at 3 + RECALL_HOLD_MS.
        p.retry(3 + RECALL_HOLD_MS, |_, _| 0);
        assert_eq!((p.len(), p.expired), (MAX_PENDING_RECALLS - 1, 4));
    }
}
