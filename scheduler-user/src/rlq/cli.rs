//! The flags that give a client a learned placement (`bolt submit --policy ...`).

use std::path::PathBuf;

use clap::Args;

use super::{parse_worker_type, Objective, PolicyConfig, PolicyKind, WorkerType};
use crate::client::learned::LearnedPlacement;

/// Flags of learned placement.
#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Pick each task's worker type with this policy and ask for that type's resource
    /// bit (RLQ; docs/rlq.md). Needs --worker-type.
    #[arg(long, value_name = "POLICY", value_enum)]
    pub policy: Option<PolicyKind>,

    /// A worker type as BIT:SPEED:COST:REPLICAS (resource bit 0..8, speed factor, cost
    /// per second, executors); repeat once per type, in the order of the policy's arms.
    #[arg(long = "worker-type", value_name = "BIT:SPEED:COST:REPLICAS", value_parser = parse_worker_type)]
    pub worker_types: Vec<WorkerType>,

    /// Task classes the policy tells apart (classes 0..N).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub classes: u16,

    /// What the policy's rewards minimise.
    #[arg(long, value_name = "OBJECTIVE", value_enum, default_value = "exec-time")]
    pub objective: Objective,

    /// Read the policy's learned state from FILE if it exists, and write it back at the end.
    #[arg(long, value_name = "FILE")]
    pub policy_state: Option<PathBuf>,

    /// Seed of the policy's random choices.
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub policy_seed: u64,

    /// Multiply rewards by this (tasks k times shorter than the policy's design scale
    /// pass k, so rewards keep their proportion to LinUCB's confidence widths).
    #[arg(long, value_name = "K", default_value_t = 1.0)]
    pub reward_scale: f64,

    /// LinUCB's δ in (0, 2]: α = 1 + √(ln(2/δ)/2).
    #[arg(long, value_name = "DELTA", default_value_t = 2.0)]
    pub lin_ucb_delta: f64,
}

impl PolicyArgs {
    /// The placement these flags ask for, if any.
    pub fn placement(&self) -> anyhow::Result<Option<LearnedPlacement>> {
        let Some(kind) = self.policy else {
            anyhow::ensure!(
                self.worker_types.is_empty() && self.policy_state.is_none(),
                "--worker-type and --policy-state need --policy"
            );
            return Ok(None);
        };
        anyhow::ensure!(!self.worker_types.is_empty(), "--policy needs at least one --worker-type");
        let mut cfg = PolicyConfig::new(kind, self.classes as usize, self.worker_types.clone(), self.objective);
        cfg.seed = self.policy_seed;
        cfg.delta = self.lin_ucb_delta;
        cfg.reward_scale = self.reward_scale;
        LearnedPlacement::new(cfg, self.policy_state.clone()).map(Some)
    }
}
