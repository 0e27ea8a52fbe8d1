use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn types(n: usize) -> Vec<WorkerType> {
    (0..n).map(|i| WorkerType { bit: i as u8, speed: 1.0, cost_per_s: 1.0 + i as f64, replicas: 1 }).collect()
}

fn obs(class: usize, classes: usize, outstanding: &[u64]) -> Observation {
    let mut load = TypeLoad::new(outstanding.len());
    for (ty, &n) in outstanding.iter().enumerate() {
        for _ in 0..n {
            load.sent(ty);
        }
    }
    Observation::new(class, classes, &load).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn load_is_normalised_by_the_total_and_zero_when_idle() {
    let mut load = TypeLoad::new(3);
    assert_eq!(load.normalised(), vec![0.0, 0.0, 0.0]);
    load.sent(0);
    load.sent(2);
    load.sent(2);
    load.sent(2);
    assert_eq!(load.normalised(), vec![0.25, 0.0, 0.75]);
    load.completed(2);
    load.completed(1); // a completion of nothing outstanding changes nothing
    assert_eq!(load.outstanding(), &[1, 0, 2]);
    let o = Observation::new(1, 2, &load).unwrap();
    let third = 1.0 / 3.0;
    assert_eq!(o.state(), vec![0.0, 1.0, third as f32, 0.0, (2.0 * third) as f32]);
    assert_eq!(
        o.context(1),
        vec![0.0, 1.0, f64::from(third as f32), 0.0, f64::from((2.0 * third) as f32), 0.0, 1.0, 0.0]
    );
    assert!(Observation::new(2, 2, &load).is_err());
}

#[test]
fn rewards_are_minus_time_cost_or_wait() {
    let o = Outcome::from_complete(2_000_000_000, 5_500_000_000, 5_000_000_000);
    assert_eq!(o, Outcome { exec_s: 2.0, wait_s: 0.5 });
    assert_eq!(Objective::ExecTime.reward(&o, 3.0), -2.0);
    assert_eq!(Objective::ExecCost.reward(&o, 3.0), -6.0);
    assert_eq!(Objective::WaitTime.reward(&o, 3.0), -0.5);
    // A start before the send (clocks apart) is no waiting, not a huge one.
    assert_eq!(Outcome::from_complete(1, 4, 9).wait_s, 0.0);
}

#[test]
fn alpha_follows_delta_as_rlq_sets_it() {
    assert!(close(alpha_from_delta(2.0), 1.0));
    assert!(close(alpha_from_delta(1.0), 1.0 + (2f64.ln() / 2.0).sqrt()));
    assert!((alpha_from_delta(1.0) - 1.589).abs() < 1e-3);
}

#[test]
fn lin_ucb_update_and_choice_match_a_hand_computed_case() {
    // One class, two types: context d = 1 + 2 + 2 = 5. Idle: x₀ = [1,0,0,1,0], |x|² = 2.
    let mut p = LinUcbPolicy::new(1, 2, 1.0);
    let o = obs(0, 1, &[0, 0]);
    p.update(&o, 0, -3.0);
    p.update(&o, 1, -0.3);
    // After one update A = I + xxᵀ, A⁻¹ = I − xxᵀ/3, θ = A⁻¹(r x) = r x / 3:
    // θᵀx = 2r/3, xᵀA⁻¹x = 2 − 4/3 = 2/3.
    let (mean0, width0) = p.estimate(&o, 0);
    let (mean1, width1) = p.estimate(&o, 1);
    assert!(close(mean0, -2.0), "{mean0}");
    assert!(close(mean1, -0.2), "{mean1}");
    assert!(close(width0, (2.0f64 / 3.0).sqrt()) && close(width1, (2.0f64 / 3.0).sqrt()));
    let alpha = 1.0 + (2f64.ln() / 2.0).sqrt();
    let scores = p.scores(&o);
    assert!(close(scores[0], -2.0 + alpha * (2.0f64 / 3.0).sqrt()));
    assert!(close(scores[1], -0.2 + alpha * (2.0f64 / 3.0).sqrt()));
    let mut rng = StdRng::seed_from_u64(1);
    assert_eq!(p.choose(&o, &mut rng), 1);
    // A second update of arm 1 with x₁ = [1,0,0,0,1]: A = I + 2xxᵀ, A⁻¹ = I − 2xxᵀ/5,
    // b = 2r x, θᵀx = 2r·2 − 2r·(2/5)·4 = 4r/5 (r = −0.3 each time would be −0.24).
    p.update(&o, 1, -0.3);
    let (mean1, width1) = p.estimate(&o, 1);
    assert!(close(mean1, 4.0 * -0.3 / 5.0), "{mean1}");
    assert!(close(width1, (2.0f64 - 8.0 / 5.0).sqrt()), "{width1}");
}

#[test]
fn lin_ucb_tries_every_arm_before_trusting_its_estimates() {
    let mut p = LinUcbPolicy::new(1, 3, 2.0);
    let o = obs(0, 1, &[0, 0, 0]);
    let mut rng = StdRng::seed_from_u64(7);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let a = p.choose(&o, &mut rng);
        assert!(!seen.contains(&a), "arm {a} chosen twice before all were tried");
        seen.push(a);
        // A great reward would make any arm the favourite if untried arms did not come first.
        p.update(&o, a, 100.0);
    }
}

#[test]
fn random_is_uniform_over_types() {
    let mut p = RandomPolicy::new(4);
    let mut rng = StdRng::seed_from_u64(3);
    let o = obs(0, 1, &[0; 4]);
    let mut counts = [0u32; 4];
    for _ in 0..4_000 {
        counts[p.choose(&o, &mut rng)] += 1;
    }
    assert!(counts.iter().all(|&c| (900..1_100).contains(&c)), "{counts:?}");
}

#[test]
fn round_robin_cycles_through_types_whatever_the_class_and_load() {
    let mut p = RoundRobinPolicy::new(3);
    let mut rng = StdRng::seed_from_u64(0);
    let picks: Vec<usize> = (0..7).map(|i| p.choose(&obs(i % 2, 2, &[9, 0, i as u64]), &mut rng)).collect();
    assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0]);
    let saved = p.save().unwrap();
    let mut restored = RoundRobinPolicy::new(3);
    restored.load(saved).unwrap();
    assert_eq!(restored.choose(&obs(0, 2, &[0; 3]), &mut rng), 1);
}

fn experience(class: usize, action: usize, exec_s: f64) -> Experience {
    let o = obs(class, 2, &[0, 0]);
    Experience { observation: o.clone(), action, reward: -exec_s, outcome: Outcome { exec_s, wait_s: 0.0 }, next: o }
}

#[test]
fn epvm_sends_a_task_where_the_marginal_cost_rises_least() {
    // Two types, one replica each; class 0 takes 1 s on type 0 and 3 s on type 1.
    let mut p = EpvmPolicy::new(2, vec![1, 1]);
    let mut rng = StdRng::seed_from_u64(0);
    p.observe(&experience(0, 0, 1.0), &mut rng).unwrap();
    p.observe(&experience(0, 1, 3.0), &mut rng).unwrap();
    // unit = mean estimate over types = 2 s. Idle: cost = 1.5^(d) − 1 with d = 0.5, 1.5.
    let idle = p.marginal_costs(0, &[0, 0]);
    assert!(close(idle[0], 1.5f64.powf(0.5) - 1.0) && close(idle[1], 1.5f64.powf(1.5) - 1.0), "{idle:?}");
    assert_eq!(p.choose(&obs(0, 2, &[0, 0]), &mut rng), 0);
    // Four tasks outstanding on type 0 (mean 1 s each → u = 2): 1.5^2.5 − 1.5^2 ≈ 0.506
    // against type 1 idle: 1.5^1.5 − 1 ≈ 0.837; still type 0. Eight (u = 4):
    // 1.5^4.5 − 1.5^4 ≈ 1.139 > 0.837, type 1.
    assert_eq!(p.choose(&obs(0, 2, &[4, 0]), &mut rng), 0);
    assert_eq!(p.choose(&obs(0, 2, &[8, 0]), &mut rng), 1);
    // Class 1 was never seen: it borrows each type's mean.
    assert!(close(p.estimate(1, 0), 1.0) && close(p.estimate(1, 1), 3.0));
}

#[test]
fn hidden_layers_start_as_wide_as_the_state_and_halve() {
    assert_eq!(hidden_widths(14, 3), vec![14, 7, 3]);
    assert_eq!(hidden_widths(3, 2), vec![3, 1]);
    assert_eq!(hidden_widths(1, 3), vec![1, 1, 1]);
}

/// Weights of a network (state 3, hidden 3 and 1, two actions) whose output is its
/// bias `q` whatever the input: every weight zero.
fn constant_network(q: [f32; 2]) -> Vec<NamedWeights> {
    let w = |name: &str, dims: Vec<usize>, values: Vec<f32>| NamedWeights { name: name.into(), dims, values };
    vec![
        w("hidden0.bias", vec![3], vec![0.0; 3]),
        w("hidden0.weight", vec![3, 3], vec![0.0; 9]),
        w("hidden1.bias", vec![1], vec![0.0]),
        w("hidden1.weight", vec![1, 3], vec![0.0; 3]),
        w("out.bias", vec![2], q.to_vec()),
        w("out.weight", vec![2, 1], vec![0.0; 2]),
    ]
}

#[test]
fn double_dqn_target_matches_a_hand_computed_batch() {
    let mut rng = StdRng::seed_from_u64(0);
    let mut p = DoubleDqnPolicy::new(1, 2, DqnConfig::default(), &mut rng).unwrap();
    // The online network prefers action 1 everywhere, the target network values action
    // 1 at 10 and action 0 at 20: Double DQN takes the online argmax (1) and the target's
    // value of it (10); plain DQN would take max 20.
    p.set_weights(&constant_network([1.0, 3.0]), &constant_network([20.0, 10.0])).unwrap();
    let t = |reward: f32| Transition { state: vec![1.0, 0.5, 0.5], action: 0, reward, next_state: vec![1.0, 0.0, 1.0] };
    let batch = [t(-2.0), t(0.5)];
    let y = p.targets(&batch.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(y.len(), 2);
    assert!((y[0] - (-2.0 + 0.99 * 10.0)).abs() < 1e-5, "{y:?}");
    assert!((y[1] - (0.5 + 0.99 * 10.0)).abs() < 1e-5, "{y:?}");
    assert_eq!(p.q_values(&[1.0, 0.0, 0.0]).unwrap(), vec![1.0, 3.0]);
}

#[test]
fn double_dqn_training_moves_q_toward_the_target_and_syncs_the_target_network() {
    let mut rng = StdRng::seed_from_u64(4);
    let cfg = DqnConfig { learning_rate: 0.01, target_sync: 4, ..DqnConfig::default() };
    let mut p = DoubleDqnPolicy::new(1, 2, cfg, &mut rng).unwrap();
    let t = Transition { state: vec![1.0, 0.0, 0.0], action: 0, reward: -1.0, next_state: vec![1.0, 0.0, 0.0] };
    let batch = vec![&t; 8];
    let first = p.train_on(&batch).unwrap();
    for _ in 0..3 {
        p.train_on(&batch).unwrap();
    }
    assert_eq!(p.updates(), 4);
    // After the sync both networks agree, so the target equals r + γ·max Q_online.
    let q = p.q_values(&t.next_state).unwrap();
    let best = q.iter().copied().fold(f32::MIN, f32::max);
    let y = p.targets(&[&t]).unwrap();
    assert!((y[0] - (-1.0 + 0.99 * best)).abs() < 1e-4, "{y:?} vs {q:?}");
    assert!(first.is_finite() && p.last_loss().is_finite());
}

#[test]
fn epsilon_falls_linearly_then_stays() {
    let mut rng = StdRng::seed_from_u64(0);
    let cfg = DqnConfig { epsilon_steps: 10, ..DqnConfig::default() };
    let mut p = DoubleDqnPolicy::new(1, 2, cfg, &mut rng).unwrap();
    assert!(close(p.epsilon(), 0.65));
    let o = obs(0, 1, &[0, 0]);
    for _ in 0..5 {
        p.choose(&o, &mut rng);
    }
    assert!(close(p.epsilon(), 0.33));
    for _ in 0..20 {
        p.choose(&o, &mut rng);
    }
    assert!(close(p.epsilon(), 0.01));
}

/// A seeded two-class, three-type bandit whose planted best type is 2 for class 0 and 0
/// for class 1; returns the share of the last `tail` decisions that chose it.
fn planted_bandit(kind: PolicyKind, steps: usize, tail: usize, dqn: DqnConfig) -> f64 {
    let exec = [[0.9, 0.6, 0.1], [0.1, 0.5, 0.8]];
    let best = [2, 0];
    let mut cfg = PolicyConfig::new(kind, 2, types(3), Objective::ExecTime);
    cfg.seed = 11;
    cfg.dqn = dqn;
    let mut agent = Agent::new(cfg).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let mut hits = 0;
    for step in 0..steps {
        let class = rng.gen_range(0..2);
        let d = agent.decide(class).unwrap();
        let noise: f64 = rng.gen_range(-0.05..0.05);
        agent.complete(d.id, Outcome { exec_s: exec[class][d.ty] + noise, wait_s: 0.0 });
        if step >= steps - tail && d.ty == best[class] {
            hits += 1;
        }
    }
    hits as f64 / tail as f64
}

#[test]
fn lin_ucb_learns_a_planted_best_type_within_300_steps() {
    let share = planted_bandit(PolicyKind::LinUcb, 300, 100, DqnConfig::default());
    assert!(share >= 0.9, "LinUCB chose the best type {share:.2} of the last 100");
}

#[test]
fn double_dqn_learns_a_planted_best_type_within_600_steps() {
    // One hidden layer: with this 5-entry state a second would be 2 units wide, a
    // bottleneck whose ReLUs can all die and leave Q blind to the class.
    let dqn = DqnConfig { learning_rate: 0.01, hidden_layers: 1, epsilon_steps: 300, ..DqnConfig::default() };
    let share = planted_bandit(PolicyKind::DoubleDqn, 600, 100, dqn);
    assert!(share >= 0.85, "DoubleDQN chose the best type {share:.2} of the last 100");
}

#[test]
fn round_robin_does_not_learn_the_planted_type() {
    let share = planted_bandit(PolicyKind::RoundRobin, 300, 99, DqnConfig::default());
    assert!(share < 0.5, "{share}");
}

#[test]
fn the_agent_learns_from_a_decision_once_its_reward_and_next_state_are_known() {
    let mut agent = Agent::new(PolicyConfig::new(PolicyKind::Epvm, 1, types(2), Objective::ExecTime)).unwrap();
    let a = agent.decide(0).unwrap();
    assert_eq!(agent.load().outstanding().iter().sum::<u64>(), 1);
    assert_eq!(agent.complete(a.id, Outcome { exec_s: 2.0, wait_s: 0.0 }), Some(-2.0));
    assert_eq!(agent.complete(a.id, Outcome { exec_s: 2.0, wait_s: 0.0 }), None, "a duplicate teaches nothing");
    assert_eq!(agent.stats().updates, 0, "no next state yet");
    let b = agent.decide(0).unwrap();
    assert_eq!(agent.stats().updates, 1);
    agent.forget(b.id);
    assert_eq!(agent.load().outstanding(), &[0, 0]);
    assert_eq!(agent.stats().decisions, 2);
}

/// Equal JSON up to the last bits of floats (a decimal round trip may move them).
fn json_close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn policy_state_survives_a_save_and_restore() {
    let dir = std::env::temp_dir().join(format!("bolt-rlq-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for kind in PolicyKind::ALL {
        let path = dir.join(format!("{}.json", kind.name()));
        let mut cfg = PolicyConfig::new(kind, 2, types(3), Objective::ExecCost);
        cfg.dqn.batch = 4;
        let mut trained = Agent::new(cfg.clone()).unwrap();
        for i in 0..20 {
            let d = trained.decide(i % 2).unwrap();
            trained.complete(d.id, Outcome { exec_s: 0.1 * (d.ty + 1) as f64, wait_s: 0.0 });
        }
        trained.save(&path).unwrap();
        let mut fresh = Agent::new(cfg).unwrap();
        fresh.restore(&path).unwrap();
        let (a, b) = (fresh.policy().save().unwrap(), trained.policy().save().unwrap());
        assert!(json_close(&a, &b), "{}: {a} vs {b}", kind.name());
        let other = PolicyConfig::new(kind, 3, types(3), Objective::ExecCost);
        assert!(Agent::new(other).unwrap().restore(&path).is_err(), "a state for another shape loads");
    }
    std::fs::write(dir.join("bad.json"), b"{not json").unwrap();
    let mut agent = Agent::new(PolicyConfig::new(PolicyKind::LinUcb, 2, types(3), Objective::ExecTime)).unwrap();
    assert!(agent.restore(&dir.join("bad.json")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn worker_types_parse_and_reject_bad_input() {
    let t = parse_worker_type("3:1.5:4.02:2").unwrap();
    assert_eq!(t, WorkerType { bit: 3, speed: 1.5, cost_per_s: 4.02, replicas: 2 });
    assert_eq!(t.resources(), 0b1000);
    for bad in ["", "1:2:3", "8:1:1:1", "0:0:1:1", "0:-1:1:1", "0:1:-1:1", "0:x:1:1", "0:1:1:1:1", "0:NaN:1:1"] {
        assert!(parse_worker_type(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn choices_among_nan_scores_still_name_a_type() {
    let mut rng = StdRng::seed_from_u64(0);
    assert_eq!(baselines::argmin_random_ties(&[f64::NAN, 2.0, 1.0], &mut rng), 2);
    for _ in 0..20 {
        assert!(baselines::argmin_random_ties(&[f64::NAN; 3], &mut rng) < 3);
    }
    assert!(baselines::argmin_random_ties(&[f64::INFINITY; 2], &mut rng) < 2);
}
