//! `bolt ring show`: per node and priority, how full the rings are, and the refills that
//! keep them so.

use std::net::SocketAddr;
use std::time::Duration;

use scheduler_common::maps::Counter;
use serde::Serialize;

use super::{pinned_nodes, table, OutputArgs};
use crate::metrics;
use crate::xdp::XdpMaps;

#[derive(clap::Subcommand, Debug)]
pub enum RingCommand {
    /// Per node and priority: tasks queued (reserved slots), capacity, low watermark; REFILL
    /// requested (from the agent's metrics endpoint) and received (from the program's counters).
    #[command(visible_alias = "list")]
    Show(RingShowArgs),
}

#[derive(clap::Args, Debug)]
pub struct RingShowArgs {
    /// Only this node (its directory under /sys/fs/bpf/bolt/).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// The agent's metrics endpoint, for the refills it requested ("off": do not ask).
    #[arg(long, value_name = "ADDR", default_value = metrics::AGENT_DEFAULT)]
    pub agent: String,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RingLevel {
    pub priority: u8,
    /// Slots reserved: the tasks queued plus any being handed out right now.
    pub reserved: i64,
    pub capacity: u32,
    /// A ring left below this after a pop wakes the agent (0: events off).
    pub low_watermark: u32,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeRings {
    pub pin_name: String,
    pub node: u16,
    pub levels: u8,
    pub rings: Vec<RingLevel>,
    /// REFILL frames and tasks the program stored, tasks sent to the overflow queue or
    /// bounced back to the switch.
    pub refill_frames: u64,
    pub refill_tasks: u64,
    pub overflow: u64,
    pub bounced: u64,
    /// From the agent: REFILL_REQ sent, answers with tasks, empty answers (null when its
    /// metrics endpoint cannot be reached).
    pub refill_requests: Option<u64>,
    pub refill_answers: Option<u64>,
    pub refill_empty: Option<u64>,
}

pub fn collect(only: Option<&str>, agent: Option<SocketAddr>) -> anyhow::Result<Vec<NodeRings>> {
    let agent_stats = agent.and_then(|a| metrics::get_json(a, "/stats", Duration::from_millis(500)).ok());
    let mut out = Vec::new();
    for node in pinned_nodes(only)? {
        let maps = XdpMaps::open_pinned(&node.dir)?;
        let cfg = maps.config()?;
        let counters = maps.counters()?;
        // An agent answers for its own pins only.
        let from_agent = agent_stats
            .as_ref()
            .filter(|s| s.pointer("/xdp/pin_name").and_then(|v| v.as_str()) == Some(node.name.as_str()));
        let agent_u64 = |field: &str| from_agent.and_then(|s| s.pointer(&format!("/agent/{field}"))?.as_u64());
        out.push(NodeRings {
            pin_name: node.name.clone(),
            node: cfg.node,
            levels: cfg.levels,
            rings: (1..=cfg.levels)
                .map(|p| RingLevel {
                    priority: p,
                    reserved: maps.reserved(p),
                    capacity: maps.ring_capacity(p),
                    low_watermark: cfg.low_watermark,
                })
                .collect(),
            refill_frames: counters.get(Counter::RefillFrames),
            refill_tasks: counters.get(Counter::RefillTasks),
            overflow: counters.get(Counter::Overflow),
            bounced: counters.get(Counter::Bounced),
            refill_requests: agent_u64("refill_requests"),
            refill_answers: agent_u64("refill_answers"),
            refill_empty: agent_u64("refill_empty"),
        });
    }
    Ok(out)
}

pub fn run(cmd: RingCommand, global: OutputArgs) -> anyhow::Result<()> {
    let RingCommand::Show(args) = cmd;
    let out = global.merge(args.out);
    let agent = metrics::parse_endpoint(&args.agent, metrics::AGENT_PORT)?;
    let views = collect(args.iface.as_deref(), agent)?;
    out.print(&views, |v| render(v))
}

fn opt(v: Option<u64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

fn render(nodes: &[NodeRings]) -> String {
    if nodes.is_empty() {
        return "no Bolt rings are pinned".into();
    }
    let mut s = String::new();
    for n in nodes {
        s.push_str(&format!("node {} ({}), {} levels\n", n.node, n.pin_name, n.levels));
        let rows: Vec<Vec<String>> = n
            .rings
            .iter()
            .map(|r| {
                let pct = 100.0 * r.reserved as f64 / r.capacity.max(1) as f64;
                vec![
                    r.priority.to_string(),
                    r.reserved.to_string(),
                    r.capacity.to_string(),
                    format!("{pct:.1}%"),
                    r.low_watermark.to_string(),
                ]
            })
            .collect();
        s.push_str(&table(&["prio", "queued", "capacity", "full", "low_watermark"], &rows));
        s.push_str(&format!(
            "refills: requested {}  answered {}  empty {}  received {} frames, {} tasks  overflow {}  bounced {}\n",
            opt(n.refill_requests),
            opt(n.refill_answers),
            opt(n.refill_empty),
            n.refill_frames,
            n.refill_tasks,
            n.overflow,
            n.bounced
        ));
    }
    s
}
