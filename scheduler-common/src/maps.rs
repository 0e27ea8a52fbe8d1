//! What the tier-1 XDP program and userspace (loader, agent, inspection) share: map and
//! program names, the load-time configuration, the per-ring state, the counters and the
//! events the program sends to the agent. These are host-local types (native byte
//! order), never sent on the wire.

use crate::layout::MAX_PRIORITIES;

/// Name of the XDP program in the object file.
pub const PROGRAM_NAME: &str = "bolt_xdp";

/// Number of task rings: one per priority level the wire format can name.
pub const RING_COUNT: usize = MAX_PRIORITIES as usize;

/// Map names of the per-priority task rings (BPF_MAP_TYPE_QUEUE of [`crate::Entry`]);
/// index 0 is priority 1.
pub const RING_MAPS: [&str; RING_COUNT] = [
    "BOLT_RING_1",
    "BOLT_RING_2",
    "BOLT_RING_3",
    "BOLT_RING_4",
    "BOLT_RING_5",
    "BOLT_RING_6",
    "BOLT_RING_7",
    "BOLT_RING_8",
];

/// Queue of [`crate::Entry`] that REFILL tasks go to when their ring is full. The agent
/// pops it and RETURNs the tasks to tier 2.
pub const OVERFLOW_MAP: &str = "BOLT_OVERFLOW";

/// Array with one [`RingStates`] value, created BPF_F_MMAPABLE so that userspace can
/// update the reservation counters with the same atomic operations as the program. One
/// value for all rings, so that a GET_TASK looks it up once however many rings it searches.
pub const RING_STATE_MAP: &str = "BOLT_RING_STATE";

/// Per-CPU array with one [`Counters`] value.
pub const COUNTERS_MAP: &str = "BOLT_COUNTERS";

/// Ring buffer of [`RingEvent`] for the agent.
pub const EVENTS_MAP: &str = "BOLT_EVENTS";

/// Array with one [`XdpConfig`], written by the loader before it attaches the program.
pub const CONFIG_MAP: &str = "BOLT_CONFIG";

/// Queue of [`crate::Entry`]: the node's dedicated ring (MATRIX's LReadyQ), tasks a
/// client PINned to this host. GET_TASK takes from it before the per-priority rings.
pub const DEDICATED_MAP: &str = "BOLT_DEDICATED";

/// Queue of [`HostWaiter`]: executors whose GET_TASK with WAIT found nothing here and
/// wait at this host for the next REFILL (docs/xdp.md, "Waiting at the host").
pub const WAITERS_MAP: &str = "BOLT_WAITERS";

/// Array of u32 with [`MAX_HOST_WAITERS`] entries, indexed by executor index: the seq of
/// each executor's newest GET_TASK parked here. A queued [`HostWaiter`] whose seq differs
/// was replaced by a newer request of its executor and is skipped.
pub const WAIT_SEQ_MAP: &str = "BOLT_WAIT_SEQ";

/// Executor indices below this may wait at their host; others wait at tier 2.
pub const MAX_HOST_WAITERS: u32 = 256;

/// Waiter records [`WAITERS_MAP`] holds: every executor index once, and room for
/// replaced records not yet skipped.
pub const WAITERS_CAPACITY: u32 = 4 * MAX_HOST_WAITERS;

/// How long an executor waits at its host before the agent answers it NOOP, unless
/// configured otherwise: tier 2's default park time.
pub const DEFAULT_HOST_WAIT_NS: u64 = 10_000_000;

/// Every map whose contents must survive an agent restart; pinned together.
pub const STATE_MAPS: [&str; RING_COUNT + 8] = [
    RING_MAPS[0],
    RING_MAPS[1],
    RING_MAPS[2],
    RING_MAPS[3],
    RING_MAPS[4],
    RING_MAPS[5],
    RING_MAPS[6],
    RING_MAPS[7],
    OVERFLOW_MAP,
    RING_STATE_MAP,
    CONFIG_MAP,
    COUNTERS_MAP,
    EVENTS_MAP,
    DEDICATED_MAP,
    WAITERS_MAP,
    WAIT_SEQ_MAP,
];

/// Where the loader pins a program and its maps: `PIN_ROOT/<interface>/`.
pub const PIN_ROOT: &str = "/sys/fs/bpf/bolt";

/// Tasks one ring holds unless configured otherwise.
pub const DEFAULT_RING_CAPACITY: u32 = 4096;
/// Tasks the dedicated ring holds.
pub const DEDICATED_CAPACITY: u32 = 4096;
/// Bytes 38..40 of an entry in the dedicated ring (the lease stamp in the shared rings:
/// pinned tasks have no lease, they wait for their host): this value marks a task the
/// host's FLDS monitor may move to the shared rings (PIN's MOVABLE flag); 0 a task that
/// stays. Zeroed on the wire as every stamp.
pub const DEDICATED_MOVABLE: [u8; 2] = [0, 1];
/// Tasks the overflow queue holds unless configured otherwise.
pub const DEFAULT_OVERFLOW_CAPACITY: u32 = 16384;
/// Bytes of the event ring buffer (a power of two, a multiple of the page size).
pub const EVENTS_BYTES: u32 = 64 * 1024;
/// Low-watermark events per ring are at most one per this many nanoseconds by default.
pub const DEFAULT_EVENT_INTERVAL_NS: u64 = 1_000_000;
/// How long tier 2's BEST stamp is believed after it was read, unless configured: a few
/// REFILL round trips, and several ticks of the coarse clock it is read with.
pub const DEFAULT_HINT_TTL_NS: u64 = 20_000_000;

/// How long a prefetched task may wait in a tier-1 ring before it goes back to tier 2,
/// unless configured otherwise. Long against a REFILL round trip (so that a node's own
/// prefetch never expires under normal draining), short against a client's task timeout
/// (so that a task stuck on a host, or runnable by none of its executors, reaches an
/// executor elsewhere well before its client gives up on it).
pub const DEFAULT_LEASE_MS: u16 = 500;
/// The longest lease: half the stamp's period, so that an age is never ambiguous.
pub const MAX_LEASE_MS: u16 = 30_000;

/// The lease stamp: ENTRY bytes 38..40 (`pad`, zero on the wire) hold, while the entry
/// sits in a tier-1 ring, the time it was stored there in milliseconds of
/// CLOCK_MONOTONIC (the clock of `bpf_ktime_get_ns`) modulo 2^16, big-endian. Whoever
/// pushes a task into a ring writes it (the XDP program's REFILL ingest, the agent's
/// pushes); whoever takes it out of the ring for good zeroes it (ASSIGN, RETURN,
/// STEAL_GRANT); a put-back (a task no executor of this request can run) keeps it, so a
/// task no executor of the host can run expires by the lease instead of cycling. The
/// value 0 means "not stamped" (never expires): a time whose stamp would be 0 is
/// written as 1.
#[inline(always)]
pub const fn ring_stamp(now_ms: u64) -> [u8; 2] {
    let s = now_ms as u16;
    (if s == 0 { 1 } else { s }).to_be_bytes()
}

/// Milliseconds an entry stamped `stamp` has spent in its ring at `now_ms` (modulo 2^16),
/// or None for an unstamped entry.
#[inline(always)]
pub const fn stamp_age_ms(stamp: [u8; 2], now_ms: u64) -> Option<u16> {
    let s = u16::from_be_bytes(stamp);
    if s == 0 {
        return None;
    }
    Some((now_ms as u16).wrapping_sub(s))
}

/// True when an entry stamped `stamp` has outlived a lease of `lease_ms` (0: no lease).
#[inline(always)]
pub const fn lease_expired(stamp: [u8; 2], now_ms: u64, lease_ms: u16) -> bool {
    if lease_ms == 0 {
        return false;
    }
    match stamp_age_ms(stamp, now_ms) {
        Some(age) => age >= lease_ms && age < 0x8000,
        None => false,
    }
}

/// Configuration of the XDP program, the one value of [`CONFIG_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// UDP port of Bolt traffic (host byte order).
    pub port: u16,
    /// This host's node id; GET_TASK from another node passes on to tier 2.
    pub node: u16,
    /// IPv4 address REFILL is accepted from, in network byte order as on the wire.
    /// All zeros accepts REFILL from nobody.
    pub switch_ipv4: [u8; 4],
    /// Priority levels in use (1..=RING_COUNT). GET_TASK searches rings 1..=levels; a
    /// task with a lower priority (larger number) queues in the lowest ring in use.
    pub levels: u8,
    /// Length of the executor prefix [`XdpConfig::executor_net`] (0..=32; 0 admits every
    /// source).
    pub executor_prefix_len: u8,
    /// Lease of a prefetched task in milliseconds (0: no lease). A GET_TASK that pops an
    /// entry whose [`ring_stamp`] is at least this old moves it to the overflow queue, from
    /// which the agent RETURNs it to tier 2, instead of serving it. At most
    /// [`MAX_LEASE_MS`]: the stamp wraps after 65.5 s.
    pub lease_ms: u16,
    /// Tasks one ring may hold: REFILL reserves a slot in [`RingState::reserved`]
    /// against this before pushing.
    pub ring_capacity: u32,
    /// A ring left with fewer reserved slots than this after a pop sends a
    /// [`RingEvent`]; 0 disables all events.
    pub low_watermark: u32,
    /// GET_TASK is answered only from sources in `executor_net/executor_prefix_len`
    /// (network byte order, as on the wire): the registered executors of this node.
    /// Others are dropped and counted ([`Counter::ForeignGetTask`]).
    pub executor_net: [u8; 4],
    /// Minimum nanoseconds between two events of the same ring.
    pub event_interval_ns: u64,
    /// Interfaces REFILL is accepted on (ifindex; 0 = unused slot): the host's uplinks.
    /// The same program runs on the executor-facing interfaces, before any reverse-path
    /// filter, where an executor could forge the switch's source address; a REFILL
    /// arriving anywhere else is dropped and counted ([`Counter::RefillOffUplink`]).
    /// All zero accepts REFILL on no interface.
    pub uplink_ifindex: [u32; MAX_UPLINKS],
    /// How long a BEST stamp read from tier 2 ([`RingStates::tier2_hint`]) stays
    /// believed; 0 turns the bypass rule off.
    pub hint_ttl_ns: u64,
    /// Waiting at the host: a GET_TASK with WAIT that finds nothing, while no fresh
    /// stamp says tier 2 holds work it searches, is queued in [`WAITERS_MAP`] and
    /// answered by the next REFILL (the frame becomes its ASSIGN) or by the agent: with
    /// a task, or with NOOP once it has waited this long. 0: such requests pass on to
    /// tier 2 and wait there.
    pub host_wait_ns: u64,
}

/// Most uplink interfaces one program accepts REFILL on.
pub const MAX_UPLINKS: usize = 2;

impl XdpConfig {
    pub const fn new(port: u16, node: u16, switch_ipv4: [u8; 4]) -> XdpConfig {
        XdpConfig {
            port,
            node,
            switch_ipv4,
            levels: crate::layout::DEFAULT_PRIORITIES,
            executor_prefix_len: 0,
            lease_ms: DEFAULT_LEASE_MS,
            ring_capacity: DEFAULT_RING_CAPACITY,
            low_watermark: DEFAULT_RING_CAPACITY / 4,
            executor_net: [0; 4],
            event_interval_ns: DEFAULT_EVENT_INTERVAL_NS,
            uplink_ifindex: [0; MAX_UPLINKS],
            hint_ttl_ns: DEFAULT_HINT_TTL_NS,
            host_wait_ns: 0,
        }
    }

    /// Whether REFILL arriving on interface `ifindex` may be stored.
    #[inline(always)]
    pub fn is_uplink(&self, ifindex: u32) -> bool {
        ifindex != 0 && (self.uplink_ifindex[0] == ifindex || self.uplink_ifindex[1] == ifindex)
    }
}

/// Shared state of one ring. `reserved` counts slots taken: a producer adds one before it
/// pushes, a consumer subtracts one only after it has popped and delivered the task. So
/// `reserved` never falls below the number of queued tasks, a task popped and put back
/// always finds room, and `reserved == 0` means the ring is empty.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingState {
    pub reserved: i64,
    /// bpf_ktime_get_coarse_ns() of this ring's last event (rate limit).
    pub last_event_ns: u64,
}

/// The value of [`RING_STATE_MAP`]: the state of every ring, index 0 = priority 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStates {
    pub rings: [RingState; RING_COUNT],
    /// The last BEST stamp read from a tier-2 packet (HINT, REFILL, or an ASSIGN/NOOP on
    /// its way to an executor), packed with the coarse time it was read by [`Tier2Hint`]:
    /// one 64-bit word, so that readers never see a level with another packet's time.
    pub tier2_hint: u64,
    /// Nonzero while the agent awaits the first frame of a REFILL_REQ's answer: it sets it
    /// ([`REFILL_ARMED_WAKE`] or [`REFILL_ARMED_RECORD`]) before sending the request, and
    /// the program clears it at the next REFILL frame it stores and sends
    /// [`EVENT_REFILL_ANSWER`]. The agent reads the REFILL counters when an event wakes
    /// it, not on a timer while its request is parked at tier 2.
    pub refill_armed: u64,
}

/// The packed form of [`RingStates::tier2_hint`]: `bpf_ktime_get_coarse_ns()` (or
/// CLOCK_MONOTONIC_COARSE in userspace, the same clock) with its low 8 bits replaced by
/// BEST. The 256 ns lost are far below the clock's tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tier2Hint(pub u64);

impl Tier2Hint {
    #[inline(always)]
    pub const fn new(read_at_ns: u64, best: u8) -> Tier2Hint {
        Tier2Hint((read_at_ns & !0xff) | best as u64)
    }

    /// The highest level tier 2 held tasks in (1 = highest; 0: none, or never heard).
    #[inline(always)]
    pub const fn best(self) -> u8 {
        self.0 as u8
    }

    #[inline(always)]
    pub const fn read_at_ns(self) -> u64 {
        self.0 & !0xff
    }

    /// Whether this hint is younger than `ttl_ns` at `now_ns` (never when `ttl_ns` is 0).
    #[inline(always)]
    pub const fn is_fresh(self, ttl_ns: u64, now_ns: u64) -> bool {
        now_ns.wrapping_sub(self.read_at_ns()) < ttl_ns
    }

    /// BEST while this hint is fresh ([`Tier2Hint::is_fresh`]); 0 once it is older (a
    /// stale level is no reason to act) or when `ttl_ns` is 0.
    #[inline(always)]
    pub const fn fresh_best(self, ttl_ns: u64, now_ns: u64) -> u8 {
        if self.is_fresh(ttl_ns, now_ns) {
            self.best()
        } else {
            0
        }
    }

    /// The bypass rule, shared by the XDP program and the agent's userspace path: a
    /// GET_TASK searching from `rtrv_prio`, whose best local task is at level
    /// `local_best` (0: every ring it searches is empty), goes to tier 2 instead when
    /// this hint, younger than `ttl_ns`, names a level the request searches that
    /// outranks `local_best`. `now_ns` is called only when the levels say bypass, so
    /// the hit path reads no clock when tier 2 holds nothing better.
    #[inline(always)]
    pub fn outranks_local(self, rtrv_prio: u8, local_best: u8, ttl_ns: u64, now_ns: impl FnOnce() -> u64) -> bool {
        let best = self.best();
        if best == 0 || local_best == 0 || best < rtrv_prio || best >= local_best || ttl_ns == 0 {
            return false;
        }
        self.is_fresh(ttl_ns, now_ns())
    }

    /// The parking rule, shared by the XDP program and the simulator: whether this hint,
    /// younger than `ttl_ns` at `now_ns`, says tier 2 holds nothing a request searching
    /// from `rtrv_prio` would take (no level at all, or only levels above the search),
    /// so that its executor may wait at the host. A stale hint says nothing, nor does one
    /// never heard (0): the request then asks tier 2, which answers at once if it has
    /// work (waiting at the host would cost the agent's REFILL_REQ round trip first).
    #[inline(always)]
    pub const fn known_empty_for(self, rtrv_prio: u8, ttl_ns: u64, now_ns: u64) -> bool {
        let best = self.best();
        self.0 != 0 && (best == 0 || best < rtrv_prio) && self.is_fresh(ttl_ns, now_ns)
    }
}

/// Event kinds.
pub const EVENT_LOW_WATERMARK: u8 = 1;
/// A GET_TASK found the requested rings empty and passed on to tier 2.
pub const EVENT_EMPTY: u8 = 2;
/// A task that could go back neither into its ring nor into the overflow queue, handed to
/// the agent in a [`RescuedTask`] record for it to RETURN.
pub const EVENT_RESCUED: u8 = 3;

/// The event ring buffer's record for [`EVENT_RESCUED`]: the task itself. Told apart from
/// a [`RingEvent`] by its length.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RescuedTask {
    /// EVENT_RESCUED.
    pub kind: u8,
    /// Priority of the ring it was popped from.
    pub prio: u8,
    pub pad: [u8; 6],
    /// The task as it was queued.
    pub entry: crate::Entry,
}

/// A GET_TASK passed on to tier 2 although a ring (`prio`) held a task, because tier 2's
/// hint named a higher level ([`Counter::Bypass`]).
pub const EVENT_BYPASS: u8 = 4;

/// An executor's GET_TASK was queued to wait at this host ([`Counter::ParkedHere`]): the
/// agent makes sure a REFILL_REQ is on its way. `prio` is the request's RTRV_PRIO.
pub const EVENT_WAITING: u8 = 5;

/// A REFILL's tasks are being stored while executors wait at this host: the agent hands
/// them out, and asks tier 2 again for the rest at once rather than at its next poll.
/// `prio` is 0.
pub const EVENT_REFILLED_WAITERS: u8 = 6;

/// The first REFILL frame stored since the agent set [`RingStates::refill_armed`]: the
/// answer to its REFILL_REQ has begun. One per request, stamped with
/// `bpf_ktime_get_ns`. `prio` is 0.
pub const EVENT_REFILL_ANSWER: u8 = 7;

/// [`RingStates::refill_armed`] for a request whose answer wakes the agent at its first
/// stored frame ([`EVENT_REFILL_ANSWER`]): a prefetch, whose next request the agent
/// sends as soon as the answer is in.
pub const REFILL_ARMED_WAKE: u64 = 1;

/// [`RingStates::refill_armed`] for a request that announced executors waiting at the
/// host: tier 2 answers it one task per frame, in a flush of every waiting host's
/// frames. Its first stored frame records [`EVENT_REFILL_ANSWER`] without waking the
/// agent, since a wake-up there delays every frame sent after it; an empty answer still
/// wakes it.
pub const REFILL_ARMED_RECORD: u64 = 2;

/// An executor waiting at this host: where its GET_TASK came from, so that the REFILL
/// that answers it (or the agent's NOOP) can be addressed as tier 2's answer would be.
/// Addresses and ports are as on the wire (network byte order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostWaiter {
    /// The executor's MAC address (the GET_TASK's source).
    pub exec_mac: [u8; 6],
    /// This host's MAC address on the executor's link (the GET_TASK's destination).
    pub host_mac: [u8; 6],
    pub exec_ip: [u8; 4],
    /// The switch address the GET_TASK was sent to: the answer's source.
    pub switch_ip: [u8; 4],
    pub exec_port: [u8; 2],
    pub switch_port: [u8; 2],
    /// The interface the GET_TASK arrived on, where its answer leaves.
    pub ifindex: u32,
    /// The request's seq (host byte order), echoed by a NOOP.
    pub seq: u32,
    /// The executor's index (host byte order); below [`MAX_HOST_WAITERS`].
    pub executor: u16,
    /// The request's RTRV_PRIO and EXEC_RSRC.
    pub rtrv_prio: u8,
    pub rsrc: u8,
    pub pad: u32,
    /// bpf_ktime_get_coarse_ns() when it was queued.
    pub parked_ns: u64,
}

/// What the program tells the agent through [`EVENTS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingEvent {
    /// bpf_ktime_get_coarse_ns() when it happened (CLOCK_MONOTONIC_COARSE); for
    /// [`EVENT_REFILL_ANSWER`], bpf_ktime_get_ns() (CLOCK_MONOTONIC): the agent times the
    /// REFILL round trip to it.
    pub ktime_ns: u64,
    /// The ring's reserved slots at that moment.
    pub reserved: i64,
    /// One of the `EVENT_*` kinds.
    pub kind: u8,
    /// Priority of the ring (1 = highest).
    pub prio: u8,
    pub pad: u16,
    pub pad2: u32,
}

macro_rules! counters {
    ($($name:ident = $idx:expr, $text:expr, $doc:expr;)*) => {
        /// Indices into [`Counters::values`]. Priority hits come first: the hit counter of
        /// priority `p` is `Counter::HitP1 as usize + p - 1`.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Counter {
            $(#[doc = $doc] $name = $idx,)*
        }

        impl Counter {
            pub const ALL: [Counter; COUNTER_COUNT] = [$(Counter::$name,)*];
            /// Names for reports, indexed like [`Counters::values`].
            pub const NAMES: [&'static str; COUNTER_COUNT] = [$($text,)*];
            pub const fn name(self) -> &'static str {
                Self::NAMES[self as usize]
            }
        }
    };
}

counters! {
    HitP1 = 0, "hit_p1", "GET_TASK answered from the priority-1 ring.";
    HitP2 = 1, "hit_p2", "GET_TASK answered from the priority-2 ring.";
    HitP3 = 2, "hit_p3", "GET_TASK answered from the priority-3 ring.";
    HitP4 = 3, "hit_p4", "GET_TASK answered from the priority-4 ring.";
    HitP5 = 4, "hit_p5", "GET_TASK answered from the priority-5 ring.";
    HitP6 = 5, "hit_p6", "GET_TASK answered from the priority-6 ring.";
    HitP7 = 6, "hit_p7", "GET_TASK answered from the priority-7 ring.";
    HitP8 = 7, "hit_p8", "GET_TASK answered from the priority-8 ring.";
    Miss = 8, "miss", "GET_TASK with every searched ring empty, passed on to tier 2.";
    Requeued = 9, "requeued", "Popped task not runnable with the request's resources, put back at its ring's tail.";
    RefillFrames = 10, "refill_frames", "Valid REFILL frames from the switch.";
    RefillTasks = 11, "refill_tasks", "REFILL tasks stored in their ring.";
    Overflow = 12, "overflow", "REFILL tasks whose ring was full, stored in the overflow queue.";
    Bounced = 13, "bounced", "REFILL tasks sent straight back to tier 2 as RETURN (ring and overflow full).";
    ForeignRefill = 14, "foreign_refill", "REFILL frames not from the configured switch address, dropped.";
    Malformed = 15, "malformed", "Bolt-port datagrams that are not a valid message of their op.";
    Truncated = 16, "truncated", "Frames shorter than their Ethernet/IPv4/UDP headers or lengths say.";
    NotIpv4 = 17, "not_ipv4", "Frames of an EtherType other than IPv4, IPv6 and VLAN.";
    Ipv6 = 18, "ipv6", "IPv6 frames (passed: Bolt v1 is IPv4 only).";
    Vlan = 19, "vlan", "802.1Q/802.1ad tagged frames (passed untouched).";
    IpOptions = 20, "ip_options", "IPv4 headers with options (passed untouched).";
    IpFragment = 21, "ip_fragment", "IPv4 fragments (passed untouched).";
    NotUdp = 22, "not_udp", "IPv4 packets of another protocol.";
    OtherPort = 23, "other_port", "UDP datagrams to another port.";
    OtherOp = 24, "other_op", "Valid Bolt headers of ops this program leaves to the stack.";
    OtherNode = 25, "other_node", "GET_TASK from another node's executor, passed on.";
    Passed = 26, "passed", "XDP_PASS verdicts.";
    Transmitted = 27, "transmitted", "XDP_TX verdicts.";
    Dropped = 28, "dropped", "XDP_DROP verdicts.";
    Events = 29, "events", "Events written to the event ring buffer.";
    EventsLost = 30, "events_lost", "Events not written because the ring buffer was full.";
    RingErrors = 31, "ring_errors", "Queue helper failures other than full or empty.";
    AdjustFailed = 32, "adjust_failed", "bpf_xdp_adjust_tail failures: a GET_TASK passed on with its task kept, or a bounced RETURN sent with padding.";
    ForeignGetTask = 33, "foreign_get_task", "GET_TASK from a source outside the executor prefix, dropped.";
    RefillOffUplink = 34, "refill_off_uplink", "REFILL frames arriving on an interface that is not an uplink, dropped.";
    Rescued = 35, "rescued", "Popped tasks that fit neither their ring nor the overflow queue, handed to the agent as an event.";
    Expired = 36, "expired", "Popped tasks past their lease, moved to the overflow queue for RETURN instead of served.";
    Bypass = 37, "bypass", "GET_TASK passed on to tier 2 because its fresh hint outranked every non-empty ring searched.";
    Tier2Stamps = 38, "tier2_stamps", "BEST stamps read from tier-2 packets (HINT, REFILL, ASSIGN, NOOP) from the switch address.";
    StampOffUplink = 39, "stamp_off_uplink", "HINT, ASSIGN or NOOP from the switch address arriving on an interface that is not an uplink: stamp ignored.";
    Tier2AssignP1 = 40, "tier2_assign_p1", "ASSIGN of a priority-1 task from the switch passing through to an executor of this host.";
    Tier2AssignP2 = 41, "tier2_assign_p2", "ASSIGN of a priority-2 task from the switch passing through to an executor of this host.";
    Tier2AssignP3 = 42, "tier2_assign_p3", "ASSIGN of a priority-3 task from the switch passing through to an executor of this host.";
    Tier2AssignP4 = 43, "tier2_assign_p4", "ASSIGN of a priority-4 task from the switch passing through to an executor of this host.";
    Tier2AssignP5 = 44, "tier2_assign_p5", "ASSIGN of a priority-5 task from the switch passing through to an executor of this host.";
    Tier2AssignP6 = 45, "tier2_assign_p6", "ASSIGN of a priority-6 task from the switch passing through to an executor of this host.";
    Tier2AssignP7 = 46, "tier2_assign_p7", "ASSIGN of a priority-7 task from the switch passing through to an executor of this host.";
    Tier2AssignP8 = 47, "tier2_assign_p8", "ASSIGN of a priority-8 task from the switch passing through to an executor of this host.";
    DedicatedHit = 48, "dedicated_hit", "GET_TASK answered with a task from the dedicated ring (a PINned task).";
    DedicatedRequeued = 49, "dedicated_requeued", "Task popped from the dedicated ring that the requesting executor cannot run, put back at its tail.";
    ParkedHere = 50, "parked_here", "GET_TASK with WAIT that found nothing, queued to wait at this host (dropped).";
    Handoffs = 51, "handoffs", "REFILL frames turned into the ASSIGN of a waiting executor (also counted as hits).";
    StaleWaiters = 52, "stale_waiters", "Waiter records skipped because their executor had asked again since.";
    WaitersFull = 53, "waiters_full", "GET_TASK that would have waited here, passed on to tier 2 because the waiter queue was full.";
}

/// Number of counters.
pub const COUNTER_COUNT: usize = 54;

/// The value of [`COUNTERS_MAP`]: one per CPU, summed by userspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters {
    pub values: [u64; COUNTER_COUNT],
}

impl Default for Counters {
    fn default() -> Self {
        Counters { values: [0; COUNTER_COUNT] }
    }
}

impl Counters {
    pub fn get(&self, c: Counter) -> u64 {
        self.values[c as usize]
    }

    /// Hits of priority `prio` (1-based); 0 for a priority out of range.
    pub fn hits(&self, prio: u8) -> u64 {
        if prio == 0 || prio as usize > RING_COUNT {
            return 0;
        }
        self.values[Counter::HitP1 as usize + prio as usize - 1]
    }

    /// ASSIGNs of priority-`prio` tasks (1-based) that tier 2 sent to this host's
    /// executors; 0 for a priority out of range.
    pub fn tier2_assigns(&self, prio: u8) -> u64 {
        if prio == 0 || prio as usize > RING_COUNT {
            return 0;
        }
        self.values[Counter::Tier2AssignP1 as usize + prio as usize - 1]
    }
}

const _: () = {
    assert!(Counter::WaitersFull as usize + 1 == COUNTER_COUNT);
    assert!(Counter::Tier2AssignP1 as usize + RING_COUNT == Counter::DedicatedHit as usize);
    assert!(core::mem::size_of::<XdpConfig>() == 56);
    assert!(core::mem::size_of::<HostWaiter>() == 48);
    assert!(MAX_UPLINKS == 2, "XdpConfig::is_uplink compares every slot");
    assert!(core::mem::size_of::<RingState>() == 16);
    assert!(core::mem::size_of::<RingStates>() == 16 * RING_COUNT + 16);
    assert!(RING_COUNT.is_power_of_two());
    assert!(core::mem::size_of::<RingEvent>() == 24);
    assert!(core::mem::size_of::<RescuedTask>() == 48);
};

#[cfg(feature = "user")]
mod pod {
    // SAFETY: repr(C), integer fields only, no padding (sizes asserted above).
    unsafe impl aya::Pod for super::XdpConfig {}
    unsafe impl aya::Pod for super::RingState {}
    unsafe impl aya::Pod for super::RingStates {}
    unsafe impl aya::Pod for super::RingEvent {}
    unsafe impl aya::Pod for super::Counters {}
    unsafe impl aya::Pod for super::HostWaiter {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_indices_follow_their_declaration() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(c.name(), Counter::NAMES[i]);
        }
    }

    #[test]
    fn map_names_fit_the_kernel_limit() {
        // BPF object names are at most 15 bytes plus NUL.
        for name in STATE_MAPS.iter().chain([&PROGRAM_NAME]) {
            assert!(name.len() <= 15, "{name}");
        }
    }

    #[test]
    fn lease_stamps_age_modulo_their_period() {
        assert_eq!(ring_stamp(0), [0, 1], "0 is reserved for unstamped");
        assert_eq!(ring_stamp(0x1_0005), [0, 5]);
        let s = ring_stamp(65_530);
        assert_eq!(stamp_age_ms(s, 65_530 + 10), Some(10), "ages across the wrap");
        assert_eq!(stamp_age_ms([0, 0], 5), None);
        assert!(!lease_expired(s, 65_530 + 499, 500));
        assert!(lease_expired(s, 65_530 + 500, 500));
        assert!(!lease_expired(s, 65_530 + 500, 0), "lease 0 is off");
        assert!(!lease_expired([0, 0], 1_000_000, 500), "unstamped never expires");
    }

    #[test]
    fn the_bypass_rule() {
        const MS: u64 = 1_000_000;
        let hint = Tier2Hint::new(100 * MS, 1);
        assert_eq!((hint.best(), hint.read_at_ns()), (1, 100 * MS));
        let at = |ms: u64| move || ms * MS;
        // Tier 2 holds level 1, the rings only level 3: bypass while the hint is fresh.
        assert!(hint.outranks_local(1, 3, 20 * MS, at(119)));
        assert!(!hint.outranks_local(1, 3, 20 * MS, at(121)), "stale");
        assert!(!hint.outranks_local(1, 3, 0, at(100)), "ttl 0 turns it off");
        assert!(!hint.outranks_local(1, 1, 20 * MS, at(100)), "same level is served locally");
        assert!(!hint.outranks_local(1, 0, 20 * MS, at(100)), "empty rings: a miss, not a bypass");
        assert!(!hint.outranks_local(2, 3, 20 * MS, at(100)), "the request does not search level 1");
        assert!(!Tier2Hint::new(100 * MS, 0).outranks_local(1, 3, 20 * MS, at(100)), "tier 2 empty");
        // The clock is read only when the levels say bypass.
        assert!(!hint.outranks_local(1, 1, 20 * MS, || panic!("clock read")));
    }

    #[test]
    fn the_parking_rule() {
        const MS: u64 = 1_000_000;
        // Tier 2 said it was empty at 100 ms: a request may wait at its host while that
        // is fresh, and asks tier 2 once it is stale.
        let empty = Tier2Hint::new(100 * MS, 0);
        assert!(empty.known_empty_for(1, 20 * MS, 119 * MS));
        assert!(!empty.known_empty_for(1, 20 * MS, 121 * MS), "stale: ask tier 2");
        assert!(!empty.known_empty_for(1, 0, 100 * MS), "ttl 0: never known");
        assert!(!Tier2Hint::default().known_empty_for(1, 20 * MS, 0), "never heard: ask tier 2");
        // Tier 2 holds level 2: a request searching from 3 finds nothing there, one
        // searching from 1 or 2 does.
        let level2 = Tier2Hint::new(100 * MS, 2);
        assert!(level2.known_empty_for(3, 20 * MS, 100 * MS));
        assert!(!level2.known_empty_for(2, 20 * MS, 100 * MS));
        assert!(!level2.known_empty_for(1, 20 * MS, 100 * MS));
    }

    #[test]
    fn a_hint_names_its_level_only_while_fresh() {
        const MS: u64 = 1_000_000;
        let hint = Tier2Hint::new(100 * MS, 3);
        assert_eq!(hint.fresh_best(20 * MS, 119 * MS), 3);
        assert_eq!(hint.fresh_best(20 * MS, 120 * MS), 0, "stale");
        assert_eq!(hint.fresh_best(0, 100 * MS), 0, "ttl 0 turns hints off");
        assert_eq!(Tier2Hint::default().fresh_best(20 * MS, 5 * MS), 0, "never heard");
    }

    #[test]
    fn hits_are_indexed_by_priority() {
        let mut c = Counters::default();
        c.values[Counter::HitP3 as usize] = 5;
        assert_eq!(c.hits(3), 5);
        assert_eq!(c.hits(0), 0);
        assert_eq!(c.hits(9), 0);
    }
}
