//! The network: racks of hosts under leaf switches, leaves under the spine where the
//! tier-2 switch sits. A message costs the sender's and receiver's stack time, each link's
//! propagation and serialisation, and each switch's latency. Links are not shared
//! queues: contention is modelled only at the tier-2 pipeline (see docs/sim.md).

use serde::Serialize;

use super::clock::Nanos;

#[derive(Clone, Debug, Serialize)]
pub struct NetParams {
    /// A host's kernel UDP send or receive (each end pays it once per message).
    pub stack_ns: Nanos,
    /// Executor ↔ its host's XDP program, one way (GET_TASK and ASSIGN answered on the host).
    pub local_ns: Nanos,
    /// Propagation of one link.
    pub link_ns: Nanos,
    /// Latency of a leaf (top-of-rack) switch.
    pub leaf_ns: Nanos,
    /// Latency of a spine switch (other than the tier-2 pipeline).
    pub spine_ns: Nanos,
    /// Link bandwidth, Gbit/s.
    pub gbps: f64,
    /// Hosts per rack.
    pub hosts_per_rack: u32,
}

impl NetParams {
    /// A leaf-spine data centre of 100 Gbit/s links (docs/sim.md gives the sources).
    pub fn datacenter() -> NetParams {
        NetParams {
            stack_ns: 5_000,
            local_ns: 2_600,
            link_ns: 500,
            leaf_ns: 800,
            spine_ns: 800,
            gbps: 100.0,
            hosts_per_rack: 40,
        }
    }

    /// The namespace testbed: veth links and a software switch on one 2-core machine,
    /// set from its measured round trips (docs/benchmarks.md, `bolt bench tiers`).
    pub fn testbed() -> NetParams {
        NetParams {
            stack_ns: 18_000,
            local_ns: 2_600,
            link_ns: 0,
            leaf_ns: 1_000,
            spine_ns: 0,
            gbps: 10.0,
            hosts_per_rack: 64,
        }
    }
}

/// Where things are: hosts by index, racks of `hosts_per_rack`.
#[derive(Clone, Debug)]
pub struct Topology {
    pub p: NetParams,
    pub hosts: u32,
}

/// Bytes of a message with `entries` 40-byte entries (Ethernet + IP + UDP + Bolt header).
pub fn frame_bytes(entries: usize) -> u32 {
    14 + 20 + 8 + 8 + 40 * entries as u32
}

impl Topology {
    pub fn new(p: NetParams, hosts: u32) -> Topology {
        Topology { p, hosts: hosts.max(1) }
    }

    pub fn rack(&self, host: u32) -> u32 {
        host / self.p.hosts_per_rack.max(1)
    }

    fn serialise(&self, bytes: u32) -> Nanos {
        (bytes as f64 * 8.0 / self.p.gbps).round() as Nanos
    }

    /// One link: propagation and serialisation.
    fn hop(&self, bytes: u32) -> Nanos {
        self.p.link_ns + self.serialise(bytes)
    }

    /// A host to the tier-2 switch at the spine (or back): host link, leaf, uplink.
    pub fn host_switch(&self, bytes: u32) -> Nanos {
        self.p.stack_ns + 2 * self.hop(bytes) + self.p.leaf_ns
    }

    /// Host to host: through the leaf, and the spine between racks.
    pub fn host_host(&self, a: u32, b: u32, bytes: u32) -> Nanos {
        if a == b {
            return 2 * self.p.local_ns;
        }
        let path = if self.rack(a) == self.rack(b) {
            2 * self.hop(bytes) + self.p.leaf_ns
        } else {
            4 * self.hop(bytes) + 2 * self.p.leaf_ns + self.p.spine_ns
        };
        2 * self.p.stack_ns + path
    }
}
