//! `cargo xtask demo`: Bolt end to end on this machine, with a short two-priority workload
//! (a batch client whose jobs queue behind busy executors, an interactive client at a
//! higher priority) and what the clients measured.
//!
//! Where it can (root, network namespaces, XDP), it runs two-level on the namespace
//! testbed: `bolt switch` in a switch namespace, a `bolt agent` with the XDP tier on each
//! worker host, executors in the executor namespaces behind them, clients beside the
//! switch. Elsewhere it runs one-level on loopback. It says which mode it ran in, and why.

use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};

use crate::run::{build_bolt, is_root};
use crate::setup::{self, SetupArgs};
use crate::testbed::{self, UpOptions};

// Parser as well as Args: `cargo xtask test` builds its short demo from an argument list.
#[derive(Parser, Debug)]
pub struct DemoArgs {
    /// Do not run `cargo xtask setup` first.
    #[arg(long)]
    pub no_setup: bool,
    /// Where to run: `auto` is the testbed with the XDP tier when it can come up (root,
    /// namespaces, XDP) and loopback otherwise.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub mode: Mode,
    /// Executors in all (split evenly over the worker hosts on the testbed).
    #[arg(long, default_value_t = 16)]
    pub executors: u16,
    /// Worker hosts on the testbed.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=8))]
    pub workers: u16,
    /// Jobs the batch client (priority 2) submits, one every --batch-interval-ms; the
    /// interactive client (priority 1) submits its jobs over the same span.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: u32,
    /// Tasks per batch job. With the defaults a batch job is 4 times the executors, so
    /// most of it queues.
    #[arg(long, default_value_t = 64)]
    pub batch_tasks: u32,
    /// Milliseconds between the batch client's jobs.
    #[arg(long, default_value_t = 35, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_interval_ms: u64,
    /// Tasks per interactive job.
    #[arg(long, default_value_t = 2)]
    pub interactive_tasks: u32,
    /// Milliseconds between the interactive client's jobs.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub interactive_interval_ms: u64,
    /// Submit the batch client's jobs at priority 1 too, so that both share one FIFO
    /// level: what the interactive client would see without priorities.
    #[arg(long)]
    pub same_priority: bool,
    /// How long each task sleeps, in microseconds. With the defaults the executors are
    /// about 70 % busy: (64 / 35 ms + 2 / 5 ms) x 5 ms = 11.1 busy of 16.
    #[arg(long, default_value_t = 5000)]
    pub task_us: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The testbed when it can come up, else loopback.
    Auto,
    /// Two-level on the namespace testbed (fails if it cannot come up).
    Testbed,
    /// One-level on loopback: switch, executors and clients as plain processes.
    Loopback,
}

/// Children that are stopped (SIGTERM, then SIGKILL) however the demo ends.
struct Processes(Vec<(String, Child)>);

impl Processes {
    fn spawn(&mut self, name: impl Into<String>, cmd: &mut Command) -> anyhow::Result<()> {
        let name = name.into();
        let child = cmd.stdin(Stdio::null()).spawn().with_context(|| format!("starting {name}"))?;
        self.0.push((name, child));
        Ok(())
    }

    /// Fails if any child has exited already.
    fn check_running(&mut self) -> anyhow::Result<()> {
        for (name, child) in &mut self.0 {
            if let Some(st) = child.try_wait()? {
                bail!("{name} exited at start ({st}); see its log above");
            }
        }
        Ok(())
    }

    fn stop_all(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (name, child) in &mut self.0 {
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if let Ok(None) = child.try_wait() {
                eprintln!("{name} did not stop on SIGTERM; killing it");
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.0.clear();
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// A loopback port nobody listens on right now.
fn free_udp_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    if !args.no_setup {
        setup::run(&SetupArgs::default())?;
    }
    let bolt = build_bolt(true)?;
    match args.mode {
        Mode::Loopback => on_loopback(&bolt, args, "asked for with --mode loopback"),
        Mode::Testbed => on_testbed(args),
        Mode::Auto if !is_root() => on_loopback(&bolt, args, "the testbed needs root: run as root for two-level"),
        Mode::Auto => match testbed::up(&testbed_options(args)) {
            Ok(tb) => run_on(&tb, args),
            Err(e) => on_loopback(&bolt, args, &format!("the testbed could not come up: {e:#}")),
        },
    }
}

fn testbed_options(args: &DemoArgs) -> UpOptions {
    // No prefetch flags: each agent sizes its rings from its measured drain rate, and
    // idle executors wait at their host (the agent's defaults).
    UpOptions { name: "demo".into(), workers: args.workers, ..UpOptions::default() }
}

fn on_testbed(args: &DemoArgs) -> anyhow::Result<()> {
    anyhow::ensure!(is_root(), "--mode testbed needs root (network namespaces, XDP)");
    let tb = testbed::up(&testbed_options(args))?;
    run_on(&tb, args)
}

/// Two-level: the testbed `tb` is up with its switch and agents; executors go in the
/// executor namespaces, clients in the switch's. Dropping `tb` afterwards stops the
/// agents (their tasks go back to the switch), the switch, and deletes the namespaces.
fn run_on(tb: &testbed::Testbed, args: &DemoArgs) -> anyhow::Result<()> {
    let switch = tb.switch_socket();
    let per_worker = args.executors.div_ceil(tb.workers.len() as u16).max(1);
    println!(
        "\nBolt demo, two-level on the namespace testbed `{}`: software switch (tier 2) at {switch} in {}; \
         on each of {} worker hosts a `bolt agent` with the XDP tier (generic mode) answers GET_TASK \
         from its rings; {per_worker} executors behind each host\n",
        tb.name,
        tb.switch_ns,
        tb.workers.len()
    );
    let mut procs = Processes(Vec::new());
    for w in &tb.workers {
        let node = w.node.to_string();
        let mut exec = tb.bolt_in(&w.executors[0].ns);
        exec.args(["executor", "--switch", &switch, "--node", &node, "--resources", "0xff"])
            .args(["--executors", &per_worker.to_string()]);
        procs.spawn(format!("bolt executor (node {node})"), &mut exec)?;
    }
    std::thread::sleep(Duration::from_millis(300));
    procs.check_running()?;
    let outcome = run_clients(args, &switch, |cmd| {
        let mut c = tb.bolt_in(&tb.switch_ns);
        c.args(cmd);
        c
    });
    procs.stop_all();
    outcome?;
    let (mut from_rings, mut from_switch) = (0, 0);
    for w in &tb.workers {
        let (rings, switch) = print_xdp_counters(tb, w)?;
        from_rings += rings;
        from_switch += switch;
    }
    // Every task completed (run_clients fails otherwise): what neither the program nor the
    // switch handed out, the agents did, to executors waiting at their host.
    let all = args.clients().iter().map(|c| u64::from(c.jobs) * u64::from(c.tasks)).sum::<u64>();
    if all > 0 {
        let by_agents = all.saturating_sub(from_rings + from_switch);
        println!(
            "The XDP tier served {from_rings} of the {all} tasks ({:.1} %), the agents {by_agents} (to executors \
             waiting at their host, from the rings), the switch assigned {from_switch} directly; tier 1 served \
             {:.1} %.",
            100.0 * from_rings as f64 / all as f64,
            100.0 * (from_rings + by_agents) as f64 / all as f64
        );
    }
    println!("\nMode: two-level (XDP tier 1 on {} worker hosts, software switch tier 2).", tb.workers.len());
    Ok(())
}

/// What the XDP program on worker `w` did, read from its pinned counters with `bolt stats`.
/// Returns the tasks the host's executors got from its rings and from the switch directly.
fn print_xdp_counters(tb: &testbed::Testbed, w: &testbed::Worker) -> anyhow::Result<(u64, u64)> {
    let pin = &w.executors[0].host_iface;
    let out = Command::new(&tb.bolt)
        .args(["stats", "--json", "--interval", "0.05", "--iface", pin])
        .stderr(Stdio::inherit())
        .output()
        .context("running bolt stats")?;
    anyhow::ensure!(out.status.success(), "bolt stats --iface {pin} failed");
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).context("reading bolt stats --json")?;
    let counters = &reports[0]["counters"];
    let get = |name: &str| counters[name].as_u64().unwrap_or(0);
    let hits: u64 = (1..=8).map(|p| get(&format!("hit_p{p}"))).sum();
    let direct: u64 = (1..=8).map(|p| get(&format!("tier2_assign_p{p}"))).sum();
    println!(
        "node {}: the XDP tier answered {hits} GET_TASK from the host's rings, passed {} to the switch while they \
         were empty and {} because the switch held higher-priority work; the switch assigned {direct} tasks to \
         the host's executors directly; {} REFILLs brought {} tasks",
        w.node,
        get("miss"),
        get("bypass"),
        get("refill_frames"),
        get("refill_tasks")
    );
    Ok((hits, direct))
}

/// One-level: the switch, one executor pool and the clients as plain processes on loopback.
fn on_loopback(bolt: &Path, args: &DemoArgs, why: &str) -> anyhow::Result<()> {
    let switch = format!("127.0.0.1:{}", free_udp_port()?);
    println!(
        "\nBolt demo, one-level on loopback ({why}): software switch (tier 2) on {switch}, {} executors asking it directly\n",
        args.executors
    );
    let mut procs = Processes(Vec::new());
    procs.spawn("bolt switch", Command::new(bolt).args(["switch", "--listen", &switch, "--report-secs", "0"]))?;
    procs.spawn(
        "bolt executor",
        Command::new(bolt)
            .args(["executor", "--switch", &switch, "--node", "1", "--resources", "0xff"])
            .args(["--executors", &args.executors.to_string()]),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    procs.check_running()?;
    let outcome = run_clients(args, &switch, |cmd| {
        let mut c = Command::new(bolt);
        c.args(cmd);
        c
    });
    procs.stop_all();
    outcome?;
    println!("\nMode: one-level on loopback ({why}).");
    Ok(())
}

/// One of the demo's two clients: `bolt submit` with these jobs.
struct ClientPlan {
    label: &'static str,
    priority: u8,
    jobs: u32,
    tasks: u32,
    interval_ms: u64,
}

impl DemoArgs {
    /// The batch client, and the interactive one submitting over the same span.
    fn clients(&self) -> [ClientPlan; 2] {
        let span_ms = u64::from(self.jobs) * self.batch_interval_ms;
        let interactive_jobs = span_ms.div_ceil(self.interactive_interval_ms).max(1);
        [
            ClientPlan {
                label: "client 1 (priority 1, interactive)",
                priority: 1,
                jobs: u32::try_from(interactive_jobs).unwrap_or(u32::MAX),
                tasks: self.interactive_tasks,
                interval_ms: self.interactive_interval_ms,
            },
            ClientPlan {
                label: if self.same_priority { "client 2 (priority 1, batch)" } else { "client 2 (priority 2, batch)" },
                priority: if self.same_priority { 1 } else { 2 },
                jobs: self.jobs,
                tasks: self.batch_tasks,
                interval_ms: self.batch_interval_ms,
            },
        ]
    }
}

/// The two clients at once; prints their summaries and fails if either reports a failed
/// or lost task.
///
/// Priority orders what is queued and preempts nothing, so the workload makes work of
/// both priorities queue together: each batch job is several times the executors, and an
/// interactive job that arrives while a batch backlog waits should go ahead of it and
/// wait only for the next executor to finish. In FIFO order it would wait for the backlog.
fn run_clients(args: &DemoArgs, switch: &str, bolt: impl Fn(&[String]) -> Command) -> anyhow::Result<()> {
    let plans = args.clients();
    for p in &plans {
        println!(
            "{}: {} jobs of {} tasks of {} us, one every {} ms",
            p.label, p.jobs, p.tasks, args.task_us, p.interval_ms
        );
    }
    println!();
    let mut children = Vec::new();
    for p in &plans {
        let argv: Vec<String> = [
            "submit",
            "--switch",
            switch,
            "--handler",
            "sleep",
            "--duration-us",
            &args.task_us.to_string(),
            "--tasks",
            &p.tasks.to_string(),
            "--jobs",
            &p.jobs.to_string(),
            "--interval-ms",
            &p.interval_ms.to_string(),
            "--priority",
            &p.priority.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let child = bolt(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", p.label))?;
        children.push((p.label, child));
    }
    let mut failed = false;
    for (label, child) in children {
        let out = child.wait_with_output()?;
        println!("== {label}");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        failed |= !out.status.success();
    }
    if failed {
        bail!("a client reported failed or lost tasks");
    }
    println!("\nEvery task completed exactly once.");
    Ok(())
}
