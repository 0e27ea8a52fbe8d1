//! `bolt bench bundle` at a tiny size: every run completes its tasks, the JSON lines
//! parse and the plot is written. Timings are not checked (they belong to the benchmark).

use bolt_tests::unique_name;
use scheduler_user::bench::bundle::{self, BundleArgs};

#[test]
fn the_bundle_bench_runs_every_size_and_writes_its_results() {
    let out = std::env::temp_dir().join(unique_name("bb"));
    let args = BundleArgs {
        tasks: 160,
        executors: 2,
        bundles: vec![1, 4, 16],
        task_us: vec![0, 100],
        out: Some(out.clone()),
        json: false,
    };
    let r = bundle::run(&args).expect("the bench runs");
    assert_eq!(r.runs.len(), 6);
    for x in &r.runs {
        assert_eq!((x.tasks, x.completed), (160, 160), "{x:?}");
        assert!(x.decisions_per_s > 0.0 && x.tasks_per_s > 0.0 && x.switch_packets_per_task > 0.0, "{x:?}");
        assert!(x.requests_per_task > 0.0, "{x:?}");
        if x.bundle == 1 {
            assert_eq!(x.mean_bundle, 0.0, "bundle 1 sends GET_TASK: {x:?}");
        } else {
            assert!(x.mean_bundle >= 1.0 && x.mean_bundle <= x.bundle as f64, "{x:?}");
        }
    }
    let text = std::fs::read_to_string(out.join("bundle.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 6);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["experiment"], "bundle");
    }
    let png = std::fs::read(out.join("bundle.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(std::fs::read_to_string(out.join("bundle.svg")).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&out).unwrap();
}
