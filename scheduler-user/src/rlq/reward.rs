//! RLQ's rewards: minus the cost of a completed task under one objective per run.

use serde::{Deserialize, Serialize};

/// What a run minimises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Objective {
    /// Execution time (s).
    ExecTime,
    /// Execution time × the worker type's cost per second.
    ExecCost,
    /// Waiting time: submit → start (s).
    WaitTime,
}

impl Objective {
    pub const ALL: [Objective; 3] = [Objective::ExecTime, Objective::ExecCost, Objective::WaitTime];

    pub fn name(self) -> &'static str {
        match self {
            Objective::ExecTime => "exec-time",
            Objective::ExecCost => "exec-cost",
            Objective::WaitTime => "wait-time",
        }
    }

    /// The cost of one task under this objective.
    pub fn cost(self, outcome: &Outcome, cost_per_s: f64) -> f64 {
        match self {
            Objective::ExecTime => outcome.exec_s,
            Objective::ExecCost => outcome.exec_s * cost_per_s,
            Objective::WaitTime => outcome.wait_s,
        }
    }

    /// The reward: minus the cost.
    pub fn reward(self, outcome: &Outcome, cost_per_s: f64) -> f64 {
        -self.cost(outcome, cost_per_s)
    }
}

/// What a COMPLETE tells about a task, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// How long the handler ran.
    pub exec_s: f64,
    /// Submit → start (0 when the clocks disagree).
    pub wait_s: f64,
}

impl Outcome {
    /// From a COMPLETE's run time and start stamp and the client's first-send stamp.
    pub fn from_complete(run_ns: u32, start_unix_ns: u64, first_sent_unix_ns: u64) -> Outcome {
        Outcome { exec_s: run_ns as f64 / 1e9, wait_s: start_unix_ns.saturating_sub(first_sent_unix_ns) as f64 / 1e9 }
    }
}
