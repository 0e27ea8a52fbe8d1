//! Executors, clients and hosts as the packets name them: each has an IPv4 address the
//! simulator encodes its index in, so the real pipeline's outputs (addressed to a
//! `SocketAddrV4`) find their way back. Executors keep no state of their own between
//! events: what they are doing is the one event each has pending.

use std::net::{Ipv4Addr, SocketAddrV4};

use serde::Serialize;

use super::clock::Nanos;

#[derive(Clone, Debug, Serialize)]
pub struct ExecParams {
    /// Pause after a NOOP before the next GET_TASK (`bolt executor`'s default, 50 µs, as
    /// the thesis's executors).
    pub noop_backoff_ns: Nanos,
    /// Wait for an answer before asking again (`bolt executor`'s default, 50 ms).
    pub get_timeout_ns: Nanos,
    /// Time a task takes beyond its duration (a sleeping executor overshoots).
    pub run_overhead_ns: Nanos,
    /// Executors send their first GET_TASK at a uniformly random time below this (0: all
    /// at once), as executors started one by one would.
    pub start_spread_ns: Nanos,
    /// Mean of an exponential wait between a task reaching its executor and the task
    /// starting: the executor thread waiting for a CPU (0: a CPU is always free). On
    /// the testbed 40 executor threads, the switch, the agents and the clients share two
    /// cores; `SimConfig::testbed` calibrates it from one testbed point. It delays the
    /// start, not the end: `run_overhead_ns`, measured from ASSIGN to the end, holds it.
    pub cpu_wait_mean_ns: Nanos,
}

impl Default for ExecParams {
    fn default() -> Self {
        ExecParams {
            noop_backoff_ns: 50_000,
            get_timeout_ns: 50_000_000,
            run_overhead_ns: 0,
            start_spread_ns: 0,
            cpu_wait_mean_ns: 0,
        }
    }
}

const EXECUTOR_NET: u32 = 0x0A00_0000;
const HOST_NET: u32 = 0x0B00_0000;
const CLIENT_NET: u32 = 0x0C00_0000;
const INDEX_MASK: u32 = 0x00FF_FFFF;

/// Who an address belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Executor(u32),
    Host(u32),
    Client(u32),
}

impl Endpoint {
    pub fn addr(self) -> SocketAddrV4 {
        let (net, i, port) = match self {
            Endpoint::Executor(i) => (EXECUTOR_NET, i, 1),
            Endpoint::Host(i) => (HOST_NET, i, 2),
            Endpoint::Client(i) => (CLIENT_NET, i, 3),
        };
        SocketAddrV4::new(Ipv4Addr::from(net | (i & INDEX_MASK)), port)
    }

    pub fn of(addr: SocketAddrV4) -> Option<Endpoint> {
        let ip = u32::from(*addr.ip());
        let i = ip & INDEX_MASK;
        match ip & !INDEX_MASK {
            EXECUTOR_NET => Some(Endpoint::Executor(i)),
            HOST_NET => Some(Endpoint::Host(i)),
            CLIENT_NET => Some(Endpoint::Client(i)),
            _ => None,
        }
    }
}

/// The most executors an address can name.
pub const MAX_EXECUTORS: u32 = INDEX_MASK + 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_name_their_endpoint() {
        for e in [Endpoint::Executor(0), Endpoint::Executor(999_999), Endpoint::Host(99_999), Endpoint::Client(7)] {
            assert_eq!(Endpoint::of(e.addr()), Some(e));
        }
        assert_eq!(Endpoint::of(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1)), None);
    }
}
