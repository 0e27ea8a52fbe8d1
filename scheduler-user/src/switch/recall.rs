//! RECALL: when an executor parks at tier 2 (it found nothing it can run anywhere on its
//! way), a task tier 2 REFILLed to another host a moment ago may still sit in that host's
//! rings behind its busy executors. Tier 2 asks that host's agent for one task back; the
//! agent RETURNs it and tier 2 hands it to the parked executor at once (parked executors
//! are served before parked REFILLs).
//!
//! This is what kept two-level's 10-ms tail in `bolt bench sw1` at 60 to 90 % load: a
//! REFILL took a burst's leftover tasks to one host while another host's executors, a
//! moment later, waited at tier 2 with nothing to run; the tasks waited for the first
//! host's executors, one task length. Work stealing reaches them only after the idle
//! host's REFILL_REQ has waited out its park time (10 ms).
//!
//! What bounds it: a RECALL goes only to a host REFILLed with tasks within the window
//! ([`RECALL_WINDOW`] unless configured; `bolt switch --recall-window-ms`), never to the
//! parked executor's own host (its rings were empty when its request passed them), and
//! tier 2 recalls no more tasks from a REFILL than that REFILL took into the host's
//! rings (its tasks less those for the executors its host said wait there, which go
//! straight to them), so recalls never exceed the tasks prefetched in the window. The
//! candidates are the last [`RECALL_CANDIDATES`] REFILLs, newest first: the newest is
//! the likeliest still to be in a ring.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long after a REFILL tier 2 may still recall its tasks by default: twice the park
/// time.
/// Tasks prefetched earlier have most likely been run; a RECALL to a host whose rings
/// are empty costs one datagram and is answered with nothing.
pub const RECALL_WINDOW: Duration = Duration::from_millis(20);

/// REFILLs remembered as recall candidates (newest kept): bounds the work per park.
pub const RECALL_CANDIDATES: usize = 64;

/// One REFILL with tasks: to which node, when, and how many of its tasks may still be
/// recalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Candidate {
    node: u16,
    at: Instant,
    left: u32,
}

/// Recent REFILLs and the choice of whom to recall from.
#[derive(Debug)]
pub struct Recalls {
    /// How long a REFILL stays a candidate; zero turns recall off.
    window: Duration,
    recent: VecDeque<Candidate>,
    /// RECALLs sent.
    pub sent: u64,
}

impl Recalls {
    pub fn new(window: Duration) -> Recalls {
        Recalls { window, recent: VecDeque::new(), sent: 0 }
    }

    /// Records a REFILL that took `tasks` tasks into `node`'s rings at `now`.
    pub fn refilled(&mut self, node: u16, tasks: u32, now: Instant) {
        if tasks == 0 || self.window.is_zero() {
            return;
        }
        if self.recent.len() == RECALL_CANDIDATES {
            self.recent.pop_front();
        }
        self.recent.push_back(Candidate { node, at: now, left: tasks });
    }

    /// An executor of `parked_node` parked at `now`: the node to recall one task from,
    /// among those `reachable` says tier 2 can address, if any. Takes one task off that
    /// REFILL's recallable count.
    pub fn recall_for(&mut self, parked_node: u16, now: Instant, reachable: impl Fn(u16) -> bool) -> Option<u16> {
        while self.recent.front().is_some_and(|c| now.saturating_duration_since(c.at) >= self.window) {
            self.recent.pop_front();
        }
        let i = self.recent.iter().rposition(|c| c.node != parked_node && c.left > 0 && reachable(c.node))?;
        let c = &mut self.recent[i];
        c.left -= 1;
        let node = c.node;
        if c.left == 0 {
            self.recent.remove(i);
        }
        self.sent += 1;
        Some(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_recall_goes_to_the_newest_refill_of_another_node_and_no_more_often_than_it_had_tasks() {
        let t0 = Instant::now();
        let mut r = Recalls::new(RECALL_WINDOW);
        r.refilled(1, 2, t0);
        r.refilled(2, 1, t0 + MS);
        r.refilled(3, 0, t0 + MS);
        assert_eq!(r.recall_for(2, t0 + 2 * MS, |_| true), Some(1), "never the parked executor's own node");
        assert_eq!(r.recall_for(3, t0 + 2 * MS, |_| true), Some(2), "the newest REFILL first");
        assert_eq!(r.recall_for(3, t0 + 2 * MS, |_| true), Some(1));
        assert_eq!(r.recall_for(3, t0 + 2 * MS, |_| true), None, "node 1 was sent two tasks: both recalled");
        assert_eq!(r.sent, 3);
        r.refilled(4, 1, t0 + 3 * MS);
        assert_eq!(r.recall_for(3, t0 + 3 * MS, |n| n != 4), None, "a node tier 2 cannot address is passed over");
        assert_eq!(r.sent, 3);
    }

    #[test]
    fn refills_older_than_the_window_are_not_recalled_from() {
        let t0 = Instant::now();
        let mut r = Recalls::new(RECALL_WINDOW);
        r.refilled(1, 4, t0);
        assert_eq!(r.recall_for(2, t0 + RECALL_WINDOW, |_| true), None);
        assert!(r.recent.is_empty());
        r.refilled(1, 1, t0 + RECALL_WINDOW);
        assert_eq!(r.recall_for(2, t0 + RECALL_WINDOW + MS, |_| true), Some(1));
    }

    #[test]
    fn the_candidates_are_bounded() {
        let t0 = Instant::now();
        let mut r = Recalls::new(RECALL_WINDOW);
        for node in 0..(RECALL_CANDIDATES as u16 + 10) {
            r.refilled(node, 1, t0);
        }
        assert_eq!(r.recent.len(), RECALL_CANDIDATES);
        assert_eq!(r.recent.front().map(|c| c.node), Some(10), "the oldest dropped");
    }

    #[test]
    fn a_zero_window_recalls_nothing() {
        let t0 = Instant::now();
        let mut r = Recalls::new(Duration::ZERO);
        r.refilled(1, 4, t0);
        assert_eq!(r.recall_for(2, t0, |_| true), None);
    }
}
