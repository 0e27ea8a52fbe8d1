//! RLQ's baselines: Random, round-robin over types (RLQ's "LRU") and E-PVM.

use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::{Experience, Observation, Policy, PolicyKind};

/// Uniform over the worker types.
#[derive(Debug)]
pub struct RandomPolicy {
    types: usize,
}

impl RandomPolicy {
    pub fn new(types: usize) -> RandomPolicy {
        RandomPolicy { types }
    }
}

impl Policy for RandomPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Random
    }

    fn choose(&mut self, _obs: &Observation, rng: &mut StdRng) -> usize {
        rng.gen_range(0..self.types)
    }

    fn observe(&mut self, _e: &Experience, _rng: &mut StdRng) -> anyhow::Result<()> {
        Ok(())
    }

    fn save(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }

    fn load(&mut self, _v: serde_json::Value) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Each type in turn, whatever the class (RLQ's "LRU": "assigns a task to each Worker
/// Type in a round-robin fashion").
#[derive(Debug, Serialize, Deserialize)]
pub struct RoundRobinPolicy {
    types: usize,
    next: usize,
}

impl RoundRobinPolicy {
    pub fn new(types: usize) -> RoundRobinPolicy {
        RoundRobinPolicy { types, next: 0 }
    }
}

impl Policy for RoundRobinPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::RoundRobin
    }

    fn choose(&mut self, _obs: &Observation, _rng: &mut StdRng) -> usize {
        let ty = self.next;
        self.next = (self.next + 1) % self.types;
        ty
    }

    fn observe(&mut self, _e: &Experience, _rng: &mut StdRng) -> anyhow::Result<()> {
        Ok(())
    }

    fn save(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::json!({ "next": self.next }))
    }

    fn load(&mut self, v: serde_json::Value) -> anyhow::Result<()> {
        let next =
            v.get("next").and_then(|n| n.as_u64()).ok_or_else(|| anyhow::anyhow!("round-robin state lacks next"))?;
        self.next = next as usize % self.types;
        Ok(())
    }
}

/// The base of E-PVM's exponential cost (the value RLQ's implementation uses).
pub const EPVM_BASE: f64 = 1.5;

/// E-PVM (Amir et al.), single-resource marginal-cost variant. The resource of a type is
/// its replicas' time: utilisation u = outstanding tasks × the type's mean execution time
/// ÷ replicas, the task's demand d = the class's estimated execution time on that type ÷
/// replicas, both in units of the mean estimate over types. The task goes to the type
/// whose cost Σ α^u rises least: α^(u+d) − α^u. Estimates are running means of observed
/// execution times per (class, type), falling back to the type's mean, then to the
/// overall mean, then to 1 s.
#[derive(Debug, Serialize, Deserialize)]
pub struct EpvmPolicy {
    classes: usize,
    replicas: Vec<u32>,
    /// Sum and count of execution times, per class × type, row-major by class.
    sum_s: Vec<f64>,
    count: Vec<u64>,
}

impl EpvmPolicy {
    pub fn new(classes: usize, replicas: Vec<u32>) -> EpvmPolicy {
        let cells = classes * replicas.len();
        EpvmPolicy { classes, replicas, sum_s: vec![0.0; cells], count: vec![0; cells] }
    }

    fn types(&self) -> usize {
        self.replicas.len()
    }

    /// The estimated execution time of `class` on `ty`, s.
    pub fn estimate(&self, class: usize, ty: usize) -> f64 {
        let cell = class * self.types() + ty;
        if self.count[cell] > 0 {
            return self.sum_s[cell] / self.count[cell] as f64;
        }
        self.type_mean(ty).or_else(|| self.overall_mean()).unwrap_or(1.0)
    }

    fn type_mean(&self, ty: usize) -> Option<f64> {
        let cells = (0..self.classes).map(|c| c * self.types() + ty);
        let (s, n) = cells.fold((0.0, 0), |(s, n), i| (s + self.sum_s[i], n + self.count[i]));
        (n > 0).then(|| s / n as f64)
    }

    fn overall_mean(&self) -> Option<f64> {
        let n: u64 = self.count.iter().sum();
        (n > 0).then(|| self.sum_s.iter().sum::<f64>() / n as f64)
    }

    /// The rise in cost of sending a task of `class` to each type, given the
    /// outstanding tasks per type.
    pub fn marginal_costs(&self, class: usize, outstanding: &[u64]) -> Vec<f64> {
        let unit = (0..self.types()).map(|t| self.estimate(class, t)).sum::<f64>() / self.types() as f64;
        let unit = if unit > 0.0 { unit } else { 1.0 };
        (0..self.types())
            .map(|t| {
                let replicas = self.replicas[t].max(1) as f64;
                let mean = self.type_mean(t).or_else(|| self.overall_mean()).unwrap_or(1.0);
                let u = outstanding[t] as f64 * mean / replicas / unit;
                let d = self.estimate(class, t) / replicas / unit;
                EPVM_BASE.powf(u + d) - EPVM_BASE.powf(u)
            })
            .collect()
    }
}

impl Policy for EpvmPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Epvm
    }

    fn choose(&mut self, obs: &Observation, rng: &mut StdRng) -> usize {
        argmin_random_ties(&self.marginal_costs(obs.class, &obs.outstanding), rng)
    }

    fn observe(&mut self, e: &Experience, _rng: &mut StdRng) -> anyhow::Result<()> {
        let cell = e.observation.class * self.types() + e.action;
        self.sum_s[cell] += e.outcome.exec_s;
        self.count[cell] += 1;
        Ok(())
    }

    fn save(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::to_value(self)?)
    }

    fn load(&mut self, v: serde_json::Value) -> anyhow::Result<()> {
        let loaded: EpvmPolicy = serde_json::from_value(v)?;
        anyhow::ensure!(
            loaded.classes == self.classes
                && loaded.replicas.len() == self.replicas.len()
                && loaded.sum_s.len() == self.sum_s.len()
                && loaded.count.len() == self.count.len(),
            "E-PVM state is for another shape"
        );
        *self = loaded;
        Ok(())
    }
}

/// The index of the smallest value; ties broken uniformly at random. NaNs never win;
/// if every value is NaN (a diverged network) any index may.
pub(crate) fn argmin_random_ties(values: &[f64], rng: &mut StdRng) -> usize {
    let best = values.iter().copied().fold(f64::INFINITY, f64::min);
    let ties: Vec<usize> = (0..values.len()).filter(|&i| values[i] <= best + 1e-12).collect();
    if ties.is_empty() {
        return rng.gen_range(0..values.len());
    }
    ties[rng.gen_range(0..ties.len())]
}
