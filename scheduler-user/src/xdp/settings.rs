//! What an operator chooses when loading the program.

use std::net::Ipv4Addr;

use scheduler_common::{
    maps::{
        XdpConfig, DEFAULT_EVENT_INTERVAL_NS, DEFAULT_HINT_TTL_NS, DEFAULT_OVERFLOW_CAPACITY, DEFAULT_RING_CAPACITY,
        RING_COUNT,
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
    /// How long tier 2's BEST stamp is believed (0: GET_TASK never bypasses the rings).
    pub hint_ttl_ns: u64,
}

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
            hint_ttl_ns: DEFAULT_HINT_TTL_NS,
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
            pad: [0; 2],
            ring_capacity: self.ring_capacity,
            low_watermark: self.low_watermark,
            executor_net: self.executors.network(),
            event_interval_ns: self.event_interval_ns,
            hint_ttl_ns: self.hint_ttl_ns,
        }
    }
}
