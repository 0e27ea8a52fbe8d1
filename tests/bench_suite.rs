//! `bolt bench all --quick` as a smoke test: every experiment runs one-level and two-level
//! on a namespace testbed of its own, every submitted task completes, every JSON line
//! parses and every plot is written. Timings are not checked (they belong to the
//! benchmarks, not to tests).

use std::path::Path;

use bolt_tests::{is_root, require, unique_name};
use scheduler_user::bench::suite::{self, SuiteArgs, EXPERIMENTS};

#[test]
fn the_quick_suite_runs_every_experiment_and_writes_well_formed_results() {
    if !require(is_root(), "root (network namespaces and XDP for the two-level runs)") {
        return;
    }
    let out = std::env::temp_dir().join(unique_name("bench"));
    let args = SuiteArgs {
        quick: true,
        only: Vec::new(),
        out: Some(out.clone()),
        testbed: unique_name("bs"),
        seed: 7,
        task_records: true,
        client_offset_ms: 0.0,
        sw1_hosts: scheduler_user::bench::sw1::DEFAULT_HOSTS,
        rounds: 2,
    };
    let report = suite::run(&args).expect("the quick suite runs");
    assert_eq!(report.experiments.len(), EXPERIMENTS.len(), "every registered experiment ran");
    for (name, o) in &report.experiments {
        // `peers` runs Bolt and the other schedulers on loopback, one-level; a peer that
        // cannot run is reported with its reason (tests/bench_peers.rs checks those).
        let both_levels = name != "peers";
        assert_eq!(o.submitted, o.completed, "{name}: every submitted task completed");
        assert!(
            !both_levels || o.fallbacks.is_empty(),
            "{name}: as root both levels run on the testbed: {:?}",
            o.fallbacks
        );
        assert!(o.table.contains("|---"), "{name}: a Markdown table");
        let text = std::fs::read_to_string(&o.jsonl).unwrap();
        assert_eq!(text.lines().count() as u64, o.lines);
        assert!(o.lines > 0, "{name}: JSON lines written");
        let mut levels = Vec::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
            assert_eq!(v["experiment"].as_str(), Some(name.as_str()));
            assert_eq!(v["level"], v["ran"], "{name}: ran the level asked for: {line}");
            levels.extend(v["level"].as_str().map(str::to_string));
            if let (Some(s), Some(c)) = (v["submitted"].as_u64(), v["completed"].as_u64()) {
                assert_eq!(s, c, "{name}: {line}");
            }
            if name == "sw1" {
                // The agents' host wait is recorded, for `bolt sim validate` to simulate.
                let wait = if v["level"] == "two-level" {
                    serde_json::json!(scheduler_common::maps::DEFAULT_HOST_WAIT_NS / 1_000_000)
                } else {
                    serde_json::Value::Null
                };
                assert_eq!(v["host_wait_ms"], wait, "{line}");
                // And the agents' nice value, which moves two-level's delays.
                let nice = if v["level"] == "two-level" {
                    serde_json::json!(scheduler_user::bench::cluster::AGENT_NICE)
                } else {
                    serde_json::Value::Null
                };
                assert_eq!(v["agent_nice"], nice, "{line}");
                assert!(v["executor_threads"]["stalls"].is_array(), "{line}");
                assert!(v["executor_threads"]["spells"].is_array(), "{line}");
                // The switch thread's times, for `bolt sim validate` to run tier 2 with.
                for k in ["switch_wait_ns", "switch_resume_ns", "switch_handle_ns", "switch_send_ns"] {
                    let q = v["executor_threads"][k].as_array().map_or(0, Vec::len);
                    assert_eq!(q, 14, "{k}: a value at each of metrics::QUANTILE_POINTS: {line}");
                }
            }
            if let Some(d) = v["decisions_per_s"].as_f64() {
                assert!(d > 0.0, "{name}: {line}");
            }
        }
        for level in ["one-level", "two-level"].iter().filter(|_| both_levels) {
            assert!(levels.iter().any(|l| l == level), "{name}: measured {level}");
        }
        assert!(o.submitted > 0 || name == "noop", "{name}: tasks ran");
        assert!(!o.plots.is_empty() && o.plots.len() % 2 == 0, "{name}: SVG and PNG per chart");
        for p in &o.plots {
            let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            match p.extension().and_then(|e| e.to_str()) {
                Some("png") => assert_eq!(&bytes[1..4], b"PNG", "{}", p.display()),
                Some("svg") => assert!(String::from_utf8_lossy(&bytes).contains("<svg"), "{}", p.display()),
                other => panic!("unexpected plot file {other:?}"),
            }
            assert!(p.starts_with(Path::new(&out)));
        }
    }
    // --rounds 2: every point's pair ran twice, and its tasks are pooled per level.
    let sw1 = &report.experiments.iter().find(|(n, _)| n == "sw1").expect("sw1 ran").1;
    let sw1_lines = std::fs::read_to_string(&sw1.jsonl).unwrap();
    let rounds: Vec<u64> = sw1_lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["round"].as_u64().expect("round"))
        .collect();
    assert_eq!(rounds.iter().filter(|&&r| r == 1).count(), rounds.iter().filter(|&&r| r == 2).count());
    let pooled = std::fs::read_to_string(out.join("sw1_pooled.jsonl")).expect("sw1_pooled.jsonl written");
    assert_eq!(pooled.lines().count() * 2, sw1_lines.lines().count(), "one pooled line per point and level");
    let pooled_tasks: u64 = pooled
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["tasks"].as_u64().expect("tasks"))
        .sum();
    assert_eq!(pooled_tasks, sw1.completed, "every task of both rounds pooled");
    assert!(sw1.table.contains("p99 ratio per round"), "{}", sw1.table);
    // --task-records: one timeline line per SW1 task that completed, each with its start.
    let tasks = std::fs::read_to_string(out.join("sw1_tasks.jsonl")).expect("sw1_tasks.jsonl written");
    assert_eq!(tasks.lines().count() as u64, sw1.completed);
    for line in tasks.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("sw1_tasks: {e}: {line}"));
        assert!(v["start_unix_ns"].as_u64() >= v["first_sent_unix_ns"].as_u64(), "{line}");
        assert!(v["node"].as_u64().is_some_and(|n| n > 0), "{line}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
