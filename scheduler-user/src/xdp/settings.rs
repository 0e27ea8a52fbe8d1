//! What an operator chooses when loading the program.

use std::net::Ipv4Addr;

use scheduler_common::{
    maps::{
        XdpConfig, DEFAULT_EVENT_INTERVAL_NS, DEFAULT_HINT_TTL_NS, DEFAULT_LEASE_MS, DEFAULT_OVERFLOW_CAPACITY,
        DEFAULT_RING_CAPACITY, MAX_LEASE_MS, MAX_UPLINKS, RING_COUNT,
    },
    Ipv4Prefix, DEFAULT_PORT, DEFAULT_PRIORITIES,
};

/// Settings of one loaded XDP program (one per node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpSettings {
    /// UDP port of Bolt traffic.
    pub port: u16,
    /// This node's id (GET_TASK of other nodes passes on).
    pub node: u16,
    /// The tier-2 switch: REFILL is accepted from this address only.
    pub switch_addr: Option<Ipv4Addr>,
    /// Priority levels in use (1..=8).
    pub levels: u8,
    /// Tasks per ring.
    pub ring_capacity: u32,
    /// Tasks the overflow queue holds.
    pub overflow_capacity: u32,
    /// Low watermark per ring (0 = no events).
    pub low_watermark: u32,
    /// Minimum time between two events of one ring.
    pub event_interval_ns: u64,
    /// aya-log level of the program's log lines: 0 = off (default), 1 = error ... 5 = trace.
    pub log_level: u8,
    /// Sources GET_TASK is answered from (the node's executors); others are dropped.
    pub executors: Ipv4Prefix,
    /// Interfaces (ifindex, 0 = none) REFILL is accepted on: the uplinks. Default: none,
    /// so REFILL is stored by no interface until the loader names the uplink. A frame run
    /// with BPF_PROG_TEST_RUN arrives on the loopback interface, [`LOOPBACK_IFINDEX`].
    pub uplink_ifindex: [u32; MAX_UPLINKS],
    /// Lease of a prefetched task in milliseconds (0 = none; see `XdpConfig::lease_ms`).
    pub lease_ms: u16,
    /// How long tier 2's BEST stamp is believed (0: GET_TASK never bypasses the rings).
    pub hint_ttl_ns: u64,
    /// How long an executor with nothing to do waits at this host before the agent
    /// answers it NOOP (0: it waits at tier 2; see `XdpConfig::host_wait_ns`).
    pub host_wait_ns: u64,
}

/// The ifindex of `lo` in every network namespace.
pub const LOOPBACK_IFINDEX: u32 = 1;

/// [`XdpSettings::uplink_ifindex`] for frames run with BPF_PROG_TEST_RUN, which arrive on
/// the loopback interface: REFILL run that way is stored.
pub const TEST_RUN_UPLINK: [u32; MAX_UPLINKS] = {
    let mut u = [0; MAX_UPLINKS];
    u[0] = LOOPBACK_IFINDEX;
    u
};

impl Default for XdpSettings {
    fn default() -> Self {
        XdpSettings {
            port: DEFAULT_PORT,
            node: 0,
            switch_addr: None,
            levels: DEFAULT_PRIORITIES,
            ring_capacity: DEFAULT_RING_CAPACITY,
            overflow_capacity: DEFAULT_OVERFLOW_CAPACITY,
            low_watermark: DEFAULT_RING_CAPACITY / 4,
            event_interval_ns: DEFAULT_EVENT_INTERVAL_NS,
            log_level: 0,
            executors: Ipv4Prefix::ANY,
            uplink_ifindex: [0; MAX_UPLINKS],
            lease_ms: DEFAULT_LEASE_MS,
            hint_ttl_ns: DEFAULT_HINT_TTL_NS,
            host_wait_ns: 0,
        }
    }
}

impl XdpSettings {
    /// Checks the ranges the program relies on.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.port != 0, "the Bolt port must not be 0");
        anyhow::ensure!(
            (1..=RING_COUNT as u8).contains(&self.levels),
            "levels must be 1..={RING_COUNT}, not {}",
            self.levels
        );
        anyhow::ensure!(self.ring_capacity > 0, "ring capacity must be at least 1");
        anyhow::ensure!(self.overflow_capacity > 0, "overflow capacity must be at least 1");
        anyhow::ensure!(self.log_level <= 5, "log level must be 0..=5");
        anyhow::ensure!(self.lease_ms <= MAX_LEASE_MS, "the lease must be at most {MAX_LEASE_MS} ms");
        Ok(())
    }

    /// The value written to the config map.
    pub fn config(&self) -> XdpConfig {
        XdpConfig {
            port: self.port,
            node: self.node,
            switch_ipv4: self.switch_addr.map(|a| a.octets()).unwrap_or([0; 4]),
            levels: self.levels,
            executor_prefix_len: self.executors.prefix_len(),
            lease_ms: self.lease_ms,
            ring_capacity: self.ring_capacity,
            low_watermark: self.low_watermark,
            executor_net: self.executors.network(),
            event_interval_ns: self.event_interval_ns,
            uplink_ifindex: self.uplink_ifindex,
            hint_ttl_ns: self.hint_ttl_ns,
            host_wait_ns: self.host_wait_ns,
        }
    }
}
