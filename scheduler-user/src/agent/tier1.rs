//! Bringing up tier 1 on this host: the XDP program with its rings pinned under
//! `/sys/fs/bpf/bolt/<name>/`, attached to the executor-facing interface and to the
//! uplink REFILL arrives on; or, where XDP cannot run, the same rings served from
//! userspace.
//!
//! Order of preference, each step falling back to the next with the reason logged:
//! 1. a program already pinned there (an agent restarting): reopen its maps with every
//!    queued task, attach it wherever it is missing, bring its configuration up to date;
//! 2. load the program over the pinned maps (reusing any that exist) and attach it;
//! 3. the program loaded but cannot attach (driver, old kernel): serve the pinned BPF
//!    rings from userspace, so that queued tasks still survive a restart;
//! 4. no BPF at all (no privileges): serve rings kept in this process.

use std::net::Ipv4Addr;
use std::path::Path;

use anyhow::Context as _;
use aya::programs::ProgramInfo;
use aya_log::EbpfLogger;
use scheduler_common::maps::{XdpConfig, PIN_ROOT, RING_COUNT};
use scheduler_common::Ipv4Prefix;

use super::rings::{MemoryRings, Rings};
use crate::xdp::{is_bpffs, AttachMode, BoltXdp, EventReader, PinDir, XdpMaps, XdpSettings};

/// Whether the agent may, must, or must not use XDP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum XdpChoice {
    /// XDP where it works, userspace otherwise (saying why).
    #[default]
    Auto,
    /// XDP or nothing: fail when the program cannot be attached.
    Require,
    /// Userspace only (rings in this process): for hosts without BPF, and for tests.
    Off,
}

/// What tier 1 on this host needs to know.
#[derive(Clone, Debug)]
pub struct Tier1Config {
    /// Interfaces executors' GET_TASK arrives on (at least one; one per executor
    /// container, say). All share the same program and rings.
    pub ifaces: Vec<String>,
    /// Interface REFILL from the switch arrives on, when it is another one.
    pub uplink: Option<String>,
    /// Directory name under PIN_ROOT (default: `iface`).
    pub pin_name: String,
    pub attach_mode: AttachMode,
    pub xdp: XdpChoice,
    pub settings: XdpSettings,
}

/// How GET_TASK is answered on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tier1Mode {
    /// By the XDP program, on the listed interfaces.
    Xdp { interfaces: Vec<String>, reattached: bool },
    /// By the agent at its UDP socket (executors point `--switch` at the agent).
    Userspace { reason: String, persistent: bool },
}

impl Tier1Mode {
    pub fn is_xdp(&self) -> bool {
        matches!(self, Tier1Mode::Xdp { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Tier1Mode::Xdp { .. } => "xdp",
            Tier1Mode::Userspace { persistent: true, .. } => "userspace-bpf-rings",
            Tier1Mode::Userspace { persistent: false, .. } => "userspace-memory-rings",
        }
    }
}

/// Tier 1 on this host, up and running.
pub struct Tier1 {
    pub rings: Rings,
    pub events: Option<EventReader>,
    pub logger: Option<EbpfLogger<&'static dyn log::Log>>,
    pub mode: Tier1Mode,
    /// Where the program and rings are pinned (None for memory rings).
    pub pins: Option<PinDir>,
}

/// Mounts a bpf filesystem at /sys/fs/bpf unless one is there. Err(None): not permitted
/// (the caller falls back); Err(Some(e)): anything else, which the operator must fix.
fn ensure_bpffs() -> Result<(), Option<anyhow::Error>> {
    let root = Path::new("/sys/fs/bpf");
    if is_bpffs(root) {
        return Ok(());
    }
    if !root.is_dir() {
        return Err(Some(anyhow::anyhow!(
            "{} does not exist: this kernel has no bpf filesystem mount point (CONFIG_BPF_SYSCALL)",
            root.display()
        )));
    }
    let (src, fstype, target) = (c"bpf", c"bpf", c"/sys/fs/bpf");
    // SAFETY: NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 {
        tracing::info!("mounted a bpf filesystem at /sys/fs/bpf");
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if matches!(err.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
        return Err(None);
    }
    Err(Some(anyhow::anyhow!(
        "no bpf filesystem at /sys/fs/bpf and mounting one failed: {err} (run `mount -t bpf bpf /sys/fs/bpf` as root)"
    )))
}

impl Tier1Config {
    /// This configuration with the uplink's ifindex in the settings: the one interface
    /// the program stores REFILL from (an executor behind another interface could forge
    /// the switch's address). No uplink, or one that does not exist: REFILL is stored
    /// from no interface, and reaches the agent's socket through the stack instead.
    fn with_uplink_ifindex(&self) -> Tier1Config {
        let mut cfg = self.clone();
        let index = self.uplink.as_deref().and_then(|name| match crate::net::ifindex(name) {
            Ok(i) => Some(i),
            Err(e) => {
                tracing::warn!(uplink = name, error = %e, "no such uplink interface: REFILL is stored from none");
                None
            }
        });
        cfg.settings.uplink_ifindex = [0; scheduler_common::maps::MAX_UPLINKS];
        cfg.settings.uplink_ifindex[0] = index.unwrap_or(0);
        cfg
    }

    /// Every interface to attach to, executor-facing first, the uplink last, no repeats.
    fn interfaces(&self) -> Vec<(&str, Role)> {
        let mut v: Vec<(&str, Role)> = Vec::new();
        for (i, iface) in self.ifaces.iter().enumerate() {
            if !v.iter().any(|(n, _)| n == iface) {
                v.push((iface, if i == 0 { Role::First } else { Role::Executors }));
            }
        }
        if let Some(uplink) = self.uplink.as_deref() {
            if !v.iter().any(|(n, _)| *n == uplink) {
                v.push((uplink, Role::Uplink));
            }
        }
        v
    }
}

/// Why the program is attached to an interface, which decides what a failure means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The first executor-facing interface: without it, tier 1 runs in userspace.
    First,
    /// Another executor-facing interface: its executors reach the switch directly.
    Executors,
    /// Where REFILL arrives: without it, REFILL reaches the agent's socket.
    Uplink,
}

fn warn_partial(iface: &str, role: Role, e: &anyhow::Error) {
    let consequence = match role {
        Role::Uplink => "REFILL goes through the agent's socket instead (slower ingest)",
        _ => "GET_TASK arriving there goes to the switch directly",
    };
    tracing::warn!(iface, error = format!("{e:#}"), "XDP not attached: {consequence}");
}

impl Tier1 {
    /// Brings tier 1 up as described in the module documentation.
    pub fn open(cfg: &Tier1Config) -> anyhow::Result<Tier1> {
        let cfg = &cfg.with_uplink_ifindex();
        cfg.settings.validate()?;
        anyhow::ensure!(!cfg.ifaces.is_empty(), "at least one executor-facing interface is needed");
        let pins = PinDir::under(Path::new(PIN_ROOT), &cfg.pin_name)?;
        if cfg.xdp == XdpChoice::Off {
            if pins.path().exists() {
                tracing::warn!(
                    pins = %pins.path().display(),
                    "a pinned program and rings exist for this interface and are left as they are; \
                     `bolt agent --iface {} --unload` returns their tasks",
                    cfg.pin_name
                );
            }
            return Ok(Tier1::memory(cfg, "XDP turned off (--xdp off)".into()));
        }
        match ensure_bpffs() {
            Ok(()) => {}
            Err(None) => {
                return Tier1::fall_back(
                    cfg,
                    "not permitted to mount a bpf filesystem (needs root or CAP_SYS_ADMIN)".into(),
                )
            }
            Err(Some(e)) => return Err(e),
        }
        if pins.program().exists() {
            return Tier1::reattach(cfg, pins);
        }
        // Pins this call creates hold no task yet: they go again if tier 1 does not come up
        // on them. Pins found here may hold tasks and always stay.
        let fresh = !pins.path().exists();
        let discard = |pins: &PinDir| {
            if fresh {
                if let Err(e) = BoltXdp::unload_pinned(pins) {
                    tracing::warn!(error = format!("{e:#}"), pins = %pins.path().display(), "removing unused pins");
                }
            }
        };
        let mut xdp = match BoltXdp::load_pinned(&cfg.settings, &pins) {
            Ok(xdp) => xdp,
            Err(e) => {
                let reason = format!("the XDP program could not be loaded: {e:#}");
                // The maps may have been created and pinned before the program failed.
                return match XdpMaps::open_pinned(&pins) {
                    Ok(maps) if cfg.xdp == XdpChoice::Auto => Ok(Tier1::userspace_on_maps(maps, pins, reason)),
                    _ => {
                        discard(&pins);
                        Tier1::fall_back(cfg, reason)
                    }
                };
            }
        };
        let mut interfaces = Vec::new();
        for (iface, role) in cfg.interfaces() {
            let attached = if role == Role::First {
                xdp.attach(iface, cfg.attach_mode)
            } else {
                xdp.attach_also(iface, cfg.attach_mode)
            };
            match attached {
                Ok(()) => interfaces.push(iface.to_string()),
                Err(e) if role == Role::First => {
                    let reason = format!("{e:#}");
                    let logger = xdp.take_logger();
                    drop(xdp);
                    if cfg.xdp == XdpChoice::Require {
                        discard(&pins);
                        anyhow::bail!("{reason} (and --xdp require)");
                    }
                    let maps = XdpMaps::open_pinned(&pins).context("reopening the pinned rings")?;
                    let mut t = Tier1::userspace_on_maps(maps, pins, reason);
                    t.logger = logger;
                    return Ok(t);
                }
                Err(e) => warn_partial(iface, role, &e),
            }
        }
        let logger = xdp.take_logger();
        // Everything is pinned: the program keeps running without this handle, and the
        // agent works on the pinned maps exactly as it will after a restart.
        drop(xdp);
        let mut maps = XdpMaps::open_pinned(&pins).context("reopening the pinned rings")?;
        let events = maps.take_events();
        tracing::info!(interfaces = ?interfaces, pins = %pins.path().display(), mode = ?cfg.attach_mode, "XDP program loaded and attached");
        Ok(Tier1 {
            rings: Rings::Bpf(Box::new(maps)),
            events,
            logger,
            mode: Tier1Mode::Xdp { interfaces, reattached: false },
            pins: Some(pins),
        })
    }

    /// Opens what an earlier agent pinned, for draining it: fails if nothing is pinned.
    pub fn open_existing(pin_name: &str) -> anyhow::Result<Tier1> {
        let pins = PinDir::under(Path::new(PIN_ROOT), pin_name)?;
        anyhow::ensure!(
            pins.path().is_dir(),
            "nothing is pinned at {}: no Bolt XDP program was loaded for {pin_name}",
            pins.path().display()
        );
        let mut maps = XdpMaps::open_pinned(&pins)
            .with_context(|| format!("opening the rings pinned at {}", pins.path().display()))?;
        let levels = maps.config()?.levels;
        recount(&mut maps, levels)?;
        let events = maps.take_events();
        let interfaces = if pins.links().is_empty() { Vec::new() } else { vec![pin_name.to_string()] };
        Ok(Tier1 {
            rings: Rings::Bpf(Box::new(maps)),
            events,
            logger: None,
            mode: Tier1Mode::Xdp { interfaces, reattached: true },
            pins: Some(pins),
        })
    }

    /// A program is pinned already: keep it running, reopen its maps, attach it where it
    /// is missing, and write the configuration asked for now (except ring sizes, which
    /// the pinned maps fix).
    fn reattach(cfg: &Tier1Config, pins: PinDir) -> anyhow::Result<Tier1> {
        let mut maps = XdpMaps::open_pinned(&pins).with_context(|| {
            format!(
                "a Bolt program is pinned at {} but its rings cannot be opened; \
                 remove it with `bolt agent --iface {} --unload` (its tasks are lost if the maps are broken)",
                pins.path().display(),
                cfg.pin_name
            )
        })?;
        let pinned = maps.config()?;
        let wanted = reconciled_config(&pinned, &cfg.settings.config());
        if wanted != pinned {
            maps.write_config(&wanted)?;
            tracing::info!(?pinned, now = ?wanted, "configuration of the pinned program updated");
        }
        recount(&mut maps, wanted.levels)?;
        let queued = maps.occupancy();
        let mut interfaces = Vec::new();
        let mut failures = Vec::new();
        for (iface, role) in cfg.interfaces() {
            let attached = pins.link_for(iface).exists() || (role == Role::First && pins.link().exists());
            if attached {
                interfaces.push(iface.to_string());
                continue;
            }
            match BoltXdp::attach_pinned(&pins, iface, cfg.attach_mode) {
                Ok(()) => interfaces.push(iface.to_string()),
                Err(e) if role == Role::First => failures.push(format!("{e:#}")),
                Err(e) => warn_partial(iface, role, &e),
            }
        }
        let logger = if cfg.settings.log_level > 0 { pinned_logger(&pins) } else { None };
        let events = maps.take_events();
        if let Some(reason) = failures.pop() {
            if cfg.xdp == XdpChoice::Require {
                anyhow::bail!("{reason} (and --xdp require)");
            }
            let mut t = Tier1::userspace_on_maps(maps, pins, reason);
            t.logger = logger;
            return Ok(t);
        }
        tracing::info!(
            pins = %pins.path().display(),
            interfaces = ?interfaces,
            queued = ?&queued[..wanted.levels as usize],
            "reattached to the pinned XDP program; its queued tasks are kept"
        );
        Ok(Tier1 {
            rings: Rings::Bpf(Box::new(maps)),
            events,
            logger,
            mode: Tier1Mode::Xdp { interfaces, reattached: true },
            pins: Some(pins),
        })
    }

    fn userspace_on_maps(mut maps: XdpMaps, pins: PinDir, reason: String) -> Tier1 {
        tracing::warn!(
            reason = %reason,
            pins = %pins.path().display(),
            "XDP is not attached: serving GET_TASK from the pinned rings in userspace; \
             point executors' --switch at this agent"
        );
        let events = maps.take_events();
        Tier1 {
            rings: Rings::Bpf(Box::new(maps)),
            events,
            logger: None,
            mode: Tier1Mode::Userspace { reason, persistent: true },
            pins: Some(pins),
        }
    }

    fn fall_back(cfg: &Tier1Config, reason: String) -> anyhow::Result<Tier1> {
        if cfg.xdp == XdpChoice::Require {
            anyhow::bail!("{reason} (and --xdp require)");
        }
        Ok(Tier1::memory(cfg, reason))
    }

    fn memory(cfg: &Tier1Config, reason: String) -> Tier1 {
        tracing::warn!(
            reason = %reason,
            "serving GET_TASK from rings in this process; point executors' --switch at this agent \
             (queued tasks do not survive an agent crash in this mode)"
        );
        Tier1 {
            rings: Rings::Memory(MemoryRings::new(cfg.settings.levels, cfg.settings.ring_capacity)),
            events: None,
            logger: None,
            mode: Tier1Mode::Userspace { reason, persistent: false },
            pins: None,
        }
    }
}

/// Sets the pinned rings' reservation counts to the tasks they hold: a process killed
/// between a count change and its push or pop leaves a count off for ever otherwise (too
/// high: the agent would see tasks that are not there and stop refilling).
fn recount(maps: &mut XdpMaps, levels: u8) -> anyhow::Result<()> {
    let corrections = maps.recount_reservations(levels).context("recounting the rings' reservations")?;
    if corrections.iter().any(|&c| c != 0) {
        tracing::warn!(
            corrections = ?&corrections[..levels.clamp(1, RING_COUNT as u8) as usize],
            "reservation counts corrected to the rings' contents (a process was killed mid-operation)"
        );
    }
    Ok(())
}

/// The configuration to run a pinned program with: everything as asked now, except the
/// levels and ring capacity, which its maps were created with.
fn reconciled_config(pinned: &XdpConfig, asked: &XdpConfig) -> XdpConfig {
    if asked.levels != pinned.levels || asked.ring_capacity != pinned.ring_capacity {
        tracing::warn!(
            pinned_levels = pinned.levels,
            pinned_capacity = pinned.ring_capacity,
            asked_levels = asked.levels,
            asked_capacity = asked.ring_capacity,
            "the pinned rings keep their levels and capacity; unload them (drained) to change either"
        );
    }
    let low_watermark = asked.low_watermark.min(pinned.ring_capacity);
    XdpConfig { levels: pinned.levels, ring_capacity: pinned.ring_capacity, low_watermark, ..*asked }
}

/// The log records of an already running program (loaded by an earlier agent).
fn pinned_logger(pins: &PinDir) -> Option<EbpfLogger<&'static dyn log::Log>> {
    let id = match ProgramInfo::from_pin(pins.program()) {
        Ok(info) => info.id(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the pinned program's id: its log lines are not forwarded");
            return None;
        }
    };
    match EbpfLogger::init_from_id(id) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(
                error = %e,
                "the pinned program has no log buffer to read (it was loaded with logging off; reload it to change that)"
            );
            None
        }
    }
}

/// The interface the route to `dst` leaves by, from this thread's network namespace:
/// where REFILL from a switch at `dst` will arrive. A destination local to the namespace
/// leaves by `lo`: its route is in the local table, which /proc/net/route does not show
/// (the main table's default route would be taken instead, and an agent whose switch runs
/// on this host would refuse every REFILL as arriving off its uplink).
pub fn route_interface(dst: Ipv4Addr) -> Option<String> {
    if is_local(dst) {
        return Some("lo".to_string());
    }
    let table = std::fs::read_to_string("/proc/thread-self/net/route").ok()?;
    best_route(&table, dst)
}

/// Whether the kernel delivers `dst` locally: a loopback address, or one of this
/// namespace's own (a UDP socket connected to it is given it as its source; connecting
/// sends nothing).
fn is_local(dst: Ipv4Addr) -> bool {
    dst.is_loopback() || is_own_address(dst)
}

/// Whether `dst` is an address of this namespace: the kernel picks it as the source of a
/// UDP socket connected to it.
fn is_own_address(dst: Ipv4Addr) -> bool {
    let source = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect((dst, scheduler_common::DEFAULT_PORT)).and_then(|()| s.local_addr()));
    source.is_ok_and(|a| a.ip() == std::net::IpAddr::V4(dst))
}

/// The shortest prefix holding the connected subnets of `ifaces` (routes without a
/// gateway through them), from this thread's namespace's main routing table: the
/// executors a host serves, by default. None when none of them has an IPv4 subnet.
pub fn connected_prefix(ifaces: &[String]) -> Option<Ipv4Prefix> {
    let table = std::fs::read_to_string("/proc/thread-self/net/route").ok()?;
    covering_connected(&table, ifaces)
}

fn covering_connected(table: &str, ifaces: &[String]) -> Option<Ipv4Prefix> {
    let mut covering: Option<Ipv4Prefix> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || !ifaces.iter().any(|i| i == f[0]) {
            continue;
        }
        let (Ok(net), Ok(gateway), Ok(mask)) =
            (u32::from_str_radix(f[1], 16), u32::from_str_radix(f[2], 16), u32::from_str_radix(f[7], 16))
        else {
            continue;
        };
        if gateway != 0 {
            continue;
        }
        // The kernel prints host byte order: back to wire order.
        let subnet = Ipv4Prefix::of(net.to_ne_bytes(), mask.count_ones() as u8);
        covering = Some(covering.map_or(subnet, |c| Ipv4Prefix::covering(c, subnet)));
    }
    covering
}

/// Longest-prefix match over the text of /proc/net/route (lowest metric on ties).
fn best_route(table: &str, dst: Ipv4Addr) -> Option<String> {
    // Destination and mask are the kernel's u32 in host byte order, printed in hex.
    let dst = u32::from_ne_bytes(dst.octets());
    let mut best: Option<(u32, u32, String)> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let (Ok(net), Ok(flags), Ok(metric), Ok(mask)) = (
            u32::from_str_radix(f[1], 16),
            u32::from_str_radix(f[3], 16),
            f[6].parse::<u32>(),
            u32::from_str_radix(f[7], 16),
        ) else {
            continue;
        };
        const RTF_UP: u32 = 1;
        if flags & RTF_UP == 0 || dst & mask != net {
            continue;
        }
        let prefix = mask.count_ones();
        let better = match &best {
            None => true,
            Some((p, m, _)) => prefix > *p || (prefix == *p && metric < *m),
        };
        if better {
            best = Some((prefix, metric, f[0].to_string()));
        }
    }
    best.map(|(_, _, iface)| iface)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(ip: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(ip))
    }

    #[test]
    fn local_destinations_leave_by_lo() {
        assert_eq!(route_interface(Ipv4Addr::new(127, 0, 0, 2)).as_deref(), Some("lo"));
        // The kernel's own answer, without the loopback rule: 127.0.0.1 is lo's address,
        // 127.0.0.2 is reached from it, and a documentation address is nobody's here.
        assert!(is_own_address(Ipv4Addr::LOCALHOST));
        assert!(!is_own_address(Ipv4Addr::new(127, 0, 0, 2)));
        assert!(!is_own_address(Ipv4Addr::new(192, 0, 2, 1)));
    }

    #[test]
    fn routes_pick_the_longest_prefix_then_the_lowest_metric() {
        let table = format!(
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
             eth0\t{}\t{}\t0003\t0\t0\t100\t{}\t0\t0\t0\n\
             up1\t{}\t00000000\t0001\t0\t0\t0\t{}\t0\t0\t0\n\
             up2\t{}\t00000000\t0001\t0\t0\t5\t{}\t0\t0\t0\n\
             up3\t{}\t00000000\t0001\t0\t0\t1\t{}\t0\t0\t0\n\
             down\t{}\t00000000\t0000\t0\t0\t0\t{}\t0\t0\t0\n",
            hex([0, 0, 0, 0]),
            hex([192, 0, 2, 1]),
            hex([0, 0, 0, 0]),
            hex([10, 77, 0, 0]),
            hex([255, 255, 0, 0]),
            hex([10, 77, 1, 0]),
            hex([255, 255, 255, 0]),
            hex([10, 77, 1, 0]),
            hex([255, 255, 255, 0]),
            hex([10, 77, 1, 7]),
            hex([255, 255, 255, 255]),
        );
        assert_eq!(best_route(&table, Ipv4Addr::new(10, 77, 1, 9)).as_deref(), Some("up3"));
        assert_eq!(best_route(&table, Ipv4Addr::new(10, 77, 2, 9)).as_deref(), Some("up1"));
        assert_eq!(best_route(&table, Ipv4Addr::new(198, 51, 100, 1)).as_deref(), Some("eth0"));
        // A route that is down is never chosen.
        assert_eq!(best_route(&table, Ipv4Addr::new(10, 77, 1, 7)).as_deref(), Some("up3"));
        assert_eq!(best_route("garbage\nnot a route\n", Ipv4Addr::LOCALHOST), None);
    }

    #[test]
    fn executor_prefix_covers_the_connected_subnets_of_the_interfaces() {
        let row = |iface: &str, net: [u8; 4], gw: [u8; 4], mask: [u8; 4]| {
            format!("{iface}\t{}\t{}\t0001\t0\t0\t0\t{}\t0\t0\t0\n", hex(net), hex(gw), hex(mask))
        };
        let table = format!(
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n{}{}{}{}",
            row("x1a", [10, 77, 101, 0], [0; 4], [255, 255, 255, 252]),
            row("x1b", [10, 77, 101, 4], [0; 4], [255, 255, 255, 252]),
            row("x1a", [0; 4], [10, 77, 101, 2], [0; 4]),
            row("up", [10, 77, 1, 0], [0; 4], [255, 255, 255, 0]),
        );
        let ifaces = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(covering_connected(&table, &ifaces(&["x1a"])), Ipv4Prefix::parse("10.77.101.0/30").ok());
        assert_eq!(covering_connected(&table, &ifaces(&["x1a", "x1b"])), Ipv4Prefix::parse("10.77.101.0/29").ok());
        assert_eq!(covering_connected(&table, &ifaces(&["lo"])), None);
    }
}
