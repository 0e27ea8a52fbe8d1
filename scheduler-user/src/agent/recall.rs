//! RECALL from tier 2: an executor waits there with nothing to run while this host, sent
//! a REFILL a moment ago, may still hold its tasks behind busy executors
//! (switch/recall.rs). The agent gives back up to the asked number of ring heads the
//! waiting executor can run, highest priority first, as it gives a thief
//! (`Rings::take_heads_for`), and RETURNs them; tier 2 hands them to the parked executor.
//! Never more than the host's RETURN credit (what tier 2 REFILLed to it less what it
//! RETURNed): tier 2 would refuse the rest.

use scheduler_common::RefillRequest;

use super::Agent;

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
        let back = self.tier1.rings.take_heads_for(exec_rsrc, n, &mut unplaced, &mut self.stats.ring_errors);
        self.stats.recalled += back.len() as u64;
        for entry in back.into_iter().chain(unplaced) {
            self.returner.add(&self.sock, entry);
        }
        self.returner.flush(&self.sock);
        tracing::trace!(want = req.want, "RECALL answered");
    }
}
