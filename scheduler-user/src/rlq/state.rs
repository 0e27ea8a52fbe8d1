//! RLQ's state: the task's class one-hot, then the load of each worker type (tasks sent
//! and not yet completed) normalised by the total load, a zero vector when nothing is
//! outstanding.

use anyhow::ensure;
use serde::{Deserialize, Serialize};

/// Tasks sent to each worker type and not completed yet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeLoad {
    outstanding: Vec<u64>,
}

impl TypeLoad {
    pub fn new(types: usize) -> TypeLoad {
        TypeLoad { outstanding: vec![0; types] }
    }

    pub fn types(&self) -> usize {
        self.outstanding.len()
    }

    /// A task was sent to `ty`.
    pub fn sent(&mut self, ty: usize) {
        self.outstanding[ty] += 1;
    }

    /// A task of `ty` completed (never below zero: a duplicate completion is not a
    /// second task).
    pub fn completed(&mut self, ty: usize) {
        self.outstanding[ty] = self.outstanding[ty].saturating_sub(1);
    }

    pub fn outstanding(&self) -> &[u64] {
        &self.outstanding
    }

    /// Each type's share of the outstanding tasks; all zero when none are.
    pub fn normalised(&self) -> Vec<f32> {
        let total: u64 = self.outstanding.iter().sum();
        if total == 0 {
            return vec![0.0; self.outstanding.len()];
        }
        self.outstanding.iter().map(|&l| l as f32 / total as f32).collect()
    }
}

/// What a policy sees when it decides: the class and the normalised per-type load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub class: usize,
    pub classes: usize,
    pub load: Vec<f32>,
    /// The raw outstanding counts (not part of the state; E-PVM's utilisation).
    pub outstanding: Vec<u64>,
}

impl Observation {
    pub fn new(class: usize, classes: usize, load: &TypeLoad) -> anyhow::Result<Observation> {
        ensure!(class < classes, "class {class} is outside 0..{classes}");
        Ok(Observation { class, classes, load: load.normalised(), outstanding: load.outstanding().to_vec() })
    }

    pub fn types(&self) -> usize {
        self.load.len()
    }

    /// The state vector (M + N): one-hot class, then the normalised load.
    pub fn state(&self) -> Vec<f32> {
        let mut s = vec![0.0; self.classes + self.load.len()];
        s[self.class] = 1.0;
        s[self.classes..].copy_from_slice(&self.load);
        s
    }

    /// LinUCB's context for arm `ty` (M + 2N): the state, then the arm one-hot.
    pub fn context(&self, ty: usize) -> Vec<f64> {
        let mut x: Vec<f64> = self.state().into_iter().map(f64::from).collect();
        x.extend((0..self.load.len()).map(|a| if a == ty { 1.0 } else { 0.0 }));
        x
    }
}
