//! RECALL from tier 2: an executor waits there with nothing to run while this host, sent
//! a REFILL a moment ago, may still hold its tasks behind busy executors
//! (switch/recall.rs). The agent gives back up to the asked number of ring heads the
//! waiting executor can run and that have waited here at least [`RECALL_MIN_AGE_MS`],
//! highest priority first, as it gives a thief (`Rings::take_heads_where`), and RETURNs
//! them; tier 2 hands them to the parked executor. Never more than the host's RETURN
//! credit (what tier 2 REFILLed to it less what it RETURNed): tier 2 would refuse the rest.

use scheduler_common::{maps::lease_expired, RefillRequest};

use super::rings::monotonic_ms;
use super::Agent;

/// A task RECALL may take has waited in the rings at least this long (milliseconds of the
/// lease stamp, so between 1 and 2 ms). A task that has just arrived is about to be
/// taken by this host's executors; called back, it would go to the tail of its level at
/// tier 2 and, when the executor it was called back for got another task first, into
/// the next host's REFILL and be called back from there again: with every executor of
/// the demo parking between tasks, priority-1 tasks went round that loop until their
/// median delay was ten times priority 2's.
pub const RECALL_MIN_AGE_MS: u16 = 2;

/// Whether a ring entry stamped `stamp` may be recalled at `now_ms` (one rule for the
/// agent and the simulator).
pub fn recallable(stamp: [u8; 2], now_ms: u64) -> bool {
    lease_expired(stamp, now_ms, RECALL_MIN_AGE_MS)
}

impl Agent {
    /// A RECALL from the switch for `req.want` tasks `exec_rsrc` covers.
    pub(super) fn on_recall(&mut self, exec_rsrc: u8, req: RefillRequest) {
        self.stats.recalls += 1;
        if req.node() != self.cfg.node {
            self.stats.recall_other_node += 1;
            tracing::debug!(node = req.node(), "RECALL for another node ignored");
            return;
        }
        let n = (req.want as u64).min(self.return_credit()) as usize;
        if n == 0 {
            return;
        }
        let mut unplaced = Vec::new();
        let now_ms = monotonic_ms();
        let take = |e: &scheduler_common::Entry| e.task.runs_on(exec_rsrc) && recallable(e.pad, now_ms);
        let back = self.tier1.rings.take_heads_where(n, take, &mut unplaced, &mut self.stats.ring_errors);
        self.stats.recalled += back.len() as u64;
        for entry in back.into_iter().chain(unplaced) {
            self.returner.add(&self.sock, entry);
        }
        self.returner.flush(&self.sock);
        tracing::trace!(want = req.want, "RECALL answered");
    }
}
