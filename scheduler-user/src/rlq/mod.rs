//! RLQ: learned allocation of task classes to worker types (docs/rlq.md).
//!
//! A worker type is a set of executors offering one resource bit, with a speed and a
//! cost per second. For each task the client's [`Agent`] picks a type from the task's
//! class and the per-type load, and the task asks for that type's resource bit, so the
//! data plane does the placement with no round trip to a broker. Each COMPLETE gives the
//! delayed reward of its decision (minus execution time, cost or waiting time).
//!
//! Policies are plain state machines: randomness comes in as an RNG and time as the
//! [`Outcome`] of a task, so a simulator can run them as well as the client.

mod baselines;
mod cli;
mod dqn;
mod linucb;
mod reward;
mod state;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, ensure, Context};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

pub use baselines::{EpvmPolicy, RandomPolicy, RoundRobinPolicy, EPVM_BASE};
pub use cli::PolicyArgs;
pub use dqn::{hidden_widths, DoubleDqnPolicy, DqnConfig, NamedWeights, Transition};
pub use linucb::{alpha_from_delta, LinUcbPolicy};
pub use reward::{Objective, Outcome};
pub use state::{Observation, TypeLoad};

/// The policies, by their `--policy` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    Random,
    /// Each type in turn (RLQ's "LRU").
    RoundRobin,
    Epvm,
    LinUcb,
    DoubleDqn,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 5] =
        [PolicyKind::Random, PolicyKind::RoundRobin, PolicyKind::Epvm, PolicyKind::LinUcb, PolicyKind::DoubleDqn];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Random => "random",
            PolicyKind::RoundRobin => "round-robin",
            PolicyKind::Epvm => "epvm",
            PolicyKind::LinUcb => "lin-ucb",
            PolicyKind::DoubleDqn => "double-dqn",
        }
    }
}

/// One worker type: the resource bit its executors offer, how fast they run a task
/// relative to speed 1, what a second of their time costs, and how many there are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerType {
    /// Index of the resource bit (0..8).
    pub bit: u8,
    pub speed: f64,
    pub cost_per_s: f64,
    pub replicas: u32,
}

impl WorkerType {
    /// The resource bitmap a task for this type asks for.
    pub fn resources(&self) -> u8 {
        1 << self.bit
    }
}

/// Parses `BIT:SPEED:COST:REPLICAS`, for example `0:1.0:3.22:2`.
pub fn parse_worker_type(s: &str) -> Result<WorkerType, String> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    let [bit, speed, cost, replicas] = parts.as_slice() else {
        return Err(format!("{s:?}: expected BIT:SPEED:COST:REPLICAS"));
    };
    let bit: u8 = bit.parse().map_err(|e| format!("bit {bit:?}: {e}"))?;
    let speed: f64 = speed.parse().map_err(|e| format!("speed {speed:?}: {e}"))?;
    let cost_per_s: f64 = cost.parse().map_err(|e| format!("cost {cost:?}: {e}"))?;
    let replicas: u32 = replicas.parse().map_err(|e| format!("replicas {replicas:?}: {e}"))?;
    if bit >= 8 {
        return Err(format!("bit {bit} is outside 0..8"));
    }
    if !(speed.is_finite() && speed > 0.0) {
        return Err(format!("speed {speed} must be positive"));
    }
    if !(cost_per_s.is_finite() && cost_per_s >= 0.0) {
        return Err(format!("cost {cost_per_s} must be non-negative"));
    }
    Ok(WorkerType { bit, speed, cost_per_s, replicas })
}

/// What a policy learns from: the decision's observation and action, its reward, and
/// the observation at the next decision (RLQ's s′).
#[derive(Clone, Debug, PartialEq)]
pub struct Experience {
    pub observation: Observation,
    pub action: usize,
    pub reward: f64,
    pub outcome: Outcome,
    pub next: Observation,
}

/// One interface for every policy: choose a type for an observation, learn from the
/// delayed reward of an earlier choice.
pub trait Policy: Send {
    fn kind(&self) -> PolicyKind;
    fn choose(&mut self, obs: &Observation, rng: &mut StdRng) -> usize;
    fn observe(&mut self, e: &Experience, rng: &mut StdRng) -> anyhow::Result<()>;
    fn save(&self) -> anyhow::Result<serde_json::Value>;
    fn load(&mut self, v: serde_json::Value) -> anyhow::Result<()>;
}

/// How to build a policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    pub kind: PolicyKind,
    pub classes: usize,
    pub types: Vec<WorkerType>,
    pub objective: Objective,
    /// LinUCB's δ (RLQ's Table 2: 2 or 1).
    pub delta: f64,
    pub dqn: DqnConfig,
    pub seed: u64,
    /// Rewards are multiplied by this: a run whose tasks are k times shorter than RLQ's
    /// passes k so the rewards (and LinUCB's confidence widths against them) keep RLQ's
    /// proportions.
    pub reward_scale: f64,
}

impl PolicyConfig {
    pub fn new(kind: PolicyKind, classes: usize, types: Vec<WorkerType>, objective: Objective) -> PolicyConfig {
        PolicyConfig {
            kind,
            classes,
            types,
            objective,
            delta: 2.0,
            dqn: DqnConfig::default(),
            seed: 0,
            reward_scale: 1.0,
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        ensure!(self.classes > 0, "at least one class");
        ensure!(!self.types.is_empty(), "at least one worker type");
        ensure!(self.delta > 0.0 && self.delta <= 2.0, "LinUCB's δ {} is outside (0, 2]", self.delta);
        ensure!(self.reward_scale.is_finite() && self.reward_scale > 0.0, "the reward scale must be positive");
        Ok(())
    }
}

/// Builds the policy `cfg` names.
pub fn make_policy(cfg: &PolicyConfig, rng: &mut StdRng) -> anyhow::Result<Box<dyn Policy>> {
    cfg.validate()?;
    let n = cfg.types.len();
    Ok(match cfg.kind {
        PolicyKind::Random => Box::new(RandomPolicy::new(n)),
        PolicyKind::RoundRobin => Box::new(RoundRobinPolicy::new(n)),
        PolicyKind::Epvm => Box::new(EpvmPolicy::new(cfg.classes, cfg.types.iter().map(|t| t.replicas).collect())),
        PolicyKind::LinUcb => Box::new(LinUcbPolicy::new(cfg.classes, n, cfg.delta)),
        PolicyKind::DoubleDqn => Box::new(DoubleDqnPolicy::new(cfg.classes, n, cfg.dqn.clone(), rng)?),
    })
}

/// A decision the agent made: its id (to report the outcome under) and the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub id: u64,
    pub ty: usize,
}

struct Pending {
    observation: Observation,
    action: usize,
    next: Option<Observation>,
    outcome: Option<(f64, Outcome)>,
}

/// The agent's counters, exported on the client's /metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AgentStats {
    pub decisions: u64,
    pub decisions_per_type: Vec<u64>,
    /// Decisions the policy made (not recorded from elsewhere, as a bootstrap's).
    pub choices: u64,
    pub rewards: u64,
    pub reward_sum: f64,
    /// Decisions forgotten (their task failed, or too many were outstanding).
    pub forgotten: u64,
    pub update_errors: u64,
    /// Time the policy spent choosing and learning, ns.
    pub decide_ns: u64,
    pub update_ns: u64,
    pub updates: u64,
}

impl AgentStats {
    pub fn mean_decide_us(&self) -> f64 {
        self.decide_ns as f64 / 1e3 / self.choices.max(1) as f64
    }

    pub fn mean_update_us(&self) -> f64 {
        self.update_ns as f64 / 1e3 / self.updates.max(1) as f64
    }
}

/// Most decisions awaiting their reward; older ones are forgotten past this.
const MAX_PENDING: usize = 1 << 20;

/// A policy with its bookkeeping: the per-type load, decisions awaiting their reward
/// and next observation, the RNG and the counters.
pub struct Agent {
    cfg: PolicyConfig,
    policy: Box<dyn Policy>,
    load: TypeLoad,
    rng: StdRng,
    pending: HashMap<u64, Pending>,
    order: VecDeque<u64>,
    last: Option<u64>,
    next_id: u64,
    stats: AgentStats,
}

/// What `--policy-state` files hold.
#[derive(Serialize, Deserialize)]
struct SavedAgent {
    kind: PolicyKind,
    classes: usize,
    types: usize,
    policy: serde_json::Value,
}

impl Agent {
    pub fn new(cfg: PolicyConfig) -> anyhow::Result<Agent> {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let policy = make_policy(&cfg, &mut rng)?;
        let types = cfg.types.len();
        Ok(Agent {
            load: TypeLoad::new(types),
            policy,
            rng,
            pending: HashMap::new(),
            order: VecDeque::new(),
            last: None,
            next_id: 0,
            stats: AgentStats { decisions_per_type: vec![0; types], ..AgentStats::default() },
            cfg,
        })
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.cfg
    }

    pub fn load(&self) -> &TypeLoad {
        &self.load
    }

    pub fn stats(&self) -> &AgentStats {
        &self.stats
    }

    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// Chooses a type for a task of `class`. The observation becomes the next state of
    /// the previous decision.
    pub fn decide(&mut self, class: usize) -> anyhow::Result<Decision> {
        self.record_decision(class, None)
    }

    /// Records a decision made elsewhere (RLQ's bootstrap of random placement): the
    /// task goes to `ty`, and the policy learns from it as from its own.
    pub fn decide_as(&mut self, class: usize, ty: usize) -> anyhow::Result<Decision> {
        ensure!(ty < self.cfg.types.len(), "type {ty} is outside 0..{}", self.cfg.types.len());
        self.record_decision(class, Some(ty))
    }

    fn record_decision(&mut self, class: usize, forced: Option<usize>) -> anyhow::Result<Decision> {
        let observation = Observation::new(class, self.cfg.classes, &self.load)?;
        if let Some(prev) = self.last.take() {
            if let Some(p) = self.pending.get_mut(&prev) {
                p.next = Some(observation.clone());
            }
            self.try_learn(prev);
        }
        let ty = match forced {
            Some(ty) => ty,
            None => {
                let started = Instant::now();
                let ty = self.policy.choose(&observation, &mut self.rng);
                self.stats.choices += 1;
                self.stats.decide_ns += started.elapsed().as_nanos() as u64;
                ty
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        self.load.sent(ty);
        self.pending.insert(id, Pending { observation, action: ty, next: None, outcome: None });
        self.order.push_back(id);
        self.last = Some(id);
        self.stats.decisions += 1;
        self.stats.decisions_per_type[ty] += 1;
        self.bound_pending();
        Ok(Decision { id, ty })
    }

    /// The task of decision `id` completed with `outcome`; returns its reward.
    pub fn complete(&mut self, id: u64, outcome: Outcome) -> Option<f64> {
        let p = self.pending.get_mut(&id)?;
        if p.outcome.is_some() {
            return None;
        }
        let ty = p.action;
        let reward = self.cfg.objective.reward(&outcome, self.cfg.types[ty].cost_per_s) * self.cfg.reward_scale;
        p.outcome = Some((reward, outcome));
        self.load.completed(ty);
        self.stats.rewards += 1;
        self.stats.reward_sum += reward;
        self.try_learn(id);
        Some(reward)
    }

    /// The task of decision `id` will not complete (it failed): it leaves the load and
    /// teaches nothing.
    pub fn forget(&mut self, id: u64) {
        if let Some(p) = self.pending.remove(&id) {
            if p.outcome.is_none() {
                self.load.completed(p.action);
            }
            self.stats.forgotten += 1;
        }
    }

    /// Learns from decision `id` once both its reward and its next state are known.
    fn try_learn(&mut self, id: u64) {
        let ready = self.pending.get(&id).is_some_and(|p| p.next.is_some() && p.outcome.is_some());
        if !ready {
            return;
        }
        let Some(p) = self.pending.remove(&id) else { return };
        let (Some(next), Some((reward, outcome))) = (p.next, p.outcome) else { return };
        let e = Experience { observation: p.observation, action: p.action, reward, outcome, next };
        let started = Instant::now();
        if let Err(err) = self.policy.observe(&e, &mut self.rng) {
            self.stats.update_errors += 1;
            tracing::warn!(error = %err, "policy update failed");
        }
        self.stats.update_ns += started.elapsed().as_nanos() as u64;
        self.stats.updates += 1;
    }

    fn bound_pending(&mut self) {
        while self.pending.len() > MAX_PENDING {
            let Some(oldest) = self.order.pop_front() else { break };
            self.forget(oldest);
        }
        // Ids whose decision already left `pending` need not stay in `order`.
        while self.order.front().is_some_and(|id| !self.pending.contains_key(id)) {
            self.order.pop_front();
        }
    }

    /// Writes the policy's learned state to `path` (JSON).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let saved = SavedAgent {
            kind: self.cfg.kind,
            classes: self.cfg.classes,
            types: self.cfg.types.len(),
            policy: self.policy.save()?,
        };
        let text = serde_json::to_string(&saved)?;
        std::fs::write(path, text).with_context(|| format!("writing the policy state to {}", path.display()))
    }

    /// Reads a policy state written by [`Agent::save`] for the same policy and shape.
    pub fn restore(&mut self, path: &Path) -> anyhow::Result<()> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading the policy state {}", path.display()))?;
        let saved: SavedAgent = serde_json::from_str(&text).context("parsing the policy state")?;
        if saved.kind != self.cfg.kind || saved.classes != self.cfg.classes || saved.types != self.cfg.types.len() {
            bail!(
                "the policy state is for {} with {} classes and {} types, not {} with {} and {}",
                saved.kind.name(),
                saved.classes,
                saved.types,
                self.cfg.kind.name(),
                self.cfg.classes,
                self.cfg.types.len()
            );
        }
        self.policy.load(saved.policy)
    }
}
