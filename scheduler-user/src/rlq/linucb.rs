//! LinUCB with disjoint arms (one ridge regression per worker type), as RLQ uses it:
//! context = one-hot class + normalised per-type load + one-hot arm; score
//! θₐᵀx + α·√(xᵀAₐ⁻¹x) with α = 1 + √(ln(2/δ)/2); arms never tried are tried first.

use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::{Experience, Observation, Policy, PolicyKind};

/// α from RLQ's δ ∈ (0, 2]: δ = 2 gives 1, δ = 1 about 1.589.
pub fn alpha_from_delta(delta: f64) -> f64 {
    1.0 + ((2.0 / delta).ln() / 2.0).sqrt()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Arm {
    /// A⁻¹ (d × d, row-major), kept by Sherman–Morrison so no inversion is needed.
    a_inv: Vec<f64>,
    b: Vec<f64>,
    pulls: u64,
}

impl Arm {
    fn new(dim: usize) -> Arm {
        let mut a_inv = vec![0.0; dim * dim];
        for i in 0..dim {
            a_inv[i * dim + i] = 1.0;
        }
        Arm { a_inv, b: vec![0.0; dim], pulls: 0 }
    }

    fn a_inv_times(&self, x: &[f64]) -> Vec<f64> {
        let d = x.len();
        (0..d).map(|i| (0..d).map(|j| self.a_inv[i * d + j] * x[j]).sum()).collect()
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LinUcbPolicy {
    alpha: f64,
    dim: usize,
    arms: Vec<Arm>,
}

impl LinUcbPolicy {
    pub fn new(classes: usize, types: usize, delta: f64) -> LinUcbPolicy {
        let dim = classes + 2 * types;
        LinUcbPolicy { alpha: alpha_from_delta(delta), dim, arms: vec![Arm::new(dim); types] }
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// θₐᵀx and √(xᵀAₐ⁻¹x) of arm `ty` for `obs`.
    pub fn estimate(&self, obs: &Observation, ty: usize) -> (f64, f64) {
        let x = obs.context(ty);
        let arm = &self.arms[ty];
        let a_inv_x = arm.a_inv_times(&x);
        // θ = A⁻¹b, so θᵀx = bᵀ(A⁻¹x) (A⁻¹ is symmetric).
        let mean = arm.b.iter().zip(&a_inv_x).map(|(b, v)| b * v).sum();
        let width = x.iter().zip(&a_inv_x).map(|(x, v)| x * v).sum::<f64>().max(0.0).sqrt();
        (mean, width)
    }

    /// The upper confidence bound of each arm.
    pub fn scores(&self, obs: &Observation) -> Vec<f64> {
        (0..self.arms.len())
            .map(|ty| {
                let (mean, width) = self.estimate(obs, ty);
                mean + self.alpha * width
            })
            .collect()
    }

    /// A += xxᵀ (by Sherman–Morrison on A⁻¹), b += r·x.
    pub fn update(&mut self, obs: &Observation, ty: usize, reward: f64) {
        let x = obs.context(ty);
        let arm = &mut self.arms[ty];
        let v = arm.a_inv_times(&x);
        let denom = 1.0 + x.iter().zip(&v).map(|(x, v)| x * v).sum::<f64>();
        let d = self.dim;
        for i in 0..d {
            for j in 0..d {
                arm.a_inv[i * d + j] -= v[i] * v[j] / denom;
            }
        }
        for (b, x) in arm.b.iter_mut().zip(&x) {
            *b += reward * x;
        }
        arm.pulls += 1;
    }
}

impl Policy for LinUcbPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::LinUcb
    }

    fn choose(&mut self, obs: &Observation, rng: &mut StdRng) -> usize {
        let untried: Vec<usize> = (0..self.arms.len()).filter(|&a| self.arms[a].pulls == 0).collect();
        if !untried.is_empty() {
            return untried[rng.gen_range(0..untried.len())];
        }
        let negated: Vec<f64> = self.scores(obs).into_iter().map(|s| -s).collect();
        super::baselines::argmin_random_ties(&negated, rng)
    }

    fn observe(&mut self, e: &Experience, _rng: &mut StdRng) -> anyhow::Result<()> {
        self.update(&e.observation, e.action, e.reward);
        Ok(())
    }

    fn save(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::to_value(self)?)
    }

    fn load(&mut self, v: serde_json::Value) -> anyhow::Result<()> {
        let loaded: LinUcbPolicy = serde_json::from_value(v)?;
        anyhow::ensure!(
            loaded.dim == self.dim
                && loaded.arms.len() == self.arms.len()
                && loaded.arms.iter().all(|a| a.a_inv.len() == self.dim * self.dim && a.b.len() == self.dim),
            "LinUCB state is for another shape"
        );
        self.arms = loaded.arms;
        Ok(())
    }
}
