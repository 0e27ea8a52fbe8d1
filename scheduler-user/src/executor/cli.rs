//! `bolt executor`: command-line arguments and the run-until-signal loop.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Args;
use scheduler_common::DEFAULT_PORT;

use super::{spawn, CounterSnapshot, ExecRule, ExecutorConfig, ExecutorPool};
use crate::provision::{Retirement, RetirementRule};

/// Arguments of `bolt executor`.
#[derive(Args, Debug, Clone)]
pub struct ExecutorArgs {
    /// Scheduler to pull tasks from: the switch (tier 2) or this node's host agent
    /// (tier 1), as IP:PORT, IP or HOST[:PORT] (port defaults to 7171).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = "127.0.0.1:7171")]
    pub switch: SocketAddr,

    /// Number of executor threads to run (each pulls one task at a time with its own
    /// socket; typically the number of hardware threads on the node).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub executors: u16,

    /// Node id carried in GET_TASK and reported in COMPLETE.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub node: u16,

    /// Resources these executors offer, as an 8-bit bitmap (EXEC_RSRC). A task runs
    /// here only if every bit it needs is set. Decimal (5), hex (0x05) or binary
    /// (0b0000_0101); underscores are ignored.
    #[arg(long, value_name = "BITS", value_parser = parse_resources)]
    pub resources: u8,

    /// Tasks each executor asks for at a time: 1 sends GET_TASK; 2 to 16 send GET_BUNDLE,
    /// whose ASSIGN lists up to N tasks that the executor runs one after another (fewer
    /// requests per task for short tasks; a tier that serves one task at a time, such as
    /// a host's rings, answers with one).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub bundle: u8,

    /// Pause after a NOOP (nothing this executor can run is queued) before asking
    /// again, in microseconds.
    #[arg(long, value_name = "US", default_value_t = 50)]
    pub noop_backoff_us: u64,

    /// How long to wait for ASSIGN or NOOP before resending GET_TASK (the request or
    /// its answer was lost), in milliseconds: longer than the switch's --park-ms plus a
    /// round trip. A late ASSIGN is still run.
    #[arg(long, value_name = "MS", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub get_timeout_ms: u64,

    /// Allow `exec` tasks naming NAME to run COMMAND (through /bin/sh -c, no input,
    /// output discarded; exit 0 is success). Repeat for more commands. Without this
    /// flag every exec task is refused. NAME: 1 to 14 of A-Z a-z 0-9 _ . -
    #[arg(long = "allow-exec", value_name = "NAME=COMMAND", value_parser = ExecRule::parse)]
    pub allow_exec: Vec<ExecRule>,

    /// Longest a task may take, in milliseconds: sleep/spin tasks asking for more are
    /// refused, commands still running then are killed (and reported as failed).
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub task_time_limit_ms: u64,

    /// Local IP to bind the executor sockets to (default: loopback when the switch is
    /// on loopback, otherwise all addresses).
    #[arg(long, value_name = "IP")]
    pub bind: Option<IpAddr>,

    /// This worker type's speed: sleep tasks last their duration ÷ SPEED (trace replay
    /// on worker types of different speed).
    #[arg(long, value_name = "SPEED", default_value_t = 1.0, value_parser = parse_positive)]
    pub speed: f64,

    /// Cap these executors together at CORES CPUs' worth of time (a cgroup v1 `cpu`
    /// group with a CFS quota, removed at exit; needs root), for CPU-bound worker types.
    #[arg(long, value_name = "CORES", value_parser = parse_positive)]
    pub cpu_quota: Option<f64>,

    /// Log the counters every this many seconds while they change (0: only at exit).
    #[arg(long, value_name = "S", default_value_t = 10)]
    pub stats_interval_s: u64,

    /// Lease period in milliseconds (CloudKon: an hour of billing): with it, the process
    /// exits when no task has finished for --retire-idle-ms and the current period (from
    /// its start) ends within --retire-window-ms. Without it the executors run until a signal.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_period_ms: Option<u64>,

    /// With --lease-period-ms: how long without a finished task counts as idle (longer
    /// than the longest task).
    #[arg(long, value_name = "MS", default_value_t = 60_000, requires = "lease_period_ms")]
    pub retire_idle_ms: u64,

    /// With --lease-period-ms: how near the end of a period an idle executor retires.
    #[arg(long, value_name = "MS", default_value_t = 60_000, requires = "lease_period_ms")]
    pub retire_window_ms: u64,

    /// This host's object store (`bolt object serve --listen`), as IP:PORT the other hosts
    /// reach it at. Needed for SPEC tasks (inputs read, outputs written there); without
    /// it they are refused.
    #[arg(long, value_name = "IP:PORT")]
    pub store: Option<std::net::SocketAddrV4>,
}

impl ExecutorArgs {
    pub fn to_config(&self) -> ExecutorConfig {
        ExecutorConfig {
            switch: self.switch,
            executors: self.executors,
            node: self.node,
            resources: self.resources,
            bundle: self.bundle,
            noop_backoff: Duration::from_micros(self.noop_backoff_us),
            get_timeout: Duration::from_millis(self.get_timeout_ms),
            task_time_limit: Duration::from_millis(self.task_time_limit_ms),
            allow_exec: self.allow_exec.clone(),
            bind: self.bind,
            record_assignments: false,
            store: self.store,
            speed: self.speed,
            cpu_quota_cores: self.cpu_quota,
            spec_handlers: None,
        }
    }
}

/// A positive, finite factor.
fn parse_positive(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("{v} must be positive"))
    }
}

/// Parses a resource bitmap: decimal, `0x` hex or `0b` binary, at most 8 bits.
pub fn parse_resources(s: &str) -> Result<u8, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    let (digits, radix) = if let Some(r) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (r, 16)
    } else if let Some(r) = t.strip_prefix("0b").or_else(|| t.strip_prefix("0B")) {
        (r, 2)
    } else {
        (t.as_str(), 10)
    };
    let valid = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
    valid
        .then(|| u8::from_str_radix(digits, radix).ok())
        .flatten()
        .ok_or_else(|| format!("{s:?} is not an 8-bit resource bitmap (0..=255 as decimal, 0x hex or 0b binary)"))
}

/// Parses a scheduler address: `IP:PORT`, `IP`, `HOST:PORT` or `HOST` (port 7171).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let resolved = if s.contains(':') { s.to_socket_addrs() } else { (s, DEFAULT_PORT).to_socket_addrs() };
    resolved
        .map_err(|e| format!("cannot resolve {s:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

/// Runs `bolt executor` until SIGINT or SIGTERM, then stops cleanly: every executor
/// finishes its running task (and any task already on its way to it) and reports it.
pub fn run(args: ExecutorArgs) -> anyhow::Result<()> {
    let cfg = args.to_config();
    let allowed: Vec<&str> = cfg.allow_exec.iter().map(|r| r.name.as_str()).collect();
    tracing::info!(
        switch = %cfg.switch,
        executors = cfg.executors,
        node = cfg.node,
        resources = format_args!("{:#010b}", cfg.resources),
        allow_exec = ?allowed,
        "starting executors"
    );
    let pool = spawn(cfg)?;
    let retirement = args.lease_period_ms.map(|period| RetirementRule {
        period: Duration::from_millis(period),
        idle: Duration::from_millis(args.retire_idle_ms),
        window: Duration::from_millis(args.retire_window_ms),
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signal = runtime.block_on(wait_for_signal(&pool, args.stats_interval_s, retirement))?;
    tracing::info!(signal, "stopping: finishing running tasks");
    let total = pool.shutdown();
    log_counters("executors stopped", &total);
    Ok(())
}

/// Waits for SIGINT or SIGTERM, or, with a retirement rule, for the moment it says to
/// retire; logs the counters on the way.
async fn wait_for_signal(
    pool: &ExecutorPool,
    stats_interval_s: u64,
    retirement: Option<RetirementRule>,
) -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut retire = retirement.map(|rule| Retirement::new(rule, std::time::Instant::now()));
    // Polled often enough to catch the window: a quarter of it, 10 ms to 1 s.
    let check = retirement
        .map_or(Duration::from_secs(1), |r| (r.window / 4).clamp(Duration::from_millis(10), Duration::from_secs(1)));
    let mut retire_ticker = tokio::time::interval(check);
    let mut ticker = tokio::time::interval(Duration::from_secs(stats_interval_s.max(1)));
    ticker.tick().await;
    let mut last = CounterSnapshot::default();
    loop {
        tokio::select! {
            r = tokio::signal::ctrl_c() => {
                r?;
                return Ok("SIGINT");
            }
            _ = term.recv() => return Ok("SIGTERM"),
            _ = retire_ticker.tick(), if retire.is_some() => {
                let c = pool.counters();
                let now = std::time::Instant::now();
                if let Some(r) = retire.as_mut() {
                    if r.poll(now, c.tasks_run + c.tasks_refused) {
                        tracing::info!(periods = r.periods_used(now), "retiring: idle near the end of the lease period");
                        return Ok("retirement");
                    }
                }
            }
            _ = ticker.tick(), if stats_interval_s > 0 => {
                let now = pool.counters();
                if now != last {
                    log_counters("executor counters", &now);
                    last = now;
                }
            }
        }
    }
}

fn log_counters(what: &str, c: &CounterSnapshot) {
    tracing::info!(
        tasks_run = c.tasks_run,
        ok = c.tasks_ok,
        failed = c.tasks_failed,
        refused = c.tasks_refused,
        noops = c.noops,
        get_timeouts = c.get_timeouts,
        ignored = c.ignored,
        decode_errors = c.decode_errors,
        complete_errors = c.complete_errors,
        spec_fetches = c.spec_fetches,
        spec_errors = c.spec_errors,
        local_reads = c.local_reads,
        local_read_bytes = c.local_read_bytes,
        local_read_ms = c.local_read_ns / 1_000_000,
        remote_fetches = c.remote_fetches,
        remote_fetch_bytes = c.remote_fetch_bytes,
        remote_fetch_ms = c.remote_fetch_ns / 1_000_000,
        outputs_stored = c.outputs_stored,
        "{what}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_accept_decimal_hex_and_binary() {
        assert_eq!(parse_resources("5"), Ok(5));
        assert_eq!(parse_resources("0x0F"), Ok(15));
        assert_eq!(parse_resources("0XfF"), Ok(255));
        assert_eq!(parse_resources("0b101"), Ok(5));
        assert_eq!(parse_resources("0b1000_0001"), Ok(0x81));
        assert_eq!(parse_resources(" 0 "), Ok(0));
        for bad in ["256", "0x100", "0b111111111", "", "0x", "-1", "+1", "0b102", "five"] {
            assert!(parse_resources(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn addresses_default_to_the_bolt_port() {
        assert_eq!(parse_addr("127.0.0.1:9000").unwrap(), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(parse_addr("127.0.0.1").unwrap(), "127.0.0.1:7171".parse().unwrap());
        assert_eq!(parse_addr("localhost:9").unwrap().port(), 9);
        assert!(parse_addr("127.0.0.1:notaport").is_err());
    }
}
