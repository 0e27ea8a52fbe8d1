//! The program's maps seen from userspace: pushing and popping tasks in the rings (under
//! the same slot reservation protocol as the program), draining the overflow queue, and
//! reading the config, counters and events.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;

use anyhow::Context as _;
use aya::{
    maps::{Array, Map, MapData, MapError, PerCpuArray, Queue, RingBuf},
    Ebpf,
};
use scheduler_common::{
    maps::{
        Counters, HostWaiter, Tier2Hint, XdpConfig, CONFIG_MAP, COUNTERS_MAP, DEDICATED_MAP, EVENTS_MAP, OVERFLOW_MAP,
        REFILL_ARMED_RECORD, REFILL_ARMED_WAKE, RING_COUNT, RING_MAPS, RING_STATE_MAP, WAITERS_MAP, WAIT_SEQ_MAP,
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
    /// Second descriptors of the ring maps and of the overflow queue, for peeking (aya's
    /// `Queue` only pops and pushes).
    ring_fds: Vec<OwnedFd>,
    overflow_fd: OwnedFd,
    /// The dedicated ring (PINned tasks) and a second descriptor of it, for peeking.
    dedicated: Queue<MapData, Entry>,
    dedicated_fd: OwnedFd,
    states: MappedRingStates,
    config: Array<MapData, XdpConfig>,
    counters: PerCpuArray<MapData, Counters>,
    events: Option<RingBuf<MapData>>,
    /// Executors waiting at this host, a second descriptor for peeking, and each one's
    /// newest request.
    waiters: Queue<MapData, HostWaiter>,
    waiters_fd: OwnedFd,
    wait_seq: Array<MapData, u32>,
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
                CONFIG_MAP | RING_STATE_MAP | WAIT_SEQ_MAP => Map::Array(data),
                COUNTERS_MAP => Map::PerCpuArray(data),
                EVENTS_MAP => Map::RingBuf(data),
                _ => Map::Queue(data),
            })
        })
    }

    fn assemble(mut get: impl FnMut(&str) -> anyhow::Result<Map>) -> anyhow::Result<XdpMaps> {
        let mut rings = Vec::with_capacity(RING_COUNT);
        let mut ring_fds = Vec::with_capacity(RING_COUNT);
        for name in RING_MAPS {
            let map = get(name)?;
            ring_fds.push(queue_fd(&map).with_context(|| format!("map {name}"))?);
            rings.push(Queue::try_from(map).with_context(|| format!("map {name}"))?);
        }
        let overflow = get(OVERFLOW_MAP)?;
        let overflow_fd = queue_fd(&overflow).context(OVERFLOW_MAP)?;
        let dedicated = get(DEDICATED_MAP)?;
        let dedicated_fd = queue_fd(&dedicated).context(DEDICATED_MAP)?;
        let waiters = get(WAITERS_MAP)?;
        let waiters_fd = queue_fd(&waiters).context(WAITERS_MAP)?;
        let states = match get(RING_STATE_MAP)? {
            Map::Array(data) => MappedRingStates::new(data)?,
            _ => anyhow::bail!("{RING_STATE_MAP} is not an array map"),
        };
        Ok(XdpMaps {
            rings,
            overflow: Queue::try_from(overflow).context(OVERFLOW_MAP)?,
            ring_fds,
            overflow_fd,
            dedicated: Queue::try_from(dedicated).context(DEDICATED_MAP)?,
            dedicated_fd,
            states,
            config: Array::try_from(get(CONFIG_MAP)?).context(CONFIG_MAP)?,
            counters: PerCpuArray::try_from(get(COUNTERS_MAP)?).context(COUNTERS_MAP)?,
            events: Some(RingBuf::try_from(get(EVENTS_MAP)?).context(EVENTS_MAP)?),
            waiters: Queue::try_from(waiters).context(WAITERS_MAP)?,
            waiters_fd,
            wait_seq: Array::try_from(get(WAIT_SEQ_MAP)?).context(WAIT_SEQ_MAP)?,
        })
    }

    /// The executor that has waited at this host longest, left in place.
    pub fn peek_waiter(&self) -> anyhow::Result<Option<HostWaiter>> {
        peek(self.waiters_fd.as_fd()).context("peeking the waiter queue")
    }

    /// Takes the executor that has waited longest, if any.
    pub fn pop_waiter(&mut self) -> anyhow::Result<Option<HostWaiter>> {
        match self.waiters.pop(0) {
            Ok(w) => Ok(Some(w)),
            Err(MapError::ElementNotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Queues `waiter` again, at the tail.
    pub fn push_waiter(&mut self, waiter: &HostWaiter) -> anyhow::Result<()> {
        Ok(self.waiters.push(waiter, 0)?)
    }

    /// Whether `waiter` is its executor's newest request (not replaced by a later one).
    pub fn waiter_is_current(&self, waiter: &HostWaiter) -> anyhow::Result<bool> {
        Ok(self.wait_seq.get(&(waiter.executor as u32), 0)? == waiter.seq)
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

    /// Queues `entry` at the tail of the dedicated ring, as it is (bytes 38..40 carry the
    /// MOVABLE mark). `Ok(false)` when the ring is full.
    pub fn push_dedicated(&mut self, entry: &Entry) -> anyhow::Result<bool> {
        match self.dedicated.push(entry, 0) {
            Ok(()) => Ok(true),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::E2BIG) => Ok(false),
            Err(e) => Err(e).context("pushing into the dedicated ring"),
        }
    }

    /// Takes the head of the dedicated ring, if any.
    pub fn pop_dedicated(&mut self) -> anyhow::Result<Option<Entry>> {
        match self.dedicated.pop(0) {
            Ok(e) => Ok(Some(e)),
            Err(MapError::ElementNotFound) => Ok(None),
            Err(e) => Err(e).context("popping the dedicated ring"),
        }
    }

    /// The head of the dedicated ring, left in place.
    pub fn peek_dedicated(&self) -> anyhow::Result<Option<Entry>> {
        peek(self.dedicated_fd.as_fd()).context("peeking the dedicated ring")
    }

    /// Capacity of the dedicated ring.
    pub fn dedicated_capacity(&self) -> u32 {
        self.dedicated.capacity()
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

    /// Asks the program to send [`EVENT_REFILL_ANSWER`] at the next REFILL frame it
    /// stores (set before a REFILL_REQ goes out): waking the agent, or, with `wake`
    /// false, recorded for its next wake-up unless the answer is empty.
    ///
    /// [`EVENT_REFILL_ANSWER`]: scheduler_common::maps::EVENT_REFILL_ANSWER
    pub fn arm_refill_answer(&self, wake: bool) {
        let how = if wake { REFILL_ARMED_WAKE } else { REFILL_ARMED_RECORD };
        self.states.refill_armed().store(how, Ordering::Release);
    }

    /// True while the program has not yet seen a frame since [`XdpMaps::arm_refill_answer`].
    pub fn refill_armed(&self) -> bool {
        self.states.refill_armed().load(Ordering::Acquire) != 0
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

    /// The head of the overflow queue, left in place. The agent RETURNs it and only then
    /// pops it, so that a task is never only in its memory (a SIGKILL between the two
    /// RETURNs it twice rather than losing it).
    pub fn peek_overflow(&self) -> anyhow::Result<Option<Entry>> {
        peek(self.overflow_fd.as_fd()).context("peeking the overflow queue")
    }

    /// The head of ring `prio` (1-based), left in place: a queue map can be read at its
    /// head only, and nothing else is read without taking tasks out.
    pub fn peek_ring(&self, prio: u8) -> anyhow::Result<Option<Entry>> {
        anyhow::ensure!((1..=RING_COUNT as u8).contains(&prio), "priority {prio} has no ring");
        peek(self.ring_fds[prio as usize - 1].as_fd()).with_context(|| format!("peeking ring {prio}"))
    }

    /// Sets each ring's reservation count (rings `1..=levels`) to the tasks it holds, for a
    /// process opening rings that one killed between a reservation change and its push
    /// or pop may have left off by one. The program keeps serving meanwhile:
    /// 1. the count is raised by `PAUSE`, so every producer (REFILL, `push`) finds the
    ///    ring full and sends its tasks to the overflow queue, while consumers keep
    ///    popping, each pop changing queue and count alike;
    /// 2. every task is popped, keeping its slot, and after a pause that lets program runs
    ///    in flight end, popped again until the ring stays empty;
    /// 3. with the ring empty and its tasks held here, what the count holds beyond them
    ///    (the lowest of a few reads, so that a refused REFILL's passing reservation does
    ///    not count) is the error: the tasks are pushed back in their order and the count
    ///    lowered by `PAUSE` plus the error.
    ///
    /// Returns the correction of each ring (index 0 = priority 1). Not for a ring some
    /// other process is pushing to or popping from at the same time.
    pub fn recount_reservations(&mut self, levels: u8) -> anyhow::Result<[i64; RING_COUNT]> {
        const PAUSE: i64 = 1 << 40;
        let mut corrections = [0i64; RING_COUNT];
        for prio in 1..=levels.clamp(1, RING_COUNT as u8) {
            let i = prio as usize - 1;
            let slot = self.states.reserved(prio);
            slot.fetch_add(PAUSE, Ordering::AcqRel);
            let mut held = Vec::new();
            let mut result = Ok(());
            for round in 0..2 {
                if round == 1 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                // Bounded: producers are paused, so the ring only empties.
                for _ in 0..=self.rings[i].capacity() {
                    match self.rings[i].pop(0) {
                        Ok(e) => held.push(e),
                        Err(MapError::ElementNotFound) => break,
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
            }
            // A REFILL refused meanwhile adds its batch and takes it back at once: the
            // lowest of a few reads is the count without such a passing reservation.
            let settled = (0..3)
                .map(|_| {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                    slot.load(Ordering::Acquire)
                })
                .min()
                .unwrap_or(PAUSE);
            let error = settled - PAUSE - held.len() as i64;
            let mut unplaced = 0i64;
            for e in &held {
                // The ring held these a moment ago and nothing else pushes: they fit.
                if self.rings[i].push(e, 0).is_err() {
                    unplaced += 1;
                    self.overflow.push(e, 0).with_context(|| {
                        format!("a task of ring {prio} fits neither its ring nor the overflow queue")
                    })?;
                }
            }
            slot.fetch_sub(PAUSE + error + unplaced, Ordering::AcqRel);
            corrections[i] = -error;
            result.with_context(|| format!("popping ring {prio}"))?;
        }
        Ok(corrections)
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

/// A descriptor of its own for the queue map `map`.
fn queue_fd(map: &Map) -> anyhow::Result<OwnedFd> {
    match map {
        Map::Queue(data) => Ok(data.fd().as_fd().try_clone_to_owned()?),
        _ => anyhow::bail!("not a queue map"),
    }
}

/// The head of the queue map `fd` without taking it (BPF_MAP_LOOKUP_ELEM with no key).
fn peek<T: aya::Pod + Default>(fd: BorrowedFd<'_>) -> std::io::Result<Option<T>> {
    /// The `map_elem` member of `union bpf_attr`.
    #[repr(C)]
    struct MapElemAttr {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
    let mut out = T::default();
    let attr = MapElemAttr {
        map_fd: std::os::fd::AsRawFd::as_raw_fd(&fd) as u32,
        pad: 0,
        key: 0,
        value: std::ptr::addr_of_mut!(out) as u64,
        flags: 0,
    };
    // SAFETY: `attr` is a valid bpf_attr prefix of the size passed; the kernel writes one
    // value of the map's value size (that of T, checked when the map was opened) into
    // `out`.
    let rc = unsafe {
        libc::syscall(libc::SYS_bpf, BPF_MAP_LOOKUP_ELEM, &attr as *const MapElemAttr, size_of::<MapElemAttr>())
    };
    if rc == 0 {
        return Ok(Some(out));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ENOENT) {
        return Ok(None);
    }
    Err(e)
}
