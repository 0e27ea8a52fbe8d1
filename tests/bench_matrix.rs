//! `bolt bench matrix --quick` as a smoke test: on a namespace testbed of its own with
//! capped links, every experiment (stacking under MDL, all-pairs under each policy, the
//! DAG shapes under FLDS) completes every task, places them as its policy says, and
//! writes its JSON lines and plots. Timings are not checked (they belong to the
//! benchmark, not to tests).

use bolt_tests::{is_root, require, unique_name};
use scheduler_user::bench::matrix::{self, MatrixArgs};

#[test]
fn the_quick_matrix_bench_runs_every_experiment_and_places_by_policy() {
    if !require(is_root(), "root (network namespaces, link caps and XDP)") {
        return;
    }
    let out = std::env::temp_dir().join(unique_name("mx"));
    let args = MatrixArgs {
        hosts: 2,
        executors_per_host: 1,
        task_ms: 20,
        link_mbit: 200,
        tasks_per_executor: 4,
        threshold_fraction: 0.05,
        quick: true,
        // Dask is compared by the benchmark; the smoke test installs nothing.
        no_dask: true,
        venv: None,
        testbed: unique_name("mx"),
        out: Some(out.clone()),
        json: true,
    };
    let report = matrix::run(&args).expect("the quick MATRIX bench runs");
    let count = |e: &str| report.measurements.iter().filter(|m| m.experiment == e).count();
    assert_eq!((count("stacking"), count("all-pairs"), count("dag")), (2, 4, 4), "{:#?}", report.measurements);
    for m in &report.measurements {
        assert_eq!(m.done, m.tasks, "{m:?}");
        assert!(m.tasks > 0 && m.makespan_s > 0.0 && m.busy_s > 0.0, "{m:?}");
        assert_eq!(m.utilisation.len(), 20, "{m:?}");
        match (m.experiment, m.policy) {
            // MDL pins every data task to its largest input's host, where it runs; a
            // stacking task's only input is then always local.
            ("stacking", "mdl") => {
                assert_eq!((m.pinned, m.on_data_host, m.remote_fetches), (m.tasks, 1.0, 0), "{m:?}")
            }
            ("all-pairs", "mdl") => assert_eq!((m.pinned, m.on_data_host), (m.tasks, 1.0), "{m:?}"),
            ("all-pairs", "mlb") => assert_eq!((m.pinned, m.shared), (0, m.tasks), "{m:?}"),
            _ => assert_eq!(m.pinned + m.shared, m.tasks, "{m:?}"),
        }
    }
    let lines = std::fs::read_to_string(out.join("matrix.jsonl")).expect("JSON lines");
    assert_eq!(lines.lines().count(), report.measurements.len());
    for line in lines.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    for stem in ["matrix_stacking", "matrix_allpairs_utilisation", "matrix_dag_utilisation"] {
        let png = std::fs::read(out.join(format!("{stem}.png"))).expect("PNG plot");
        assert_eq!(&png[1..4], b"PNG", "{stem}");
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).expect("SVG plot");
        assert!(svg.contains("<svg"), "{stem}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
