//! `bolt map show|list` and `bolt map dump`: Bolt's pinned maps, rings decoded into
//! tasks and counters by name.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use aya::maps::MapInfo;
use scheduler_common::{
    descriptor::Handler,
    maps::{
        Counter, CONFIG_MAP, COUNTERS_MAP, DEDICATED_MAP, EVENTS_MAP, OVERFLOW_MAP, RING_MAPS, RING_STATE_MAP,
        STATE_MAPS, WAITERS_MAP, WAIT_SEQ_MAP,
    },
    Entry,
};
use serde::Serialize;

use super::{pinned_nodes, shown_path, table, OutputArgs, PinnedNode};
use crate::xdp::{PinDir, XdpMaps};

#[derive(clap::Subcommand, Debug)]
pub enum MapCommand {
    /// Bolt's maps on this host: id, type, name, key and value size, entries, pinned path (-f).
    #[command(visible_alias = "list")]
    Show(MapShowArgs),
    /// The contents of one map, decoded: `map dump NAME [--iface IF]` or `map dump pinned PATH`.
    /// Rings list their tasks head first, counters their values by name per CPU and summed.
    Dump(MapDumpArgs),
}

#[derive(clap::Args, Debug)]
pub struct MapShowArgs {
    /// Only the maps pinned for this node.
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct MapDumpArgs {
    /// A map name (BOLT_RING_1 .. BOLT_RING_8, BOLT_RING_STATE, BOLT_COUNTERS, BOLT_CONFIG;
    /// case does not matter), or `pinned` followed by the path of a pinned map.
    #[arg(value_name = "NAME|pinned")]
    pub name: String,
    /// With `pinned`: the pinned map's path.
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,
    /// The node whose map to dump (needed when several are pinned).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One map as `map show` lists it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MapView {
    pub pin_name: String,
    pub id: u32,
    pub name: String,
    /// The kernel's map type, as bpftool names it (queue, array, percpu_array, ringbuf).
    #[serde(rename = "type")]
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub pinned: Option<String>,
}

/// A task as a ring holds it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TaskView {
    pub uid: u32,
    pub jid: u32,
    pub tid: u32,
    pub priority: u8,
    /// Resources the task needs, an 8-bit bitmap.
    pub resources: u8,
    pub class: u8,
    /// The handler its descriptor names (noop, sleep 500us, exec NAME), or "invalid".
    pub handler: String,
    /// Where the executor reports COMPLETE: IP:PORT.
    pub client: String,
}

impl TaskView {
    pub fn of(e: &Entry) -> TaskView {
        let handler = match Handler::decode(&e.task.desc) {
            Ok(Handler::Noop) => "noop".to_string(),
            Ok(Handler::Sleep { micros }) => format!("sleep {micros}us"),
            Ok(Handler::Spin { micros }) => format!("spin {micros}us"),
            Ok(Handler::Exec { name }) => format!("exec {}", String::from_utf8_lossy(name)),
            Ok(Handler::Spec { port, spec_id }) => format!("spec {spec_id} (client port {port})"),
            Err(err) => format!("invalid ({})", err.name()),
        };
        TaskView {
            uid: e.uid(),
            jid: e.jid(),
            tid: e.task.tid(),
            priority: e.task.prio,
            resources: e.task.rsrc,
            class: e.task.class,
            handler,
            client: format!("{}:{}", Ipv4Addr::from(e.client_ip), e.client_port()),
        }
    }
}

/// What `map dump` prints: one of these, by the map's kind.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MapDump {
    Ring {
        map: String,
        pin_name: String,
        priority: u8,
        reserved: i64,
        capacity: u32,
        /// The ring's head task (none when empty): a queue map is readable at its head only.
        tasks: Vec<TaskView>,
    },
    Counters {
        map: String,
        pin_name: String,
        total: serde_json::Map<String, serde_json::Value>,
        per_cpu: Vec<serde_json::Map<String, serde_json::Value>>,
    },
    RingState {
        map: String,
        pin_name: String,
        reserved: Vec<i64>,
    },
    Config {
        map: String,
        pin_name: String,
        config: ConfigView,
    },
}

/// The program's configuration map, decoded.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ConfigView {
    pub port: u16,
    pub node: u16,
    /// REFILL is taken only from this address (null: from nobody).
    pub switch: Option<String>,
    pub levels: u8,
    pub ring_capacity: u32,
    pub low_watermark: u32,
    pub event_interval_ns: u64,
    pub hint_ttl_ns: u64,
}

impl ConfigView {
    pub fn of(c: &scheduler_common::maps::XdpConfig) -> ConfigView {
        ConfigView {
            port: c.port,
            node: c.node,
            switch: (c.switch_ipv4 != [0; 4]).then(|| Ipv4Addr::from(c.switch_ipv4).to_string()),
            levels: c.levels,
            ring_capacity: c.ring_capacity,
            low_watermark: c.low_watermark,
            event_interval_ns: c.event_interval_ns,
            hint_ttl_ns: c.hint_ttl_ns,
        }
    }
}

/// `name value` of every counter, as a JSON object in Counter order.
pub fn counters_object(values: &scheduler_common::maps::Counters) -> serde_json::Map<String, serde_json::Value> {
    Counter::ALL.iter().map(|c| (c.name().to_string(), values.get(*c).into())).collect()
}

fn map_type_name(info: &MapInfo) -> String {
    use aya::maps::MapType;
    match info.map_type() {
        Ok(MapType::Queue) => "queue".into(),
        Ok(MapType::Array) => "array".into(),
        Ok(MapType::PerCpuArray) => "percpu_array".into(),
        Ok(MapType::RingBuf) => "ringbuf".into(),
        Ok(other) => format!("{other:?}").to_lowercase(),
        Err(e) => format!("unknown ({e})"),
    }
}

pub fn collect_maps(nodes: &[PinnedNode], out: &OutputArgs) -> anyhow::Result<Vec<MapView>> {
    let mut views = Vec::new();
    for node in nodes {
        for name in STATE_MAPS {
            let path = node.dir.map(name);
            if !path.exists() {
                continue;
            }
            let info = MapInfo::from_pin(&path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
            views.push(MapView {
                pin_name: node.name.clone(),
                id: info.id(),
                name: name.to_string(),
                map_type: map_type_name(&info),
                key_size: info.key_size(),
                value_size: info.value_size(),
                max_entries: info.max_entries(),
                pinned: shown_path(out, path),
            });
        }
    }
    Ok(views)
}

/// The dump of map `name` (one of STATE_MAPS) of the node pinned in `dir`.
/// A ring is shown by its head task only: a BPF queue map can be read in place at its head
/// and nowhere else, and a dump must not change the ring it reads (taking tasks off and
/// putting them back would rotate a ring being served, and a signal in between would lose
/// a task).
pub fn dump(pin_name: &str, dir: &PinDir, name: &str) -> anyhow::Result<MapDump> {
    let maps = XdpMaps::open_pinned(dir)?;
    let map = name.to_string();
    let pin_name = pin_name.to_string();
    if let Some(i) = RING_MAPS.iter().position(|r| *r == name) {
        let priority = i as u8 + 1;
        let tasks = maps.peek_ring(priority)?.iter().map(TaskView::of).collect();
        return Ok(MapDump::Ring {
            map,
            pin_name,
            priority,
            reserved: maps.reserved(priority),
            capacity: maps.ring_capacity(priority),
            tasks,
        });
    }
    Ok(match name {
        COUNTERS_MAP => MapDump::Counters {
            map,
            pin_name,
            total: counters_object(&maps.counters()?.0),
            per_cpu: maps.counters_per_cpu()?.iter().map(counters_object).collect(),
        },
        RING_STATE_MAP => MapDump::RingState { map, pin_name, reserved: maps.occupancy().to_vec() },
        CONFIG_MAP => MapDump::Config { map, pin_name, config: ConfigView::of(&maps.config()?) },
        DEDICATED_MAP => anyhow::bail!(
            "{DEDICATED_MAP} is a queue read only at its head; `ring show` counts the tasks it served (dedicated_hit)"
        ),
        WAITERS_MAP => anyhow::bail!(
            "{WAITERS_MAP} is a queue read only at its head; `ring show` counts the executors that waited (parked_here, handoffs)"
        ),
        WAIT_SEQ_MAP => anyhow::bail!(
            "{WAIT_SEQ_MAP} holds each executor's newest request number; `ring show` counts the replaced ones (stale_waiters)"
        ),
        OVERFLOW_MAP => anyhow::bail!(
            "{OVERFLOW_MAP} is a queue the agent empties as it fills; `ring show` counts what went through it"
        ),
        EVENTS_MAP => {
            anyhow::bail!("{EVENTS_MAP} is a ring buffer the agent consumes; reading it would take its events")
        }
        _ => anyhow::bail!("{name:?} is not a Bolt map (one of {})", STATE_MAPS.join(", ")),
    })
}

fn resolve(args: &MapDumpArgs) -> anyhow::Result<(String, PinDir, String)> {
    if args.name == "pinned" {
        let path = args.path.as_deref().ok_or_else(|| anyhow::anyhow!("map dump pinned PATH: the path is missing"))?;
        let (dir, file) = split_pin_path(path)?;
        let pin_name = dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        return Ok((pin_name, dir, file));
    }
    anyhow::ensure!(args.path.is_none(), "map dump NAME takes no path (did you mean `map dump pinned PATH`?)");
    let name = args.name.to_ascii_uppercase();
    let nodes = pinned_nodes(args.iface.as_deref())?;
    let node = match nodes.as_slice() {
        [] => anyhow::bail!("no Bolt program is pinned under {}", scheduler_common::maps::PIN_ROOT),
        [one] => one.clone(),
        many => anyhow::bail!(
            "several nodes are pinned ({}): choose one with --iface",
            many.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    Ok((node.name, node.dir, name))
}

/// A pinned map's path as its node's pin directory and the map's name.
fn split_pin_path(path: &Path) -> anyhow::Result<(PinDir, String)> {
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_string();
    let parent = path.parent().unwrap_or(Path::new("/"));
    let node = parent.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    let root = parent.parent().unwrap_or(Path::new("/"));
    anyhow::ensure!(STATE_MAPS.contains(&file.as_str()), "{} is not a pinned Bolt map", path.display());
    Ok((PinDir::under(root, node)?, file))
}

pub fn run(cmd: MapCommand, global: OutputArgs) -> anyhow::Result<()> {
    match cmd {
        MapCommand::Show(args) => {
            let out = global.merge(args.out);
            let views = collect_maps(&pinned_nodes(args.iface.as_deref())?, &out)?;
            out.print(&views, |v| render_maps(v))
        }
        MapCommand::Dump(args) => {
            let out = global.merge(args.out);
            let (pin_name, dir, name) = resolve(&args)?;
            let d = dump(&pin_name, &dir, &name)?;
            out.print(&d, render_dump)
        }
    }
}

fn render_maps(views: &[MapView]) -> String {
    if views.is_empty() {
        return "no Bolt map is pinned".into();
    }
    let mut s = String::new();
    for v in views {
        s.push_str(&format!(
            "{}: {}  name {}  key {}B  value {}B  max_entries {}  node {}\n",
            v.id, v.map_type, v.name, v.key_size, v.value_size, v.max_entries, v.pin_name
        ));
        if let Some(p) = &v.pinned {
            s.push_str(&format!("\tpinned {p}\n"));
        }
    }
    s
}

fn render_dump(d: &MapDump) -> String {
    match d {
        MapDump::Ring { map, pin_name, priority, reserved, capacity, tasks } => {
            let mut s = format!(
                "{map} ({pin_name}): priority {priority}, {reserved} of {capacity} slots reserved; {}\n",
                if tasks.is_empty() { "empty" } else { "its head (a queue map is readable at its head only):" }
            );
            let rows: Vec<Vec<String>> = tasks
                .iter()
                .map(|t| {
                    vec![
                        t.uid.to_string(),
                        t.jid.to_string(),
                        t.tid.to_string(),
                        t.priority.to_string(),
                        format!("{:#04x}", t.resources),
                        t.class.to_string(),
                        t.handler.clone(),
                        t.client.clone(),
                    ]
                })
                .collect();
            if !rows.is_empty() {
                s.push_str(&table(&["uid", "jid", "tid", "prio", "rsrc", "class", "handler", "client"], &rows));
            }
            s
        }
        MapDump::Counters { map, pin_name, total, per_cpu } => {
            let mut header = vec!["counter".to_string(), "total".to_string()];
            header.extend((0..per_cpu.len()).map(|i| format!("cpu{i}")));
            let rows: Vec<Vec<String>> = Counter::NAMES
                .iter()
                .filter_map(|name| Some((*name, total.get(*name)?)))
                .map(|(name, v)| {
                    let mut row = vec![name.to_string(), v.to_string()];
                    row.extend(per_cpu.iter().map(|c| c.get(name).map(|x| x.to_string()).unwrap_or_default()));
                    row
                })
                .collect();
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            format!("{map} ({pin_name}):\n{}", table(&header, &rows))
        }
        MapDump::RingState { map, pin_name, reserved } => {
            let rows: Vec<Vec<String>> =
                reserved.iter().enumerate().map(|(i, r)| vec![(i + 1).to_string(), r.to_string()]).collect();
            format!("{map} ({pin_name}):\n{}", table(&["priority", "reserved"], &rows))
        }
        MapDump::Config { map, pin_name, config } => format!(
            "{map} ({pin_name}): node {}  port {}  switch {}  levels {}  ring_capacity {}  low_watermark {}  event_interval_ns {}  hint_ttl_ns {}",
            config.node,
            config.port,
            config.switch.as_deref().unwrap_or("none"),
            config.levels,
            config.ring_capacity,
            config.low_watermark,
            config.event_interval_ns,
            config.hint_ttl_ns
        ),
    }
}
