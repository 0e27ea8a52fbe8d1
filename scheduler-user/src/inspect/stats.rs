//! `bolt stats`: the XDP program's per-CPU counters summed, with rates over an interval.

use std::time::{Duration, Instant};

use scheduler_common::maps::Counter;
use serde::Serialize;

use super::{maps::counters_object, pinned_nodes, table, OutputArgs, PinnedNode};
use crate::xdp::{CounterSnapshot, XdpMaps};

#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// Only this node (its directory under /sys/fs/bpf/bolt/).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// Print again every SECS seconds, rates over each interval (until interrupted, or --count).
    #[arg(long, value_name = "SECS")]
    pub watch: Option<f64>,
    /// Seconds between the two reads the rates come from (without --watch).
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    /// With --watch: stop after this many reports.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One node's counters over an interval.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeStats {
    pub pin_name: String,
    pub node: u16,
    pub interval_s: f64,
    /// Totals since the program's maps were created, by counter name.
    pub counters: serde_json::Map<String, serde_json::Value>,
    /// Per second over the interval, by counter name.
    pub rates: serde_json::Map<String, serde_json::Value>,
    /// GET_TASK answered from the rings over all GET_TASK seen, over the interval (null
    /// when none came).
    pub hit_ratio: Option<f64>,
}

/// Hits over hits and misses of a counter difference.
pub fn hit_ratio(delta: &CounterSnapshot) -> Option<f64> {
    let hits = delta.total_hits();
    let all = hits + delta.get(Counter::Miss);
    (all > 0).then(|| hits as f64 / all as f64)
}

fn read(nodes: &[PinnedNode]) -> anyhow::Result<Vec<(u16, CounterSnapshot)>> {
    nodes
        .iter()
        .map(|n| {
            let m = XdpMaps::open_pinned(&n.dir)?;
            Ok((m.config()?.node, m.counters()?))
        })
        .collect()
}

fn report(
    nodes: &[PinnedNode],
    before: &[(u16, CounterSnapshot)],
    after: &[(u16, CounterSnapshot)],
    secs: f64,
) -> Vec<NodeStats> {
    nodes
        .iter()
        .zip(before.iter().zip(after))
        .map(|(n, ((_, b), (node, a)))| {
            let delta = a.since(b);
            NodeStats {
                pin_name: n.name.clone(),
                node: *node,
                interval_s: secs,
                counters: counters_object(&a.0),
                rates: delta.iter().map(|(name, v)| (name.to_string(), (v as f64 / secs).into())).collect(),
                hit_ratio: hit_ratio(&delta),
            }
        })
        .collect()
}

pub fn run(args: StatsArgs, global: OutputArgs) -> anyhow::Result<()> {
    let out = global.merge(args.out);
    let secs = args.watch.unwrap_or(args.interval);
    anyhow::ensure!(secs > 0.0 && secs <= 86_400.0, "the interval must be more than 0 and at most a day");
    let nodes = pinned_nodes(args.iface.as_deref())?;
    anyhow::ensure!(!nodes.is_empty(), "no Bolt program is pinned under {}", scheduler_common::maps::PIN_ROOT);
    let reports = match (args.watch, args.count) {
        (None, _) => 1,
        (Some(_), Some(n)) => n,
        (Some(_), None) => u64::MAX,
    };
    let mut before = read(&nodes)?;
    let mut t0 = Instant::now();
    for _ in 0..reports {
        std::thread::sleep(Duration::from_secs_f64(secs));
        let after = read(&nodes)?;
        let elapsed = t0.elapsed().as_secs_f64();
        t0 = Instant::now();
        out.print(&report(&nodes, &before, &after, elapsed), |r| render(r))?;
        before = after;
    }
    Ok(())
}

fn render(nodes: &[NodeStats]) -> String {
    let mut s = String::new();
    for n in nodes {
        let ratio = n.hit_ratio.map(|r| format!("{:.1}%", r * 100.0)).unwrap_or_else(|| "-".into());
        s.push_str(&format!("node {} ({}), over {:.1} s: hit ratio {ratio}\n", n.node, n.pin_name, n.interval_s));
        // In the order the counters are declared (the JSON object is keyed by name).
        let rows: Vec<Vec<String>> = Counter::NAMES
            .iter()
            .filter_map(|name| Some((*name, n.counters.get(*name)?)))
            .filter(|(_, v)| v.as_u64() != Some(0))
            .map(|(name, v)| {
                let rate = n.rates.get(name).and_then(|r| r.as_f64()).unwrap_or(0.0);
                vec![name.to_string(), v.to_string(), format!("{rate:.1}")]
            })
            .collect();
        s.push_str(&table(&["counter", "total", "per_s"], &rows));
    }
    s
}
