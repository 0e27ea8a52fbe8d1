//! Learned placement on the client (RLQ, docs/rlq.md): a policy picks each task's
//! worker type when the job is added and writes it into the task's resource bits; each
//! COMPLETE becomes the delayed reward of that decision. Rewards are queued when the
//! COMPLETE arrives and learned from between receive bursts, so a slow update never
//! holds up the socket.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::TaskSpec;
use crate::rlq::{Agent, AgentStats, Outcome, PolicyConfig};

/// Most queued rewards learned from per turn of the client's loop.
pub const LEARN_BURST: usize = 64;

/// What the client exports about its placement (on /stats and /metrics).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlacementReport {
    pub policy: String,
    pub objective: String,
    #[serde(flatten)]
    pub stats: AgentStats,
    /// Tasks sent to each type and not completed yet.
    pub load_per_type: Vec<u64>,
    pub mean_decide_us: f64,
    pub mean_update_us: f64,
    /// Completions waiting to be learned from.
    pub queued_rewards: u64,
}

/// The policy and what ties its decisions to task ids.
pub struct LearnedPlacement {
    agent: Agent,
    /// tid → (decision id, client wall clock at the decision, ns).
    decisions: HashMap<u32, (u64, u64)>,
    /// Completed tasks not learned from yet: tid and outcome (`None`: it failed).
    queued: VecDeque<(u32, Option<Outcome>)>,
    state_file: Option<PathBuf>,
    /// While set, types are drawn at random from this RNG and the policy learns from
    /// them (RLQ's bootstrap).
    bootstrap: Option<StdRng>,
}

impl LearnedPlacement {
    /// A placement with `cfg`'s policy, its learned state read from `state_file` when
    /// that file exists (and written back by [`LearnedPlacement::save`]).
    pub fn new(cfg: PolicyConfig, state_file: Option<PathBuf>) -> anyhow::Result<LearnedPlacement> {
        let mut agent = Agent::new(cfg)?;
        if let Some(path) = state_file.as_deref().filter(|p| p.exists()) {
            agent.restore(path)?;
            tracing::info!(path = %path.display(), "policy state loaded");
        }
        Ok(LearnedPlacement { agent, decisions: HashMap::new(), queued: VecDeque::new(), state_file, bootstrap: None })
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// From now on types are drawn uniformly at random (seeded), and the policy learns
    /// from them as from its own choices, until [`LearnedPlacement::end_bootstrap`].
    pub fn start_bootstrap(&mut self, seed: u64) {
        self.bootstrap = Some(StdRng::seed_from_u64(seed));
    }

    pub fn end_bootstrap(&mut self) {
        self.bootstrap = None;
    }

    /// Picks the type of task `tid` and sets its resource bits to that type's bit (its
    /// other bits kept).
    pub fn place(&mut self, tid: u32, spec: &mut TaskSpec, now_unix_ns: u64) -> anyhow::Result<usize> {
        let types = self.agent.config().types.len();
        let d = match self.bootstrap.as_mut() {
            Some(rng) => self.agent.decide_as(spec.class as usize, rng.gen_range(0..types))?,
            None => self.agent.decide(spec.class as usize)?,
        };
        spec.resources |= self.agent.config().types[d.ty].resources();
        self.decisions.insert(tid, (d.id, now_unix_ns));
        Ok(d.ty)
    }

    /// Task `tid` completed: queue its reward (run time and start from the COMPLETE).
    pub fn completed(&mut self, tid: u32, run_ns: u32, start_unix_ns: u64) {
        if let Some(&(_, decided_ns)) = self.decisions.get(&tid) {
            self.queued.push_back((tid, Some(Outcome::from_complete(run_ns, start_unix_ns, decided_ns))));
        }
    }

    /// Task `tid` failed for good: its decision teaches nothing.
    pub fn failed(&mut self, tid: u32) {
        if self.decisions.contains_key(&tid) {
            self.queued.push_back((tid, None));
        }
    }

    /// Learns from at most `max` queued completions; returns how many.
    pub fn learn(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some((tid, outcome)) = self.queued.pop_front() else { break };
            let Some((id, _)) = self.decisions.remove(&tid) else { continue };
            match outcome {
                Some(o) => {
                    self.agent.complete(id, o);
                }
                None => self.agent.forget(id),
            }
            n += 1;
        }
        n
    }

    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    pub fn report(&self) -> PlacementReport {
        let stats = self.agent.stats().clone();
        PlacementReport {
            policy: self.agent.config().kind.name().to_owned(),
            objective: self.agent.config().objective.name().to_owned(),
            load_per_type: self.agent.load().outstanding().to_vec(),
            mean_decide_us: stats.mean_decide_us(),
            mean_update_us: stats.mean_update_us(),
            queued_rewards: self.queued.len() as u64,
            stats,
        }
    }

    /// Writes the learned state to the state file, if there is one.
    pub fn save(&self) -> anyhow::Result<()> {
        match &self.state_file {
            Some(path) => self.agent.save(path),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use scheduler_common::descriptor::Handler;

    use super::*;
    use crate::rlq::{Objective, PolicyKind, WorkerType};

    fn placement(kind: PolicyKind) -> LearnedPlacement {
        let types = vec![
            WorkerType { bit: 2, speed: 1.0, cost_per_s: 1.0, replicas: 1 },
            WorkerType { bit: 5, speed: 2.0, cost_per_s: 3.0, replicas: 1 },
        ];
        LearnedPlacement::new(PolicyConfig::new(kind, 2, types, Objective::ExecCost), None).unwrap()
    }

    #[test]
    fn the_chosen_type_becomes_the_task_s_resource_bit_and_its_completion_a_reward() {
        let mut p = placement(PolicyKind::RoundRobin);
        let mut spec = TaskSpec::new(Handler::Noop, 1, 0b1).unwrap();
        spec.class = 1;
        assert_eq!(p.place(7, &mut spec, 1_000).unwrap(), 0);
        assert_eq!(spec.resources, 0b101, "type 0's bit 2 added to the task's own bit 0");
        let mut second = TaskSpec::new(Handler::Noop, 1, 0).unwrap();
        assert_eq!(p.place(8, &mut second, 2_000).unwrap(), 1);
        assert_eq!(second.resources, 1 << 5);
        assert_eq!(p.report().load_per_type, vec![1, 1]);
        // Ran 0.5 s, started 1.5 s after the decision; a COMPLETE for an unknown tid is ignored.
        p.completed(7, 500_000_000, 1_500_001_000);
        p.completed(99, 1, 1);
        p.failed(8);
        assert!(p.has_queued());
        assert_eq!(p.learn(LEARN_BURST), 2);
        let r = p.report();
        assert_eq!((r.stats.rewards, r.stats.forgotten), (1, 1));
        assert!((r.stats.reward_sum - -0.5).abs() < 1e-9, "cost = 0.5 s × 1.0 per s: {}", r.stats.reward_sum);
        assert_eq!(r.load_per_type, vec![0, 0]);
        assert_eq!(r.policy, "round-robin");
    }

    #[test]
    fn a_bootstrap_places_at_random_and_the_policy_learns_from_it() {
        let mut p = placement(PolicyKind::LinUcb);
        p.start_bootstrap(5);
        let mut seen = [0u32; 2];
        for tid in 0..40 {
            let mut spec = TaskSpec::new(Handler::Noop, 1, 0).unwrap();
            seen[p.place(tid, &mut spec, 0).unwrap()] += 1;
            p.completed(tid, 1_000_000, 0);
            p.learn(LEARN_BURST);
        }
        p.end_bootstrap();
        let r = p.report();
        assert_eq!((r.stats.decisions, r.stats.choices), (40, 0), "the policy was not asked");
        assert_eq!(r.stats.updates, 39, "but learned from every decision with a successor");
        assert!(seen.iter().all(|&n| n >= 10), "{seen:?}");
        let mut spec = TaskSpec::new(Handler::Noop, 1, 0).unwrap();
        p.place(40, &mut spec, 0).unwrap();
        assert_eq!(p.report().stats.choices, 1);
    }

    #[test]
    fn a_state_file_is_written_and_read_back() {
        let path = std::env::temp_dir().join(format!("bolt-placement-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let types = vec![WorkerType { bit: 0, speed: 1.0, cost_per_s: 1.0, replicas: 1 }; 2];
        let cfg = PolicyConfig::new(PolicyKind::LinUcb, 2, types, Objective::ExecTime);
        let mut p = LearnedPlacement::new(cfg.clone(), Some(path.clone())).unwrap();
        for tid in 0..4 {
            let mut spec = TaskSpec::new(Handler::Noop, 1, 0).unwrap();
            p.place(tid, &mut spec, 0).unwrap();
            p.completed(tid, 1_000_000, 0);
            p.learn(LEARN_BURST);
        }
        p.save().unwrap();
        let loaded = LearnedPlacement::new(cfg, Some(path.clone())).unwrap();
        let saved = |p: &LearnedPlacement| p.agent().policy().save().unwrap().to_string().len();
        assert!(saved(&loaded) > 0 && saved(&loaded) == saved(&p));
        std::fs::remove_file(&path).unwrap();
    }
}
