//! Double DQN as RLQ uses it: an MLP with ReLU whose first hidden layer is as wide as
//! the state and each next one half as wide; Adam; a replay buffer; a target network
//! copied from the online one every so many updates; ε-greedy with ε falling linearly.
//! The target of a transition (s, a, r, s′) is r + γ·Q_target(s′, argmax Q_online(s′, ·)),
//! the loss Huber (smooth L1). The network and its gradients are candle's, on the CPU.

use std::collections::VecDeque;

use anyhow::{ensure, Context};
use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{linear, AdamW, Linear, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use rand::rngs::StdRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::{Experience, Observation, Policy, PolicyKind};

/// Double DQN's settings (RLQ's values by default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DqnConfig {
    /// Hidden layers (RLQ's grid: 2 or 3).
    pub hidden_layers: usize,
    pub learning_rate: f64,
    pub replay: usize,
    pub batch: usize,
    /// Gradient updates between copies of the online network into the target.
    pub target_sync: u64,
    pub gamma: f64,
    pub epsilon_start: f64,
    pub epsilon_end: f64,
    /// Decisions over which ε falls from start to end.
    pub epsilon_steps: u64,
}

impl Default for DqnConfig {
    fn default() -> DqnConfig {
        DqnConfig {
            hidden_layers: 2,
            learning_rate: 0.001,
            replay: 5_000,
            batch: 64,
            target_sync: 128,
            gamma: 0.99,
            epsilon_start: 0.65,
            epsilon_end: 0.01,
            epsilon_steps: 2_000,
        }
    }
}

/// The widths of the hidden layers for a state of `state` entries.
pub fn hidden_widths(state: usize, layers: usize) -> Vec<usize> {
    let mut widths = Vec::with_capacity(layers);
    let mut w = state;
    for _ in 0..layers {
        widths.push(w.max(1));
        w /= 2;
    }
    widths
}

/// An MLP: hidden layers with ReLU, then a linear output of one Q value per type.
struct Mlp {
    vars: VarMap,
    hidden: Vec<Linear>,
    out: Linear,
}

impl Mlp {
    fn new(state: usize, actions: usize, layers: usize, rng: &mut StdRng) -> anyhow::Result<Mlp> {
        let vars = VarMap::new();
        let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
        let mut hidden = Vec::with_capacity(layers);
        let mut input = state;
        for (i, w) in hidden_widths(state, layers).into_iter().enumerate() {
            hidden.push(linear(input, w, vb.pp(format!("hidden{i}")))?);
            input = w;
        }
        let out = linear(input, actions, vb.pp("out"))?;
        let mlp = Mlp { vars, hidden, out };
        mlp.seed_weights(rng)?;
        Ok(mlp)
    }

    /// Replaces candle's (unseeded) initialisation by the same uniform ±1/√fan_in from
    /// `rng`, so runs are reproducible.
    fn seed_weights(&self, rng: &mut StdRng) -> anyhow::Result<()> {
        let data = self.vars.data().lock().map_err(|_| anyhow::anyhow!("weights lock poisoned"))?;
        let mut names: Vec<&String> = data.keys().collect();
        names.sort();
        for name in names {
            let var = &data[name];
            let dims = var.dims().to_vec();
            let layer = name.rsplit_once('.').map_or(name.as_str(), |(l, _)| l);
            let fan_in = data.get(&format!("{layer}.weight")).map_or(1, |w| w.dims()[1]);
            let bound = 1.0 / (fan_in as f32).sqrt();
            let n: usize = dims.iter().product();
            let values: Vec<f32> = (0..n).map(|_| rng.gen_range(-bound..bound)).collect();
            var.set(&Tensor::from_vec(values, dims, &Device::Cpu)?)?;
        }
        Ok(())
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let mut h = x.clone();
        for layer in &self.hidden {
            h = layer.forward(&h)?.relu()?;
        }
        self.out.forward(&h)
    }

    fn weights(&self) -> anyhow::Result<Vec<NamedWeights>> {
        let data = self.vars.data().lock().map_err(|_| anyhow::anyhow!("weights lock poisoned"))?;
        let mut out: Vec<NamedWeights> = data
            .iter()
            .map(|(name, var)| {
                Ok(NamedWeights {
                    name: name.clone(),
                    dims: var.dims().to_vec(),
                    values: var.flatten_all()?.to_vec1::<f32>()?,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn set_weights(&self, weights: &[NamedWeights]) -> anyhow::Result<()> {
        let data = self.vars.data().lock().map_err(|_| anyhow::anyhow!("weights lock poisoned"))?;
        ensure!(weights.len() == data.len(), "{} weight tensors for a network of {}", weights.len(), data.len());
        for w in weights {
            let var = data.get(&w.name).with_context(|| format!("no weight tensor {}", w.name))?;
            ensure!(var.dims() == w.dims.as_slice(), "weight {} has shape {:?}, not {:?}", w.name, w.dims, var.dims());
            ensure!(w.values.len() == w.dims.iter().product::<usize>(), "weight {} has the wrong length", w.name);
            var.set(&Tensor::from_vec(w.values.clone(), w.dims.clone(), &Device::Cpu)?)?;
        }
        Ok(())
    }
}

/// One weight tensor, for saving.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedWeights {
    pub name: String,
    pub dims: Vec<usize>,
    pub values: Vec<f32>,
}

/// One transition in the replay buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub state: Vec<f32>,
    pub action: usize,
    pub reward: f32,
    pub next_state: Vec<f32>,
}

#[derive(Serialize, Deserialize)]
struct Saved {
    decisions: u64,
    updates: u64,
    online: Vec<NamedWeights>,
    target: Vec<NamedWeights>,
}

pub struct DoubleDqnPolicy {
    cfg: DqnConfig,
    state_len: usize,
    actions: usize,
    online: Mlp,
    target: Mlp,
    optimizer: AdamW,
    replay: VecDeque<Transition>,
    decisions: u64,
    updates: u64,
    last_loss: f32,
}

impl DoubleDqnPolicy {
    pub fn new(classes: usize, types: usize, cfg: DqnConfig, rng: &mut StdRng) -> anyhow::Result<DoubleDqnPolicy> {
        ensure!(cfg.batch > 0 && cfg.replay >= cfg.batch, "the replay buffer must hold at least one batch");
        ensure!(cfg.target_sync > 0, "the target sync interval must be positive");
        let state_len = classes + types;
        let online = Mlp::new(state_len, types, cfg.hidden_layers, rng)?;
        let target = Mlp::new(state_len, types, cfg.hidden_layers, rng)?;
        target.set_weights(&online.weights()?)?;
        let optimizer = AdamW::new(
            online.vars.all_vars(),
            ParamsAdamW { lr: cfg.learning_rate, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
        )?;
        Ok(DoubleDqnPolicy {
            cfg,
            state_len,
            actions: types,
            online,
            target,
            optimizer,
            replay: VecDeque::new(),
            decisions: 0,
            updates: 0,
            last_loss: 0.0,
        })
    }

    /// ε after `decisions` decisions.
    pub fn epsilon(&self) -> f64 {
        let c = &self.cfg;
        let progress = (self.decisions as f64 / c.epsilon_steps.max(1) as f64).min(1.0);
        c.epsilon_start + (c.epsilon_end - c.epsilon_start) * progress
    }

    pub fn updates(&self) -> u64 {
        self.updates
    }

    pub fn last_loss(&self) -> f32 {
        self.last_loss
    }

    /// The online network's Q values for one state.
    pub fn q_values(&self, state: &[f32]) -> anyhow::Result<Vec<f32>> {
        let x = Tensor::from_slice(state, (1, self.state_len), &Device::Cpu)?;
        Ok(self.online.forward(&x)?.flatten_all()?.to_vec1::<f32>()?)
    }

    fn batch_tensors(&self, batch: &[&Transition]) -> anyhow::Result<(Tensor, Tensor, Tensor, Tensor)> {
        let n = batch.len();
        let states: Vec<f32> = batch.iter().flat_map(|t| t.state.iter().copied()).collect();
        let next: Vec<f32> = batch.iter().flat_map(|t| t.next_state.iter().copied()).collect();
        let actions: Vec<u32> = batch.iter().map(|t| t.action as u32).collect();
        let rewards: Vec<f32> = batch.iter().map(|t| t.reward).collect();
        Ok((
            Tensor::from_vec(states, (n, self.state_len), &Device::Cpu)?,
            Tensor::from_vec(actions, (n, 1), &Device::Cpu)?,
            Tensor::from_vec(rewards, (n, 1), &Device::Cpu)?,
            Tensor::from_vec(next, (n, self.state_len), &Device::Cpu)?,
        ))
    }

    /// The Double-DQN targets of a batch: r + γ·Q_target(s′, argmax_a Q_online(s′, a)).
    pub fn targets(&self, batch: &[&Transition]) -> anyhow::Result<Vec<f32>> {
        let (_, _, rewards, next) = self.batch_tensors(batch)?;
        Ok(self.target_tensor(&rewards, &next)?.flatten_all()?.to_vec1::<f32>()?)
    }

    fn target_tensor(&self, rewards: &Tensor, next: &Tensor) -> candle_core::Result<Tensor> {
        let best_next = self.online.forward(next)?.argmax_keepdim(D::Minus1)?;
        let q_next = self.target.forward(next)?.gather(&best_next, D::Minus1)?;
        (rewards + q_next.affine(self.cfg.gamma, 0.0)?)?.detach().contiguous()
    }

    /// One gradient step on `batch`; returns the loss before the step.
    pub fn train_on(&mut self, batch: &[&Transition]) -> anyhow::Result<f32> {
        let (states, actions, rewards, next) = self.batch_tensors(batch)?;
        let y = self.target_tensor(&rewards, &next)?;
        let q = self.online.forward(&states)?.gather(&actions, D::Minus1)?;
        let loss = huber(&(q - y)?)?;
        self.optimizer.backward_step(&loss)?;
        self.updates += 1;
        if self.updates.is_multiple_of(self.cfg.target_sync) {
            self.target.set_weights(&self.online.weights()?)?;
        }
        self.last_loss = loss.to_scalar::<f32>()?;
        Ok(self.last_loss)
    }

    /// Replaces both networks' weights (tests and loading).
    pub fn set_weights(&mut self, online: &[NamedWeights], target: &[NamedWeights]) -> anyhow::Result<()> {
        self.online.set_weights(online)?;
        self.target.set_weights(target)
    }

    pub fn online_weights(&self) -> anyhow::Result<Vec<NamedWeights>> {
        self.online.weights()
    }
}

/// Mean smooth-L1 loss of the differences `diff`.
fn huber(diff: &Tensor) -> candle_core::Result<Tensor> {
    let abs = diff.abs()?;
    let quadratic = abs.clamp(0f32, 1f32)?;
    let linear = (&abs - &quadratic)?;
    (quadratic.sqr()?.affine(0.5, 0.0)? + linear)?.mean_all()
}

impl Policy for DoubleDqnPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::DoubleDqn
    }

    fn choose(&mut self, obs: &Observation, rng: &mut StdRng) -> usize {
        let explore = rng.gen_bool(self.epsilon().clamp(0.0, 1.0));
        self.decisions += 1;
        if explore {
            return rng.gen_range(0..self.actions);
        }
        match self.q_values(&obs.state()) {
            Ok(q) => {
                let negated: Vec<f64> = q.iter().map(|&v| -f64::from(v)).collect();
                super::baselines::argmin_random_ties(&negated, rng)
            }
            Err(e) => {
                // Cannot happen with a well-formed state; a random type keeps tasks moving.
                tracing::warn!(error = %e, "Q-network forward pass failed; choosing at random");
                rng.gen_range(0..self.actions)
            }
        }
    }

    fn observe(&mut self, e: &Experience, rng: &mut StdRng) -> anyhow::Result<()> {
        if self.replay.len() == self.cfg.replay {
            self.replay.pop_front();
        }
        self.replay.push_back(Transition {
            state: e.observation.state(),
            action: e.action,
            reward: e.reward as f32,
            next_state: e.next.state(),
        });
        if self.replay.len() < self.cfg.batch {
            return Ok(());
        }
        let picks: Vec<usize> = (0..self.cfg.batch).map(|_| rng.gen_range(0..self.replay.len())).collect();
        let replay = std::mem::take(&mut self.replay);
        let batch: Vec<&Transition> = picks.iter().map(|&i| &replay[i]).collect();
        let trained = self.train_on(&batch);
        self.replay = replay;
        trained.map(|_| ())
    }

    fn save(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::to_value(Saved {
            decisions: self.decisions,
            updates: self.updates,
            online: self.online.weights()?,
            target: self.target.weights()?,
        })?)
    }

    fn load(&mut self, v: serde_json::Value) -> anyhow::Result<()> {
        let saved: Saved = serde_json::from_value(v)?;
        self.set_weights(&saved.online, &saved.target)?;
        self.decisions = saved.decisions;
        self.updates = saved.updates;
        Ok(())
    }
}
