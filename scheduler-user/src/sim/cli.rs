//! `bolt sim`: one configuration (`run`), the scale sweep of the five systems (`sweep`),
//! and the testbed-scale runs that validate the model against the testbed (`validate`).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use super::report::fmt_us;
use super::{run, Report, SimConfig, System};
use crate::bench::plot::{self, Chart, Scale, Series};
use scheduler_common::maps::DEFAULT_HOST_WAIT_NS;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// Simulate one system at one scale (the scale workload: 5-ms tasks at --load).
    Run(RunArgs),
    /// Median and p99 scheduling delay of all five systems against the executor count.
    Sweep(SweepArgs),
    /// One-level and two-level Bolt on the testbed's scale and workloads (SW1, trace),
    /// against a testbed run's delays, drawing the executors' thread times from that run.
    Validate(ValidateArgs),
    /// Measure, on this machine, the wait for a CPU and the sleep overshoot of sleeping
    /// executor threads alone (the simulator's testbed defaults; `validate` draws from
    /// those measured in the testbed runs themselves).
    Calibrate(CalibrateArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[arg(long, value_enum, default_value = "two-level")]
    pub system: System,
    #[arg(long, default_value_t = 1000)]
    pub executors: u32,
    /// Offered load, as a fraction of the executors' capacity.
    #[arg(long, default_value_t = 0.9)]
    pub load: f64,
    /// Simulated seconds of submissions (default: by scale, see `bolt sim sweep --help`).
    #[arg(long)]
    pub seconds: Option<f64>,
    #[arg(long, default_value_t = 2021)]
    pub seed: u64,
    /// Tier-2 pipeline passes per second (default: the thesis's measured 23 M/s).
    #[arg(long)]
    pub passes_per_sec: Option<f64>,
    /// CloudKon's one-way latency to its global queue, µs.
    #[arg(long)]
    pub cloudkon_us: Option<u64>,
    /// Tier 2 as bolt.p4 builds it: no park table, no HINT (executors and agents poll;
    /// executors do not wait at their host).
    #[arg(long)]
    pub as_built: bool,
    /// HINTs tier 2 sends per level turning non-empty, at most (default: 16, the
    /// switch's; the fewer of it and the tasks the enqueue brought).
    #[arg(long, value_name = "N")]
    pub hint_fanout: Option<usize>,
    /// Two-level: how long an executor whose GET_TASK finds its host's rings empty waits
    /// there for the agent's next REFILL, ms (`bolt agent --host-wait-ms`); 0: it goes on
    /// to tier 2 and waits in its park table.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_HOST_WAIT_NS / 1_000_000)]
    pub host_wait_ms: u64,
    /// MATRIX: every STEAL message its own event (default: those an event sends that
    /// arrive at the same instant travel as one).
    #[arg(long)]
    pub unbatched_steals: bool,
    /// Print no progress bar.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Executor counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000u32, 10_000, 100_000, 1_000_000])]
    pub executors: Vec<u32>,
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = System::ALL)]
    pub systems: Vec<System>,
    #[arg(long, default_value_t = 0.9)]
    pub load: f64,
    #[arg(long, default_value_t = 2021)]
    pub seed: u64,
    /// Tier-2 pipeline passes per second (default: the thesis's measured 23 M/s).
    #[arg(long)]
    pub passes_per_sec: Option<f64>,
    /// Two-level: how long an executor whose GET_TASK finds its host's rings empty waits
    /// there for the agent's next REFILL, ms (`bolt agent --host-wait-ms`); 0: it goes on
    /// to tier 2 and waits in its park table.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_HOST_WAIT_NS / 1_000_000)]
    pub host_wait_ms: u64,
    /// Simulated seconds of submissions for every point (default: by scale, about 5 M
    /// tasks a point: 2 s up to 13,900 executors, 50 ms at 1,000,000).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Where the JSON lines, the table and the plots go.
    #[arg(long, default_value = "target/sim")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// A `bolt bench all --only sw1 --only trace` results directory (its sw1.jsonl and
    /// trace.jsonl) to validate against (repeat for several runs; each run is compared
    /// with its own simulation, and a point is off by the middle of its runs' errors); default: the three runs committed in
    /// docs/bench-results/sim-validate-late/ (made with
    /// --client-offset-ms 5).
    #[arg(long, value_name = "DIR")]
    pub testbed: Vec<PathBuf>,
    /// Seed of the simulator's own draws (the trace's seed is the testbed run's).
    #[arg(long, default_value_t = 2021)]
    pub seed: u64,
    /// Simulations of each run, with seeds 1,000 apart; the middle of their delays is
    /// the run's (a simulated p99 moves with the seed as a run's does).
    #[arg(long, default_value_t = 3)]
    pub draws: u32,
    /// Directory for validate.jsonl: one line per run, point and draw, the testbed's delays
    /// beside the simulator's report.
    #[arg(long, default_value = "target/sim")]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Executor threads (the testbed's SW1 runs 40).
    #[arg(long, default_value_t = 40)]
    pub threads: usize,
    /// Task length, ms (SW1's tasks: 10 ms).
    #[arg(long, default_value_t = 10)]
    pub task_ms: u64,
    /// Utilisations to measure at, one after the other.
    #[arg(long, value_delimiter = ',', default_values_t = [0.4, 0.7, 0.9])]
    pub utilisation: Vec<f64>,
    /// Seconds per utilisation (SW1: 4 s per point).
    #[arg(long, default_value_t = 4.0)]
    pub seconds: f64,
    #[arg(long, default_value = "target/sim")]
    pub out: PathBuf,
}

pub fn run_cli(args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Run(a) => {
            let mut cfg =
                scale_config(a.system, a.executors, a.load, a.seconds, a.seed, a.passes_per_sec, a.cloudkon_us);
            if a.as_built {
                cfg.tofino = cfg.tofino.as_built();
            }
            if let Some(n) = a.hint_fanout {
                cfg.tofino.hint_fanout = n;
            }
            cfg.batch_steals = !a.unbatched_steals;
            // A switch that parks no REFILL_REQ leaves executors nothing to wait for at
            // their host (`bolt agent --host-wait-ms`).
            cfg.host_wait_ns = if a.as_built { 0 } else { a.host_wait_ms * 1_000_000 };
            let r = run_with_bar(&cfg, !a.quiet)?;
            println!("{}", serde_json::to_string(&r)?);
            eprintln!("{}", summary(&r));
            Ok(())
        }
        SimCommand::Sweep(a) => sweep(&a),
        SimCommand::Validate(a) => validate(&a),
        SimCommand::Calibrate(a) => calibrate(&a),
    }
}

/// Simulated seconds of submissions at a scale: about 5 M tasks per run at 90 % load
/// (2 s at up to 13,900 executors, 50 ms at 1,000,000).
pub fn default_seconds(executors: u32) -> f64 {
    (27_778.0 / executors as f64).clamp(0.05, 2.0)
}

pub fn scale_config(
    system: System,
    executors: u32,
    load: f64,
    seconds: Option<f64>,
    seed: u64,
    passes_per_sec: Option<f64>,
    cloudkon_us: Option<u64>,
) -> SimConfig {
    let seconds = seconds.unwrap_or_else(|| default_seconds(executors));
    let mut cfg = SimConfig::scale(system, executors, load, seconds, seed);
    if let Some(p) = passes_per_sec {
        cfg.tofino.passes_per_sec = p;
    }
    if let Some(us) = cloudkon_us {
        cfg.cloudkon.queue_one_way_ns = us * 1000;
    }
    cfg
}

fn run_with_bar(cfg: &SimConfig, bar: bool) -> anyhow::Result<Report> {
    let end_ms = ((cfg.workload.seconds() + cfg.drain_s) * 1000.0) as u64;
    let pb = bar.then(|| {
        let pb = ProgressBar::new(end_ms);
        pb.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} simulated ms ({elapsed})")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        pb.set_message(format!("{} {} executors", cfg.system.name(), cfg.executors));
        pb
    });
    let r = run(cfg, pb.as_ref());
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    r
}

fn summary(r: &Report) -> String {
    let hits = r.tier1_hits_per_task.map_or(String::new(), |h| format!(", {:.0} % of tasks from the rings", h * 100.0));
    let sw = r.switch.as_ref().map_or(String::new(), |s| {
        format!(
            "{hits}, switch {:.3} pkts in/task, {:.2} passes/task, {:.3} HINTs/task, pipeline {:.0} %, {} dropped",
            s.packets_in_per_task,
            s.passes_per_task,
            s.hints_per_task,
            s.utilisation * 100.0,
            s.dropped
        )
    });
    format!(
        "{} {} executors: p50 {} p99 {} ({} of {} measured tasks started){}; {} events in {:.1} s ({:.2} M/s), peak RSS {:.0} MiB",
        r.system,
        r.executors,
        fmt_us(r.p50_us),
        fmt_us(r.p99_us),
        r.tasks_started,
        r.tasks_measured,
        sw,
        r.events,
        r.wall_s,
        r.events_per_s / 1e6,
        r.peak_rss_mib
    )
}

fn jsonl(out: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(out)?;
    Ok(std::fs::File::create(out.join(format!("{name}.jsonl")))?)
}

fn sweep(a: &SweepArgs) -> anyhow::Result<()> {
    // Runs append to sweep.jsonl; the table and the plots cover every line in it, so a
    // sweep can be run in parts.
    std::fs::create_dir_all(&a.out)?;
    let path = a.out.join("sweep.jsonl");
    let mut lines = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
    for &n in &a.executors {
        for &system in &a.systems {
            let mut cfg = scale_config(system, n, a.load, a.seconds, a.seed, a.passes_per_sec, None);
            cfg.host_wait_ns = a.host_wait_ms * 1_000_000;
            let r = run_with_bar(&cfg, true)?;
            eprintln!("{}", summary(&r));
            writeln!(lines, "{}", serde_json::to_string(&r)?)?;
        }
    }
    // The latest line of each (executors, system) counts.
    let mut latest = std::collections::BTreeMap::new();
    for line in std::fs::read_to_string(&path)?.lines() {
        let r: Report = serde_json::from_str(line)?;
        latest.insert((r.executors, r.system.clone()), r);
    }
    let results: Vec<Report> = latest.into_values().collect();
    println!("| executors | system | sched. delay p50 | p99 | switch pkts in / task | passes / task | pipeline load | events | wall (s) | events/s | peak RSS (MiB) |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &results {
        let (pk, pa, ut) = r.switch.as_ref().map_or(("–".into(), "–".into(), "–".into()), |s| {
            (
                format!("{:.3}", s.packets_in_per_task),
                format!("{:.2}", s.passes_per_task),
                format!("{:.0} %", s.utilisation * 100.0),
            )
        });
        println!(
            "| {} | {} | {} | {} | {pk} | {pa} | {ut} | {} | {:.1} | {:.2} M | {:.0} |",
            r.executors,
            r.system,
            fmt_us(r.p50_us),
            fmt_us(r.p99_us),
            r.events,
            r.wall_s,
            r.events_per_s / 1e6,
            r.peak_rss_mib
        );
    }
    for (q, stem, what) in [(0.5, "sim_p50", "median"), (0.99, "sim_p99", "p99")] {
        let series = System::ALL
            .iter()
            .map(|&s| {
                let points = results
                    .iter()
                    .filter(|r| r.system == s.name())
                    .filter_map(|r| {
                        let v = if q == 0.5 { r.p50_us } else { r.p99_us };
                        v.map(|us| (r.executors as f64, us / 1000.0))
                    })
                    .collect();
                Series::new(s.name(), points)
            })
            .collect();
        let chart = Chart::new(
            format!("Simulated {what} scheduling delay at {:.0} % load", a.load * 100.0),
            "executors",
            "scheduling delay (ms)",
            Scale::Log,
            series,
        );
        plot::render(&chart, &a.out, stem)?;
    }
    // Switch packets and pipeline passes per task run, and the pipeline's load: where
    // one-level Bolt saturates its pipeline.
    type Metric = fn(&super::report::SwitchReport) -> f64;
    let metrics: [(&str, &str, &str, Metric); 3] = [
        ("sim_packets", "Switch packets in per task run", "packets / task", |s| s.packets_in_per_task),
        ("sim_passes", "Pipeline passes per task run", "passes / task", |s| s.passes_per_task),
        ("sim_pipeline_load", "Pipeline load (passes over the budget)", "load (%)", |s| s.utilisation * 100.0),
    ];
    for (stem, title, y, metric) in metrics {
        let series = [System::OneLevel, System::TwoLevel]
            .iter()
            .map(|&s| {
                let points = results
                    .iter()
                    .filter(|r| r.system == s.name())
                    .filter_map(|r| r.switch.as_ref().map(|sw| (r.executors as f64, metric(sw))))
                    .collect();
                Series::new(s.name(), points)
            })
            .collect();
        plot::render(&Chart::new(title, "executors", y, Scale::Log, series), &a.out, stem)?;
    }
    eprintln!("results in {}", a.out.display());
    Ok(())
}

fn calibrate(a: &CalibrateArgs) -> anyhow::Result<()> {
    let mut lines = jsonl(&a.out, "calibrate")?;
    let us = |q: &[(f64, super::clock::Nanos)]| {
        q.iter().map(|(p, ns)| format!("p{}={:.0}", p * 100.0, *ns as f64 / 1e3)).collect::<Vec<_>>().join(" ")
    };
    for &u in &a.utilisation {
        let c = super::calibrate::measure(a.threads, std::time::Duration::from_millis(a.task_ms), u, a.seconds)?;
        writeln!(lines, "{}", serde_json::to_string(&c)?)?;
        println!("utilisation {:.0} %, {} tasks, load average {:?}", u * 100.0, c.tasks, c.load_average);
        println!("  wait for a CPU (µs): {}", us(&c.wait_ns));
        println!("  sleep overshoot (µs): {}", us(&c.overshoot_ns));
    }
    eprintln!("results in {}", a.out.join("calibrate.jsonl").display());
    Ok(())
}

/// Seeds of a run's draws are this far apart (run i's first is `--seed` + i).
const DRAW_SEED_STRIDE: u64 = 1_000;

/// The middle value (the lower of the middle two for an even count); a saturated
/// simulation is infinite and sorts last.
fn middle(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

/// How far off a point is: the middle over its runs of each (simulated, testbed) pair's
/// relative error, so that each run is judged against the simulation of its own threads.
fn run_by_run_error(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    middle(&pairs.map(|(simulated, testbed)| simulated / testbed - 1.0).collect::<Vec<_>>())
}

fn validate(a: &ValidateArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.draws >= 1, "--draws must be at least 1");
    let runs = super::validate::load(&a.testbed, a.seed)?;
    let mut lines = jsonl(&a.out, "validate")?;
    // Per point (in the first run's order), per run, ms: the testbed's p50 and p99, the
    // simulator's (each the middle of the run's draws), then the same of the part before
    // the executor's thread (the testbed's is NaN in lines made before it was recorded).
    let mut rows: Vec<(String, &'static str, Vec<[f64; 8]>)> = Vec::new();
    let ms = |us: Option<f64>| us.map_or(f64::INFINITY, |us| us / 1000.0);
    for run in &runs {
        for p in &run.points {
            let mut simulated: [Vec<f64>; 4] = Default::default();
            for draw in 0..a.draws {
                let mut cfg = p.cfg.clone();
                cfg.seed = p.cfg.seed + DRAW_SEED_STRIDE * u64::from(draw);
                let r = run_with_bar(&cfg, true)?;
                writeln!(
                    lines,
                    "{}",
                    serde_json::to_string(
                        &serde_json::json!({ "testbed_run": run.name, "draw": draw, "testbed_p50_ms": p.p50_ms, "testbed_p99_ms": p.p99_ms, "testbed_before_arrival_ms": p.before_arrival_ms, "simulated": r })
                    )?
                )?;
                let values = [r.p50_us, r.p99_us, r.p50_before_arrival_us, r.p99_before_arrival_us];
                for (v, x) in simulated.iter_mut().zip(values) {
                    v.push(ms(x));
                }
            }
            let at = match rows.iter().position(|(n, s, _)| *n == p.name && *s == p.cfg.system.name()) {
                Some(i) => i,
                None => {
                    rows.push((p.name.clone(), p.cfg.system.name(), Vec::new()));
                    rows.len() - 1
                }
            };
            let (b50, b99) = p.before_arrival_ms.unwrap_or((f64::NAN, f64::NAN));
            let [s50, s99, sb50, sb99] = simulated.map(|v| middle(&v));
            rows[at].2.push([p.p50_ms, p.p99_ms, s50, s99, b50, b99, sb50, sb99]);
        }
    }
    // Each run is compared with its own simulation (driven by that run's threads and
    // spells): a point is off by the middle of its runs' errors. The values shown are
    // the middles over the runs.
    let column = |runs: &[[f64; 8]], i: usize| runs.iter().map(|r| r[i]).collect::<Vec<f64>>();
    let off = |runs: &[[f64; 8]], s: usize, t: usize| run_by_run_error(runs.iter().map(|r| (r[s], r[t])));
    let within = |e: f64| (e.abs() <= 0.25) as u32;
    // The testbed's cell, and the simulator's with how far off it is.
    let cells = |runs: &[[f64; 8]], [t50, t99, s50, s99]: [usize; 4]| {
        let us = |ms: f64| ms.is_finite().then_some(ms * 1000.0);
        let pct = |e: f64| if e.is_finite() { format!("{:+.0} %", e * 100.0) } else { "–".into() };
        let testbed = format!("{:.3} / {:.2} ms", middle(&column(runs, t50)), middle(&column(runs, t99)));
        let simulated = format!(
            "{} / {} | {} | {}",
            fmt_us(us(middle(&column(runs, s50)))),
            fmt_us(us(middle(&column(runs, s99)))),
            pct(off(runs, s50, t50)),
            pct(off(runs, s99, t99)),
        );
        (testbed, simulated)
    };
    println!(
        "{} testbed runs, each against the simulator driven by its own measured threads ({} draws per run, the middle one kept).",
        runs.len(),
        a.draws
    );
    println!("Values are the middles over the runs; a point is off by the middle of its runs' errors.\n");
    println!(
        "| workload | level | testbed p50 / p99 | runs' p50 range | simulated p50 / p99 | p50 off by | p99 off by | runs' p99 off by |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let (mut p50_ok, mut p99_ok, mut p50_ok_middles, mut p99_ok_middles) = (0, 0, 0, 0);
    for (name, system, runs) in &rows {
        p50_ok += within(off(runs, 2, 0));
        p99_ok += within(off(runs, 3, 1));
        let middle_error = |s, t| middle(&column(runs, s)) / middle(&column(runs, t)) - 1.0;
        p50_ok_middles += within(middle_error(2, 0));
        p99_ok_middles += within(middle_error(3, 1));
        let (lo, hi) = runs.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| (lo.min(r[0]), hi.max(r[0])));
        let (t, s) = cells(runs, [0, 1, 2, 3]);
        let errors = runs.iter().map(|r| r[3] / r[1] - 1.0);
        let (e_lo, e_hi) = errors.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), e| (lo.min(e), hi.max(e)));
        let spread =
            if e_hi.is_finite() { format!("{:+.0} to {:+.0} %", e_lo * 100.0, e_hi * 100.0) } else { "–".into() };
        println!("| {name} | {system} | {t} | {lo:.3} – {hi:.3} ms | {s} | {spread} |");
    }
    println!("\nWithin 25 %: medians {p50_ok} of {n}, p99s {p99_ok} of {n}.", n = rows.len());
    println!(
        "Comparing the middles over the runs instead (not run by run): medians {p50_ok_middles} of {n}, p99s {p99_ok_middles} of {n}.",
        n = rows.len()
    );
    if rows.iter().any(|(_, _, runs)| runs.iter().any(|r| r[4].is_nan())) {
        return Ok(());
    }
    println!("\nThe part before the executor's thread: first send → the task reaching its executor.\n");
    println!("| workload | level | testbed p50 / p99 | simulated p50 / p99 | p50 off by | p99 off by |");
    println!("|---|---|---:|---:|---:|---:|");
    for (name, system, runs) in &rows {
        let (t, s) = cells(runs, [4, 5, 6, 7]);
        println!("| {name} | {system} | {t} | {s} |");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_is_off_by_the_middle_of_its_runs_own_errors() {
        // (simulated, testbed): errors of +10, −55 and +120 %, so +10 %; the middles over
        // the runs (1.8 simulated, 2.0 testbed) pair two different runs and say −10 %.
        let runs = [(1.1, 1.0), (1.8, 4.0), (4.4, 2.0)];
        let e = run_by_run_error(runs.into_iter());
        assert!((e - 0.1).abs() < 1e-9, "{e}");
        assert_eq!(middle(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(middle(&[4.0, 1.0, 3.0, 2.0]), 2.0, "the lower of the middle two");
        // A saturated simulation sorts last.
        assert_eq!(middle(&[f64::INFINITY, 1.0, 2.0]), 2.0);
    }
}
