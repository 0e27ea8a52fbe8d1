//! `cargo xtask testbed up|down|show`: a Bolt cluster in network namespaces on this
//! machine (see `bolt testbed --help`; scheduler-user's `testbed` module builds it).
//!
//! From code (the demo):
//!
//! ```ignore
//! let tb = testbed::up(&testbed::UpOptions { workers: 2, ..Default::default() })?;
//! // tb.switch_ns, tb.switch_addr, tb.workers[i].exec_ns, ...: run things inside with
//! let mut executor = tb.bolt_in(&tb.workers[0].executors[0].ns)
//!     .args(["executor", "--switch", &tb.switch_addr.to_string(), "--node", "1", "--resources", "0xff"])
//!     .spawn()?;
//! // ... dropping `tb` stops the agents (their tasks go back to the switch) and the
//! // switch, and deletes every namespace.
//! ```

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::run::{build_bolt, is_root, status};

#[derive(Args, Debug)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Create the namespaces, start the switch and an agent per worker host; print the
    /// layout. Already up the same way: prints it again; up differently: fails.
    Up(UpCli),
    /// Stop everything the testbed runs (agents RETURN their tasks first) and delete its
    /// namespaces and pins.
    Down(NameCli),
    /// Print the layout of a running testbed as JSON.
    Show(NameCli),
}

#[derive(Args, Debug)]
pub struct NameCli {
    /// Testbed name (prefix of its namespaces and interfaces).
    #[arg(long, default_value = DEFAULT_NAME)]
    pub name: String,
    /// Build and run the release binary.
    #[arg(long)]
    pub release: bool,
}

#[derive(Args, Debug)]
pub struct UpCli {
    #[command(flatten)]
    pub name: NameCli,
    /// Worker nodes (1..=99).
    #[arg(long, default_value_t = 2)]
    pub workers: u16,
    /// Executor namespaces behind each worker host (1..=8).
    #[arg(long, default_value_t = 1)]
    pub executor_links: u8,
    /// Do not start agents: GET_TASK reaches the switch directly (one-level).
    #[arg(long)]
    pub no_agents: bool,
    /// An extra argument for every `bolt agent` (repeat, e.g. --agent-arg=--batch --agent-arg=32).
    #[arg(long = "agent-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub agent_args: Vec<String>,
}

pub const DEFAULT_NAME: &str = "bolt";

/// How to bring a testbed up from code.
#[derive(Clone, Debug)]
pub struct UpOptions {
    pub name: String,
    pub workers: u16,
    /// Executor namespaces behind each worker host.
    pub executor_links: u8,
    /// Start an agent (XDP) on every worker host.
    pub agents: bool,
    pub release: bool,
    /// Extra arguments for every `bolt agent`.
    pub agent_args: Vec<String>,
}

impl Default for UpOptions {
    fn default() -> Self {
        UpOptions {
            name: DEFAULT_NAME.into(),
            workers: 2,
            executor_links: 1,
            agents: true,
            release: true,
            agent_args: Vec::new(),
        }
    }
}

/// One executor namespace behind a worker host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executors {
    /// Namespace to run `bolt executor` in.
    pub ns: String,
    /// Its address.
    pub addr: Ipv4Addr,
    /// The host's end of its link (the XDP program is attached there).
    pub host_iface: String,
    /// The host's address on that link (where a userspace-fallback agent is reached).
    pub gateway: Ipv4Addr,
}

/// One worker node of a running testbed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worker {
    /// Node id, for `--node` of its executors and agent.
    pub node: u16,
    /// Namespace of the worker host (the agent runs here).
    pub host_ns: String,
    /// Host's link to the switch, and its address.
    pub uplink: String,
    pub uplink_addr: Ipv4Addr,
    /// Executor namespaces (at least one), all served by this host's rings.
    pub executors: Vec<Executors>,
}

/// A running testbed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Testbed {
    pub name: String,
    /// The `bolt` binary it runs.
    pub bolt: PathBuf,
    /// Namespace of the switch (run clients here too: its address is routed everywhere).
    pub switch_ns: String,
    pub switch_addr: Ipv4Addr,
    pub port: u16,
    pub workers: Vec<Worker>,
}

impl Testbed {
    /// `ip netns exec NS <bolt>`: add the subcommand and its arguments. (Not for `bolt
    /// agent`, whose pins need the host's /sys/fs/bpf, which `ip netns exec` hides.)
    pub fn bolt_in(&self, ns: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(&self.bolt);
        cmd
    }

    /// The switch as executors and clients name it: `IP:PORT`.
    pub fn switch_socket(&self) -> String {
        format!("{}:{}", self.switch_addr, self.port)
    }

    fn from_layout(bolt: PathBuf, v: &Value) -> anyhow::Result<Testbed> {
        let s = |v: &Value, k: &str| -> anyhow::Result<String> {
            v[k].as_str().map(str::to_string).with_context(|| format!("layout field {k} missing"))
        };
        let ip = |v: &Value, k: &str| -> anyhow::Result<Ipv4Addr> { Ok(s(v, k)?.parse()?) };
        let workers = v["workers"]
            .as_array()
            .context("layout has no workers")?
            .iter()
            .map(|w| {
                let executors = w["executors"]
                    .as_array()
                    .context("worker without executors")?
                    .iter()
                    .map(|e| {
                        Ok(Executors {
                            ns: s(e, "ns")?,
                            addr: ip(e, "addr")?,
                            host_iface: s(e, "host_iface")?,
                            gateway: ip(e, "gateway")?,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(Worker {
                    node: w["node"].as_u64().context("worker without node")? as u16,
                    host_ns: s(w, "host_ns")?,
                    uplink: s(w, "uplink")?,
                    uplink_addr: ip(w, "uplink_addr")?,
                    executors,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Testbed {
            name: s(v, "name")?,
            bolt,
            switch_ns: s(v, "switch_ns")?,
            switch_addr: ip(v, "switch_addr")?,
            port: v["port"].as_u64().context("layout without port")? as u16,
            workers,
        })
    }
}

/// A testbed that is taken down when this is dropped.
pub struct TestbedGuard(Testbed);

impl std::ops::Deref for TestbedGuard {
    type Target = Testbed;
    fn deref(&self) -> &Testbed {
        &self.0
    }
}

impl TestbedGuard {
    /// Leaves the testbed up after this value is gone (`cargo xtask testbed up`).
    pub fn keep(self) -> Testbed {
        let testbed = self.0.clone();
        std::mem::forget(self);
        testbed
    }
}

impl Drop for TestbedGuard {
    fn drop(&mut self) {
        if let Err(e) = down_with(&self.0.bolt, &self.0.name) {
            eprintln!("taking testbed {} down: {e:#}", self.0.name);
        }
    }
}

/// Builds `bolt`, brings the testbed up (switch, and agents unless told otherwise) and
/// returns it; dropping the guard takes it down.
pub fn up(opts: &UpOptions) -> anyhow::Result<TestbedGuard> {
    anyhow::ensure!(is_root(), "the testbed needs root (network namespaces, XDP)");
    let bolt = build_bolt(opts.release)?;
    let mut cmd = Command::new(&bolt);
    cmd.args(["testbed", "up", "--json", "--name", &opts.name, "--workers", &opts.workers.to_string()]);
    cmd.args(["--executor-links", &opts.executor_links.to_string()]);
    if !opts.agents {
        cmd.arg("--no-agents");
    }
    for a in &opts.agent_args {
        cmd.arg(format!("--agent-arg={a}"));
    }
    eprintln!("+ {} testbed up --name {} --workers {}", bolt.display(), opts.name, opts.workers);
    let out = cmd.output().context("running bolt testbed up")?;
    anyhow::ensure!(out.status.success(), "bolt testbed up failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let parsed = serde_json::from_slice::<Value>(&out.stdout)
        .map_err(anyhow::Error::from)
        .and_then(|layout| Testbed::from_layout(bolt.clone(), &layout));
    match parsed {
        Ok(testbed) => Ok(TestbedGuard(testbed)),
        Err(e) => {
            // It is up, but unusable from here: take it down rather than leave it behind.
            let _ = down_with(&bolt, &opts.name);
            Err(e.context("reading the layout `bolt testbed up --json` printed"))
        }
    }
}

/// Takes testbed `name` down.
pub fn down(name: &str, release: bool) -> anyhow::Result<()> {
    let bolt = build_bolt(release)?;
    down_with(&bolt, name)
}

fn down_with(bolt: &Path, name: &str) -> anyhow::Result<()> {
    status(Command::new(bolt).args(["testbed", "down", "--name", name]))
}

pub fn run(args: &TestbedArgs) -> anyhow::Result<()> {
    anyhow::ensure!(is_root(), "the testbed needs root (network namespaces, XDP)");
    match &args.action {
        Action::Up(a) => {
            let opts = UpOptions {
                name: a.name.name.clone(),
                workers: a.workers,
                executor_links: a.executor_links,
                agents: !a.no_agents,
                release: a.name.release,
                agent_args: a.agent_args.clone(),
            };
            let testbed = up(&opts)?.keep();
            print_summary(&testbed);
            Ok(())
        }
        Action::Down(n) => down(&n.name, n.release),
        Action::Show(n) => {
            let bolt = build_bolt(n.release)?;
            status(Command::new(bolt).args(["testbed", "show", "--name", &n.name]))
        }
    }
}

/// What is where, and how to run executors and a client on it.
fn print_summary(t: &Testbed) {
    println!("testbed {}: switch {} in namespace {}", t.name, t.switch_socket(), t.switch_ns);
    for w in &t.workers {
        println!("  node {}: host {} (uplink {} {})", w.node, w.host_ns, w.uplink, w.uplink_addr);
        for e in &w.executors {
            println!("    executors in {} at {} (XDP on {})", e.ns, e.addr, e.host_iface);
        }
    }
    let show = |cmd: Command| {
        let mut line = cmd.get_program().to_string_lossy().into_owned();
        for a in cmd.get_args() {
            line.push(' ');
            line.push_str(&a.to_string_lossy());
        }
        line
    };
    if let Some(w) = t.workers.first() {
        let mut exec = t.bolt_in(&w.executors[0].ns);
        exec.args(["executor", "--switch", &t.switch_socket(), "--node", &w.node.to_string(), "--resources", "0xff"]);
        let mut submit = t.bolt_in(&t.switch_ns);
        submit.args(["submit", "--switch", &t.switch_socket(), "--tasks", "10000", "--handler", "noop"]);
        println!("executors: {}", show(exec));
        println!("a client:  {}", show(submit));
    }
    println!("down:      cargo xtask testbed down --name {}", t.name);
}
