//! `bolt sim validate`: the simulator against the namespace testbed, point by point.
//!
//! The testbed's figures come from `bolt bench all --only sw1 --only trace` runs (each a
//! directory with `sw1.jsonl` and `trace.jsonl`): per point, the scheduling delay's
//! median and p99, and what the executors' threads added to each task in that same run
//! (`ThreadTimes`: the wait from the ASSIGN's arrival stamp to the task starting, the
//! sleep's overshoot). For each run the simulator is configured with the point's
//! workload and scale and draws each task's wait and overshoot, and tier 2's thread's
//! wait for a CPU, from that run's measurements; the delays themselves are never an
//! input. A single testbed run moves from the next by tens of per cent at some SW1
//! points (tasks as long as the interval between jobs: whether an executor is free at
//! the next submission turns on its overshoot), so points are compared as the median
//! over runs. Without directories, the three runs committed in
//! docs/bench-results/sim-validate-late/ are used (`--client-offset-ms 5`: the SW1
//! clients' phase, which moves the testbed's medians, fixed and simulated; with the
//! software switch's thread times recorded, its handling by op and its resumption, the
//! machine's slow spells, and how late the clients sent their jobs).

use std::path::PathBuf;

use anyhow::Context as _;

use super::calibrate::ThreadTimes;
use super::executors::Draw;
use super::spells::Spells;
use super::tofino::SwitchThread;
use super::{SimConfig, System, WorkloadSpec};
use crate::bench::cluster::Level;
use crate::bench::suite::LevelFields;
use crate::bench::sw1;
use crate::bench::trace::SummaryLine;
use crate::bench::workload::TraceParams;

/// Worker hosts of the testbed's trace experiment (`bench::trace`); SW1's lines say
/// theirs (`--sw1-hosts`).
pub const TESTBED_HOSTS: u32 = 2;

/// The committed runs: (name, sw1.jsonl, trace.jsonl).
const COMMITTED: [(&str, &str, &str); 3] = [
    (
        "run1",
        include_str!("../../../docs/bench-results/sim-validate-late/run1/sw1.jsonl"),
        include_str!("../../../docs/bench-results/sim-validate-late/run1/trace.jsonl"),
    ),
    (
        "run2",
        include_str!("../../../docs/bench-results/sim-validate-late/run2/sw1.jsonl"),
        include_str!("../../../docs/bench-results/sim-validate-late/run2/trace.jsonl"),
    ),
    (
        "run3",
        include_str!("../../../docs/bench-results/sim-validate-late/run3/sw1.jsonl"),
        include_str!("../../../docs/bench-results/sim-validate-late/run3/trace.jsonl"),
    ),
];

/// One testbed measurement and the simulator's configuration for it.
pub struct TestbedPoint {
    pub name: String,
    pub cfg: SimConfig,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The delays' part before the executor's thread (first send → the ASSIGN's arrival
    /// stamp), median and p99, ms; None in lines made before it was recorded.
    pub before_arrival_ms: Option<(f64, f64)>,
}

/// The median and p99 of a quantile table at `QUANTILE_POINTS`, ms.
fn median_and_p99_ms(q: &[(f64, super::clock::Nanos)]) -> Option<(f64, f64)> {
    let at = |p: f64| q.iter().find(|&&(x, _)| x == p).map(|&(_, ns)| ns as f64 / 1e6);
    Some((at(0.5)?, at(0.99)?))
}

fn system(level: &LevelFields) -> anyhow::Result<System> {
    anyhow::ensure!(
        level.level == level.ran && level.fallback.is_none(),
        "a point ran {} instead of {} ({}): not the testbed",
        level.ran.name(),
        level.level.name(),
        level.fallback.as_deref().unwrap_or("no reason given")
    );
    Ok(match level.level {
        Level::OneLevel => System::OneLevel,
        Level::TwoLevel => System::TwoLevel,
    })
}

fn with_threads(mut cfg: SimConfig, t: ThreadTimes, point: &str) -> anyhow::Result<SimConfig> {
    anyhow::ensure!(
        !t.wait_ns.is_empty() && !t.overshoot_ns.is_empty(),
        "{point}: the run recorded no executor thread times (made before they were)"
    );
    // The software switch is one more thread woken on the cores the executors share: its
    // own wake-up wait where the run recorded it, else the executors'.
    let switch_wait = if t.switch_wait_ns.is_empty() { t.wait_ns.clone() } else { t.switch_wait_ns };
    cfg.switch_cpu_wait = Draw::Quantiles(switch_wait);
    // Its handling and sending as measured, where the run recorded them, instead of the
    // pipeline rate measured stand-alone; its resumption between batches where recorded.
    if !t.switch_handle_ns.is_empty() && !t.switch_send_ns.is_empty() {
        let mut thread = SwitchThread::new(Draw::Quantiles(t.switch_handle_ns), Draw::Quantiles(t.switch_send_ns));
        thread.resume = (!t.switch_resume_ns.is_empty()).then_some(Draw::Quantiles(t.switch_resume_ns));
        thread.handle_by_op = t
            .switch_handle_by_op_ns
            .into_iter()
            .filter(|(_, q)| !q.is_empty())
            .filter_map(|(name, q)| {
                crate::queue::ORIGINS.iter().find(|op| op.name() == name).map(|op| (op.name(), Draw::Quantiles(q)))
            })
            .collect();
        cfg.tofino.thread = Some(thread);
    }
    cfg.exec.cpu_wait = Draw::Quantiles(t.wait_ns);
    cfg.exec.run_overhead = Draw::Quantiles(t.overshoot_ns);
    // The clients' lateness as measured, where the run recorded it; else the testbed
    // configuration's model of their timer stays.
    if !t.client_late_ns.is_empty() {
        cfg.client_late = Draw::Quantiles(t.client_late_ns);
    }
    cfg.stalls = t.stalls.iter().map(|s| (s.at_ns, s.at_ns + s.len_ns)).collect();
    let spells: Vec<_> = t.spells.iter().map(|s| (s.at_ns, s.at_ns + s.len_ns)).collect();
    cfg.spells = std::sync::Arc::new(Spells::new(spells, t.spell_span_ns));
    if let Some(thread) = cfg.tofino.thread.as_mut() {
        thread.spells = cfg.spells.clone();
    }
    Ok(cfg)
}

/// The host wait the run's agents had: none recorded means executors waited at tier 2.
fn host_wait_ns(level: &LevelFields) -> super::clock::Nanos {
    level.host_wait_ms.unwrap_or(0) * 1_000_000
}

/// The points of one testbed run: every SW1 line, and the trace's sleep-executor lines
/// (the simulator's executors sleep). `seed` seeds the simulator's own draws.
pub fn testbed_points(sw1: &str, trace: &str, seed: u64) -> anyhow::Result<Vec<TestbedPoint>> {
    let mut points = Vec::new();
    for (i, line) in sw1.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let l: sw1::Line = serde_json::from_str(line).with_context(|| format!("sw1.jsonl line {}", i + 1))?;
        let round = if l.round > 1 { format!(", round {}", l.round) } else { String::new() };
        let name = format!("SW1 {:.0} %{round}", l.utilization * 100.0);
        let system = system(&l.level)?;
        let w = WorkloadSpec::Sw1 {
            utilization: l.utilization,
            seconds: 4.0,
            client_offset_ns: (l.client_offset_ms * 1e6) as super::clock::Nanos,
        };
        let before_arrival_ms = median_and_p99_ms(&l.executor_threads.before_arrival_ns);
        let mut cfg =
            with_threads(SimConfig::testbed(system, w, l.executors, l.hosts, seed), l.executor_threads, &name)?;
        cfg.host_wait_ns = host_wait_ns(&l.level);
        points.push(TestbedPoint {
            name,
            cfg,
            p50_ms: l.p50_sched_delay_ms,
            p99_ms: l.p99_sched_delay_ms,
            before_arrival_ms,
        });
    }
    for (i, line) in trace.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let at = || format!("trace.jsonl line {}", i + 1);
        let v: serde_json::Value = serde_json::from_str(line).with_context(at)?;
        if v["kind"] != "summary" || v["work"] != "sleep" {
            continue;
        }
        let l: SummaryLine = serde_json::from_value(v).with_context(at)?;
        let round = if l.round > 1 { format!(", round {}", l.round) } else { String::new() };
        let name = format!("trace {:.0} %{round}", l.trace.load * 100.0);
        let system = system(&l.level)?;
        let params = TraceParams::new(l.trace.seed, l.trace.seconds, l.executors, l.trace.load);
        let w = WorkloadSpec::Trace { params, clients: 1 };
        let before_arrival_ms = median_and_p99_ms(&l.executor_threads.before_arrival_ns);
        let mut cfg =
            with_threads(SimConfig::testbed(system, w, l.executors, TESTBED_HOSTS, seed), l.executor_threads, &name)?;
        cfg.host_wait_ns = host_wait_ns(&l.level);
        points.push(TestbedPoint {
            name,
            cfg,
            p50_ms: l.sched_delay_ms.p50,
            p99_ms: l.sched_delay_ms.p99,
            before_arrival_ms,
        });
    }
    anyhow::ensure!(!points.is_empty(), "no SW1 or sleep-trace points to validate against");
    // One-level first, then two-level, each in the order run.
    points.sort_by_key(|p| p.cfg.system != System::OneLevel);
    Ok(points)
}

/// One testbed run's points.
pub struct Run {
    pub name: String,
    pub points: Vec<TestbedPoint>,
}

/// The runs in `dirs` (each with sw1.jsonl and trace.jsonl), or the committed runs if
/// there are none. Run `i` seeds the simulator with `seed + i`.
pub fn load(dirs: &[PathBuf], seed: u64) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    if dirs.is_empty() {
        for (i, (name, sw1, trace)) in COMMITTED.iter().enumerate() {
            runs.push(Run { name: name.to_string(), points: testbed_points(sw1, trace, seed + i as u64)? });
        }
    }
    for (i, dir) in dirs.iter().enumerate() {
        let read = |f: &str| {
            let p = dir.join(f);
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
        };
        let points = testbed_points(&read("sw1.jsonl")?, &read("trace.jsonl")?, seed + i as u64)
            .with_context(|| format!("in {}", dir.display()))?;
        runs.push(Run { name: dir.display().to_string(), points });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_runs_give_sw1_and_trace_points_at_both_levels_with_their_own_thread_times_and_switch() {
        let runs = load(&[], 1).unwrap();
        assert_eq!(runs.len(), 3);
        let points = &runs[0].points;
        assert!(runs.iter().all(|r| r.points.len() == points.len()), "every run has the same points");
        for system in [System::OneLevel, System::TwoLevel] {
            let of: Vec<&TestbedPoint> = points.iter().filter(|p| p.cfg.system == system).collect();
            assert!(of.iter().any(|p| p.name.starts_with("SW1")), "{system:?} has SW1");
            assert!(of.iter().any(|p| p.name.starts_with("trace")), "{system:?} has the trace");
            for p in of {
                assert!(p.p50_ms > 0.0 && p.p99_ms >= p.p50_ms, "{}: {} / {}", p.name, p.p50_ms, p.p99_ms);
                assert!(matches!(p.cfg.exec.cpu_wait, Draw::Quantiles(ref q) if q.len() > 2), "{}", p.name);
                assert!(matches!(p.cfg.switch_cpu_wait, Draw::Quantiles(ref q) if q.len() > 2), "{}", p.name);
                let thread = p.cfg.tofino.thread.as_ref().expect("the switch's thread as measured");
                assert!(thread.resume.is_some(), "{}: its resumption as measured", p.name);
                let submit = thread.handle_by_op.iter().any(|(op, _)| *op == "SUBMIT");
                assert!(submit, "{}: a SUBMIT's handling as measured", p.name);
                assert!(p.before_arrival_ms.is_some_and(|(m, p99)| m > 0.0 && p99 >= m), "{}", p.name);
                assert!(matches!(p.cfg.client_late, Draw::Quantiles(ref q) if q.len() > 2), "{}", p.name);
            }
        }
        let sw1 = || runs.iter().flat_map(|r| &r.points).filter(|p| p.name.starts_with("SW1"));
        assert!(sw1().any(|p| p.cfg.spells.share() > 0.0), "the runs' slow spells are replayed");
        assert!(sw1().all(|p| p.cfg.spells.share() < 0.5), "spells are the exception");
    }

    #[test]
    fn a_point_that_fell_back_to_loopback_or_has_no_thread_times_is_refused() {
        let good = r#"{"level":"one-level","ran":"one-level","fallback":null,"xdp_share":null,"tier1_returned":null,"stolen":null,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]]}}"#;
        let points = testbed_points(good, "", 1).unwrap();
        assert_eq!((points.len(), points[0].name.as_str()), (1, "SW1 40 %"));
        let fell_back =
            good.replace(r#""ran":"one-level","fallback":null"#, r#""ran":"one-level","fallback":"not root""#);
        let e = testbed_points(&fell_back, "", 1).err().expect("refused");
        assert!(e.to_string().contains("not the testbed"), "{e}");
        let old = good.split(r#","executor_threads""#).next().unwrap().to_string() + "}";
        let e = testbed_points(&old, "", 1).err().expect("refused");
        assert!(e.to_string().contains("no executor thread times"), "{e}");
    }

    /// Tier 2's thread waits as the run's switch did where its line recorded that, and as
    /// the run's executors did in a line made before.
    #[test]
    fn the_simulated_switch_waits_as_the_runs_switch_did_where_recorded() {
        let before = r#"{"level":"one-level","ran":"one-level","fallback":null,"xdp_share":null,"tier1_returned":null,"stolen":null,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]]}}"#;
        let switch_wait = |line: &str| match &testbed_points(line, "", 1).unwrap()[0].cfg.switch_cpu_wait {
            Draw::Quantiles(q) => q.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(switch_wait(before), vec![(0.0, 1000), (1.0, 2000)]);
        let recorded = before.replace(
            r#""overshoot_ns":[[0.0,5000],[1.0,9000]]"#,
            r#""overshoot_ns":[[0.0,5000],[1.0,9000]],"switch_wakeups":7,"switch_wait_ns":[[0.0,300],[1.0,700]]"#,
        );
        assert_eq!(switch_wait(&recorded), vec![(0.0, 300), (1.0, 700)]);
    }

    /// The thread's handling by op and its resumption are the run's where its line
    /// recorded them; without them every op draws from the handling of all messages and
    /// the thread is back at its socket at once.
    #[test]
    fn the_simulated_switch_handles_each_op_and_resumes_as_the_run_did_where_recorded() {
        let line = r#"{"level":"one-level","ran":"one-level","fallback":null,"xdp_share":null,"tier1_returned":null,"stolen":null,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]],"switch_wait_ns":[[0.0,300],[1.0,700]],"switch_handle_ns":[[0.0,1000],[1.0,3000]],"switch_send_ns":[[0.0,5000],[1.0,9000]]}}"#;
        let thread = |line: &str| testbed_points(line, "", 1).unwrap()[0].cfg.tofino.thread.clone().expect("measured");
        let t = thread(line);
        assert!(t.resume.is_none() && t.handle_by_op.is_empty());
        assert_eq!(t.handling(scheduler_common::Op::Submit), &Draw::Quantiles(vec![(0.0, 1000), (1.0, 3000)]));
        let recorded = line.replace(
            r#""switch_send_ns""#,
            r#""switch_resume_ns":[[0.0,50],[1.0,90]],"switch_handle_by_op_ns":{"SUBMIT":[[0.0,8000],[1.0,20000]],"NOT_AN_OP":[[0.0,1],[1.0,2]]},"switch_send_ns""#,
        );
        let t = thread(&recorded);
        assert_eq!(t.resume, Some(Draw::Quantiles(vec![(0.0, 50), (1.0, 90)])));
        assert_eq!(t.handling(scheduler_common::Op::Submit), &Draw::Quantiles(vec![(0.0, 8000), (1.0, 20000)]));
        assert_eq!(t.handling(scheduler_common::Op::GetTask), &Draw::Quantiles(vec![(0.0, 1000), (1.0, 3000)]));
        assert_eq!(t.handle_by_op.len(), 1, "an op it does not know is left out");
    }

    /// The run's slow spells reach the simulator, its executors' draws and its switch
    /// thread's, with the share of the run they cover; a line without them has none.
    #[test]
    fn the_runs_slow_spells_are_simulated_where_recorded() {
        let line = r#"{"level":"one-level","ran":"one-level","fallback":null,"xdp_share":null,"tier1_returned":null,"stolen":null,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]],"switch_wait_ns":[[0.0,300],[1.0,700]],"switch_handle_ns":[[0.0,1000],[1.0,3000]],"switch_send_ns":[[0.0,5000],[1.0,9000]]}}"#;
        let cfg = |line: &str| testbed_points(line, "", 1).unwrap().remove(0).cfg;
        assert_eq!(cfg(line).spells.share(), 0.0);
        let with = line.replace(
            r#""switch_send_ns""#,
            r#""spells":[{"at_ns":100000000,"len_ns":20000000},{"at_ns":300000000,"len_ns":20000000}],"spell_span_ns":4000000000,"switch_send_ns""#,
        );
        let c = cfg(&with);
        assert!((c.spells.share() - 0.01).abs() < 1e-12);
        assert!(c.spells.contains(110_000_000) && !c.spells.contains(200_000_000));
        assert_eq!(c.tofino.thread.expect("measured").spells, c.spells);
    }

    /// The clients send as late as the run's did where its line recorded that, and by the
    /// testbed's timer model in a line made before.
    #[test]
    fn the_simulated_clients_are_as_late_as_the_runs_where_recorded() {
        let line = r#"{"level":"one-level","ran":"one-level","fallback":null,"xdp_share":null,"tier1_returned":null,"stolen":null,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]]}}"#;
        let late = |line: &str| testbed_points(line, "", 1).unwrap().remove(0).cfg.client_late;
        assert_eq!(late(line), super::super::testbed_client_late());
        let recorded = line.replace(
            r#""overshoot_ns":[[0.0,5000],[1.0,9000]]"#,
            r#""overshoot_ns":[[0.0,5000],[1.0,9000]],"client_late_ns":[[0.0,800000],[1.0,2100000]]"#,
        );
        assert_eq!(late(&recorded), Draw::Quantiles(vec![(0.0, 800_000), (1.0, 2_100_000)]));
    }

    /// A two-level run's executors waited at their host as long as its line says; a line
    /// made before they could (no `host_wait_ms`) is simulated with them waiting at tier 2.
    #[test]
    fn the_simulated_host_wait_is_the_runs() {
        let two = r#"{"level":"two-level","ran":"two-level","fallback":null,"xdp_share":0.9,"tier1_returned":0,"stolen":0,"host_wait_ms":10,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]]}}"#;
        assert_eq!(testbed_points(two, "", 1).unwrap()[0].cfg.host_wait_ns, 10_000_000);
        let before = two.replace(r#""host_wait_ms":10,"#, "");
        assert_eq!(testbed_points(&before, "", 1).unwrap()[0].cfg.host_wait_ns, 0);
    }

    /// A run's executors are simulated on as many hosts as its line says (`--sw1-hosts`);
    /// a line made before it could say is a run on the two hosts there were.
    #[test]
    fn the_simulated_sw1_runs_on_the_runs_hosts() {
        let two = r#"{"level":"two-level","ran":"two-level","fallback":null,"xdp_share":0.9,"tier1_returned":0,"stolen":0,"utilization":0.4,"executors":40,"tasks_per_job":8,"jobs":800,"submitted":6400,"completed":6400,"p50_job_ms":10.4,"p99_job_ms":11.2,"p50_sched_delay_ms":0.3,"p99_sched_delay_ms":1.2,"executor_threads":{"waits":2,"sleeps":2,"wait_ns":[[0.0,1000],[1.0,2000]],"overshoot_ns":[[0.0,5000],[1.0,9000]]}}"#;
        assert_eq!(testbed_points(two, "", 1).unwrap()[0].cfg.executors_per_host, 20);
        let one_host = two.replace(r#""executors":40,"#, r#""executors":40,"hosts":1,"#);
        assert_eq!(testbed_points(&one_host, "", 1).unwrap()[0].cfg.executors_per_host, 40);
    }
}
