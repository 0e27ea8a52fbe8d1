//! `bolt bench peers --quick` as a smoke test: the whole comparison runs (Bolt in this
//! process, each peer's driver in the bench's venv), every JSON line is well formed, and
//! every system either reports numbers or says why it could not run. Timings are not
//! asserted: the machine is shared.

use std::collections::HashSet;

use bolt_tests::require;
use scheduler_user::bench::peers::{self, PeersArgs, Status, System};

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

#[test]
fn quick_comparison_reports_numbers_or_a_reason_for_every_system() {
    // cargo xtask setup installs both; without them every peer is reported unavailable,
    // which is correct output but would not exercise the peers.
    if !require(on_path("redis-server") && on_path("python3"), "redis-server and python3 (cargo xtask setup)") {
        return;
    }
    let args = PeersArgs::every_system(true);
    let report = peers::run(&args).expect("the bench runs");

    let machine: serde_json::Value = serde_json::to_value(&report.machine).unwrap();
    assert_eq!((machine["experiment"].as_str(), machine["kind"].as_str()), (Some("peers"), Some("machine")));
    assert!(machine["cpus"].as_u64().unwrap() > 0);

    // One measurement per system and workload, none dropped.
    let pairs: HashSet<(System, &str)> = report.measurements.iter().map(|m| (m.system, m.workload)).collect();
    assert_eq!(pairs.len(), report.measurements.len(), "a pair measured twice");
    for system in System::ALL {
        for workload in ["noop", "sleep"] {
            assert!(pairs.contains(&(system, workload)), "{system} {workload} missing");
        }
    }

    for m in &report.measurements {
        let line: serde_json::Value = serde_json::from_str(&serde_json::to_string(m).unwrap()).unwrap();
        for key in ["experiment", "system", "workload", "tasks", "workers", "status", "throughput_tasks_per_s"] {
            assert!(line.get(key).is_some(), "{key} missing in {line}");
        }
        assert_eq!(line["experiment"], "peers");
        assert_eq!((m.tasks, m.workers), (1000, 4));
        match m.status {
            Status::Ok => {
                assert!(m.throughput_tasks_per_s.unwrap() > 0.0, "{line}");
                let (p50, p99) = (m.delay_p50_us.unwrap(), m.delay_p99_us.unwrap());
                assert!(p50 > 0.0 && p99 >= p50, "{line}");
                assert!(m.burst_delay_p50_us.unwrap() > 0.0, "{line}");
                // A result comes back after its task started, task by task, so every
                // quantile of submit → result is at least that of submit → start.
                let (r50, r99) = (m.result_p50_us.unwrap(), m.result_p99_us.unwrap());
                assert!(r50 >= p50 && r99 >= r50 && r99 >= p99, "{line}");
                let (b50, b99) = (m.burst_result_p50_us.unwrap(), m.burst_result_p99_us.unwrap());
                assert!(b50 >= m.burst_delay_p50_us.unwrap() && b99 >= b50, "{line}");
                // 25 waves of one task per worker.
                assert_eq!(m.idle_tasks, Some(100), "{line}");
                assert!(m.reason.is_none(), "{line}");
            }
            Status::Unavailable | Status::Failed => {
                assert!(
                    !matches!(m.system, System::Bolt | System::UdpFloor),
                    "Bolt and the floor run in this process and need nothing installed: {line}"
                );
                assert!(m.reason.as_ref().is_some_and(|r| !r.trim().is_empty()), "no reason: {line}");
                assert!(m.throughput_tasks_per_s.is_none(), "{line}");
            }
        }
    }

    // A ratio for every peer that ran, from Bolt's numbers of the same run.
    let ran = report.measurements.iter().filter(|m| m.status == Status::Ok && m.system != System::Bolt).count();
    assert_eq!(report.ratios.len(), ran);
    for r in &report.ratios {
        assert!(r.throughput_bolt_over_peer > 0.0 && r.delay_p50_bolt_over_peer > 0.0, "{r:?}");
    }
    for m in report.measurements.iter().filter(|m| m.status != Status::Ok) {
        eprintln!("{} {}: {:?}: {}", m.system, m.workload, m.status, m.reason.as_deref().unwrap_or(""));
    }
}
