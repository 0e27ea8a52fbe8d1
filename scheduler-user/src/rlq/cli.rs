//! The flags that give a client a learned placement (`bolt submit --policy ...`).

use std::path::PathBuf;

use clap::Args;

use super::{parse_worker_type, DqnConfig, Objective, PolicyConfig, PolicyKind, WorkerType};
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

    /// Double DQN's hidden layers (the first as wide as the state, each next half as wide).
    #[arg(long, value_name = "N", default_value_t = DqnConfig::default().hidden_layers as u8,
          value_parser = clap::value_parser!(u8).range(1..=8))]
    pub dqn_hidden_layers: u8,

    /// Double DQN's Adam learning rate.
    #[arg(long, value_name = "LR", default_value_t = DqnConfig::default().learning_rate)]
    pub dqn_learning_rate: f64,

    /// Decisions over which Double DQN's ε falls from 0.65 to 0.01.
    #[arg(long, value_name = "N", default_value_t = DqnConfig::default().epsilon_steps)]
    pub dqn_epsilon_steps: u64,
}

impl PolicyArgs {
    /// The placement these flags ask for, if any.
    pub fn learned(&self) -> anyhow::Result<Option<LearnedPlacement>> {
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
        anyhow::ensure!(
            self.dqn_learning_rate.is_finite() && self.dqn_learning_rate > 0.0,
            "--dqn-learning-rate must be positive"
        );
        cfg.dqn.hidden_layers = self.dqn_hidden_layers as usize;
        cfg.dqn.learning_rate = self.dqn_learning_rate;
        cfg.dqn.epsilon_steps = self.dqn_epsilon_steps;
        LearnedPlacement::new(cfg, self.policy_state.clone()).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: PolicyArgs,
    }

    fn parse(argv: &[&str]) -> Result<PolicyArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("submit").chain(argv.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn the_flags_build_the_policy_or_are_refused() {
        assert!(parse(&[]).unwrap().learned().unwrap().is_none());
        let a = parse(&[
            "--policy",
            "double-dqn",
            "--worker-type",
            "0:0.5:1:2",
            "--worker-type",
            "4:2:5:1",
            "--classes",
            "3",
            "--objective",
            "wait-time",
            "--dqn-hidden-layers",
            "3",
            "--dqn-learning-rate",
            "0.01",
        ])
        .unwrap();
        let p = a.learned().unwrap().unwrap();
        let cfg = p.agent().config();
        assert_eq!(
            (cfg.kind, cfg.classes, cfg.types.len(), cfg.objective),
            (PolicyKind::DoubleDqn, 3, 2, Objective::WaitTime)
        );
        assert_eq!((cfg.dqn.hidden_layers, cfg.dqn.learning_rate), (3, 0.01));
        assert_eq!(cfg.types[1].resources(), 1 << 4);
        assert!(parse(&["--policy", "lin-ucb"]).unwrap().learned().is_err(), "a policy without types");
        assert!(parse(&["--worker-type", "0:1:1:1"]).unwrap().learned().is_err(), "types without a policy");
        assert!(parse(&["--policy", "lin-ucb", "--worker-type", "9:1:1:1"]).is_err());
        let bad_delta = parse(&["--policy", "lin-ucb", "--worker-type", "0:1:1:1", "--lin-ucb-delta", "3"]);
        assert!(bad_delta.unwrap().learned().is_err());
        assert!(parse(&["--policy", "bandit"]).is_err());
    }
}
