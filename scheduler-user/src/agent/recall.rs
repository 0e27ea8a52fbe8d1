//! RECALL from tier 2: an executor waits there with nothing to run while this host, sent
//! a REFILL a moment ago, may still hold its tasks behind busy executors
//! (switch/recall.rs). The agent gives back up to the asked number of ring heads the
//! waiting executor can run and that have waited here at least `RECALL_MIN_AGE_MS`,
//! highest priority first, as it gives a thief (`Rings::take_heads_where`), and RETURNs
//! them; tier 2 hands them to the parked executor. Never more than the host's RETURN
//! credit (what tier 2 REFILLed to it less what it RETURNed): tier 2 would refuse the rest.
//!
//! A host whose executors have taken no task for `QUIET_AFTER` gives heads of any age:
//! its executors are all busy (`policy::recall::Uptake`).
//!
//! A RECALL the rings cannot answer in full yet waits and is tried again
//! (`policy::recall::PendingRecalls`).

use scheduler_common::RefillRequest;

use super::policy::recall::recallable;
use super::rings::monotonic_ms;
use super::Agent;

impl Agent {
    /// A RECALL from the switch for `req.want` tasks `exec_rsrc` covers.
    pub(super) fn on_recall(&mut self, exec_rsrc: u8, req: RefillRequest) {
        self.recall_at(exec_rsrc, req, monotonic_ms());
    }

    /// `on_recall` at `now_ms` (the lease stamps' clock).
    pub(super) fn recall_at(&mut self, exec_rsrc: u8, req: RefillRequest, now_ms: u64) {
        self.stats.recalls += 1;
        if req.node() != self.cfg.node {
            self.stats.recall_other_node += 1;
            tracing::debug!(node = req.node(), "RECALL for another node ignored");
            return;
        }
        let quiet = self.quiet_now();
        let mut pending = std::mem::take(&mut self.pending_recalls);
        pending.recall(exec_rsrc, req.want, now_ms, |n, rsrc| self.recall_heads(n, rsrc, now_ms, quiet));
        self.stats.recalls_expired = pending.expired;
        self.pending_recalls = pending;
        tracing::trace!(node = self.cfg.node, want = req.want, waiting = self.pending_recalls.len(), "RECALL answered");
    }

    /// Tries the RECALLs still waiting again at `now_ms` (their heads may be old enough
    /// now).
    pub(super) fn retry_recalls(&mut self, now_ms: u64) {
        if self.pending_recalls.is_empty() {
            return;
        }
        let quiet = self.quiet_now();
        let mut pending = std::mem::take(&mut self.pending_recalls);
        pending.retry(now_ms, |n, rsrc| self.recall_heads(n, rsrc, now_ms, quiet));
        self.stats.recalls_expired = pending.expired;
        self.pending_recalls = pending;
    }

    /// Whether this host's executors have taken nothing for `QUIET_AFTER`, on a fresh
    /// read of the program's counters (not quiet if they cannot be read). A fresh read
    /// can only make the host busier than the last one said, so while that one says it
    /// is not quiet yet, the read (a system call) is spared: a RECALL waiting is retried
    /// on every turn of the agent's loop.
    fn quiet_now(&mut self) -> bool {
        let now = std::time::Instant::now();
        if self.uptake.quiet_at().is_some_and(|at| now < at) {
            return false;
        }
        match self.tier1.rings.kernel_counters() {
            Ok(counters) => {
                self.observe_uptake(now, &counters);
                self.uptake.quiet(now)
            }
            Err(_) => {
                self.stats.ring_errors += 1;
                false
            }
        }
    }

    /// RETURNs up to `n` ring heads `exec_rsrc` covers that may be recalled at `now_ms`
    /// (old enough, or any age on a `quiet` host), within the RETURN credit; says how
    /// many.
    fn recall_heads(&mut self, n: usize, exec_rsrc: u8, now_ms: u64, quiet: bool) -> usize {
        let n = n.min(self.return_credit() as usize);
        if n == 0 {
            return 0;
        }
        let mut unplaced = Vec::new();
        let take = |e: &scheduler_common::Entry| e.task.runs_on(exec_rsrc) && recallable(e.pad, now_ms, quiet);
        let back = self.tier1.rings.take_heads_where(n, take, &mut unplaced, &mut self.stats.ring_errors);
        let got = back.len();
        self.stats.recalled += got as u64;
        if got > 0 {
            tracing::trace!(node = self.cfg.node, got, "RECALLed tasks RETURNed");
        }
        for entry in back.into_iter().chain(unplaced) {
            self.returner.add(&self.sock, entry);
        }
        self.returner.flush(&self.sock);
        got
    }
}
