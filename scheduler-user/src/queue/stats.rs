//! What the pipeline counts. Plain integers: the pipeline is owned by one thread; the
//! switch publishes snapshots.

use scheduler_common::Op;
use serde::Serialize;

/// External operations the switch accepts, in the order their counters are kept.
pub const ORIGINS: [Op; 5] = [Op::Submit, Op::GetTask, Op::RefillReq, Op::Return, Op::GetBundle];

pub fn origin_index(op: Op) -> usize {
    match op {
        Op::Submit => 0,
        Op::GetTask => 1,
        Op::RefillReq => 2,
        Op::GetBundle => 4,
        _ => 3,
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct OpCost {
    /// External packets of this op.
    pub packets: u64,
    /// Pipeline passes, the first one included.
    pub passes: u64,
    /// Passes after the first: recirculations and spawned REPAIR packets.
    pub recirculations: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct QueueStats {
    /// Per external op (SUBMIT, GET_TASK, REFILL_REQ, RETURN, GET_BUNDLE): packets, passes,
    /// recirculations.
    pub cost: [OpCost; ORIGINS.len()],
    /// Tasks enqueued (SUBMIT, RETURN and reinsertion after a failed SWAP search).
    pub enqueued: u64,
    /// Scheduling decisions: tasks handed to an executor (ASSIGN) or a host (REFILL).
    pub decisions: u64,
    /// ASSIGN packets (a bundle's counts once).
    pub assigns: u64,
    pub noops: u64,
    /// ASSIGNs answering a GET_BUNDLE, and the tasks they listed.
    pub bundles: u64,
    pub bundled_tasks: u64,
    /// Tasks sent back to their client in QUEUE_FULL.
    pub queue_full_tasks: u64,
    pub queue_full_packets: u64,
    /// Enqueues refused because add_ptr pointed at a slot still holding a task.
    pub slot_occupied: u64,
    pub swaps: u64,
    pub reinserts: u64,
    pub repairs_add: u64,
    pub repairs_retrieve: u64,
    /// Retrievals that ran out of passes before finding a match.
    pub budget_exhausted: u64,
    pub refill_tasks: u64,
    pub refill_packets: u64,
    pub returned_tasks: u64,
    /// Task priorities above the configured levels, queued at the lowest level.
    pub priority_clamped: u64,
}

impl QueueStats {
    pub fn cost_of(&self, op: Op) -> &OpCost {
        &self.cost[origin_index(op)]
    }

    /// Recirculations per task scheduled, over every op.
    pub fn recirculations_per_decision(&self) -> f64 {
        let r: u64 = self.cost.iter().map(|c| c.recirculations).sum();
        if self.decisions == 0 {
            0.0
        } else {
            r as f64 / self.decisions as f64
        }
    }
}
