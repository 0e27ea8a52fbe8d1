//! Loading, configuring, attaching and pinning the Bolt XDP program.

use std::borrow::Cow;

use anyhow::Context as _;
use aya::{
    programs::{
        links::{FdLink, PinnedLink},
        Xdp, XdpMode,
    },
    Ebpf, EbpfLoader,
};
use aya_log::EbpfLogger;
use aya_obj::programs::XdpAttachType;
use scheduler_common::maps::{PROGRAM_NAME, RING_MAPS, STATE_MAPS};

use super::{object::XDP_OBJECT, pin::PinDir, rings::XdpMaps, settings::XdpSettings};

/// How the program attaches to an interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttachMode {
    /// Whatever the driver supports best.
    #[default]
    Auto,
    /// In the driver (needs driver support; on veth the peer must run XDP too).
    Native,
    /// Generic XDP on the skb path: works on every interface.
    Skb,
}

impl AttachMode {
    fn xdp_mode(self) -> XdpMode {
        match self {
            AttachMode::Auto => XdpMode::Default,
            AttachMode::Native => XdpMode::Driver,
            AttachMode::Skb => XdpMode::Skb,
        }
    }
}

impl std::str::FromStr for AttachMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<AttachMode> {
        match s {
            "auto" => Ok(AttachMode::Auto),
            "native" | "driver" => Ok(AttachMode::Native),
            "skb" | "generic" => Ok(AttachMode::Skb),
            _ => anyhow::bail!("unknown XDP mode {s:?} (auto, native, skb)"),
        }
    }
}

/// One loaded instance of the Bolt XDP program (one per node) and its maps.
pub struct BoltXdp {
    ebpf: Ebpf,
    maps: XdpMaps,
    settings: XdpSettings,
    pins: Option<PinDir>,
    logger: Option<EbpfLogger<&'static dyn log::Log>>,
}

impl BoltXdp {
    /// Loads the program with maps of its own, pinned nowhere: for BPF_PROG_TEST_RUN,
    /// benchmarks, or a node whose tasks need not outlive the process.
    pub fn load(settings: &XdpSettings) -> anyhow::Result<BoltXdp> {
        BoltXdp::load_with(settings, None)
    }

    /// Loads the program with its state maps pinned in `pins`: maps already pinned there
    /// are reused as they are, so tasks queued by an earlier instance stay queued.
    pub fn load_pinned(settings: &XdpSettings, pins: &PinDir) -> anyhow::Result<BoltXdp> {
        pins.create()?;
        BoltXdp::load_with(settings, Some(pins))
    }

    /// Like [`BoltXdp::load`] or [`BoltXdp::load_pinned`], from another build of the
    /// object (e.g. one `cargo xtask build-ebpf` just made) instead of the embedded one.
    pub fn load_object(object: &[u8], settings: &XdpSettings, pins: Option<&PinDir>) -> anyhow::Result<BoltXdp> {
        if let Some(dir) = pins {
            dir.create()?;
        }
        BoltXdp::load_inner(object, settings, pins)
    }

    fn load_with(settings: &XdpSettings, pins: Option<&PinDir>) -> anyhow::Result<BoltXdp> {
        BoltXdp::load_inner(XDP_OBJECT, settings, pins)
    }

    fn load_inner(object: &[u8], settings: &XdpSettings, pins: Option<&PinDir>) -> anyhow::Result<BoltXdp> {
        settings.validate()?;
        let mut loader = EbpfLoader::new();
        loader.override_global(aya_log::LEVEL, &settings.log_level, false);
        // Rings below the levels in use never hold a task (see XdpConfig::levels): keep
        // them minimal rather than allocate their capacity.
        for (i, ring) in RING_MAPS.iter().enumerate() {
            let used = i < settings.levels as usize;
            loader.map_max_entries(ring, if used { settings.ring_capacity } else { 1 });
        }
        loader.map_max_entries(scheduler_common::maps::OVERFLOW_MAP, settings.overflow_capacity);
        let paths: Vec<(&str, std::path::PathBuf)> = match pins {
            Some(dir) => STATE_MAPS.iter().map(|name| (*name, dir.map(name))).collect(),
            None => Vec::new(),
        };
        for (name, path) in &paths {
            loader.map_pin_path(name, Cow::Borrowed(path.as_path()));
        }
        let mut ebpf = loader
            .load(object)
            .context("loading the Bolt XDP object (needs root or CAP_BPF + CAP_NET_ADMIN, and bpffs for pinning)")?;
        let logger = if settings.log_level > 0 {
            Some(EbpfLogger::init(&mut ebpf).context("starting the XDP program's logger")?)
        } else {
            None
        };
        let mut maps = XdpMaps::take_from(&mut ebpf)?;
        // Reused pinned rings keep the capacity they were created with.
        for prio in 1..=settings.levels {
            let have = maps.ring_capacity(prio);
            anyhow::ensure!(
                have >= settings.ring_capacity,
                "the pinned ring of priority {prio} holds {have} tasks, fewer than the {} asked for: \
                 drain and unload the pinned maps first to change capacity or levels",
                settings.ring_capacity
            );
        }
        maps.write_config(&settings.config())?;
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM_NAME)
            .with_context(|| format!("the XDP object has no program {PROGRAM_NAME}"))?
            .try_into()?;
        program.load().context("the kernel refused the Bolt XDP program")?;
        Ok(BoltXdp { ebpf, maps, settings: settings.clone(), pins: pins.cloned(), logger })
    }

    /// The loaded program, for attaching by hand or BPF_PROG_TEST_RUN.
    pub fn program(&self) -> anyhow::Result<&Xdp> {
        Ok(self.ebpf.program(PROGRAM_NAME).with_context(|| format!("no program {PROGRAM_NAME}"))?.try_into()?)
    }

    fn program_mut(&mut self) -> anyhow::Result<&mut Xdp> {
        Ok(self.ebpf.program_mut(PROGRAM_NAME).with_context(|| format!("no program {PROGRAM_NAME}"))?.try_into()?)
    }

    /// The program and the maps at once, e.g. to run frames on some threads while
    /// another pushes tasks.
    pub fn parts(&mut self) -> anyhow::Result<(&Xdp, &mut XdpMaps)> {
        let program =
            self.ebpf.program(PROGRAM_NAME).with_context(|| format!("no program {PROGRAM_NAME}"))?.try_into()?;
        Ok((program, &mut self.maps))
    }

    pub fn maps(&self) -> &XdpMaps {
        &self.maps
    }

    pub fn maps_mut(&mut self) -> &mut XdpMaps {
        &mut self.maps
    }

    pub fn settings(&self) -> &XdpSettings {
        &self.settings
    }

    /// The program's log lines (present when loaded with a log level above 0); call
    /// `flush` on it when its fd is readable.
    pub fn take_logger(&mut self) -> Option<EbpfLogger<&'static dyn log::Log>> {
        self.logger.take()
    }

    /// Attaches the program to `iface`. With pins, the program and its link are pinned
    /// too, so the program stays attached after this process exits; without, it detaches
    /// when this value is dropped.
    pub fn attach(&mut self, iface: &str, mode: AttachMode) -> anyhow::Result<()> {
        let link = self.pins.as_ref().map(|d| d.link());
        self.attach_at(iface, mode, link, true)
    }

    /// Attaches the same program, with the same maps, to one more interface: a host's
    /// uplink, where REFILL from the switch arrives, besides the executor-facing one. With
    /// pins, its link is pinned as [`PinDir::link_for`] next to the first.
    pub fn attach_also(&mut self, iface: &str, mode: AttachMode) -> anyhow::Result<()> {
        let link = self.pins.as_ref().map(|d| d.link_for(iface));
        self.attach_at(iface, mode, link, false)
    }

    /// `first`: this is the program's first attachment, so its pin replaces whatever
    /// program an earlier load left pinned there.
    fn attach_at(
        &mut self,
        iface: &str,
        mode: AttachMode,
        link_pin: Option<std::path::PathBuf>,
        first: bool,
    ) -> anyhow::Result<()> {
        let pins = self.pins.clone();
        let program = self.program_mut()?;
        let link_id = program
            .attach(iface, mode.xdp_mode())
            .with_context(|| format!("attaching the Bolt XDP program to {iface} ({mode:?} mode)"))?;
        if let (Some(dir), Some(link_pin)) = (pins, link_pin) {
            let link = program.take_link(link_id)?;
            pin_link(link, &link_pin)?;
            if first && dir.program().exists() {
                std::fs::remove_file(dir.program())
                    .with_context(|| format!("replacing the pinned program {}", dir.program().display()))?;
            }
            if !dir.program().exists() {
                program
                    .pin(dir.program())
                    .with_context(|| format!("pinning the program at {}", dir.program().display()))?;
            }
        }
        Ok(())
    }

    /// Attaches the program pinned in `dir` (by an earlier load) to `iface` as well, and
    /// pins the link as [`PinDir::link_for`]: for an agent that restarts with an interface
    /// the pinned program is not attached to yet.
    pub fn attach_pinned(dir: &PinDir, iface: &str, mode: AttachMode) -> anyhow::Result<()> {
        let mut program = Xdp::from_pin(dir.program(), XdpAttachType::Interface)
            .with_context(|| format!("opening the pinned program {}", dir.program().display()))?;
        let link_id = program
            .attach(iface, mode.xdp_mode())
            .with_context(|| format!("attaching the pinned Bolt XDP program to {iface} ({mode:?} mode)"))?;
        let link = program.take_link(link_id)?;
        pin_link(link, &dir.link_for(iface))
    }

    /// Detaches a program pinned for `dir` from every interface (its link pins go), and
    /// keeps the program and map pins: tasks still queued stay where they are, for a
    /// drain to RETURN them.
    pub fn detach_pinned(dir: &PinDir) -> anyhow::Result<()> {
        for path in dir.links() {
            let link =
                PinnedLink::from_pin(&path).with_context(|| format!("opening pinned link {}", path.display()))?;
            link.unpin().with_context(|| format!("unpinning {}", path.display()))?;
        }
        Ok(())
    }

    /// Detaches a program pinned for `dir` and removes its pins, maps included: tasks still
    /// queued are gone with them, so drain and RETURN them first.
    pub fn unload_pinned(dir: &PinDir) -> anyhow::Result<()> {
        BoltXdp::detach_pinned(dir)?;
        dir.remove()
    }
}

/// Pins an XDP link so that it outlives this process.
fn pin_link(link: aya::programs::xdp::XdpLink, path: &std::path::Path) -> anyhow::Result<()> {
    let fd_link = FdLink::try_from(link)
        .context("this kernel attached XDP through netlink, which cannot be pinned; use a kernel with XDP links")?;
    fd_link.pin(path).with_context(|| format!("pinning the link at {}", path.display()))?;
    Ok(())
}
