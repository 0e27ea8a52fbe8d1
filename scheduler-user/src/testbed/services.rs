//! The long-running processes of a testbed brought up from the command line: `bolt switch`
//! in the switch namespace, and a `bolt object serve` (its object store) and a `bolt agent` in each worker host. Their ids, logs and the
//! layout live in `/run/bolt-testbed/<name>/`, so `down` stops exactly these processes.

use std::io::Write as _;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::{Layout, WorkerHost};
use crate::netns;

/// Where testbeds keep their state.
pub const STATE_ROOT: &str = "/run/bolt-testbed";
/// Environment variable marking a process as a testbed's (checked before signalling it).
const MARK: &str = "BOLT_TESTBED";

/// What to run.
#[derive(Clone, Debug)]
pub struct ServicesConfig {
    /// The `bolt` binary.
    pub bolt: PathBuf,
    /// Start an agent on every worker host.
    pub agents: bool,
    /// Start an object store on every worker host (at [`WorkerHost::store_addr`]).
    pub stores: bool,
    /// Extra arguments for every `bolt agent`.
    pub agent_args: Vec<String>,
    /// Extra arguments for `bolt switch`.
    pub switch_args: Vec<String>,
}

pub fn state_dir(name: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(name)
}

/// Starts the switch and the agents, and waits until each is ready (the switch bound,
/// each agent's program attached). On failure, stops what it started.
pub fn start(layout: &Layout, cfg: &ServicesConfig) -> anyhow::Result<()> {
    let dir = state_dir(&layout.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("layout.json"), serde_json::to_vec_pretty(layout)?)?;
    let result = start_all(layout, cfg, &dir);
    if result.is_err() {
        let _ = stop(&layout.name);
    }
    result
}

fn start_all(layout: &Layout, cfg: &ServicesConfig, dir: &Path) -> anyhow::Result<()> {
    let mut args = vec!["switch".to_string(), "--listen".into(), layout.switch_socket().to_string()];
    args.extend(layout.switch_access_args());
    args.extend(cfg.switch_args.iter().cloned());
    let pid = spawn(&layout.name, &layout.switch_ns, &cfg.bolt, &args, dir, "switch")?;
    wait_until(
        &format!("the switch in {}", layout.switch_ns),
        pid,
        &dir.join("switch.log"),
        Duration::from_secs(10),
        || udp_port_bound(&layout.switch_ns, layout.port),
    )?;
    if cfg.stores {
        for w in &layout.workers {
            let addr = w.store_addr();
            let args = vec!["object".to_string(), "serve".into(), "--listen".into(), addr.to_string()];
            let role = format!("store-{}", w.node);
            let pid = spawn(&layout.name, &w.host_ns, &cfg.bolt, &args, dir, &role)?;
            wait_until(
                &format!("the store in {}", w.host_ns),
                pid,
                &dir.join(format!("{role}.log")),
                Duration::from_secs(10),
                || tcp_port_listening(&w.host_ns, addr.port()),
            )?;
        }
    }
    if !cfg.agents {
        return Ok(());
    }
    for w in &layout.workers {
        let mut args = agent_args(layout, w);
        args.extend(cfg.agent_args.iter().cloned());
        let role = format!("agent-{}", w.node);
        let pid = spawn(&layout.name, &w.host_ns, &cfg.bolt, &args, dir, &role)?;
        let pins = crate::xdp::PinDir::under(Path::new(scheduler_common::maps::PIN_ROOT), w.pin_name())?;
        wait_until(
            &format!("the agent in {}", w.host_ns),
            pid,
            &dir.join(format!("{role}.log")),
            Duration::from_secs(20),
            || Ok(pins.is_attached()),
        )?;
    }
    Ok(())
}

/// Stops a testbed's processes: agents first (SIGTERM: they RETURN their tasks to the
/// still running switch), then the switch. Processes that do not end in time are
/// killed. Only processes carrying this testbed's mark are signalled.
pub fn stop(name: &str) -> anyhow::Result<()> {
    let dir = state_dir(name);
    let Ok(text) = std::fs::read_to_string(dir.join("pids")) else {
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    };
    let mut procs: Vec<(String, i32)> = text
        .lines()
        .filter_map(|l| {
            let (role, pid) = l.split_once(' ')?;
            Some((role.to_string(), pid.trim().parse().ok()?))
        })
        .collect();
    // Agents before the switch.
    procs.sort_by_key(|(role, _)| role == "switch");
    for (role, pid) in procs {
        if !is_ours(pid, name) {
            continue;
        }
        // SAFETY: signalling a process id read from our own state file and checked above.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while is_ours(pid, name) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if is_ours(pid, name) {
            tracing::warn!(role, pid, "did not stop within 15 s; killing it");
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
}

/// The layout of a testbed brought up from the command line, if it is up.
pub fn layout(name: &str) -> Option<Layout> {
    let bytes = std::fs::read(state_dir(name).join("layout.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// True when every process recorded for testbed `name` is running.
pub fn all_running(name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(state_dir(name).join("pids")) else { return false };
    text.lines()
        .filter_map(|l| l.split_once(' ').and_then(|(_, p)| p.trim().parse::<i32>().ok()))
        .all(|pid| is_ours(pid, name))
}
/// `bolt agent` arguments for worker `w`: XDP in generic mode on all of its links, every
/// resource offered.
pub fn agent_args(layout: &Layout, w: &WorkerHost) -> Vec<String> {
    agent_args_offering(layout, w, 0xff)
}

/// `bolt agent` arguments for worker `w` offering `resources` (tier 2 refills it only
/// with tasks these cover).
pub fn agent_args_offering(layout: &Layout, w: &WorkerHost, resources: u8) -> Vec<String> {
    let mut args: Vec<String> = vec!["agent".into()];
    for e in &w.executors {
        args.extend(["--iface".to_string(), e.host_iface.clone()]);
    }
    let rest: Vec<String> = [
        "--uplink",
        &w.uplink,
        "--switch",
        &layout.switch_socket().to_string(),
        "--node",
        &w.node.to_string(),
        "--resources",
        &resources.to_string(),
        "--mode",
        "skb",
        "--xdp",
        "require",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(rest);
    // The other hosts' agents, for work stealing (reached through the switch namespace).
    let peers: Vec<String> = layout
        .workers
        .iter()
        .filter(|p| p.node != w.node)
        .map(|p| SocketAddrV4::new(p.uplink_addr, layout.switch_socket().port()).to_string())
        .collect();
    if !peers.is_empty() {
        args.extend(["--peers".to_string(), peers.join(",")]);
    }
    args
}

/// Starts `bolt ARGS` in namespace `ns`, detached from this process, logging to
/// `<dir>/<role>.log`, and records its id.
fn spawn(name: &str, ns: &str, bolt: &Path, args: &[String], dir: &Path, role: &str) -> anyhow::Result<i32> {
    let log = std::fs::File::create(dir.join(format!("{role}.log")))?;
    let child = netns::command_in(ns, bolt)?
        .args(args)
        .env(MARK, name)
        .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {} {} in {ns}", bolt.display(), args.join(" ")))?;
    let pid = child.id() as i32;
    let mut pids = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("pids"))?;
    writeln!(pids, "{role} {pid}")?;
    Ok(pid)
}

/// Waits until `ready` says so, failing if the process ends first or time runs out.
fn wait_until(
    what: &str,
    pid: i32,
    log: &Path,
    limit: Duration,
    mut ready: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if ready()? {
            return Ok(());
        }
        let alive = Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid);
        if !alive || Instant::now() >= deadline {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(15).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            anyhow::bail!(
                "{what} {} ({}):\n{}",
                if alive { "is not ready in time" } else { "exited" },
                log.display(),
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

/// True when `pid` is a live process marked as testbed `name`'s.
fn is_ours(pid: i32, name: &str) -> bool {
    if pid <= 1 || is_zombie(pid) {
        return false;
    }
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { return false };
    let mark = format!("{MARK}={name}");
    env.split(|&b| b == 0).any(|kv| kv == mark.as_bytes())
}

/// True when a TCP socket listens on `port` in namespace `ns` (state 0A: LISTEN).
fn tcp_port_listening(ns: &str, port: u16) -> anyhow::Result<bool> {
    let needle = format!(":{port:04X}");
    netns::run_in(ns, move || {
        let table = std::fs::read_to_string("/proc/thread-self/net/tcp")?;
        Ok(table.lines().skip(1).any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() > 3 && cols[1].ends_with(&needle) && cols[3] == "0A"
        }))
    })
}

/// True when a UDP socket is bound to `port` in namespace `ns`.
fn udp_port_bound(ns: &str, port: u16) -> anyhow::Result<bool> {
    let needle = format!(":{port:04X} ");
    netns::run_in(ns, move || {
        let table = std::fs::read_to_string("/proc/thread-self/net/udp")?;
        Ok(table
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(1).is_some_and(|local| format!("{local} ").ends_with(&needle))))
    })
}
