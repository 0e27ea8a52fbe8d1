//! What `bolt top` shows: filled by the live collectors, drawn by the view.

use serde::Serialize;

/// How many decisions/s samples the sparkline keeps.
pub const HISTORY: usize = 120;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TopModel {
    /// Seconds between refreshes.
    pub interval_s: f64,
    /// The switch, when its endpoint answered.
    pub switch: Option<SwitchView>,
    /// Why the switch could not be read (None when it was, or is not asked for).
    pub switch_error: Option<String>,
    /// The switch's decisions per second, oldest first, at most [`HISTORY`].
    pub decisions_history: Vec<u64>,
    /// Scheduling delay seen by a client (`bolt submit --metrics`), when watched.
    pub client: Option<ClientView>,
    pub client_error: Option<String>,
    /// Nodes whose rings are pinned on this host (a testbed's hosts share the bpffs).
    pub nodes: Vec<NodeView>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SwitchView {
    pub endpoint: String,
    /// Tasks queued per priority (index 0 = priority 1).
    pub depth: Vec<u64>,
    pub capacity: u64,
    pub decisions_per_s: f64,
    pub received_per_s: f64,
    pub refill_tasks_per_s: f64,
    pub queue_full_tasks: u64,
}

/// A client's running summary: submit → executor start, since the client started.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ClientView {
    pub endpoint: String,
    pub p50_sched_delay_us: f64,
    pub p99_sched_delay_us: f64,
    pub completed: u64,
    pub submitted: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct NodeView {
    pub pin_name: String,
    pub node: u16,
    /// Per priority: tasks queued (reserved slots) and capacity.
    pub rings: Vec<(i64, u32)>,
    /// XDP hits over GET_TASK seen in the last interval.
    pub hit_ratio: Option<f64>,
    pub hits_per_s: f64,
    pub misses_per_s: f64,
}

impl TopModel {
    /// Appends a decisions/s sample, dropping the oldest beyond [`HISTORY`].
    pub fn push_decisions(&mut self, per_s: f64) {
        self.decisions_history.push(per_s.max(0.0).round() as u64);
        if self.decisions_history.len() > HISTORY {
            self.decisions_history.remove(0);
        }
    }
}
