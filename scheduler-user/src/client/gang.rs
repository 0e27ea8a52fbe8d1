//! Gang jobs (CloudKon's HPC path): n tasks that must start together.
//!
//! Every task of a gang job carries TASK_FLAG_GANG and is claimed like an exactly-once
//! task. The executor that takes a gang task sends CLAIM and waits (asking again every
//! GET timeout); the client grants the claim in its tracker but holds the answer. When
//! the n-th member has claimed, the client answers CLAIM_GRANTED to all n at once, and
//! they start together. CloudKon has the first executor act as the job's manager and
//! gather the others; here the client is that rendezvous, because every member already
//! talks to it for the claim, so no executor needs to find another.
//!
//! No deadlock when gangs compete for executors: a client forms one gang at a time, the
//! oldest gang job with a member waiting. A claim of another gang job meanwhile is denied
//! at once and its task goes back to the queue without spending an attempt (it may be
//! turned away many times while the first gang forms), so executors never sit on members
//! of two gangs of one client. Between clients, or when there are fewer executors than
//! members, a gang that has not formed within the formation timeout gives up: every
//! waiting member is answered CLAIM_DENIED (it drops the task unrun) and each task goes
//! back to the queue at once (its claim released, as when a lease lapses), counted as an
//! attempt; past the client's max attempts it fails back to the caller. Nothing is lost.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use scheduler_common::Claim;
use serde::Serialize;

/// The longest formation timeout a client may set: executors wait
/// `executor::GANG_WAIT` (longer) for the answer.
pub const MAX_FORMATION: Duration = Duration::from_secs(10);

/// One member waiting for its gang: its claim and where to answer.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub claim: Claim,
    pub from: SocketAddr,
}

/// What to do with a gang task's CLAIM.
#[derive(Debug, PartialEq)]
pub enum GangVerdict {
    /// Not a gang task: the ordinary claim rules apply.
    NotGang,
    /// Another gang of this client is forming: deny, and put the task back.
    Busy,
    /// A member asking again while it waits: renew its lease, no answer yet.
    StillWaiting,
    /// A new member: grant it in the tracker, then [`Gangs::join`].
    Join,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct GangStats {
    /// Gangs started (every member answered at once).
    pub started: u64,
    /// Gangs that did not form in time (their members put back).
    pub gave_up: u64,
    /// Claims denied because another gang of this client was forming.
    pub busy_denied: u64,
}

struct Forming {
    since: Instant,
    members: Vec<Member>,
}

/// The gang jobs of one client and the one forming.
pub struct Gangs {
    /// Members per gang job, by job id.
    sizes: HashMap<u32, usize>,
    /// The gang forming now (at most one), by job id.
    forming: BTreeMap<u32, Forming>,
    formation: Duration,
    pub stats: GangStats,
}

impl Gangs {
    pub fn new(formation: Duration) -> Gangs {
        Gangs { sizes: HashMap::new(), forming: BTreeMap::new(), formation, stats: GangStats::default() }
    }

    /// Job `jid` is a gang of `n` tasks.
    pub fn register(&mut self, jid: u32, n: usize) {
        self.sizes.insert(jid, n);
    }

    /// Sorts a CLAIM_ASK: gang or not, and if gang, what to do with it.
    pub fn classify(&mut self, c: &Claim) -> GangVerdict {
        if !self.sizes.contains_key(&c.jid()) {
            return GangVerdict::NotGang;
        }
        if let Some((&jid, forming)) = self.forming.iter().next() {
            if jid != c.jid() {
                self.stats.busy_denied += 1;
                return GangVerdict::Busy;
            }
            let same = |m: &Member| m.claim.tid == c.tid && m.claim.node == c.node && m.claim.executor == c.executor;
            if forming.members.iter().any(same) {
                return GangVerdict::StillWaiting;
            }
        }
        GangVerdict::Join
    }

    /// Members of the forming gang that `c`'s executor held before and has given up (an
    /// executor waits on one gang task at a time; one that asks about another task has
    /// dropped the earlier one, denied or timed out). Removed: release their claims.
    pub fn take_stale(&mut self, c: &Claim) -> Vec<Member> {
        let mut stale = Vec::new();
        for f in self.forming.values_mut() {
            let (gone, kept) = f
                .members
                .drain(..)
                .partition(|m| m.claim.node == c.node && m.claim.executor == c.executor && m.claim.tid != c.tid);
            f.members = kept;
            stale.extend::<Vec<Member>>(gone);
        }
        stale
    }

    /// Adds a member whose claim the tracker granted; returns every member when the gang
    /// is complete (answer them all now), else nothing.
    pub fn join(&mut self, member: Member, now: Instant) -> Vec<Member> {
        let jid = member.claim.jid();
        let n = self.sizes.get(&jid).copied().unwrap_or(1);
        let forming = self.forming.entry(jid).or_insert_with(|| Forming { since: now, members: Vec::new() });
        forming.members.push(member);
        if forming.members.len() < n {
            return Vec::new();
        }
        self.stats.started += 1;
        self.forming.remove(&jid).map(|f| f.members).unwrap_or_default()
    }

    /// The members of a gang that has waited past the formation timeout (deny them and
    /// put their tasks back), or nothing.
    pub fn expire(&mut self, now: Instant) -> Vec<Member> {
        let late: Vec<u32> = self
            .forming
            .iter()
            .filter(|(_, f)| now.saturating_duration_since(f.since) >= self.formation)
            .map(|(&jid, _)| jid)
            .collect();
        let mut out = Vec::new();
        for jid in late {
            if let Some(f) = self.forming.remove(&jid) {
                self.stats.gave_up += 1;
                out.extend(f.members);
            }
        }
        out
    }

    /// Members waiting in the gang forming now.
    pub fn waiting(&self) -> usize {
        self.forming.values().map(|f| f.members.len()).sum()
    }

    /// When [`Gangs::expire`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.forming.values().map(|f| f.since + self.formation).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(jid: u32, tid: u32, executor: u16) -> Claim {
        let mut c = Claim::default();
        c.set_uid(1);
        c.set_jid(jid);
        c.set_tid(tid);
        c.set_node(1);
        c.set_executor(executor);
        c
    }

    fn member(jid: u32, tid: u32, executor: u16) -> Member {
        Member { claim: claim(jid, tid, executor), from: "127.0.0.1:9".parse().unwrap() }
    }

    #[test]
    fn a_gang_starts_when_its_last_member_claims() {
        let t0 = Instant::now();
        let mut g = Gangs::new(Duration::from_secs(1));
        g.register(7, 3);
        assert_eq!(g.classify(&claim(8, 1, 1)), GangVerdict::NotGang);
        assert_eq!(g.classify(&claim(7, 1, 1)), GangVerdict::Join);
        assert!(g.join(member(7, 1, 1), t0).is_empty());
        assert_eq!(g.classify(&claim(7, 1, 1)), GangVerdict::StillWaiting, "asking again while waiting");
        assert!(g.join(member(7, 2, 2), t0).is_empty());
        let all = g.join(member(7, 3, 3), t0);
        assert_eq!(all.iter().map(|m| m.claim.tid()).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(g.stats.started, 1);
        assert!(g.expire(t0 + Duration::from_secs(5)).is_empty());
    }

    #[test]
    fn an_executor_that_moved_on_is_no_longer_a_member() {
        let t0 = Instant::now();
        let mut g = Gangs::new(Duration::from_secs(1));
        g.register(7, 3);
        g.join(member(7, 1, 1), t0);
        g.join(member(7, 2, 2), t0);
        // Executor 1 now asks about task 3: it dropped task 1, which must not count.
        let stale = g.take_stale(&claim(7, 3, 1));
        assert_eq!(stale.iter().map(|m| m.claim.tid()).collect::<Vec<_>>(), vec![1]);
        assert!(g.join(member(7, 3, 1), t0).is_empty(), "two live members of three");
        assert!(g.take_stale(&claim(7, 3, 1)).is_empty(), "asking again about the same task");
    }

    #[test]
    fn one_gang_forms_at_a_time_and_one_that_waits_too_long_gives_up() {
        let t0 = Instant::now();
        let mut g = Gangs::new(Duration::from_secs(1));
        g.register(7, 3);
        g.register(9, 2);
        g.join(member(7, 1, 1), t0);
        assert_eq!(g.classify(&claim(9, 20, 2)), GangVerdict::Busy, "gang 7 is forming");
        assert_eq!(g.next_deadline(), Some(t0 + Duration::from_secs(1)));
        assert!(g.expire(t0 + Duration::from_millis(999)).is_empty());
        let gone = g.expire(t0 + Duration::from_secs(1));
        assert_eq!(gone.len(), 1);
        assert_eq!(g.stats.gave_up, 1);
        assert_eq!(g.classify(&claim(9, 20, 2)), GangVerdict::Join, "gang 9 may form now");
    }
}
