//! `bolt bench rlq --live` at a tiny size: the trace set's five worker types as executor
//! pools on loopback, every policy and objective, every evaluation task accounted for
//! and every plot written. Timings are not checked (they belong to the benchmark).

use scheduler_user::bench::rlq::{self, RlqArgs, SetupKind};

#[test]
fn the_live_bench_runs_every_policy_and_objective_on_real_executors() {
    let out = std::env::temp_dir().join(format!("bolt-rlq-live-{}", std::process::id()));
    let args = RlqArgs {
        seeds: 1,
        bootstrap: 20,
        training: 30,
        evaluation: 15,
        setup: vec![SetupKind::Trace],
        out: out.clone(),
        json: false,
        live: true,
    };
    let report = rlq::run(&args).expect("the live bench runs");
    assert!(report.live);
    assert_eq!(report.results.len(), 3, "one result per objective");
    let policies = ["random", "round-robin", "epvm", "lin-ucb", "double-dqn"];
    for r in &report.results {
        assert_eq!(r.setup, "trace");
        assert_eq!(r.policies.iter().map(|p| p.policy).collect::<Vec<_>>(), policies, "{}", r.objective);
        for p in &r.policies {
            let what = format!("{} {}", r.objective, p.policy);
            assert_eq!(p.per_type.len(), 5, "{what}: five worker types");
            assert_eq!(p.per_type.iter().sum::<f64>(), 15.0, "{what}: every evaluation task completed");
            assert!(p.exec_s.0 > 0.0 && p.cost.0 > 0.0 && p.wait_s.0 >= 0.0, "{what}: {p:?}");
            // The cheapest type costs 1 per second, the dearest 5.
            let (lo, hi) = (p.exec_s.0 * (1.0 - 1e-9), 5.0 * p.exec_s.0 * (1.0 + 1e-9));
            assert!(p.cost.0 >= lo && p.cost.0 <= hi, "{what}: {p:?}");
        }
        let random = &r.policies[0];
        assert!((random.vs_random - 1.0).abs() < 1e-12);
        let plot = r.plot.as_deref().expect("a plot per objective");
        assert!(std::fs::read_to_string(plot).unwrap().contains("<svg"), "{plot}");
        let png = std::path::Path::new(plot).with_extension("png");
        assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG", "{}", png.display());
    }
    std::fs::remove_dir_all(&out).unwrap();
}
