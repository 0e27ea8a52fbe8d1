//! Tasks queued at tier 2 per resource bit: what a provisioner reads to choose which
//! resource class of executor to start (CloudKon §II.C). A task counts under every bit
//! its bitmap sets (it waits for an executor holding all of them); a task that needs no
//! resource counts as unconstrained. A task counts from the pass that queues it (SUBMIT
//! or RETURN) to the pass that hands it out or sends it back to its client, so one held
//! by a SWAP search is still queued. bolt.p4 keeps the same nine registers, each touched
//! at most once per pass (p4/README.md, "Queued tasks per resource bit").

use serde::{Deserialize, Serialize};

/// Resource bits in a task's bitmap.
pub const RESOURCE_BITS: usize = 8;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResourceBacklog {
    /// Index r: queued tasks whose bitmap has bit r set.
    pub queued_by_resource: [u32; RESOURCE_BITS],
    /// Queued tasks whose bitmap is 0 (any executor runs them).
    pub queued_unconstrained: u32,
}

impl ResourceBacklog {
    /// A task with bitmap `rsrc` was queued.
    pub fn add(&mut self, rsrc: u8) {
        self.apply(rsrc, |n| n.wrapping_add(1));
    }

    /// A task with bitmap `rsrc` left the queue (to an executor, a host or its client).
    pub fn remove(&mut self, rsrc: u8) {
        self.apply(rsrc, |n| n.wrapping_sub(1));
    }

    fn apply(&mut self, rsrc: u8, step: impl Fn(u32) -> u32) {
        if rsrc == 0 {
            self.queued_unconstrained = step(self.queued_unconstrained);
            return;
        }
        for (bit, n) in self.queued_by_resource.iter_mut().enumerate() {
            if rsrc & (1 << bit) != 0 {
                *n = step(*n);
            }
        }
    }
}
