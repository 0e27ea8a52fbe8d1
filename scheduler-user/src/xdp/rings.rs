//! The program's maps seen from userspace: pushing and popping tasks in the rings (under
//! the same slot reservation protocol as the program), draining the overflow queue, and
//! reading the config, counters and events.

use std::sync::atomic::Ordering;

use anyhow::Context as _;
use aya::{
    maps::{Array, Map, MapData, MapError, PerCpuArray, Queue, RingBuf},
    Ebpf,
};
use scheduler_common::{
    maps::{
        Counters, Tier2Hint, XdpConfig, CONFIG_MAP, COUNTERS_MAP, EVENTS_MAP, OVERFLOW_MAP, RING_COUNT, RING_MAPS,
        RING_STATE_MAP,
    },
    Entry, MAX_PRIORITIES,
};

use super::{counters::CounterSnapshot, events::EventReader, mmap::MappedRingStates, pin::PinDir};

/// Why a push did not store the task (the task is still the caller's).
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("ring of priority {0} is full")]
    Full(u8),
    #[error("task priority {0} is outside 1..={MAX_PRIORITIES}")]
    BadPriority(u8),
    #[error(transparent)]
    Map(#[from] MapError),
}

/// Handles on every map of one loaded Bolt XDP program.
pub struct XdpMaps {
    rings: Vec<Queue<MapData, Entry>>,
    overflow: Queue<MapData, Entry>,
    states: MappedRingStates,
    config: Array<MapData, XdpConfig>,
    counters: PerCpuArray<MapData, Counters>,
    events: Option<RingBuf<MapData>>,
}

impl XdpMaps {
    /// Takes the maps out of a freshly loaded object.
    pub(crate) fn take_from(ebpf: &mut Ebpf) -> anyhow::Result<XdpMaps> {
        XdpMaps::assemble(|name| ebpf.take_map(name).with_context(|| format!("the XDP object has no map {name}")))
    }

    /// Opens the maps pinned in `dir` by an earlier load (an agent restarting, a CLI
    /// inspecting a running node).
    pub fn open_pinned(dir: &PinDir) -> anyhow::Result<XdpMaps> {
        XdpMaps::assemble(|name| {
            let path = dir.map(name);
            let data = MapData::from_pin(&path).with_context(|| format!("opening pinned map {}", path.display()))?;
            Ok(match name {
                CONFIG_MAP | RING_STATE_MAP => Map::Array(data),
                COUNTERS_MAP => Map::PerCpuArray(data),
                EVENTS_MAP => Map::RingBuf(data),
                _ => Map::Queue(data),
            })
        })
    }

    fn assemble(mut get: impl FnMut(&str) -> anyhow::Result<Map>) -> anyhow::Result<XdpMaps> {
        let mut rings = Vec::with_capacity(RING_COUNT);
        for name in RING_MAPS {
            rings.push(Queue::try_from(get(name)?).with_context(|| format!("map {name}"))?);
        }
        let states = match get(RING_STATE_MAP)? {
            Map::Array(data) => MappedRingStates::new(data)?,
            _ => anyhow::bail!("{RING_STATE_MAP} is not an array map"),
        };
        Ok(XdpMaps {
            rings,
            overflow: Queue::try_from(get(OVERFLOW_MAP)?).context(OVERFLOW_MAP)?,
            states,
            config: Array::try_from(get(CONFIG_MAP)?).context(CONFIG_MAP)?,
            counters: PerCpuArray::try_from(get(COUNTERS_MAP)?).context(COUNTERS_MAP)?,
            events: Some(RingBuf::try_from(get(EVENTS_MAP)?).context(EVENTS_MAP)?),
        })
    }

    /// The configuration the program runs with.
    pub fn config(&self) -> anyhow::Result<XdpConfig> {
        Ok(self.config.get(&0, 0)?)
    }

    pub(crate) fn write_config(&mut self, cfg: &XdpConfig) -> anyhow::Result<()> {
        Ok(self.config.set(0, cfg, 0)?)
    }

    /// The ring a task of priority `prio` queues in (same rule as the program).
    fn ring_for(prio: u8, cfg: &XdpConfig) -> u8 {
        prio.min(cfg.levels.clamp(1, RING_COUNT as u8))
    }

    /// Queues `entry` in its priority's ring. Returns the ring's priority.
    pub fn push(&mut self, entry: &Entry) -> Result<u8, PushError> {
        let prio = entry.task.prio;
        if prio == 0 || prio > MAX_PRIORITIES {
            return Err(PushError::BadPriority(prio));
        }
        let cfg = self.config.get(&0, 0)?;
        let capacity = cfg.ring_capacity as i64;
        let ring = XdpMaps::ring_for(prio, &cfg);
        let slot = self.states.reserved(ring);
        if slot.fetch_add(1, Ordering::AcqRel) >= capacity {
            slot.fetch_sub(1, Ordering::AcqRel);
            return Err(PushError::Full(ring));
        }
        if let Err(e) = self.rings[ring as usize - 1].push(entry, 0) {
            slot.fetch_sub(1, Ordering::AcqRel);
            return Err(e.into());
        }
        Ok(ring)
    }

    /// Takes the head of ring `prio` (1-based), if any.
    pub fn pop(&mut self, prio: u8) -> anyhow::Result<Option<Entry>> {
        anyhow::ensure!((1..=RING_COUNT as u8).contains(&prio), "priority {prio} has no ring");
        if self.states.load(prio) <= 0 {
            return Ok(None);
        }
        match self.rings[prio as usize - 1].pop(0) {
            Ok(e) => {
                self.states.reserved(prio).fetch_sub(1, Ordering::AcqRel);
                Ok(Some(e))
            }
            Err(MapError::ElementNotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Takes the oldest task that did not fit its ring. The agent RETURNs these to tier 2.
    pub fn pop_overflow(&mut self) -> anyhow::Result<Option<Entry>> {
        match self.overflow.pop(0) {
            Ok(e) => Ok(Some(e)),
            Err(MapError::ElementNotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Takes up to `max` tasks: the overflow queue first, then the rings from the highest
    /// priority down. For RETURNing a node's tasks when it drains.
    pub fn drain(&mut self, max: usize) -> anyhow::Result<Vec<Entry>> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.pop_overflow()? {
                Some(e) => out.push(e),
                None => break,
            }
        }
        for prio in 1..=RING_COUNT as u8 {
            while out.len() < max {
                match self.pop(prio)? {
                    Some(e) => out.push(e),
                    None => break,
                }
            }
        }
        Ok(out)
    }

    /// Slots reserved in ring `prio`: the tasks queued there plus any in flight.
    pub fn reserved(&self, prio: u8) -> i64 {
        self.states.load(prio)
    }

    /// Tier 2's last BEST stamp as the program (or the agent) recorded it.
    pub fn tier2_hint(&self) -> Tier2Hint {
        Tier2Hint(self.states.tier2_hint().load(Ordering::Acquire))
    }

    /// Records a BEST stamp the agent read from a tier-2 packet on its socket.
    pub fn record_tier2_hint(&self, hint: Tier2Hint) {
        self.states.tier2_hint().store(hint.0, Ordering::Release);
    }

    /// [`XdpMaps::reserved`] of every ring, index 0 = priority 1.
    pub fn occupancy(&self) -> [i64; RING_COUNT] {
        std::array::from_fn(|i| self.states.load(i as u8 + 1))
    }

    /// Capacity of the map behind ring `prio` (1-based).
    pub fn ring_capacity(&self, prio: u8) -> u32 {
        self.rings[(prio.clamp(1, RING_COUNT as u8) - 1) as usize].capacity()
    }

    /// Capacity of the overflow queue.
    pub fn overflow_capacity(&self) -> u32 {
        self.overflow.capacity()
    }

    /// Every task in ring `prio` (1-based), head first, at most `max`: each is taken off the
    /// head and put back at the tail with its slot still reserved, so it always fits and
    /// the ring ends as it began. A queue map offers no other way to read past its head;
    /// a ring served meanwhile may hand tasks out in a different order.
    pub fn walk_ring(&mut self, prio: u8, max: usize) -> anyhow::Result<Vec<Entry>> {
        anyhow::ensure!((1..=RING_COUNT as u8).contains(&prio), "priority {prio} has no ring");
        let ring = &mut self.rings[prio as usize - 1];
        let count = (self.states.load(prio).max(0) as usize).min(max);
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            match ring.pop(0) {
                Ok(e) => {
                    // The slot stays reserved, and the map holds no more entries than
                    // reserved slots: the push cannot find it full.
                    ring.push(e, 0).with_context(|| format!("putting a task back into ring {prio}"))?;
                    out.push(e);
                }
                Err(MapError::ElementNotFound) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    /// The counters of each CPU.
    pub fn counters_per_cpu(&self) -> anyhow::Result<Vec<Counters>> {
        Ok(self.counters.get(&0, 0)?.iter().copied().collect())
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> anyhow::Result<CounterSnapshot> {
        Ok(CounterSnapshot::sum(self.counters.get(&0, 0)?.iter()))
    }

    /// The event stream. Only one reader exists; later calls return None.
    pub fn take_events(&mut self) -> Option<EventReader> {
        self.events.take().map(EventReader::new)
    }
}
