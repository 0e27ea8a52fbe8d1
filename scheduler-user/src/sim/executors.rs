//! Executors, clients and hosts as the packets name them: each has an IPv4 address the
//! simulator encodes its index in, so the real pipeline's outputs (addressed to a
//! `SocketAddrV4`) find their way back. Executors keep no state of their own between
//! events: what they are doing is the one event each has pending.

use std::net::{Ipv4Addr, SocketAddrV4};

use rand::Rng;
use serde::Serialize;

use super::clock::Nanos;

/// A delay drawn afresh for each task.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Draw {
    Fixed(Nanos),
    /// Exponential with this mean.
    Exponential(Nanos),
    /// Measured: (cumulative probability, ns) pairs, both increasing, from 0 to 1; drawn
    /// by inverting the distribution, linear between the points.
    Quantiles(Vec<(f64, Nanos)>),
}

impl Draw {
    /// A fixed delay draws no random number (runs without one stay as they were).
    pub fn sample(&self, rng: &mut impl Rng) -> Nanos {
        self.sample_with(rng, |u| u)
    }

    /// A draw whose uniform number `u` is moved by `map` (within [0, 1]) before the
    /// distribution is read at it.
    pub fn sample_with(&self, rng: &mut impl Rng, map: impl Fn(f64) -> f64) -> Nanos {
        match self {
            Draw::Fixed(ns) => *ns,
            Draw::Exponential(0) => 0,
            Draw::Exponential(mean) => (-(*mean as f64) * (1.0 - map(rng.gen::<f64>())).ln()) as Nanos,
            Draw::Quantiles(points) => {
                let u = map(rng.gen::<f64>());
                let i = points.partition_point(|&(p, _)| p <= u).clamp(1, points.len().max(1) - 1);
                match (points.get(i - 1), points.get(i)) {
                    (Some(&(p0, v0)), Some(&(p1, v1))) if p1 > p0 => {
                        let f = ((u - p0) / (p1 - p0)).clamp(0.0, 1.0);
                        v0 + ((v1 as f64 - v0 as f64) * f).round() as Nanos
                    }
                    (Some(&(_, v)), _) => v,
                    _ => 0,
                }
            }
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ExecParams {
    /// Pause after a NOOP before the next GET_TASK (`bolt executor`'s default, 50 µs, as
    /// the thesis's executors).
    pub noop_backoff_ns: Nanos,
    /// Wait for an answer before asking again (`bolt executor`'s default, 50 ms).
    pub get_timeout_ns: Nanos,
    /// Time a task takes beyond its duration, from its start (a sleeping executor
    /// overshoots).
    pub run_overhead: Draw,
    /// Executors send their first GET_TASK at a uniformly random time below this (0: all
    /// at once), as executors started one by one would.
    pub start_spread_ns: Nanos,
    /// The wait between a task reaching its executor and the task starting: the
    /// executor thread waiting for a CPU (0: a CPU is always free). On the testbed 40
    /// executor threads, the switch, the agents and the clients share two cores;
    /// `SimConfig::testbed` draws it, and `run_overhead`, from `bolt sim calibrate`'s
    /// measurements (`TESTBED_THREADS`); `bolt sim validate` from those of the testbed
    /// run it compares with (`sim::validate`).
    pub cpu_wait: Draw,
}

impl Default for ExecParams {
    fn default() -> Self {
        ExecParams {
            noop_backoff_ns: 50_000,
            get_timeout_ns: 50_000_000,
            run_overhead: Draw::Fixed(0),
            start_spread_ns: 0,
            cpu_wait: Draw::Fixed(0),
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
    fn a_measured_draw_stays_within_its_quantiles_and_follows_them() {
        use rand::SeedableRng;
        let d = Draw::Quantiles(vec![(0.0, 100), (0.5, 200), (0.9, 1_000), (1.0, 5_000)]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut v: Vec<Nanos> = (0..100_000).map(|_| d.sample(&mut rng)).collect();
        v.sort_unstable();
        assert!(v[0] >= 100 && v[v.len() - 1] <= 5_000);
        // The median and the 90th percentile fall where the table puts them (within the
        // sampling error of 100,000 draws).
        assert!((185..=215).contains(&v[50_000]), "median {}", v[50_000]);
        assert!((900..=1_100).contains(&v[90_000]), "p90 {}", v[90_000]);
        // Linear between the points: a quarter of the way from 0.5 to 0.9 is 400 ns.
        assert!((390..=410).contains(&v[60_000]), "p60 {}", v[60_000]);
        assert_eq!(Draw::Fixed(7).sample(&mut rng), 7);
    }

    #[test]
    fn addresses_name_their_endpoint() {
        for e in [Endpoint::Executor(0), Endpoint::Executor(999_999), Endpoint::Host(99_999), Endpoint::Client(7)] {
            assert_eq!(Endpoint::of(e.addr()), Some(e));
        }
        assert_eq!(Endpoint::of(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1)), None);
    }
}
