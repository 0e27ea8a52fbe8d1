//! `cargo xtask demo`: Bolt end to end on this machine. Builds `bolt`, starts the
//! software switch and a pool of executors on loopback, runs a short SW1-style workload
//! (two clients each submitting a job every 10 ms), and prints what the clients measured.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;

use crate::run::{status, workspace_root};
use crate::setup::{self, SetupArgs};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Do not run `cargo xtask setup` first.
    #[arg(long)]
    pub no_setup: bool,
    /// Executors on the one worker node.
    #[arg(long, default_value_t = 16)]
    pub executors: u16,
    /// Jobs each of the two clients submits, one every --interval-ms.
    #[arg(long, default_value_t = 200)]
    pub jobs: u32,
    /// Milliseconds between one client's jobs.
    #[arg(long, default_value_t = 10)]
    pub interval_ms: u64,
    /// Tasks per job.
    #[arg(long, default_value_t = 12)]
    pub tasks: u32,
    /// How long each task sleeps, in microseconds. With the defaults the executors are
    /// about 75 % busy: 2 clients x 12 tasks / 10 ms x 5 ms = 12 busy of 16.
    #[arg(long, default_value_t = 5000)]
    pub task_us: u64,
}

/// Children that are stopped (SIGTERM, then SIGKILL) however the demo ends.
struct Processes(Vec<(&'static str, Child)>);

impl Processes {
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

fn bolt_binary() -> PathBuf {
    workspace_root().join("target/release/bolt")
}

/// A loopback port nobody listens on right now.
fn free_udp_port() -> anyhow::Result<u16> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    if !args.no_setup {
        setup::run(&SetupArgs::default())?;
    }
    status(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args(["build", "--release", "--locked", "-p", "scheduler-user", "--bin", "bolt"]),
    )?;
    let bolt = bolt_binary();
    let switch = format!("127.0.0.1:{}", free_udp_port()?);
    println!("\nBolt demo: software switch (tier 2) on {switch}, {} executors, loopback", args.executors);
    println!("(the two-level set-up with the XDP tier runs on the namespace testbed: cargo xtask testbed)\n");

    let mut procs = Processes(Vec::new());
    let sw = Command::new(&bolt)
        .args(["switch", "--listen", &switch, "--report-secs", "0"])
        .stdin(Stdio::null())
        .spawn()
        .context("starting bolt switch")?;
    procs.0.push(("bolt switch", sw));
    let executors = Command::new(&bolt)
        .args(["executor", "--switch", &switch, "--node", "1", "--resources", "0xff"])
        .args(["--executors", &args.executors.to_string()])
        .stdin(Stdio::null())
        .spawn()
        .context("starting bolt executor")?;
    procs.0.push(("bolt executor", executors));
    std::thread::sleep(Duration::from_millis(300));
    for (name, child) in &mut procs.0 {
        if let Some(st) = child.try_wait()? {
            bail!("{name} exited at start ({st}); see its log above");
        }
    }

    // Two clients at once, as in the thesis's SW1 workload.
    let client = |priority: &str| {
        Command::new(&bolt)
            .args(["submit", "--switch", &switch, "--handler", "sleep"])
            .args(["--duration-us", &args.task_us.to_string()])
            .args(["--tasks", &args.tasks.to_string(), "--jobs", &args.jobs.to_string()])
            .args(["--interval-ms", &args.interval_ms.to_string(), "--priority", priority])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
    };
    let first = client("1").context("starting the first client")?;
    let second = client("2").context("starting the second client")?;
    let mut failed = false;
    for (label, child) in [("client 1 (priority 1)", first), ("client 2 (priority 2)", second)] {
        let out = child.wait_with_output()?;
        println!("== {label}");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        failed |= !out.status.success();
    }
    procs.stop_all();
    if failed {
        bail!("a client reported failed or lost tasks");
    }
    println!("\nEvery task completed exactly once.");
    Ok(())
}
