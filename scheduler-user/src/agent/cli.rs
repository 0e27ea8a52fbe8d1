//! `bolt agent`: command-line arguments and the run-until-signal entry point.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use scheduler_common::{
    maps::{DEFAULT_LEASE_MS, DEFAULT_RING_CAPACITY, MAX_LEASE_MS, RING_COUNT},
    Ipv4Prefix, DEFAULT_PRIORITIES, MAX_PRIORITIES,
};

use super::{
    connected_prefix, route_interface, Agent, AgentConfig, AgentStats, RefillPolicy, StopMode, Tier1Config, XdpChoice,
};
use crate::executor::{parse_addr, parse_resources};
use crate::metrics::{MetricsServer, StatsSource};
use crate::xdp::{AttachMode, PinDir, XdpMaps, XdpSettings};

/// What `bolt agent --help` says first.
pub const HELP: &str = "Run tier 1 on this host.\n\n\
    Loads the Bolt XDP program (or reattaches to the one pinned under /sys/fs/bpf/bolt/<pin name>/, \
    with every queued task), attaches it to the executor-facing interface (--iface) and to the uplink \
    REFILL arrives on, and keeps the node's task rings above their low watermark with REFILL batches \
    from the switch. Executors keep --switch pointed at the switch: their GET_TASK crosses this host and \
    the program answers it from the rings.\n\n\
    Where XDP cannot run (no privileges, old kernel, driver), the agent says so and answers GET_TASK \
    itself at --listen; executors then point --switch at the agent.\n\n\
    SIGTERM or SIGINT: every queued task goes back to the switch (RETURN) and the program is detached; \
    with --keep-attached the program and its rings stay pinned and serving, for the next agent.";

// Arguments of `bolt agent` (a doc comment here would replace the command's help).
#[derive(Args, Debug, Clone)]
#[command(
    about = "Run the host agent (tier 1): load the XDP program, keep the node's task rings filled \
             from the switch, return their tasks on shutdown",
    long_about = HELP,
    // A later option replaces an earlier one: callers can add to a standard argument list.
    args_override_self = true
)]
pub struct AgentArgs {
    /// Interface executors' GET_TASK arrives on (the XDP program answers there). Repeat
    /// for executors behind several interfaces (one veth per container): every one gets
    /// the same program and rings. The first names the pin directory.
    #[arg(long = "iface", value_name = "IF", required = true)]
    pub ifaces: Vec<String>,

    /// The tier-2 switch, as IP:PORT, IP or HOST[:PORT] (port defaults to 7171).
    /// Required except with --unload, which uses the pinned program's.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, required_unless_present = "unload")]
    pub switch: Option<SocketAddr>,

    /// This node's id: GET_TASK from executors of this node is answered from its rings.
    #[arg(long, value_name = "ID", required_unless_present = "unload")]
    pub node: Option<u16>,

    /// The node's resources, an 8-bit bitmap (decimal, 0x hex or 0b binary): tier 2
    /// sends this node only tasks these cover.
    #[arg(long, value_name = "BITS", value_parser = parse_resources, required_unless_present = "unload")]
    pub resources: Option<u8>,

    /// Interface REFILL from the switch arrives on (default: the interface of the route
    /// to the switch). The same program, with the same rings, is attached there too.
    /// REFILL is taken only from this interface, by the program and by the agent's socket:
    /// an executor behind another one could forge the switch's address.
    #[arg(long, value_name = "IF")]
    pub uplink: Option<String>,

    /// Address of the agent's socket (IP or IP:PORT): REFILL_REQ and RETURN leave from
    /// it, and executors of a userspace-fallback agent send GET_TASK to it. The port
    /// defaults to the switch's, which XDP mode requires.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,

    /// Tasks each priority ring holds.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RING_CAPACITY,
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub ring_capacity: u32,

    /// The most tasks the rings together keep prefetched. The depth itself is measured
    /// (drain rate × REFILL round trip, see docs/agent.md); this only bounds it.
    #[arg(long, value_name = "L", default_value_t = RefillPolicy::default().low_watermark)]
    pub low_watermark: u32,

    /// The fewest tasks the rings together keep prefetched, whatever the measured depth
    /// (for example to keep serving through an agent restart). 0: the measurement alone.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub min_prefetch: u32,

    /// The other hosts' agents, for work stealing (IP[:PORT],...; port defaults to 7171).
    /// Without peers the node does not steal (it still answers no one: STEAL messages
    /// from hosts not listed are dropped).
    #[arg(long, value_name = "ADDR,...", value_delimiter = ',', value_parser = parse_addr)]
    pub peers: Vec<SocketAddr>,

    /// Bound of the steal poll interval in milliseconds: failed steals double the
    /// interval from 1 ms up to this, where stealing stops until work appears.
    #[arg(long, value_name = "MS", default_value_t = super::DEFAULT_STEAL_MAX_INTERVAL.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub steal_max_interval_ms: u64,

    /// FLDS: the dedicated ring's run-time bound `tt` to start with, in milliseconds.
    /// PINned tasks marked MOVABLE beyond what this host runs within `tt` move to its
    /// shared rings; `tt` halves on each move and doubles when a steal fails.
    #[arg(long, value_name = "MS", default_value_t = super::pin::DEFAULT_FLDS_TT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub flds_tt_ms: u64,

    /// Lease of a prefetched task in milliseconds: older tasks in a ring (including tasks
    /// none of this host's executors can run) go back to tier 2. 0: no lease.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_LEASE_MS,
          value_parser = clap::value_parser!(u16).range(0..=MAX_LEASE_MS as i64))]
    pub lease_ms: u16,

    /// Most tasks one REFILL_REQ asks for (at most 255; the switch answers in REFILL
    /// frames of up to 16). Also bounded by the free space of the fullest ring.
    #[arg(long, value_name = "B", default_value_t = RefillPolicy::default().batch,
          value_parser = clap::value_parser!(u8).range(1..))]
    pub batch: u8,

    /// Priority levels the rings serve (tasks of lower priority queue in the lowest).
    #[arg(long, value_name = "P", default_value_t = DEFAULT_PRIORITIES,
          value_parser = clap::value_parser!(u8).range(1..=MAX_PRIORITIES as i64))]
    pub levels: u8,

    /// XDP attach mode: native (in the driver), skb (generic, works on every interface),
    /// or auto (native where the driver supports it).
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = parse_mode)]
    pub mode: AttachMode,

    /// On SIGTERM/SIGINT, leave the program attached and its rings pinned (it keeps
    /// answering from them) instead of draining them back to the switch.
    #[arg(long)]
    pub keep_attached: bool,

    /// Use XDP where it works (auto), insist on it (require), or serve from userspace
    /// only (off).
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = XdpChoice::Auto)]
    pub xdp: XdpChoice,

    /// Forward the XDP program's log lines to this log at this level and below:
    /// off, error, warn, info, debug or trace. Chosen when the program is loaded; off
    /// keeps logging off the hot path.
    #[arg(long, value_name = "LEVEL", default_value = "off", value_parser = parse_log_level)]
    pub xdp_log: u8,

    /// Directory name under /sys/fs/bpf/bolt/ (default: --iface). Needed when hosts in
    /// different network namespaces of one machine use the same interface name.
    #[arg(long, value_name = "NAME")]
    pub pin_name: Option<String>,

    /// Sources GET_TASK is answered from (this node's executors), as an IPv4 prefix;
    /// requests from elsewhere are dropped and counted (foreign_get_task). Default: the
    /// shortest prefix holding the subnets of every --iface (0.0.0.0/0 where they have
    /// none).
    #[arg(long, value_name = "CIDR", value_parser = crate::switch::parse_prefix)]
    pub executors: Option<Ipv4Prefix>,

    /// Sources PIN is accepted from (clients placing tasks in this host's dedicated
    /// ring): comma-separated IPv4 prefixes or addresses, as the switch's
    /// --allow-clients for SUBMIT. Other PINs are dropped and counted (pin_foreign).
    #[arg(long, value_name = "CIDR,...", value_delimiter = ',', default_value = "0.0.0.0/0",
          value_parser = crate::switch::parse_prefix)]
    pub allow_clients: Vec<Ipv4Prefix>,

    /// How often the rings are checked when no event arrives, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub check_interval_ms: u64,

    /// How long to wait for the answer to a REFILL_REQ before asking again, in
    /// milliseconds (doubling while the switch stays silent).
    #[arg(long, value_name = "MS", default_value_t = RefillPolicy::default().answer_timeout.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub answer_timeout_ms: u64,

    /// Longest pause after empty REFILLs (tier 2 had nothing), in milliseconds. Longer
    /// spares the switch on an idle cluster; shorter fills the rings sooner when work
    /// arrives (until then executors are served by the switch directly).
    #[arg(long, value_name = "MS", default_value_t = RefillPolicy::default().max_backoff.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_backoff_ms: u64,

    /// How long tier 2's BEST stamp (in HINT, REFILL, and the ASSIGN/NOOP it sends to
    /// executors) is believed, in milliseconds. While it is fresh and names a level
    /// above every non-empty ring a GET_TASK searches, the request goes to tier 2
    /// instead of taking a lower-priority task from the rings. 0 turns this off.
    #[arg(long, value_name = "MS", default_value_t = scheduler_common::maps::DEFAULT_HINT_TTL_NS / 1_000_000)]
    pub hint_ttl_ms: u64,

    /// How long an executor whose GET_TASK finds nothing waits at this host, in
    /// milliseconds. It waits here rather than at tier 2 while tier 2 is not known to
    /// hold work for it: the next REFILL frame becomes its ASSIGN in the XDP program,
    /// so tier 2 sends the host batches and the host picks the executor. After this
    /// long the agent answers it NOOP and it asks again. 0: executors wait at tier 2,
    /// as they must with a switch that does not park REFILL_REQ (bolt.p4; `bolt switch`
    /// does).
    #[arg(long, value_name = "MS", default_value_t = scheduler_common::maps::DEFAULT_HOST_WAIT_NS / 1_000_000,
          value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub host_wait_ms: u64,

    /// Nice value of the agent's loop (-20..=19). Negative values keep the rings filled
    /// while executors keep every CPU busy (needs CAP_SYS_NICE); positive ones let
    /// executors that sleep or wait on I/O run first when they wake (`bolt bench` uses 10).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: Option<i32>,

    /// Serve counters over HTTP at this address: /metrics (Prometheus) and /stats (JSON,
    /// what `bolt ring show` and `bolt top` read): the agent's and the XDP program's.
    /// Skipped with a warning when the default is taken; "off": none.
    #[arg(long, value_name = "ADDR|off", default_value = crate::metrics::AGENT_DEFAULT)]
    pub metrics: String,

    /// Log a line of counters every this many seconds (0: only at exit).
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub stats_interval_s: u64,

    /// Load, configure, attach and pin the program, then exit: it keeps answering from its
    /// rings, which nothing refills until an agent runs (what `cargo xtask load` does).
    #[arg(long, conflicts_with = "unload")]
    pub load_only: bool,

    /// RETURN every task pinned for --iface (or --pin-name) to the switch, detach the
    /// program and remove its pins, then exit (what `cargo xtask unload` does).
    #[arg(long)]
    pub unload: bool,
}

fn parse_mode(s: &str) -> Result<AttachMode, String> {
    s.parse::<AttachMode>().map_err(|e| e.to_string())
}

/// aya-log levels: 0 off, 1 error ... 5 trace.
pub fn parse_log_level(s: &str) -> Result<u8, String> {
    match s.to_ascii_lowercase().as_str() {
        "off" | "0" => Ok(0),
        "error" | "1" => Ok(1),
        "warn" | "2" => Ok(2),
        "info" | "3" => Ok(3),
        "debug" | "4" => Ok(4),
        "trace" | "5" => Ok(5),
        _ => Err(format!("{s:?} is not a log level (off, error, warn, info, debug, trace)")),
    }
}

fn v4(addr: SocketAddr, what: &str) -> anyhow::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => anyhow::bail!("{what} {addr}: the Bolt wire format carries IPv4 addresses"),
    }
}

/// `--listen`: an IP, or IP:PORT; the port defaults to `port`.
fn parse_listen(s: Option<&str>, port: u16) -> anyhow::Result<SocketAddrV4> {
    let Some(s) = s else { return Ok(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)) };
    if let Ok(a) = s.parse::<SocketAddr>() {
        return v4(a, "--listen");
    }
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Ok(SocketAddrV4::new(ip, port)),
        _ => anyhow::bail!("--listen {s:?} is not an IPv4 address or IPv4:PORT"),
    }
}

impl AgentArgs {
    /// Where the pins live: --pin-name, or the first --iface.
    pub fn pin_name(&self) -> String {
        self.pin_name.clone().unwrap_or_else(|| self.ifaces[0].clone())
    }

    /// The configuration these arguments describe (for running, not for --unload).
    pub fn to_config(&self) -> anyhow::Result<AgentConfig> {
        let (Some(switch), Some(node), Some(resources)) = (self.switch, self.node, self.resources) else {
            anyhow::bail!("--switch, --node and --resources are required");
        };
        let switch = v4(switch, "--switch")?;
        let listen = parse_listen(self.listen.as_deref(), switch.port())?;
        let uplink = self.uplink.clone().or_else(|| route_interface(*switch.ip()));
        let executors = self.executors.or_else(|| connected_prefix(&self.ifaces)).unwrap_or_else(|| {
            tracing::warn!(ifaces = ?self.ifaces, "no IPv4 subnet on the executor interfaces: GET_TASK answered from any source");
            Ipv4Prefix::ANY
        });
        let settings = XdpSettings {
            port: switch.port(),
            node,
            switch_addr: Some(*switch.ip()),
            levels: self.levels,
            ring_capacity: self.ring_capacity,
            low_watermark: self.low_watermark.min(self.ring_capacity),
            log_level: self.xdp_log,
            executors,
            lease_ms: self.lease_ms,
            hint_ttl_ns: self.hint_ttl_ms.saturating_mul(1_000_000),
            host_wait_ns: self.host_wait_ms * 1_000_000,
            ..XdpSettings::default()
        };
        let policy = RefillPolicy {
            low_watermark: self.low_watermark,
            min_depth: self.min_prefetch,
            batch: self.batch,
            answer_timeout: Duration::from_millis(self.answer_timeout_ms),
            max_backoff: Duration::from_millis(self.max_backoff_ms),
            ..RefillPolicy::default()
        };
        Ok(AgentConfig {
            tier1: Tier1Config {
                ifaces: self.ifaces.clone(),
                uplink,
                pin_name: self.pin_name(),
                attach_mode: self.mode,
                xdp: self.xdp,
                settings,
            },
            switch,
            listen,
            node,
            resources,
            policy,
            check_interval: Duration::from_millis(self.check_interval_ms),
            nice: self.nice,
            peers: self.peers.iter().map(|&p| v4(p, "--peers")).collect::<anyhow::Result<_>>()?,
            steal_max_interval: Duration::from_millis(self.steal_max_interval_ms),
            flds_tt: Duration::from_millis(self.flds_tt_ms),
            clients: self.allow_clients.clone(),
        })
    }
}

/// The configuration `bolt agent ARGS` runs with; `args[0]` stands for the program name
/// (e.g. "agent"). For starting agents in this process with exactly the arguments a
/// process would get (tests, benchmarks).
pub fn config_from_args<I, S>(args: I) -> anyhow::Result<AgentConfig>
where
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    #[derive(clap::Parser)]
    struct Agent {
        #[command(flatten)]
        args: AgentArgs,
    }
    let parsed = <Agent as clap::Parser>::try_parse_from(args)?;
    parsed.args.to_config()
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM set a flag the loop polls (it wakes at least every check interval;
/// the signal also interrupts its ppoll).
fn install_signal_handlers() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        let old = unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        anyhow::ensure!(old != libc::SIG_ERR, "installing a signal handler: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs `bolt agent` until SIGINT or SIGTERM (or does --load-only / --unload).
pub fn run(args: AgentArgs) -> anyhow::Result<()> {
    install_signal_handlers()?;
    if args.unload {
        let pin_name = args.pin_name();
        let switch = args.switch.map(|s| v4(s, "--switch")).transpose()?;
        let listen = match (&args.listen, switch) {
            (Some(l), Some(s)) => Some(parse_listen(Some(l), s.port())?),
            (Some(l), None) => Some(parse_listen(Some(l), scheduler_common::DEFAULT_PORT)?),
            _ => None,
        };
        let agent = Agent::for_pinned(&pin_name, switch, listen)?;
        let stats = agent.finish(StopMode::Drain)?;
        log_stats("unloaded", &stats);
        return Ok(());
    }
    let cfg = args.to_config()?;
    tracing::info!(
        ifaces = ?cfg.tier1.ifaces,
        uplink = ?cfg.tier1.uplink,
        switch = %cfg.switch,
        node = cfg.node,
        resources = format_args!("{:#010b}", cfg.resources),
        low_watermark = cfg.policy.low_watermark,
        batch = cfg.policy.batch,
        "starting the host agent"
    );
    let mut agent = Agent::start(cfg)?;
    tracing::info!(mode = agent.mode().name(), "tier 1 is up");
    if args.load_only {
        anyhow::ensure!(
            agent.mode().is_xdp(),
            "--load-only: the program could not be attached ({:?}); nothing would serve the rings without an agent",
            agent.mode()
        );
        let stats = agent.finish(StopMode::KeepAttached)?;
        log_stats("loaded", &stats);
        return Ok(());
    }
    let on_signal = if args.keep_attached { StopMode::KeepAttached } else { StopMode::Drain };
    let stop = || SIGNALLED.load(Ordering::Relaxed).then_some(on_signal);
    let published = Arc::new(Mutex::new(agent.stats()));
    let pins = agent.pins().cloned();
    let _metrics = start_metrics(&args.metrics, published.clone(), pins)?;
    let log_every = Duration::from_secs(args.stats_interval_s.max(1));
    let mut last = AgentStats::default();
    let mut last_log = Instant::now();
    let mut publish = |s: &AgentStats| {
        if let Ok(mut p) = published.lock() {
            p.clone_from(s);
        }
        if args.stats_interval_s > 0
            && last_log.elapsed() >= log_every
            && (s.refill_tasks != last.refill_tasks || s.returned_tasks != last.returned_tasks)
        {
            log_stats("agent", s);
            last = s.clone();
            last_log = Instant::now();
        }
    };
    let mode = agent.run(&stop, PUBLISH_EVERY, &mut publish)?;
    tracing::info!(?mode, "signal received: stopping");
    let stats = agent.finish(mode)?;
    log_stats("agent stopped", &stats);
    Ok(())
}

/// How often the loop hands its counters to the metrics endpoint.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// The metrics endpoint: `{"agent": AgentStats, "xdp": {...} | null}`, the program's
/// counters and ring levels read from its pinned maps when asked (off the agent's loop).
fn start_metrics(
    addr: &str,
    published: Arc<Mutex<AgentStats>>,
    pins: Option<PinDir>,
) -> anyhow::Result<Option<MetricsServer>> {
    let Some(at) = crate::metrics::parse_endpoint(addr, crate::metrics::AGENT_PORT)? else { return Ok(None) };
    let source: StatsSource = Arc::new(move || {
        let agent = published.lock().map(|s| s.clone()).unwrap_or_default();
        let xdp = pins.as_ref().and_then(|dir| xdp_json(dir).ok());
        serde_json::json!({ "agent": agent, "xdp": xdp })
    });
    crate::metrics::serve(Some(at), addr == crate::metrics::AGENT_DEFAULT, source)
}

/// The program's side of the agent's metrics: counters by name and slots reserved per ring.
fn xdp_json(dir: &PinDir) -> anyhow::Result<serde_json::Value> {
    let maps = XdpMaps::open_pinned(dir)?;
    let cfg = maps.config()?;
    let pin_name = dir.path().file_name().map(|n| n.to_string_lossy().into_owned());
    Ok(serde_json::json!({
        "pin_name": pin_name,
        "node": cfg.node,
        "counters": crate::inspect::maps::counters_object(&maps.counters()?.0),
        "reserved": maps.occupancy()[..cfg.levels.clamp(1, RING_COUNT as u8) as usize],
        "ring_capacity": cfg.ring_capacity,
    }))
}

fn log_stats(what: &str, s: &AgentStats) {
    tracing::info!(
        mode = s.mode,
        queued = ?s.queued,
        refill_requests = s.refill_requests,
        refill_tasks = s.refill_tasks,
        refill_empty = s.refill_empty,
        refill_retries = s.refill_retries,
        returned = s.returned_tasks,
        drained = s.drained,
        served = s.served,
        forwarded = s.forwarded,
        malformed = s.malformed,
        "{what}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_defaults_to_the_switch_port() {
        assert_eq!(parse_listen(None, 7171).unwrap(), "0.0.0.0:7171".parse().unwrap());
        assert_eq!(parse_listen(Some("10.0.0.1"), 7000).unwrap(), "10.0.0.1:7000".parse().unwrap());
        assert_eq!(parse_listen(Some("10.0.0.1:9"), 7000).unwrap(), "10.0.0.1:9".parse().unwrap());
        assert!(parse_listen(Some("[::1]:9"), 7000).is_err());
        assert!(parse_listen(Some("nope"), 7000).is_err());
    }

    #[test]
    fn log_levels_by_name_or_number() {
        assert_eq!(parse_log_level("off"), Ok(0));
        assert_eq!(parse_log_level("WARN"), Ok(2));
        assert_eq!(parse_log_level("5"), Ok(5));
        assert!(parse_log_level("loud").is_err());
    }

    #[test]
    fn arguments_make_a_configuration() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: AgentArgs,
        }
        let cli = Cli::parse_from([
            "bolt",
            "--iface",
            "veth0",
            "--switch",
            "192.0.2.1",
            "--node",
            "3",
            "--resources",
            "0b11",
            "--uplink",
            "eth1",
            "--batch",
            "32",
            "--iface",
            "veth1",
        ]);
        let cfg = cli.args.to_config().unwrap();
        assert_eq!(cfg.switch, "192.0.2.1:7171".parse().unwrap());
        assert_eq!(cfg.listen, "0.0.0.0:7171".parse().unwrap());
        assert_eq!((cfg.node, cfg.resources, cfg.policy.batch), (3, 3, 32));
        assert_eq!(cfg.tier1.uplink.as_deref(), Some("eth1"));
        assert_eq!(cfg.tier1.pin_name, "veth0");
        assert_eq!(cfg.tier1.ifaces, ["veth0", "veth1"]);
        assert_eq!(cfg.tier1.settings.switch_addr, Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert!(Cli::try_parse_from(["bolt", "--iface", "x"]).is_err());
        let later = Cli::parse_from([
            "bolt",
            "--iface",
            "a",
            "--switch",
            "192.0.2.1",
            "--node",
            "1",
            "--resources",
            "1",
            "--xdp",
            "require",
            "--xdp",
            "off",
        ]);
        assert_eq!(later.args.xdp, XdpChoice::Off);
        assert!(Cli::try_parse_from(["bolt", "--iface", "x", "--unload"]).is_ok());
    }
}
