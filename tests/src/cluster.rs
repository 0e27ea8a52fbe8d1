//! A Bolt cluster on a namespace testbed whose roles run as processes of their own (the
//! `bolt-role` binary of this package), so that tests can kill them with SIGKILL, restart
//! them and sample their memory; a client workload in the switch's namespace that
//! reports what it saw; and packet loss and duplication injected with nftables.
//!
//! Every process is killed when its handle drops, every nftables table is deleted with
//! its guard, and the testbed's namespaces go last (field order is drop order).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_user::{
    client::{Client, ClientConfig, Summary, TaskSpec},
    netns,
    testbed::{services::agent_args, Layout, Testbed, WorkerHost},
};

use crate::unique_name;

/// No wait for a process or a workload lasts longer than this.
pub const DEADLINE: Duration = Duration::from_secs(90);

/// One `bolt ROLE ...` process in a namespace, logging to a file of its own.
pub struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `bin ARGS` in namespace `ns` and waits until its log shows `ready`.
    pub fn start(bin: &Path, ns: &str, args: &[String], ready: &str) -> Process {
        let log = std::env::temp_dir().join(format!("{}.log", unique_name("proc")));
        let out = std::fs::File::create(&log).expect("process log file");
        let child = netns::command_in(ns, bin)
            .expect("command in namespace")
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {} {}: {e}", bin.display(), args.join(" ")));
        let p = Process { child, log };
        p.wait_for_log(ready);
        p
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_for_log(&self, line: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.log().contains(line) {
            assert!(Instant::now() < deadline, "never logged {line:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, and reap it.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaping a killed process");
    }

    /// SIGTERM, and the exit status once it has stopped.
    pub fn terminate(&mut self) -> ExitStatus {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for a child") {
                return status;
            }
            assert!(Instant::now() < deadline, "did not stop on SIGTERM:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Resident set size in KiB (VmRSS), while the process runs.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Packet loss and duplication on every UDP datagram that namespaces send or forward,
/// with nftables (`numgen random`, `dup`): the kernels this runs on may lack sch_netem.
/// The table is deleted when the guard drops.
pub struct Impairment {
    namespaces: Vec<String>,
}

const FAULT_TABLE: &str = "bolt_faults";

impl Impairment {
    /// Drops `loss_permille` and duplicates `dup_permille` of UDP datagrams leaving or
    /// crossing each of `namespaces`.
    pub fn install(namespaces: &[String], loss_permille: u32, dup_permille: u32) -> anyhow::Result<Impairment> {
        Impairment::install_matching(namespaces, "meta l4proto udp", loss_permille, dup_permille)
    }

    /// As [`Impairment::install`], for the datagrams nftables expression `selector`
    /// matches (e.g. one Bolt op by its payload byte).
    pub fn install_matching(
        namespaces: &[String],
        selector: &str,
        loss_permille: u32,
        dup_permille: u32,
    ) -> anyhow::Result<Impairment> {
        let rules = |hook: &str| {
            format!(
                "chain {hook} {{ type filter hook {hook} priority 0; policy accept;\n\
                 {selector} numgen random mod 1000 < {loss_permille} counter drop\n\
                 {selector} numgen random mod 1000 < {dup_permille} counter dup to ip daddr\n}}\n"
            )
        };
        Impairment::apply(
            namespaces,
            &format!("table ip {FAULT_TABLE} {{\n{}{}}}\n", rules("output"), rules("forward")),
        )
    }

    /// Drops `permille` of the ASSIGNs arriving in each of `namespaces` (executor
    /// namespaces), whether the XDP program or the switch sent them: the loss a frame the
    /// program transmitted meets on the executor's link (the Bolt op is byte 3 of the
    /// UDP payload, bit 88 from the start of the UDP header).
    pub fn drop_assigns(namespaces: &[String], permille: u32) -> anyhow::Result<Impairment> {
        let op = scheduler_common::Op::Assign as u8;
        Impairment::apply(
            namespaces,
            &format!(
                "table ip {FAULT_TABLE} {{\nchain input {{ type filter hook input priority 0; policy accept;\n\
                 meta l4proto udp @th,88,8 {op} numgen random mod 1000 < {permille} counter drop\n}}\n}}\n"
            ),
        )
    }

    fn apply(namespaces: &[String], script: &str) -> anyhow::Result<Impairment> {
        let mut guard = Impairment { namespaces: Vec::new() };
        for ns in namespaces {
            let mut nft = netns::command_in(ns, Path::new("nft"))?
                .args(["-f", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()?;
            use std::io::Write as _;
            nft.stdin.take().expect("piped stdin").write_all(script.as_bytes())?;
            let out = nft.wait_with_output()?;
            anyhow::ensure!(out.status.success(), "nft in {ns}: {}", String::from_utf8_lossy(&out.stderr));
            guard.namespaces.push(ns.clone());
        }
        Ok(guard)
    }

    /// Datagrams dropped and duplicated so far, over every namespace.
    pub fn counts(&self) -> (u64, u64) {
        let (mut dropped, mut duplicated) = (0, 0);
        for ns in &self.namespaces {
            let Ok(out) = netns::command_in(ns, Path::new("nft"))
                .and_then(|mut c| Ok(c.args(["list", "table", "ip", FAULT_TABLE]).output()?))
            else {
                continue;
            };
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let packets = line
                    .split_whitespace()
                    .skip_while(|w| *w != "packets")
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                if line.trim_end().ends_with("drop") {
                    dropped += packets;
                } else if line.contains(" dup to ") {
                    duplicated += packets;
                }
            }
        }
        (dropped, duplicated)
    }
}

impl Drop for Impairment {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            if let Ok(mut c) = netns::command_in(ns, Path::new("nft")) {
                let _ = c.args(["delete", "table", "ip", FAULT_TABLE]).status();
            }
        }
    }
}

/// A one-worker testbed with the switch, the agent and executors as processes.
pub struct Cluster {
    // Field order is drop order: processes before the namespaces they run in.
    pub executors: Vec<Process>,
    pub agent: Option<Process>,
    pub switch: Option<Process>,
    testbed: Testbed,
    bin: PathBuf,
}

impl Cluster {
    /// A testbed of one worker host with `executor_links` executor namespaces; nothing
    /// runs yet. `bin` is this package's `bolt-role` binary (`env!("CARGO_BIN_EXE_bolt-role")`).
    pub fn new(bin: &str, executor_links: u8) -> Cluster {
        let layout = Layout::plan(&unique_name("bf"), 1, executor_links).expect("layout");
        let testbed = Testbed::create(layout).expect("testbed");
        Cluster { executors: Vec::new(), agent: None, switch: None, testbed, bin: PathBuf::from(bin) }
    }

    pub fn layout(&self) -> &Layout {
        self.testbed.layout()
    }

    pub fn worker(&self) -> &WorkerHost {
        &self.layout().workers[0]
    }

    /// Every namespace of the testbed.
    pub fn namespaces(&self) -> Vec<String> {
        self.layout().namespaces()
    }

    /// Starts `bolt switch` in the switch namespace with `extra` arguments.
    pub fn start_switch(&mut self, extra: &[&str]) {
        let mut args: Vec<String> =
            ["switch", "--listen", &self.layout().switch_socket().to_string(), "--report-secs", "0"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.extend(self.layout().switch_access_args());
        args.extend(extra.iter().map(|s| s.to_string()));
        let p = Process::start(&self.bin, &self.layout().switch_ns, &args, "software switch listening");
        self.switch = Some(p);
    }

    /// Starts `bolt agent` (XDP, generic mode) on the worker host with `extra` arguments.
    pub fn start_agent(&mut self, extra: &[&str]) {
        let mut args = agent_args(self.layout(), self.worker());
        args.extend(extra.iter().map(|s| s.to_string()));
        let p = Process::start(&self.bin, &self.worker().host_ns, &args, "tier 1 is up");
        self.agent = Some(p);
    }

    /// Starts `bolt executor` with `executors` executors in executor namespace `link`;
    /// returns its index in [`Cluster::executors`].
    pub fn start_executors(&mut self, link: usize, executors: u16, extra: &[&str]) -> usize {
        let mut args: Vec<String> = [
            "executor",
            "--switch",
            &self.layout().switch_socket().to_string(),
            "--executors",
            &executors.to_string(),
            "--node",
            &self.worker().node.to_string(),
            "--resources",
            "0xff",
            "--stats-interval-s",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let ns = self.worker().executors[link].ns.clone();
        self.executors.push(Process::start(&self.bin, &ns, &args, "starting executors"));
        self.executors.len() - 1
    }

    /// Runs `workload` from a client in the switch namespace, on a thread of its own.
    pub fn client(&self, workload: Workload) -> std::thread::JoinHandle<anyhow::Result<Outcome>> {
        let ns = self.layout().switch_ns.clone();
        let switch = SocketAddr::V4(self.layout().switch_socket());
        std::thread::spawn(move || {
            netns::enter(&ns)?;
            workload.run(switch)
        })
    }
}

/// Jobs of tasks submitted at a steady pace, tracked to completion.
#[derive(Clone, Debug)]
pub struct Workload {
    pub jobs: u32,
    pub tasks_per_job: usize,
    /// Time between the starts of two jobs.
    pub interval: Duration,
    pub handler: Handler<'static>,
    /// An attempt with no COMPLETE after this long is resubmitted.
    pub task_timeout: Duration,
    pub max_attempts: u8,
    /// Give up waiting for the last completions after this long.
    pub deadline: Duration,
    /// Tasks run only once their executor has claimed them from the client.
    pub exactly_once: bool,
}

impl Workload {
    /// `jobs` jobs of `tasks_per_job` tasks of `handler`, `interval` apart, resubmitted
    /// after `task_timeout` up to 20 times.
    pub fn new(
        jobs: u32,
        tasks_per_job: usize,
        interval: Duration,
        handler: Handler<'static>,
        task_timeout: Duration,
    ) -> Self {
        Workload {
            jobs,
            tasks_per_job,
            interval,
            handler,
            task_timeout,
            max_attempts: 20,
            deadline: DEADLINE,
            exactly_once: false,
        }
    }

    pub fn tasks(&self) -> u64 {
        self.jobs as u64 * self.tasks_per_job as u64
    }

    fn run(self, switch: SocketAddr) -> anyhow::Result<Outcome> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut cfg = ClientConfig::new(switch);
            cfg.tracker.task_timeout = self.task_timeout;
            cfg.tracker.max_attempts = self.max_attempts;
            cfg.tracker.window = 1 << 16;
            let mut client = Client::bind(cfg).await?;
            let mut spec = TaskSpec::new(self.handler, 1, 0)?;
            spec.exactly_once = self.exactly_once;
            let job = vec![spec; self.tasks_per_job];
            let start = Instant::now();
            for j in 0..self.jobs {
                let at = start + self.interval * j;
                client.drive_until(at).await?;
                client.add_job(&job)?;
                client.flush().await;
            }
            let idle = client.wait_idle(Instant::now() + self.deadline).await?;
            Ok(Outcome { idle, summary: client.summary(), tasks: self.tasks() })
        })
    }
}

/// What the client saw.
#[derive(Debug)]
pub struct Outcome {
    /// Every job finished before the deadline.
    pub idle: bool,
    pub summary: Summary,
    /// Tasks submitted.
    pub tasks: u64,
}

impl Outcome {
    /// Asserts that every task submitted was Done exactly once from the client's view
    /// (nothing failed, nothing unfinished), and prints the re-executions: the client's
    /// resubmissions and the duplicate completions it ignored.
    pub fn assert_exactly_once(&self, what: &str) {
        let s = &self.summary;
        println!(
            "{what}: {} tasks, {} done, {} failed, {} unfinished; re-executions: {} resubmitted, {} duplicate \
             completions ignored, {} timeouts, {} QUEUE_FULL bounces",
            self.tasks,
            s.completed,
            s.failed,
            s.unfinished,
            s.resubmitted,
            s.duplicates,
            s.timeouts,
            s.queue_full_bounces
        );
        assert!(self.idle, "{what}: the client was not done in time: {s:?}");
        assert_eq!(
            (s.submitted, s.completed, s.failed, s.unfinished, s.lost),
            (self.tasks, self.tasks, 0, 0, 0),
            "{what}: {s:?}"
        );
    }
}

impl Outcome {
    /// [`Outcome::assert_exactly_once`], and nothing was lost on the way: no task timed
    /// out, none was resubmitted. For faults the design promises to absorb without loss.
    pub fn assert_nothing_lost(&self, what: &str) {
        self.assert_exactly_once(what);
        let s = &self.summary;
        assert_eq!((s.resubmitted, s.timeouts), (0, 0), "{what}: tasks were lost and resubmitted: {s:?}");
    }
}

/// `ip` and `nft` exist and we are root: what the cluster tests need.
pub fn cluster_can_run() -> bool {
    crate::require(
        crate::is_root()
            && Path::new("/sys/fs/bpf").is_dir()
            && Command::new("ip").arg("-V").output().is_ok()
            && Command::new("nft").arg("--version").output().is_ok(),
        "root, iproute2, nftables and /sys/fs/bpf for network namespaces, XDP and fault injection",
    )
}
