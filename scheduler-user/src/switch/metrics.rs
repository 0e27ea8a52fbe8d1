//! The switch's metrics endpoint (`bolt switch --metrics`) and `bolt switch stats`, which
//! reads it: the Bolt wire protocol has no statistics query, and needs none.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use super::SwitchArgs;
use crate::metrics::{self, MetricsServer};
use crate::output::OutputArgs;

/// `bolt switch`: run the software switch, or (`bolt switch stats`) read a running one's counters.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, infer_subcommands = true)]
pub struct SwitchCli {
    #[command(subcommand)]
    pub command: Option<SwitchCommand>,
    #[command(flatten)]
    pub run: SwitchArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum SwitchCommand {
    /// A running switch's queue depth per priority and per resource bit, decisions/s, repairs, swaps,
    /// recirculations, QUEUE_FULL replies and refills served, from its metrics endpoint.
    Stats(SwitchStatsArgs),
}

#[derive(clap::Args, Debug)]
pub struct SwitchStatsArgs {
    /// The switch's metrics endpoint, HOST[:PORT] (port 9171 unless given: where `bolt
    /// switch` serves them by default, on its --listen address).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub switch: String,
    /// Seconds between the two reads the rates come from.
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Where `--metrics` serves: "auto" is the --listen address at port 9171.
pub(super) fn metrics_addr(args: &SwitchArgs) -> anyhow::Result<Option<SocketAddr>> {
    if args.metrics == "auto" {
        return Ok(Some(SocketAddr::new(args.listen.ip(), metrics::SWITCH_PORT)));
    }
    metrics::parse_endpoint(&args.metrics, metrics::SWITCH_PORT)
}

/// Starts the endpoint `--metrics` asks for.
pub(super) fn start(args: &SwitchArgs, handle: &super::SwitchHandle) -> anyhow::Result<Option<MetricsServer>> {
    metrics::serve(metrics_addr(args)?, args.metrics == "auto", handle.stats_source())
}

/// What `bolt switch stats` prints.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SwitchReport {
    pub endpoint: String,
    pub interval_s: f64,
    /// The switch's counters at the second read, as its /stats serves them.
    pub switch: serde_json::Value,
    pub rates: SwitchRates,
}

/// Per second between the two reads.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SwitchRates {
    pub decisions: f64,
    pub received: f64,
    pub assigns: f64,
    pub refill_tasks: f64,
    pub queue_full_tasks: f64,
}

fn counter(v: &serde_json::Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(|x| x.as_u64()).unwrap_or(0)
}

/// Reads the endpoint twice, `interval` apart.
pub fn report(endpoint: SocketAddr, interval: Duration) -> anyhow::Result<SwitchReport> {
    let timeout = Duration::from_secs(2);
    let read = || -> anyhow::Result<(std::time::Instant, serde_json::Value)> {
        let v = metrics::get_json(endpoint, "/stats", timeout)?;
        let s = v.get("switch").cloned().ok_or_else(|| anyhow::anyhow!("{endpoint} is not a switch's endpoint"))?;
        Ok((std::time::Instant::now(), s))
    };
    let (t0, a) = read()?;
    std::thread::sleep(interval);
    let (t1, b) = read()?;
    let secs = (t1 - t0).as_secs_f64().max(1e-9);
    let rate = |p: &str| counter(&b, p).saturating_sub(counter(&a, p)) as f64 / secs;
    Ok(SwitchReport {
        endpoint: endpoint.to_string(),
        interval_s: secs,
        rates: SwitchRates {
            decisions: rate("/queue/decisions"),
            received: rate("/received"),
            assigns: rate("/queue/assigns"),
            refill_tasks: rate("/queue/refill_tasks"),
            queue_full_tasks: rate("/queue/queue_full_tasks"),
        },
        switch: b,
    })
}

pub fn run_stats(args: SwitchStatsArgs, global: OutputArgs) -> anyhow::Result<()> {
    let out = global.merge(args.out);
    anyhow::ensure!(args.interval > 0.0 && args.interval <= 3600.0, "--interval must be in (0, 3600] seconds");
    let endpoint = metrics::parse_endpoint(&args.switch, metrics::SWITCH_PORT)?
        .ok_or_else(|| anyhow::anyhow!("--switch off: nothing to read"))?;
    let r = report(endpoint, Duration::from_secs_f64(args.interval))?;
    out.print(&r, render)
}

fn render(r: &SwitchReport) -> String {
    let s = &r.switch;
    let depth: Vec<String> = s
        .get("queue_depth")
        .and_then(|d| d.as_array())
        .map(|d| d.iter().enumerate().map(|(i, v)| format!("p{}={}", i + 1, v)).collect())
        .unwrap_or_default();
    let by_resource: Vec<String> = s
        .get("queued_by_resource")
        .and_then(|d| d.as_array())
        .map(|d| d.iter().enumerate().map(|(i, v)| format!("r{i}={v}")).collect())
        .unwrap_or_default();
    let recirculations: u64 = (0..4).map(|i| counter(s, &format!("/queue/cost/{i}/recirculations"))).sum();
    let malformed: u64 =
        s.get("malformed").and_then(|m| m.as_array()).map(|m| m.iter().filter_map(|x| x.as_u64()).sum()).unwrap_or(0);
    format!(
        "switch {} (over {:.1} s)\n\
         queue depth      {} of {} per priority\n\
         decisions/s      {:.0}  (assigns/s {:.0}, refill tasks/s {:.0})\n\
         received/s       {:.0}\n\
         decisions        {}\n\
         repairs          add {}  retrieve {}\n\
         swaps            {}  reinserts {}\n\
         recirculations   {}\n\
         queue_full       {} replies, {} tasks\n\
         refills served   {} packets, {} tasks; returned tasks {}\n\
         over credit      {} returned tasks bounced to their clients\n\
         parked           {} waiting; {} parked, {} answered with tasks, {} expired, {} refused (full)\n\
         queued per rsrc  {}  (unconstrained {})\n\
         best level       {}  (hints sent {}, hosts registered {})\n\
         malformed        {}\n",
        r.endpoint,
        r.interval_s,
        depth.join(" "),
        counter(s, "/capacity"),
        r.rates.decisions,
        r.rates.assigns,
        r.rates.refill_tasks,
        r.rates.received,
        counter(s, "/queue/decisions"),
        counter(s, "/queue/repairs_add"),
        counter(s, "/queue/repairs_retrieve"),
        counter(s, "/queue/swaps"),
        counter(s, "/queue/reinserts"),
        recirculations,
        counter(s, "/queue/queue_full_packets"),
        counter(s, "/queue/queue_full_tasks"),
        counter(s, "/queue/refill_packets"),
        counter(s, "/queue/refill_tasks"),
        counter(s, "/queue/returned_tasks"),
        counter(s, "/return_over_credit"),
        counter(s, "/park/waiting"),
        counter(s, "/park/parked"),
        counter(s, "/park/answered_from_park"),
        counter(s, "/park/expired"),
        counter(s, "/park/refused_park"),
        by_resource.join(" "),
        counter(s, "/queued_unconstrained"),
        counter(s, "/hints/best"),
        counter(s, "/hints/hints_sent"),
        counter(s, "/hints/registered_hosts"),
        malformed,
    )
}
