//! Who may talk to the switch, checked after a message decodes and before it enters the
//! pipeline: SUBMIT only from allowed client prefixes; REFILL_REQ and RETURN only from
//! the host agents; GET_TASK only from the executors. Agents and executors are separate
//! lists because a RETURN puts tasks into the queue in the name of the clients its
//! entries name: an executor that could send one would queue forged work and aim
//! QUEUE_FULL replies at any address. And, where configured, a per-source rate limit on
//! GET_TASK, so that one source flooding GET_TASK cannot take every task.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::time::Instant;

use scheduler_common::{Ipv4Prefix, Op};

/// Address rules of one switch. An empty list admits nobody; `0.0.0.0/0` everybody.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessRules {
    /// Sources SUBMIT is accepted from.
    pub clients: Vec<Ipv4Prefix>,
    /// Sources REFILL_REQ and RETURN are accepted from: the host agents.
    pub agents: Vec<Ipv4Prefix>,
    /// Sources GET_TASK is accepted from: the executors.
    pub executors: Vec<Ipv4Prefix>,
}

impl Default for AccessRules {
    /// Open to every source, as a switch on loopback or a private test network needs.
    fn default() -> Self {
        AccessRules { clients: vec![Ipv4Prefix::ANY], agents: vec![Ipv4Prefix::ANY], executors: vec![Ipv4Prefix::ANY] }
    }
}

/// Whether one of the prefixes of `list` holds `addr` (an access list: the switch's, and
/// the agent's for PIN).
pub fn listed(list: &[Ipv4Prefix], addr: [u8; 4]) -> bool {
    list.iter().any(|p| p.contains(addr))
}

impl AccessRules {
    /// Whether `op` from `src` may enter the pipeline. Ops a switch never takes are left
    /// to the pipeline, which refuses them as wrong-direction.
    pub fn admits(&self, op: Op, src: SocketAddrV4) -> bool {
        let addr = src.ip().octets();
        match op {
            Op::Submit => listed(&self.clients, addr),
            Op::GetTask | Op::GetBundle => listed(&self.executors, addr),
            Op::RefillReq | Op::Return => listed(&self.agents, addr),
            _ => true,
        }
    }
}

/// Parses one prefix or address of `--allow-clients`, `--nodes`, `--agents` or `--executors`.
pub fn parse_prefix(s: &str) -> Result<Ipv4Prefix, String> {
    Ipv4Prefix::parse(s).map_err(|e| format!("{s:?}: {e}"))
}

/// Most sources a [`GetTaskLimit`] tracks; past that it forgets them all (each starts
/// again with a full burst), so a spray of source addresses cannot grow its memory.
const MAX_TRACKED_SOURCES: usize = 1 << 16;

/// A per-source rate limit on GET_TASK (generic cell rate algorithm: one timestamp per
/// source). A pull scheduler hands a task to whoever asks, so a source asking as fast as
/// it can send would take every queued task; with a limit it takes at most `rate` per
/// second plus a burst, and the rest stay for the other executors. A source is a socket
/// (address and port): one executor.
pub struct GetTaskLimit {
    /// Nanoseconds between two GET_TASKs at the allowed rate.
    interval_ns: u64,
    /// How far ahead of now a source's schedule may run: the burst.
    tolerance_ns: u64,
    /// Per source: when its next GET_TASK is due at the allowed rate, in ns since `epoch`.
    due: HashMap<SocketAddrV4, u64>,
    epoch: Instant,
}

impl GetTaskLimit {
    /// `rate` GET_TASKs per second per source with bursts of `burst`; None for rate 0 (no limit).
    pub fn new(rate: u32, burst: u32) -> Option<GetTaskLimit> {
        if rate == 0 {
            return None;
        }
        let interval_ns = 1_000_000_000 / rate as u64;
        Some(GetTaskLimit {
            interval_ns,
            tolerance_ns: interval_ns * burst.max(1) as u64,
            due: HashMap::new(),
            epoch: Instant::now(),
        })
    }

    /// Whether `src` may have this GET_TASK served at `now`; if so it is charged for it.
    pub fn admit(&mut self, src: SocketAddrV4, now: Instant) -> bool {
        let t = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        if self.due.len() >= MAX_TRACKED_SOURCES && !self.due.contains_key(&src) {
            self.due.clear();
        }
        let due = self.due.entry(src).or_insert(t);
        let next = (*due).max(t);
        if next > t + self.tolerance_ns - self.interval_ns {
            return false;
        }
        *due = next + self.interval_ns;
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn rules_follow_the_op() {
        let rules = AccessRules {
            clients: vec![parse_prefix("192.0.2.0/24").unwrap()],
            agents: vec![parse_prefix("198.51.100.7").unwrap(), parse_prefix("203.0.113.0/25").unwrap()],
            executors: vec![parse_prefix("203.0.113.128/25").unwrap()],
        };
        assert!(rules.admits(Op::Submit, at("192.0.2.9:1")));
        assert!(!rules.admits(Op::Submit, at("198.51.100.7:1")));
        for op in [Op::RefillReq, Op::Return] {
            assert!(rules.admits(op, at("198.51.100.7:9")) && rules.admits(op, at("203.0.113.127:9")));
            assert!(!rules.admits(op, at("198.51.100.8:9")) && !rules.admits(op, at("203.0.113.128:9")));
            assert!(!rules.admits(op, at("192.0.2.9:9")));
        }
        // An executor may ask for work, never hand tasks in; an agent the reverse.
        assert!(rules.admits(Op::GetTask, at("203.0.113.128:9")));
        assert!(!rules.admits(Op::GetTask, at("198.51.100.7:9")) && !rules.admits(Op::GetTask, at("192.0.2.9:9")));
        assert!(AccessRules::default().admits(Op::Submit, at("1.2.3.4:5")));
        let closed = AccessRules { clients: vec![], agents: vec![], executors: vec![] };
        assert!(!closed.admits(Op::Submit, at("127.0.0.1:5")) && !closed.admits(Op::GetTask, at("127.0.0.1:5")));
    }

    #[test]
    fn a_bad_prefix_says_what_is_wrong() {
        assert!(parse_prefix("10.0.0.1/8").unwrap_err().contains("10.0.0.1/8"));
    }

    #[test]
    fn each_source_gets_its_rate_and_burst() {
        let mut limit = GetTaskLimit::new(1000, 4).unwrap();
        let t0 = Instant::now();
        let (a, b) = (at("127.0.0.1:1"), at("127.0.0.1:2"));
        let admitted = (0..100).filter(|_| limit.admit(a, t0)).count();
        assert_eq!(admitted, 4, "a burst of 4 at one instant");
        assert!(limit.admit(b, t0), "another source has its own budget");
        // One more per millisecond afterwards.
        assert!(!limit.admit(a, t0 + Duration::from_micros(500)));
        assert!(limit.admit(a, t0 + Duration::from_millis(1)));
        let later = t0 + Duration::from_secs(1);
        let over_a_second = (0..2000u64).filter(|i| limit.admit(a, later + Duration::from_micros(*i * 500))).count();
        assert!((1000..=1004).contains(&over_a_second), "{over_a_second}");
        assert!(GetTaskLimit::new(0, 4).is_none());
    }
}
