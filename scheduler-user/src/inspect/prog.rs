//! `bolt prog show|list`: the Bolt XDP programs loaded on this host.

use std::collections::BTreeSet;
use std::time::Duration;

use aya::programs::{loaded_programs, ProgramInfo};
use scheduler_common::maps::PROGRAM_NAME;
use serde::Serialize;

use super::{fdinfo, pinned_nodes, shown_path, OutputArgs};
use crate::xdp::XdpMaps;

#[derive(clap::Subcommand, Debug)]
pub enum ProgCommand {
    /// The Bolt XDP programs: id, node, interfaces and attach mode, tag, run count and time
    /// (when the kernel's BPF statistics are on), pinned path (-f).
    #[command(visible_alias = "list")]
    Show(ProgShowArgs),
}

#[derive(clap::Args, Debug)]
pub struct ProgShowArgs {
    /// Only the program pinned for this node (its directory under /sys/fs/bpf/bolt/).
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// Turn the kernel's run-time statistics on for this many seconds and report runs and
    /// ns per run over that window (statistics cost every program a clock read per run).
    #[arg(long, value_name = "SECS")]
    pub sample: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One attachment of a program.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Attachment {
    /// Interface name (null: not found in this or any named network namespace).
    pub interface: Option<String>,
    /// The named network namespace it is in (null: this one).
    pub netns: Option<String>,
    pub ifindex: u32,
    /// "driver", "skb" or "hw" (null when the interface was not found).
    pub mode: Option<String>,
    pub link_id: Option<u32>,
    pub pinned: Option<String>,
}

/// A loaded Bolt XDP program.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProgView {
    pub id: u32,
    pub name: String,
    /// The kernel's tag (hash of the instructions), 16 hex digits as bpftool shows it.
    pub tag: String,
    /// The directory of its pins under /sys/fs/bpf/bolt/ (null: loaded but not pinned).
    pub pin_name: Option<String>,
    /// The node id it answers for (from its config map; null when not pinned).
    pub node: Option<u16>,
    pub attached: Vec<Attachment>,
    /// Runs and total run time counted by the kernel while its statistics were on
    /// (null when they are off).
    pub run_count: Option<u64>,
    pub run_time_ns: Option<u64>,
    /// With --sample: runs and mean ns per run over the sample window.
    pub sample: Option<RunSample>,
    pub pinned: Option<String>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunSample {
    pub seconds: f64,
    pub runs: u64,
    pub ns_per_run: Option<f64>,
}

/// True when kernel.bpf_stats_enabled is on (run counts and times are being kept).
pub fn kernel_stats_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|s| s.trim() == "1")
}

fn tag_hex(info: &ProgramInfo) -> String {
    format!("{:016x}", info.tag())
}

/// Every Bolt XDP program: those pinned under /sys/fs/bpf/bolt/ first, then any other
/// loaded program of that name (a test's or a benchmark's, pinned nowhere).
pub fn collect(only: Option<&str>, out: &OutputArgs) -> anyhow::Result<Vec<ProgView>> {
    let stats_on = kernel_stats_enabled();
    let attachments = xdp_attachments();
    let mut views = Vec::new();
    let mut seen = BTreeSet::new();
    for node in pinned_nodes(only)? {
        let prog_pin = node.dir.program();
        if !prog_pin.exists() {
            continue;
        }
        let info = ProgramInfo::from_pin(&prog_pin)
            .map_err(|e| anyhow::anyhow!("reading the pinned program {}: {e}", prog_pin.display()))?;
        let prog_id = info.id();
        seen.insert(prog_id);
        let node_id = XdpMaps::open_pinned(&node.dir).and_then(|m| m.config()).map(|c| c.node).ok();
        let mut attached = Vec::new();
        for link in node.dir.links() {
            let info = fdinfo::pinned_fdinfo(&link)?;
            let ifindex: u32 = info.get("ifindex").and_then(|v| v.parse().ok()).unwrap_or(0);
            let on = attachments.iter().find(|a| a.prog_id == prog_id && a.ifindex == ifindex);
            attached.push(Attachment {
                interface: on.map(|a| a.name.clone()),
                netns: on.and_then(|a| a.netns.clone()),
                ifindex,
                mode: on.map(|a| a.mode.to_string()),
                link_id: info.get("link_id").and_then(|v| v.parse().ok()),
                pinned: shown_path(out, link.clone()),
            });
        }
        views.push(ProgView {
            id: info.id(),
            name: info.name_as_str().unwrap_or(PROGRAM_NAME).to_string(),
            tag: tag_hex(&info),
            pin_name: Some(node.name.clone()),
            node: node_id,
            attached,
            run_count: stats_on.then(|| info.run_count()),
            run_time_ns: stats_on.then(|| info.run_time().as_nanos() as u64),
            sample: None,
            pinned: shown_path(out, prog_pin),
        });
    }
    if only.is_none() {
        for info in loaded_programs().filter_map(Result::ok) {
            if info.name_as_str() != Some(PROGRAM_NAME) || seen.contains(&info.id()) {
                continue;
            }
            views.push(ProgView {
                id: info.id(),
                name: PROGRAM_NAME.to_string(),
                tag: tag_hex(&info),
                pin_name: None,
                node: None,
                attached: Vec::new(),
                run_count: stats_on.then(|| info.run_count()),
                run_time_ns: stats_on.then(|| info.run_time().as_nanos() as u64),
                sample: None,
                pinned: None,
            });
        }
    }
    Ok(views)
}

/// Runs and run time of each program over `window`, with the kernel's statistics on for
/// that long (they go off again when the returned descriptor closes, unless the sysctl
/// keeps them on).
fn sample(views: &mut [ProgView], window: Duration) -> anyhow::Result<()> {
    let run = |id: u32| {
        loaded_programs()
            .filter_map(Result::ok)
            .find(|i| i.id() == id)
            .map(|i| (i.run_count(), i.run_time().as_nanos() as u64))
    };
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .map_err(|e| anyhow::anyhow!("turning on the kernel's BPF run statistics (needs CAP_SYS_ADMIN): {e}"))?;
    let before: Vec<_> = views.iter().map(|v| run(v.id)).collect();
    std::thread::sleep(window);
    for (v, b) in views.iter_mut().zip(before) {
        if let (Some((c0, t0)), Some((c1, t1))) = (b, run(v.id)) {
            let runs = c1.saturating_sub(c0);
            v.sample = Some(RunSample {
                seconds: window.as_secs_f64(),
                runs,
                ns_per_run: (runs > 0).then(|| t1.saturating_sub(t0) as f64 / runs as f64),
            });
        }
    }
    Ok(())
}

/// An XDP program attached to an interface, as iproute2 lists it in some namespace.
#[derive(Clone, Debug)]
struct XdpOnInterface {
    netns: Option<String>,
    ifindex: u32,
    name: String,
    mode: &'static str,
    prog_id: u32,
}

/// Every XDP attachment in this network namespace and each named one (`/run/netns`): an
/// XDP link tells its ifindex only, which names an interface in the link's own namespace.
fn xdp_attachments() -> Vec<XdpOnInterface> {
    let mut namespaces: Vec<Option<String>> = vec![None];
    if let Ok(entries) = std::fs::read_dir("/run/netns") {
        let mut named: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
        named.sort();
        namespaces.extend(named.into_iter().map(Some));
    }
    let mut found = Vec::new();
    for ns in namespaces {
        let mut cmd = std::process::Command::new("ip");
        if let Some(ns) = &ns {
            cmd.args(["-n", ns]);
        }
        let Ok(out) = cmd.args(["-j", "link", "show"]).output() else { continue };
        let Ok(serde_json::Value::Array(links)) = serde_json::from_slice(&out.stdout) else { continue };
        for link in links {
            let Some(xdp) = link.get("xdp") else { continue };
            let attached = match xdp.get("attached").and_then(|a| a.as_array()) {
                Some(list) => list.clone(),
                None => vec![xdp.clone()],
            };
            for a in attached {
                let (Some(prog_id), Some(mode)) =
                    (a.pointer("/prog/id").and_then(|v| v.as_u64()), a.get("mode").and_then(|v| v.as_u64()))
                else {
                    continue;
                };
                found.push(XdpOnInterface {
                    netns: ns.clone(),
                    ifindex: link.get("ifindex").and_then(|v| v.as_u64()).unwrap_or(0) as u32,
                    name: link.get("ifname").and_then(|v| v.as_str()).unwrap_or_default().to_string(),
                    // XDP_ATTACHED_* of the kernel's uapi if_link.h.
                    mode: match mode {
                        1 => "driver",
                        2 => "skb",
                        3 => "hw",
                        _ => "unknown",
                    },
                    prog_id: prog_id as u32,
                });
            }
        }
    }
    found
}

pub fn run(cmd: ProgCommand, global: OutputArgs) -> anyhow::Result<()> {
    let ProgCommand::Show(args) = cmd;
    let out = global.merge(args.out);
    let mut views = collect(args.iface.as_deref(), &out)?;
    if let Some(secs) = args.sample {
        anyhow::ensure!(secs > 0.0 && secs <= 3600.0, "--sample must be more than 0 and at most 3600 seconds");
        sample(&mut views, Duration::from_secs_f64(secs))?;
    }
    out.print(&views, |views| render(views))
}

fn render(views: &[ProgView]) -> String {
    if views.is_empty() {
        return "no Bolt XDP program is loaded".into();
    }
    let mut s = String::new();
    for v in views {
        s.push_str(&format!("{}: xdp  name {}  tag {}", v.id, v.name, v.tag));
        if let Some(node) = v.node {
            s.push_str(&format!("  node {node}"));
        }
        if let Some(p) = &v.pin_name {
            s.push_str(&format!("  pins {p}"));
        }
        s.push('\n');
        for a in &v.attached {
            let name = a.interface.clone().unwrap_or_else(|| "?".into());
            s.push_str(&format!("\tattached {name}(ifindex {})", a.ifindex));
            if let Some(ns) = &a.netns {
                s.push_str(&format!("  netns {ns}"));
            }
            s.push_str(&format!("  mode {}", a.mode.as_deref().unwrap_or("?")));
            if let Some(id) = a.link_id {
                s.push_str(&format!("  link {id}"));
            }
            if let Some(p) = &a.pinned {
                s.push_str(&format!("  pinned {p}"));
            }
            s.push('\n');
        }
        match (v.run_count, v.run_time_ns) {
            (Some(c), Some(t)) => s.push_str(&format!("\trun_cnt {c}  run_time_ns {t}\n")),
            _ => s.push_str("\trun_cnt -  (kernel.bpf_stats_enabled is 0; --sample SECS measures)\n"),
        }
        if let Some(sm) = &v.sample {
            let per = sm.ns_per_run.map(|n| format!("{n:.0} ns/run")).unwrap_or_else(|| "-".into());
            s.push_str(&format!("\tsampled {:.1} s: {} runs  {per}\n", sm.seconds, sm.runs));
        }
        if let Some(p) = &v.pinned {
            s.push_str(&format!("\tpinned {p}\n"));
        }
    }
    s
}
