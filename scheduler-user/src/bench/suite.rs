//! `bolt bench all`: the thesis's evaluation (Chapter 5), every experiment in one command,
//! one-level and two-level side by side. Each experiment writes `<name>.jsonl` and its
//! plots into one results directory and returns a Markdown table for
//! docs/benchmarks.md.
//!
//! To add an experiment, write `fn(&Context) -> anyhow::Result<Outcome>` and register it
//! in [`EXPERIMENTS`]: that is the one place the suite, `--only` and the CI smoke test
//! take them from.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::cluster::{Deployment, DeploymentReport, Level};
use super::output::{JsonLines, ResultsDir};

/// A registered experiment.
pub struct Registered {
    pub name: &'static str,
    /// The thesis figure(s) it reproduces, and what it measures.
    pub about: &'static str,
    pub run: fn(&Context) -> anyhow::Result<Outcome>,
}

/// Every experiment of `bolt bench all`, in the order they run.
pub const EXPERIMENTS: &[Registered] = &[
    Registered {
        name: "noop",
        about: "Fig. 11: scheduling decisions/s with no-op executors as executors grow",
        run: super::decisions::run,
    },
    Registered {
        name: "sw1",
        about: "Fig. 12: SW1, job completion time and scheduling delay from 40 % to 100 % utilisation",
        run: super::sw1::run,
    },
    Registered {
        name: "trace",
        about: "Figs. 13-14: Google-like trace, scheduling delay CDF and its breakdown",
        run: super::trace::run,
    },
    Registered {
        name: "priority",
        about: "Figs. 15-16: queueing delay per priority level against FIFO, GET_TASK per level",
        run: super::priority::run,
    },
    Registered {
        name: "constraints",
        about: "Fig. 17: SW2, throughput per node group as tasks need A, then B, then C",
        run: super::constraints::run,
    },
    Registered {
        name: "peers",
        about: "Bolt against Dask, Ray, Celery with Redis, a Redis queue and a no-scheduler floor, in the same run (one-level, loopback)",
        run: super::peers::run_in_suite,
    },
];

/// What every experiment is given.
pub struct Context {
    /// Short runs (the whole suite in under 5 minutes): the CI smoke test.
    pub quick: bool,
    pub results: ResultsDir,
    /// Name of the namespace testbed each experiment creates and removes in turn.
    pub testbed: String,
    /// Seed of every generated workload.
    pub seed: u64,
    /// Write every task's timeline too (`--task-records`).
    pub task_records: bool,
    /// SW1: how long after the first client's jobs the second client's are due.
    pub client_offset: std::time::Duration,
    /// SW1: worker hosts its executors are spread over.
    pub sw1_hosts: u32,
    /// SW1, trace and priority: how many times each one-level and two-level pair runs.
    pub rounds: u32,
}

impl Context {
    /// ", round k of N" for a progress line while pairs run in rounds; nothing otherwise.
    pub fn round_of(&self, round: u32) -> String {
        if self.rounds > 1 {
            format!(", round {round} of {}", self.rounds)
        } else {
            String::new()
        }
    }

    /// `<experiment>_pooled.jsonl`, for the figures pooled over the rounds, while pairs
    /// run in rounds.
    pub fn pooled_jsonl(&self, experiment: &str) -> anyhow::Result<Option<JsonLines>> {
        if self.rounds > 1 {
            Ok(Some(self.results.jsonl(&format!("{experiment}_pooled"))?))
        } else {
            Ok(None)
        }
    }

    /// The sentence a table's caption gets while pairs run in rounds (`pooled`: what its
    /// figures are), or nothing.
    pub fn pooled_note(&self, pooled: &str) -> String {
        if self.rounds > 1 {
            format!(" {} rounds of each pair, in turn; {pooled}.", self.rounds)
        } else {
            String::new()
        }
    }

    /// `full` normally, `quick` with --quick.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    /// A progress line on stderr: long runs say where they are.
    pub fn progress(&self, experiment: &str, what: impl std::fmt::Display) {
        tracing::info!(experiment, "{what}");
    }
}

/// What an experiment produced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcome {
    /// Markdown: the experiment's tables.
    pub table: String,
    pub jsonl: PathBuf,
    pub lines: u64,
    pub plots: Vec<PathBuf>,
    /// Tasks submitted and completed over every measurement: equal unless tasks were lost.
    pub submitted: u64,
    pub completed: u64,
    /// Why a measurement ran other than asked (e.g. one-level on loopback), deduplicated.
    pub fallbacks: Vec<String>,
}

impl Outcome {
    pub fn note_fallback(&mut self, why: &Option<String>) {
        if let Some(w) = why {
            if !self.fallbacks.contains(w) {
                self.fallbacks.push(w.clone());
            }
        }
    }
}

/// The level fields every JSON line of a measurement carries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LevelFields {
    /// The level asked for.
    pub level: Level,
    /// The level that ran, and why it differs or ran on loopback (null on the testbed).
    pub ran: Level,
    pub fallback: Option<String>,
    /// Of the tasks the executors got, the share the XDP tier handed out (two-level;
    /// null for one-level), set once the deployment has stopped.
    pub xdp_share: Option<f64>,
    /// Tasks the agents RETURNed to tier 2 (leases, hints, overflow) and took in by
    /// stealing from each other (two-level; null for one-level), set with `xdp_share`.
    pub tier1_returned: Option<u64>,
    pub stolen: Option<u64>,
    /// Executors waiting at their host that the agents, not the XDP program, gave a task
    /// from the rings (two-level; null for one-level, absent in lines made before it was
    /// recorded), set with `xdp_share`.
    #[serde(default)]
    pub agent_served_waiters: Option<u64>,
    /// How long executors waited at their host for a REFILL before asking again, ms (the
    /// agents' `--host-wait-ms`; null for one-level, and absent in lines made before
    /// executors could wait there: they waited at tier 2).
    #[serde(default)]
    pub host_wait_ms: Option<u64>,
    /// The agents' nice value (`--nice`; null for one-level, and absent in lines made
    /// before it was recorded: docs/benchmarks.md says what those ran with).
    #[serde(default)]
    pub agent_nice: Option<i32>,
    /// The agents' wake-ups (turns of their loops) and their threads' CPU time in
    /// milliseconds, summed over the hosts (two-level; null for one-level, absent in
    /// lines made before they were recorded), set with `xdp_share`.
    #[serde(default)]
    pub agent_wakeups: Option<u64>,
    #[serde(default)]
    pub agent_cpu_ms: Option<f64>,
}

impl LevelFields {
    pub fn of(d: &Deployment) -> LevelFields {
        LevelFields {
            level: d.requested,
            ran: d.ran,
            fallback: d.fallback.clone(),
            xdp_share: None,
            tier1_returned: None,
            stolen: None,
            agent_served_waiters: None,
            host_wait_ms: d.host_wait_ms,
            agent_wakeups: None,
            agent_cpu_ms: None,
            agent_nice: d.agent_nice,
        }
    }

    /// Stops the deployment and records what its agents did.
    pub fn stop(&mut self, d: Deployment) -> anyhow::Result<DeploymentReport> {
        let report = d.stop()?;
        self.xdp_share = report.xdp_share();
        if self.ran == Level::TwoLevel {
            self.tier1_returned = Some(report.tier1_returned);
            self.stolen = Some(report.stolen);
            self.agent_served_waiters = Some(report.agent_served_waiters);
            self.agent_wakeups = Some(report.agent_loop_turns);
            self.agent_cpu_ms = Some(report.agent_cpu_us as f64 / 1e3);
        }
        Ok(report)
    }

    /// The XDP share as a table cell ("–" without agents).
    pub fn share_cell(&self) -> String {
        self.xdp_share.map_or("–".to_string(), |s| format!("{:.1} %", s * 100.0))
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct SuiteArgs {
    /// Short runs: the whole suite in under 5 minutes (numbers are noisier).
    #[arg(long)]
    pub quick: bool,
    /// Run only these experiments (repeat; default: all). Names: noop, sw1, trace,
    /// priority, constraints, peers.
    #[arg(long = "only", value_name = "NAME")]
    pub only: Vec<String>,
    /// Results directory (default: target/bench/<UTC time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Name of the namespace testbed the experiments create (1 to 10 of a-z, 0-9).
    #[arg(long, default_value = "bench")]
    pub testbed: String,
    /// Seed of the generated workloads.
    #[arg(long, default_value_t = 2021)]
    pub seed: u64,
    /// Also write every task's timeline (sw1: `sw1_tasks.jsonl`, one line per task with
    /// its first send, its ASSIGN's arrival at the executor's host, its start, the node
    /// and executor that ran it, how long that executor's GET_TASK had been out, and the
    /// software switch's stamps: its SUBMIT's arrival, the switch thread taking it in and
    /// done handling it, the first and the last flush that sent the task on, and how many did).
    #[arg(long)]
    pub task_records: bool,
    /// SW1: the second client's jobs are due this many milliseconds after the first's
    /// (below the 10-ms interval). With 0, both clients' jobs are due at the same
    /// instants, and where they land relative to each other is up to when each replay
    /// gets the CPU.
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    pub client_offset_ms: f64,
    /// SW1: worker hosts its 40 executors are spread over, evenly (1, 2, 4, 5 or 8). With
    /// 1, no task can be prefetched to a host whose executors free later than another's.
    #[arg(long, value_name = "N", default_value_t = super::sw1::DEFAULT_HOSTS)]
    pub sw1_hosts: u32,
    /// SW1, trace and priority: run each one-level and two-level pair this many times in
    /// turn (1 to 20). With more than one, the tables pool every task of the rounds per
    /// point and level, add each round's two-level over one-level ratios, and the pooled
    /// figures go to `<experiment>_pooled.jsonl`. One SW1 run's p99 rests on its slowest
    /// 64 tasks, most of them from a machine stall or two, so it moves by factors of 2
    /// from run to run.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: u32,
}

/// The round of a JSON line made before `--rounds` existed.
pub fn first_round() -> u32 {
    1
}

/// What `bolt bench all` did.
#[derive(Debug, Serialize)]
pub struct SuiteReport {
    pub results: PathBuf,
    pub seconds: f64,
    pub experiments: Vec<(String, Outcome)>,
}

/// Runs the selected experiments in order; stops at the first that fails.
pub fn run(args: &SuiteArgs) -> anyhow::Result<SuiteReport> {
    for name in &args.only {
        anyhow::ensure!(
            EXPERIMENTS.iter().any(|e| e.name == name),
            "no experiment {name:?}; there are: {}",
            EXPERIMENTS.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
        );
    }
    anyhow::ensure!(
        (0.0..super::sw1::INTERVAL_MS as f64).contains(&args.client_offset_ms),
        "--client-offset-ms must be at least 0 and below the {} ms job interval",
        super::sw1::INTERVAL_MS
    );
    anyhow::ensure!(
        (1..=8).contains(&args.sw1_hosts) && super::sw1::EXECUTORS.is_multiple_of(args.sw1_hosts),
        "--sw1-hosts must divide the {} executors evenly, with at most 8 hosts: 1, 2, 4, 5 or 8",
        super::sw1::EXECUTORS
    );
    anyhow::ensure!((1..=20).contains(&args.rounds), "--rounds must be 1 to 20");
    let ctx = Context {
        quick: args.quick,
        results: ResultsDir::create(args.out.clone())?,
        testbed: args.testbed.clone(),
        seed: args.seed,
        task_records: args.task_records,
        client_offset: std::time::Duration::from_secs_f64(args.client_offset_ms / 1e3),
        sw1_hosts: args.sw1_hosts,
        rounds: args.rounds,
    };
    let t0 = Instant::now();
    let mut experiments = Vec::new();
    let chosen: Vec<&Registered> =
        EXPERIMENTS.iter().filter(|e| args.only.is_empty() || args.only.iter().any(|o| o == e.name)).collect();
    for (i, e) in chosen.iter().enumerate() {
        ctx.progress(e.name, format_args!("[{}/{}] {}", i + 1, chosen.len(), e.about));
        let t = Instant::now();
        let outcome = (e.run)(&ctx).map_err(|err| err.context(format!("experiment {}", e.name)))?;
        ctx.progress(e.name, format_args!("done in {:.1} s", t.elapsed().as_secs_f64()));
        experiments.push((e.name.to_string(), outcome));
    }
    Ok(SuiteReport { results: ctx.results.path().to_path_buf(), seconds: t0.elapsed().as_secs_f64(), experiments })
}

/// Prints every experiment's tables, then where the results are.
pub fn print(r: &SuiteReport) {
    for (name, o) in &r.experiments {
        println!("## {name}\n");
        println!("{}", o.table);
        for f in &o.fallbacks {
            println!("Fallback: {f}\n");
        }
        println!("{} JSON lines in {}; plots: {}\n", o.lines, o.jsonl.display(), o.plots.len());
    }
    println!("results in {} ({:.0} s)", r.results.display(), r.seconds);
}

/// A Markdown table.
pub fn markdown_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n", header.join(" | "));
    s.push_str(&format!(
        "|{}\n",
        header.iter().enumerate().map(|(i, _)| if i == 0 { "---|" } else { "---:|" }).collect::<String>()
    ));
    for r in rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(sw1_hosts: u32, rounds: u32) -> SuiteArgs {
        SuiteArgs {
            quick: true,
            only: vec!["sw1".to_string()],
            out: None,
            testbed: "unused".to_string(),
            seed: 1,
            task_records: false,
            client_offset_ms: 0.0,
            sw1_hosts,
            rounds,
        }
    }

    /// A host count that leaves SW1's executors unevenly spread, or none, is refused
    /// before anything is created.
    #[test]
    fn sw1_hosts_that_do_not_divide_the_executors_are_refused() {
        for bad in [0, 3, 7, 10] {
            let err = run(&args(bad, 1)).expect_err("refused").to_string();
            assert!(err.contains("--sw1-hosts"), "{bad}: {err}");
        }
    }

    /// No rounds, or more than a bench should take, is refused before anything is
    /// created.
    #[test]
    fn rounds_out_of_range_are_refused() {
        for bad in [0, 21] {
            let err = run(&args(2, bad)).expect_err("refused").to_string();
            assert!(err.contains("--rounds"), "{bad}: {err}");
        }
    }
}
