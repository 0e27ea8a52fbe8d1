//! MATRIX's adaptive work stealing between hosts (Wang et al., "MATRIX: data-aware work
//! stealing", §III.A), with a two-phase hand-over so that a lost datagram neither loses
//! nor duplicates a task.
//!
//! **Thief.** When its node is starved (its rings are empty and tier 2 answered REFILL
//! with nothing), it draws ⌊√N + 0.5⌋ distinct peers at random (N = hosts, itself
//! included; a fresh draw every attempt), sends each a STEAL_PROBE, and after their
//! STEAL_LOADs (or `probe_timeout`) sends STEAL_REQ to the most loaded one for half its
//! stealable tasks (⌊load/2⌋, at most 16 per GRANT). A failed attempt (every peer empty,
//! the victim's tasks gone by the time of the request, an ABORT) sleeps the poll
//! interval, which starts at `initial_interval` (1 ms) and doubles; once it reaches
//! `max_interval` the thief stops stealing until work appears again. A successful steal
//! resets it.
//!
//! **Hand-over.** The victim pops the tasks into a held set and answers STEAL_GRANT; a
//! repeated STEAL_REQ gets the same GRANT. The thief holds the granted tasks tentatively
//! and repeats STEAL_ACK every `ack_interval`. The victim's first ACK commits (its copy
//! is dropped) and is answered STEAL_DONE COMMIT; a repeated ACK is answered from the
//! remembered outcome. A steal not ACKed within `hold` is aborted: the tasks go back
//! into the victim's rings, and a late ACK is answered ABORT. The thief pushes the tasks
//! on COMMIT, discards them on ABORT. It repeats ACK for `ack_window` (longer than the
//! victim's `hold`), so a victim that aborted answers ABORT to a repeat; only if every
//! ACK and DONE is lost for that whole window does the thief keep the tasks unconfirmed
//! (a task may then run twice; it is never lost).
//!
//! Plain state machines: time and received messages go in, actions come out.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler_common::{Entry, Op, StealBody, MAX_LIST, STEAL_ABORT, STEAL_COMMIT};

/// Timing of the steal protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StealConfig {
    /// This node's id (the `node` of every STEAL body it sends).
    pub node: u16,
    /// First poll interval after a failure; also the interval after a success.
    pub initial_interval: Duration,
    /// The poll interval's bound: reaching it stops stealing until work appears.
    pub max_interval: Duration,
    /// How long the thief waits for STEAL_LOADs before choosing among those it has.
    pub probe_timeout: Duration,
    /// How long the thief waits for a STEAL_GRANT before repeating STEAL_REQ.
    pub grant_timeout: Duration,
    /// STEAL_REQs sent per attempt before it counts as failed.
    pub request_tries: u32,
    /// How often the thief repeats STEAL_ACK until STEAL_DONE arrives.
    pub ack_interval: Duration,
    /// How long the thief repeats STEAL_ACK; longer than `hold`.
    pub ack_window: Duration,
    /// How long a victim holds granted tasks waiting for STEAL_ACK.
    pub hold: Duration,
    /// How long a victim remembers a steal's outcome, to answer repeated ACKs.
    pub remember: Duration,
    /// Steals a victim holds at once; more STEAL_REQs get an empty GRANT.
    pub max_held: usize,
}

impl StealConfig {
    pub fn new(node: u16) -> StealConfig {
        StealConfig {
            node,
            initial_interval: Duration::from_millis(1),
            max_interval: Duration::from_millis(1000),
            probe_timeout: Duration::from_millis(2),
            grant_timeout: Duration::from_millis(5),
            request_tries: 3,
            ack_interval: Duration::from_millis(2),
            ack_window: Duration::from_millis(200),
            hold: Duration::from_millis(100),
            remember: Duration::from_secs(2),
            max_held: 32,
        }
    }
}

/// The number of neighbours a thief asks among `hosts` hosts (itself included):
/// ⌊√hosts + 0.5⌋, at most the other hosts.
pub fn neighbours(hosts: usize) -> usize {
    (((hosts as f64).sqrt() + 0.5).floor() as usize).min(hosts.saturating_sub(1))
}

/// What the agent does for the steal state machines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StealAction<P> {
    /// Send this STEAL message without entries.
    Send { to: P, op: Op, body: StealBody },
    /// Victim: send STEAL_GRANT with these entries (their lease stamps zeroed on the wire;
    /// the held copies keep theirs).
    Grant { to: P, body: StealBody, entries: Vec<Entry> },
    /// Thief: the steal is done; push these tasks into the rings (freshly stamped).
    Keep(Vec<Entry>),
    /// Victim: an aborted steal; put these tasks back into the rings (stamps kept).
    PutBack(Vec<Entry>),
}

/// Counters of one node's stealing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StealStats {
    /// Thief: attempts started (one per draw of neighbours).
    pub attempts: u64,
    /// Thief: attempts that brought tasks.
    pub successes: u64,
    /// Thief: attempts that failed (no load, an empty GRANT, an ABORT, no answer).
    pub failures: u64,
    /// Thief: tasks taken in (committed or unconfirmed).
    pub stolen: u64,
    /// Thief: steals kept without a verdict after the ACK window.
    pub unconfirmed: u64,
    /// Thief: times it stopped at the interval's bound.
    pub stops: u64,
    /// Victim: tasks given away (committed).
    pub given: u64,
    /// Victim: steals aborted (tasks put back).
    pub aborted: u64,
}

#[derive(Clone, Debug)]
enum Thief<P> {
    /// Not stealing: the node has work, or has not been starved yet.
    Idle,
    /// A failed attempt's poll interval.
    Sleeping {
        until: Instant,
    },
    Probing {
        seq: u32,
        /// The peers probed, sorted, and whether each has answered: a thief of many
        /// neighbours (316 at 100,000 hosts) checks an answer in O(log k).
        asked: Vec<P>,
        answered: Vec<bool>,
        /// The answers in arrival order.
        loads: Vec<(P, u32)>,
        deadline: Instant,
    },
    Requesting {
        seq: u32,
        victim: P,
        want: u8,
        deadline: Instant,
        tries: u32,
    },
    Holding {
        seq: u32,
        victim: P,
        entries: Vec<Entry>,
        next_ack: Instant,
        give_up: Instant,
    },
    /// The poll interval reached its bound: no stealing until work appears.
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Held {
    Holding { deadline: Instant },
    Committed,
    Aborted,
}

#[derive(Clone, Debug)]
struct HeldSteal {
    /// Tells this steal from an older one of the same thief and seq in the time queues.
    id: u64,
    entries: Vec<Entry>,
    state: Held,
}

/// The steals a victim granted, by thief and seq, until their outcome is forgotten. Hold
/// deadlines and forget times are kept in two queues in grant order (each a constant
/// after the grant, and time only moves forward): a victim that many thieves steal from
/// finds a steal in O(1) and times steals out from the front, instead of scanning every
/// outcome it remembers (`remember`, 2 s of them) on each message and poll.
#[derive(Clone, Debug)]
struct HeldSteals<P> {
    by_steal: HashMap<(P, u32), HeldSteal>,
    /// (hold deadline, steal, id), grant order; entries no longer held are skipped.
    holds: VecDeque<(Instant, (P, u32), u64)>,
    /// (forget time, steal, id), grant order.
    forgets: VecDeque<(Instant, (P, u32), u64)>,
    /// Steals held now, and their tasks.
    holding: usize,
    holding_tasks: usize,
    next_id: u64,
}

impl<P: Copy + Eq + Hash> HeldSteals<P> {
    fn new() -> HeldSteals<P> {
        HeldSteals {
            by_steal: HashMap::new(),
            holds: VecDeque::new(),
            forgets: VecDeque::new(),
            holding: 0,
            holding_tasks: 0,
            next_id: 0,
        }
    }

    fn insert(&mut self, key: (P, u32), entries: Vec<Entry>, deadline: Instant, forget_at: Instant) {
        let id = self.next_id;
        self.next_id += 1;
        self.holding += 1;
        self.holding_tasks += entries.len();
        self.holds.push_back((deadline, key, id));
        self.forgets.push_back((forget_at, key, id));
        self.by_steal.insert(key, HeldSteal { id, entries, state: Held::Holding { deadline } });
    }

    fn is_held(&self, key: &(P, u32), id: u64) -> bool {
        self.by_steal.get(key).is_some_and(|h| h.id == id && matches!(h.state, Held::Holding { .. }))
    }

    /// Decides a held steal: its tasks leave the held count.
    fn decide(&mut self, key: &(P, u32), state: Held) -> Vec<Entry> {
        let Some(h) = self.by_steal.get_mut(key) else { return Vec::new() };
        if !matches!(h.state, Held::Holding { .. }) {
            return Vec::new();
        }
        h.state = state;
        self.holding -= 1;
        self.holding_tasks -= h.entries.len();
        let entries = std::mem::take(&mut h.entries);
        // Decided steals at the front of the hold queue need no timing any more.
        while let Some(&(_, k, id)) = self.holds.front() {
            if self.is_held(&k, id) {
                break;
            }
            self.holds.pop_front();
        }
        entries
    }

    /// The earliest hold deadline or forget time.
    fn next_deadline(&self) -> Option<Instant> {
        let hold = self.holds.iter().find(|(_, k, id)| self.is_held(k, *id)).map(|e| e.0);
        // A held steal's forget time is after its own hold deadline, so counting it
        // here moves nothing earlier than the old scan over decided steals only.
        let forget = self.forgets.front().map(|e| e.0);
        match (hold, forget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Both roles of one node: the thief it is when starved, and the victim it is for others.
#[derive(Clone, Debug)]
pub struct Stealer<P> {
    cfg: StealConfig,
    /// The hosts a thief draws from: `all` without index `me` (a list shared by every
    /// node of a large simulated cluster instead of one copy per node).
    all: Arc<[P]>,
    me: Option<usize>,
    rng: u64,
    next_seq: u32,
    interval: Duration,
    starved: bool,
    thief: Thief<P>,
    held: HeldSteals<P>,
    stats: StealStats,
}

impl<P: Copy + Ord + Hash + std::fmt::Debug> Stealer<P> {
    /// `peers` are the other hosts; `seed` seeds the neighbour draws.
    pub fn new(cfg: StealConfig, peers: Vec<P>, seed: u64) -> Stealer<P> {
        Stealer::among(cfg, peers.into(), None, seed)
    }

    /// The peers are `all` but the entry at index `me` (this node), if any.
    pub fn among(cfg: StealConfig, all: Arc<[P]>, me: Option<usize>, seed: u64) -> Stealer<P> {
        let rng = seed ^ 0x9E37_79B9_7F4A_7C15 ^ ((cfg.node as u64) << 32) | 1;
        Stealer {
            interval: cfg.initial_interval,
            cfg,
            all,
            me,
            rng,
            next_seq: (seed as u32).wrapping_mul(2_654_435_761),
            starved: false,
            thief: Thief::Idle,
            held: HeldSteals::new(),
            stats: StealStats::default(),
        }
    }

    pub fn stats(&self) -> StealStats {
        self.stats
    }

    /// The current poll interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// True once the poll interval reached its bound (no stealing until work appears).
    pub fn stopped(&self) -> bool {
        matches!(self.thief, Thief::Stopped)
    }

    /// Tasks this node holds for thieves (not yet committed or put back).
    pub fn held_tasks(&self) -> usize {
        self.held.holding_tasks
    }

    /// The node stops: every steal it holds as a victim is aborted and its tasks handed
    /// back to the caller (to RETURN to tier 2). A thief that ACKs one later is told
    /// nothing and keeps its copy after its ACK window: a task may then run twice, but
    /// none is lost with the stopping node.
    pub fn abort_held(&mut self) -> Vec<Entry> {
        let mut out = Vec::new();
        let held: Vec<_> = self.held.holds.iter().map(|&(_, key, id)| (key, id)).collect();
        for (key, id) in held {
            if self.held.is_held(&key, id) {
                self.stats.aborted += 1;
                out.append(&mut self.held.decide(&key, Held::Aborted));
            }
        }
        out
    }

    /// Tasks held tentatively as a thief (granted, not yet committed).
    pub fn incoming_tasks(&self) -> usize {
        match &self.thief {
            Thief::Holding { entries, .. } => entries.len(),
            _ => 0,
        }
    }

    /// The node has nothing: its rings are empty and tier 2 had nothing for it.
    pub fn starved(&mut self, now: Instant, out: &mut Vec<StealAction<P>>) {
        self.starved = true;
        if matches!(self.thief, Thief::Idle) {
            self.start(now, out);
        }
    }

    /// Work reached the node (from tier 2 or a steal): the poll interval resets and a
    /// stopped thief may steal again when next starved.
    pub fn work_appeared(&mut self) {
        self.starved = false;
        self.interval = self.cfg.initial_interval;
        if matches!(self.thief, Thief::Sleeping { .. } | Thief::Stopped) {
            self.thief = Thief::Idle;
        }
    }

    /// When [`Stealer::poll`] must run next even if nothing arrives.
    pub fn next_deadline(&self) -> Option<Instant> {
        let thief = match &self.thief {
            Thief::Idle | Thief::Stopped => None,
            Thief::Sleeping { until } => Some(*until),
            Thief::Probing { deadline, .. } | Thief::Requesting { deadline, .. } => Some(*deadline),
            Thief::Holding { next_ack, give_up, .. } => Some((*next_ack).min(*give_up)),
        };
        let victim = self.held.next_deadline();
        match (thief, victim) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Timeouts of both roles.
    pub fn poll(&mut self, now: Instant, out: &mut Vec<StealAction<P>>) {
        self.poll_victim(now, out);
        match std::mem::replace(&mut self.thief, Thief::Idle) {
            Thief::Sleeping { until } if now < until => self.thief = Thief::Sleeping { until },
            Thief::Sleeping { .. } => {
                if self.starved {
                    self.start(now, out);
                }
            }
            Thief::Probing { seq, asked, answered, loads, deadline } => {
                if now >= deadline {
                    self.choose(now, seq, &loads, out);
                } else {
                    self.thief = Thief::Probing { seq, asked, answered, loads, deadline };
                }
            }
            Thief::Requesting { seq, victim, want, deadline, tries } => {
                if now < deadline {
                    self.thief = Thief::Requesting { seq, victim, want, deadline, tries };
                } else if tries >= self.cfg.request_tries {
                    self.fail(now);
                } else {
                    out.push(self.send(victim, Op::StealReq, StealBody::new(self.cfg.node, seq).with_want(want)));
                    let deadline = now + self.cfg.grant_timeout;
                    self.thief = Thief::Requesting { seq, victim, want, deadline, tries: tries + 1 };
                }
            }
            Thief::Holding { seq, victim, entries, next_ack, give_up } => {
                if now >= give_up {
                    self.stats.unconfirmed += 1;
                    self.succeed(entries, out);
                } else if now >= next_ack {
                    out.push(self.send(victim, Op::StealAck, StealBody::new(self.cfg.node, seq)));
                    let next_ack = now + self.cfg.ack_interval;
                    self.thief = Thief::Holding { seq, victim, entries, next_ack, give_up };
                } else {
                    self.thief = Thief::Holding { seq, victim, entries, next_ack, give_up };
                }
            }
            other => self.thief = other,
        }
    }

    /// A STEAL message from peer `from`. `load` is what this node could give now (its
    /// stealable tasks); `take(n)` pops up to n of them for a GRANT.
    // One received message (peer, op, body, entries), the victim's side of the node
    // (load, take) and the output: grouping them would only rename the same inputs.
    #[allow(clippy::too_many_arguments)]
    pub fn on_message(
        &mut self,
        now: Instant,
        from: P,
        op: Op,
        body: &StealBody,
        entries: &[Entry],
        load: u32,
        take: &mut dyn FnMut(usize) -> Vec<Entry>,
        out: &mut Vec<StealAction<P>>,
    ) {
        match op {
            Op::StealProbe => {
                out.push(self.send(from, Op::StealLoad, StealBody::new(self.cfg.node, body.seq()).with_load(load)))
            }
            Op::StealReq => self.on_request(now, from, body, take, out),
            Op::StealAck => self.on_ack(from, body, out),
            Op::StealLoad => self.on_load(now, from, body, out),
            Op::StealGrant => self.on_grant(now, from, body, entries, out),
            Op::StealDone => self.on_done(now, from, body, out),
            _ => {}
        }
    }

    fn send(&self, to: P, op: Op, body: StealBody) -> StealAction<P> {
        StealAction::Send { to, op, body }
    }

    fn random(&mut self) -> u64 {
        // xorshift64*: enough to spread neighbour draws; not for anything secret.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// ⌊√N + 0.5⌋ distinct peers, a fresh draw (partial Fisher–Yates).
    /// The positions the dense shuffle would swap are kept in a hash map, so a draw
    /// costs O(k), not O(N), at any number of hosts (k = 316 at 100,000 hosts).
    fn draw(&mut self) -> Vec<P> {
        let n = self.all.len() - self.me.is_some_and(|m| m < self.all.len()) as usize;
        let k = neighbours(n + 1);
        let mut swapped: HashMap<usize, usize> = HashMap::with_capacity(2 * k);
        let mut drawn = Vec::with_capacity(k);
        for i in 0..k {
            let j = i + (self.random() % (n - i) as u64) as usize;
            let vi = swapped.get(&i).copied().unwrap_or(i);
            let vj = swapped.get(&j).copied().unwrap_or(j);
            swapped.insert(j, vi);
            swapped.insert(i, vj);
            drawn.push(self.peer(vj));
        }
        drawn
    }

    /// The i-th peer: index i of `all`, skipping this node's own entry.
    fn peer(&self, i: usize) -> P {
        match self.me {
            Some(m) if i >= m => self.all[i + 1],
            _ => self.all[i],
        }
    }

    fn start(&mut self, now: Instant, out: &mut Vec<StealAction<P>>) {
        let mut asked = self.draw();
        if asked.is_empty() {
            self.thief = Thief::Stopped;
            return;
        }
        self.stats.attempts += 1;
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        for &p in &asked {
            out.push(self.send(p, Op::StealProbe, StealBody::new(self.cfg.node, seq)));
        }
        let deadline = now + self.cfg.probe_timeout;
        asked.sort_unstable();
        let answered = vec![false; asked.len()];
        self.thief = Thief::Probing { seq, asked, answered, loads: Vec::new(), deadline };
    }

    fn on_load(&mut self, now: Instant, from: P, body: &StealBody, out: &mut Vec<StealAction<P>>) {
        let Thief::Probing { seq, asked, answered, loads, .. } = &mut self.thief else { return };
        if body.seq() != *seq {
            return;
        }
        let Ok(i) = asked.binary_search(&from) else { return };
        if std::mem::replace(&mut answered[i], true) {
            return;
        }
        loads.push((from, body.load()));
        if loads.len() == asked.len() {
            let (seq, loads) = (*seq, std::mem::take(loads));
            self.choose(now, seq, &loads, out);
        }
    }

    /// Asks the most loaded of the answers for half its load.
    fn choose(&mut self, now: Instant, seq: u32, loads: &[(P, u32)], out: &mut Vec<StealAction<P>>) {
        let best = loads.iter().copied().max_by_key(|&(_, load)| load);
        let want = best.map_or(0, |(_, load)| (load / 2).min(MAX_LIST as u32)) as u8;
        let Some((victim, _)) = best.filter(|_| want > 0) else {
            self.fail(now);
            return;
        };
        out.push(self.send(victim, Op::StealReq, StealBody::new(self.cfg.node, seq).with_want(want)));
        self.thief = Thief::Requesting { seq, victim, want, deadline: now + self.cfg.grant_timeout, tries: 1 };
    }

    fn on_grant(&mut self, now: Instant, from: P, body: &StealBody, entries: &[Entry], out: &mut Vec<StealAction<P>>) {
        match &self.thief {
            Thief::Requesting { seq, victim, .. } if *seq == body.seq() && *victim == from => {
                let seq = *seq;
                if entries.is_empty() {
                    self.fail(now);
                    return;
                }
                out.push(self.send(from, Op::StealAck, StealBody::new(self.cfg.node, seq)));
                self.thief = Thief::Holding {
                    seq,
                    victim: from,
                    entries: entries.to_vec(),
                    next_ack: now + self.cfg.ack_interval,
                    give_up: now + self.cfg.ack_window,
                };
            }
            // A repeated GRANT: our ACK was lost; say it again.
            Thief::Holding { seq, victim, .. } if *seq == body.seq() && *victim == from => {
                out.push(self.send(from, Op::StealAck, StealBody::new(self.cfg.node, *seq)));
            }
            // Any other GRANT is not ACKed: the victim aborts it and keeps its tasks.
            _ => {}
        }
    }

    fn on_done(&mut self, now: Instant, from: P, body: &StealBody, out: &mut Vec<StealAction<P>>) {
        let Thief::Holding { seq, victim, .. } = &self.thief else { return };
        if *seq != body.seq() || *victim != from {
            return;
        }
        let Thief::Holding { entries, .. } = std::mem::replace(&mut self.thief, Thief::Idle) else { unreachable!() };
        if body.verdict == STEAL_COMMIT {
            self.succeed(entries, out);
        } else {
            self.fail(now);
        }
    }

    fn succeed(&mut self, entries: Vec<Entry>, out: &mut Vec<StealAction<P>>) {
        self.stats.successes += 1;
        self.stats.stolen += entries.len() as u64;
        self.interval = self.cfg.initial_interval;
        self.starved = false;
        self.thief = Thief::Idle;
        out.push(StealAction::Keep(entries));
    }

    /// Sleeps the poll interval and doubles it; at the bound, stops.
    fn fail(&mut self, now: Instant) {
        self.stats.failures += 1;
        if self.interval >= self.cfg.max_interval {
            self.stats.stops += 1;
            self.thief = Thief::Stopped;
            return;
        }
        self.thief = Thief::Sleeping { until: now + self.interval };
        self.interval = (self.interval * 2).min(self.cfg.max_interval);
    }

    fn on_request(
        &mut self,
        now: Instant,
        from: P,
        body: &StealBody,
        take: &mut dyn FnMut(usize) -> Vec<Entry>,
        out: &mut Vec<StealAction<P>>,
    ) {
        let reply = StealBody::new(self.cfg.node, body.seq());
        if let Some(h) = self.held.by_steal.get(&(from, body.seq())) {
            // A repeated request: the same GRANT while held; a decided steal is not reopened.
            if matches!(h.state, Held::Holding { .. }) {
                out.push(StealAction::Grant { to: from, body: reply, entries: h.entries.clone() });
            }
            return;
        }
        let entries = if self.held.holding >= self.cfg.max_held { Vec::new() } else { take(body.want as usize) };
        if !entries.is_empty() {
            let (deadline, forget_at) = (now + self.cfg.hold, now + self.cfg.hold + self.cfg.remember);
            self.held.insert((from, body.seq()), entries.clone(), deadline, forget_at);
        }
        out.push(StealAction::Grant { to: from, body: reply, entries });
    }

    fn on_ack(&mut self, from: P, body: &StealBody, out: &mut Vec<StealAction<P>>) {
        let reply = StealBody::new(self.cfg.node, body.seq());
        let key = (from, body.seq());
        let verdict = match self.held.by_steal.get(&key).map(|h| h.state.clone()) {
            Some(Held::Holding { .. }) => {
                self.stats.given += self.held.decide(&key, Held::Committed).len() as u64;
                STEAL_COMMIT
            }
            Some(Held::Committed) => STEAL_COMMIT,
            Some(Held::Aborted) => STEAL_ABORT,
            // Never granted, or forgotten long after it was decided: nothing to commit.
            None => STEAL_ABORT,
        };
        out.push(self.send(from, Op::StealDone, reply.with_verdict(verdict)));
    }

    fn poll_victim(&mut self, now: Instant, out: &mut Vec<StealAction<P>>) {
        while let Some(&(deadline, key, id)) = self.held.holds.front() {
            if now < deadline {
                break;
            }
            self.held.holds.pop_front();
            if self.held.is_held(&key, id) {
                self.stats.aborted += 1;
                out.push(StealAction::PutBack(self.held.decide(&key, Held::Aborted)));
            }
        }
        while let Some(&(forget_at, key, id)) = self.held.forgets.front() {
            if now < forget_at {
                break;
            }
            self.held.forgets.pop_front();
            if self.held.by_steal.get(&key).is_some_and(|h| h.id == id && !matches!(h.state, Held::Holding { .. })) {
                self.held.by_steal.remove(&key);
            }
        }
    }
}

/// How many of `stolen` tasks, taken in while the thief's rings hold `queued` tasks, go
/// on to tier 2 (RETURN) rather than into the rings; the rest go into the rings.
///
/// A thief steals when its rings are empty and tier 2 has nothing for it, so its idle
/// executors are parked at tier 2 (GET_TASK with WAIT): tasks pushed into its rings would
/// wait there until those requests expire (the park time, 10 ms), while tier 2 hands a
/// RETURNed task to its first parked executor at once (executors before prefetch). Tier 2
/// takes back at most the RETURN credit the thief holds (`credit`: tasks REFILLed to it
/// less tasks it RETURNed), and refuses the rest to their clients; so beyond the credit,
/// and whenever the rings hold tasks (the executors are being served from them), the
/// stolen tasks go into the rings.
pub fn stolen_to_tier2(stolen: usize, queued: i64, credit: u64) -> usize {
    if queued > 0 {
        return 0;
    }
    stolen.min(usize::try_from(credit).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::Task;

    fn entry(tid: u32) -> Entry {
        let mut t = Task { prio: 1, ..Task::default() };
        t.set_tid(tid);
        Entry::new(1, 1, t, [127, 0, 0, 1], 9)
    }

    #[test]
    fn stolen_tasks_reach_parked_executors_through_tier_2_within_the_credit() {
        assert_eq!(stolen_to_tier2(8, 0, 100), 8, "empty rings: executors wait at tier 2");
        assert_eq!(stolen_to_tier2(8, 0, 3), 3, "tier 2 takes back no more than the credit");
        assert_eq!(stolen_to_tier2(8, 0, 0), 0, "a node never refilled returns nothing");
        assert_eq!(stolen_to_tier2(8, 2, 100), 0, "rings in use: into them");
    }

    fn stealer(node: u16, peers: Vec<u16>) -> Stealer<u16> {
        Stealer::new(StealConfig::new(node), peers, 42)
    }

    fn sends(out: &[StealAction<u16>]) -> Vec<(u16, Op)> {
        out.iter()
            .filter_map(|a| match a {
                StealAction::Send { to, op, .. } => Some((*to, *op)),
                StealAction::Grant { to, .. } => Some((*to, Op::StealGrant)),
                _ => None,
            })
            .collect()
    }

    fn body_of(out: &[StealAction<u16>], want: Op) -> StealBody {
        out.iter()
            .find_map(|a| match a {
                StealAction::Send { op, body, .. } if *op == want => Some(*body),
                StealAction::Grant { body, .. } if want == Op::StealGrant => Some(*body),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {want:?} in {out:?}"))
    }

    #[test]
    fn neighbour_count_is_the_rounded_square_root() {
        assert_eq!([1, 2, 3, 4, 6, 7, 16, 100].map(neighbours), [0, 1, 2, 2, 2, 3, 4, 10]);
    }

    #[test]
    fn every_attempt_draws_distinct_neighbours_afresh() {
        let peers: Vec<u16> = (1..16).collect();
        let mut s = stealer(0, peers);
        let mut seen = std::collections::HashSet::new();
        let mut now = Instant::now();
        for _ in 0..20 {
            let mut out = Vec::new();
            s.starved(now, &mut out);
            s.poll(now, &mut out);
            let probed: Vec<u16> =
                sends(&out).into_iter().filter(|(_, op)| *op == Op::StealProbe).map(|(p, _)| p).collect();
            assert_eq!(probed.len(), 4, "⌊√16 + 0.5⌋");
            let distinct: std::collections::HashSet<_> = probed.iter().collect();
            assert_eq!(distinct.len(), 4);
            assert!(!probed.contains(&0), "never itself");
            seen.insert(probed);
            // Nobody answers: the attempt fails at the probe timeout; reset for the next.
            now += s.cfg.probe_timeout;
            s.poll(now, &mut Vec::new());
            s.work_appeared();
        }
        assert!(seen.len() > 10, "draws repeat too often: {}", seen.len());
    }

    /// One steal between a thief (node 0) and a victim (node 1) holding 10 tasks, with a
    /// third host (node 2) holding 3, every message delivered.
    #[test]
    fn a_steal_takes_half_of_the_most_loaded_neighbours_tasks() {
        let now = Instant::now();
        let mut thief = stealer(0, vec![1, 2]);
        let mut victim = stealer(1, vec![0, 2]);
        let mut quiet = stealer(2, vec![0, 1]);
        let mut victim_ring: Vec<Entry> = (0..10).map(entry).collect();
        let mut out = Vec::new();
        thief.starved(now, &mut out);
        // √3 + 0.5 = 2.2: both peers are probed.
        let probes = sends(&out);
        assert_eq!(probes.len(), 2);
        let probe = body_of(&out, Op::StealProbe);
        let mut answers = Vec::new();
        victim.on_message(now, 0, Op::StealProbe, &probe, &[], 10, &mut |_| unreachable!(), &mut answers);
        quiet.on_message(now, 0, Op::StealProbe, &probe, &[], 3, &mut |_| unreachable!(), &mut answers);
        assert_eq!(body_of(&answers[..1], Op::StealLoad).load(), 10);
        let mut out = Vec::new();
        thief.on_message(
            now,
            2,
            Op::StealLoad,
            &body_of(&answers[1..], Op::StealLoad),
            &[],
            0,
            &mut |_| vec![],
            &mut out,
        );
        assert!(out.is_empty(), "waits for every answer");
        thief.on_message(
            now,
            1,
            Op::StealLoad,
            &body_of(&answers[..1], Op::StealLoad),
            &[],
            0,
            &mut |_| vec![],
            &mut out,
        );
        assert_eq!(sends(&out), [(1, Op::StealReq)]);
        let req = body_of(&out, Op::StealReq);
        assert_eq!(req.want, 5, "half of 10");
        let mut out = Vec::new();
        let mut take = |n: usize| victim_ring.drain(..n.min(victim_ring.len())).collect::<Vec<_>>();
        victim.on_message(now, 0, Op::StealReq, &req, &[], 10, &mut take, &mut out);
        let StealAction::Grant { entries: granted, body: grant, .. } = out[0].clone() else { panic!("{out:?}") };
        assert_eq!(granted.len(), 5);
        assert_eq!(victim.held_tasks(), 5);
        let mut out = Vec::new();
        thief.on_message(now, 1, Op::StealGrant, &grant, &granted, 0, &mut |_| vec![], &mut out);
        assert_eq!(sends(&out), [(1, Op::StealAck)]);
        assert_eq!(thief.incoming_tasks(), 5);
        let mut out = Vec::new();
        victim.on_message(now, 0, Op::StealAck, &StealBody::new(0, req.seq()), &[], 5, &mut |_| vec![], &mut out);
        let done = body_of(&out, Op::StealDone);
        assert_eq!(done.verdict, STEAL_COMMIT);
        assert_eq!(victim.held_tasks(), 0);
        let mut out = Vec::new();
        thief.on_message(now, 1, Op::StealDone, &done, &[], 0, &mut |_| vec![], &mut out);
        assert_eq!(out, [StealAction::Keep(granted)]);
        assert_eq!(thief.stats().successes, 1);
        assert_eq!(victim.stats().given, 5);
        assert_eq!(victim_ring.len(), 5);
    }

    #[test]
    fn failures_double_the_interval_up_to_the_bound_then_stop_until_work_appears() {
        let mut cfg = StealConfig::new(0);
        cfg.max_interval = Duration::from_millis(8);
        let mut s = Stealer::new(cfg, vec![1u16], 1);
        let mut now = Instant::now();
        let mut sleeps = Vec::new();
        for _ in 0..10 {
            let mut out = Vec::new();
            s.starved(now, &mut out);
            s.poll(now, &mut out);
            if s.stopped() {
                break;
            }
            let probe = body_of(&out, Op::StealProbe);
            // The only peer has one task: half of it is nothing, a failure.
            s.on_message(now, 1, Op::StealLoad, &probe.with_load(1), &[], 0, &mut |_| vec![], &mut out);
            let Some(until) = s.next_deadline() else { break };
            sleeps.push(until - now);
            now = until;
        }
        // The interval reaching its bound (8 ms) stops stealing instead of sleeping it.
        assert_eq!(sleeps, [1, 2, 4].map(Duration::from_millis));
        assert!(s.stopped());
        let mut out = Vec::new();
        s.starved(now, &mut out);
        s.poll(now + Duration::from_secs(10), &mut out);
        assert!(out.is_empty(), "a stopped thief does not steal");
        s.work_appeared();
        assert_eq!(s.interval(), Duration::from_millis(1));
        s.starved(now, &mut out);
        assert_eq!(sends(&out), [(1, Op::StealProbe)]);
    }

    #[test]
    fn a_victim_without_an_ack_puts_the_tasks_back_and_answers_a_late_ack_with_abort() {
        let now = Instant::now();
        let mut v = stealer(1, vec![0]);
        let mut ring: Vec<Entry> = (0..4).map(entry).collect();
        let req = StealBody::new(0, 7).with_want(2);
        let mut out = Vec::new();
        let mut take = |n: usize| ring.drain(..n).collect::<Vec<_>>();
        v.on_message(now, 0, Op::StealReq, &req, &[], 4, &mut take, &mut out);
        // The GRANT is lost; the thief repeats its request and gets the same GRANT.
        let mut again = Vec::new();
        v.on_message(now, 0, Op::StealReq, &req, &[], 2, &mut |_| panic!("no second pop"), &mut again);
        assert_eq!(out, again);
        let hold = v.cfg.hold;
        let mut out = Vec::new();
        v.poll(now + hold - Duration::from_micros(1), &mut out);
        assert!(out.is_empty());
        v.poll(now + hold, &mut out);
        assert_eq!(out, [StealAction::PutBack(vec![entry(0), entry(1)])]);
        let mut out = Vec::new();
        v.on_message(now + hold, 0, Op::StealAck, &StealBody::new(0, 7), &[], 4, &mut |_| vec![], &mut out);
        assert_eq!(body_of(&out, Op::StealDone).verdict, STEAL_ABORT);
        assert_eq!(v.stats().aborted, 1);
        assert_eq!(v.stats().given, 0);
    }

    #[test]
    fn a_repeated_ack_gets_the_remembered_commit_and_the_thief_discards_on_abort() {
        let now = Instant::now();
        let mut v = stealer(1, vec![0]);
        let mut out = Vec::new();
        v.on_message(
            now,
            0,
            Op::StealReq,
            &StealBody::new(0, 3).with_want(1),
            &[],
            1,
            &mut |_| vec![entry(9)],
            &mut out,
        );
        for _ in 0..3 {
            let mut out = Vec::new();
            v.on_message(now, 0, Op::StealAck, &StealBody::new(0, 3), &[], 0, &mut |_| vec![], &mut out);
            assert_eq!(body_of(&out, Op::StealDone).verdict, STEAL_COMMIT);
        }
        assert_eq!(v.stats().given, 1, "committed once");

        // A thief told ABORT keeps nothing and sleeps.
        let mut t = stealer(0, vec![1]);
        let mut out = Vec::new();
        t.starved(now, &mut out);
        let seq = body_of(&out, Op::StealProbe).seq();
        t.on_message(now, 1, Op::StealLoad, &StealBody::new(1, seq).with_load(8), &[], 0, &mut |_| vec![], &mut out);
        t.on_message(now, 1, Op::StealGrant, &StealBody::new(1, seq), &[entry(1)], 0, &mut |_| vec![], &mut out);
        let mut out = Vec::new();
        t.on_message(
            now,
            1,
            Op::StealDone,
            &StealBody::new(1, seq).with_verdict(STEAL_ABORT),
            &[],
            0,
            &mut |_| vec![],
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(t.incoming_tasks(), 0);
        assert_eq!(t.stats().failures, 1);
    }

    #[test]
    fn the_thief_repeats_ack_until_done_and_keeps_unconfirmed_tasks_only_after_the_window() {
        let now = Instant::now();
        let mut t = stealer(0, vec![1]);
        let mut out = Vec::new();
        t.starved(now, &mut out);
        let seq = body_of(&out, Op::StealProbe).seq();
        t.on_message(now, 1, Op::StealLoad, &StealBody::new(1, seq).with_load(2), &[], 0, &mut |_| vec![], &mut out);
        t.on_message(now, 1, Op::StealGrant, &StealBody::new(1, seq), &[entry(5)], 0, &mut |_| vec![], &mut out);
        let cfg = t.cfg.clone();
        assert!(cfg.ack_window > cfg.hold, "the thief outlasts the victim's hold");
        let mut acks = 0;
        let mut at = now;
        let mut kept = Vec::new();
        while at <= now + cfg.ack_window {
            let mut out = Vec::new();
            t.poll(at, &mut out);
            acks += sends(&out).iter().filter(|(_, op)| *op == Op::StealAck).count();
            kept.extend(out.into_iter().filter(|a| matches!(a, StealAction::Keep(_))));
            at += cfg.ack_interval;
        }
        assert!(acks as u32 >= (cfg.ack_window.as_millis() / cfg.ack_interval.as_millis()) as u32 - 1, "{acks}");
        assert_eq!(kept, [StealAction::Keep(vec![entry(5)])]);
        assert_eq!(t.stats().unconfirmed, 1);
    }

    #[test]
    fn a_stopping_victim_hands_back_what_it_holds() {
        let now = Instant::now();
        let mut v = stealer(1, vec![0]);
        let mut out = Vec::new();
        v.on_message(
            now,
            0,
            Op::StealReq,
            &StealBody::new(0, 4).with_want(2),
            &[],
            2,
            &mut |_| vec![entry(1), entry(2)],
            &mut out,
        );
        assert_eq!(v.abort_held(), vec![entry(1), entry(2)]);
        assert_eq!(v.held_tasks(), 0);
        let mut out = Vec::new();
        v.on_message(now, 0, Op::StealAck, &StealBody::new(0, 4), &[], 0, &mut |_| vec![], &mut out);
        assert_eq!(body_of(&out, Op::StealDone).verdict, STEAL_ABORT);
    }

    #[test]
    fn grants_for_other_steals_are_not_acked() {
        let now = Instant::now();
        let mut t = stealer(0, vec![1]);
        let mut out = Vec::new();
        t.on_message(now, 1, Op::StealGrant, &StealBody::new(1, 99), &[entry(1)], 0, &mut |_| vec![], &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_victim_holding_its_limit_grants_nothing_more() {
        let now = Instant::now();
        let mut cfg = StealConfig::new(1);
        cfg.max_held = 1;
        let mut v = Stealer::new(cfg, vec![0u16, 2], 3);
        let mut out = Vec::new();
        v.on_message(
            now,
            0,
            Op::StealReq,
            &StealBody::new(0, 1).with_want(1),
            &[],
            9,
            &mut |_| vec![entry(1)],
            &mut out,
        );
        let mut out = Vec::new();
        v.on_message(
            now,
            2,
            Op::StealReq,
            &StealBody::new(2, 1).with_want(1),
            &[],
            9,
            &mut |_| panic!("no pop"),
            &mut out,
        );
        assert!(matches!(&out[..], [StealAction::Grant { entries, .. }] if entries.is_empty()));
    }

    /// A victim of a thousand thieves: each steal is found by its thief and seq, the
    /// un-ACKed ones go back in grant order at their hold deadline, and outcomes are
    /// forgotten after `remember`, all without a scan of what it remembers.
    #[test]
    fn a_victim_of_many_thieves_times_out_and_forgets_its_steals_in_grant_order() {
        let t0 = Instant::now();
        let thieves: Vec<u16> = (1..=1000).collect();
        let mut v = Stealer::new(StealConfig { max_held: 2000, ..StealConfig::new(0) }, thieves.clone(), 5);
        let cfg = v.cfg.clone();
        for &t in &thieves {
            let at = t0 + Duration::from_micros(t as u64);
            let req = StealBody::new(t, 7).with_want(1);
            v.on_message(at, t, Op::StealReq, &req, &[], 1, &mut |_| vec![entry(t as u32)], &mut Vec::new());
        }
        assert_eq!(v.held_tasks(), 1000);
        assert_eq!(v.next_deadline(), Some(t0 + Duration::from_micros(1) + cfg.hold));
        // The even thieves ACK: committed.
        for t in thieves.iter().filter(|t| *t % 2 == 0) {
            let mut out = Vec::new();
            v.on_message(
                t0 + Duration::from_millis(1),
                *t,
                Op::StealAck,
                &StealBody::new(*t, 7),
                &[],
                0,
                &mut |_| vec![],
                &mut out,
            );
            assert_eq!(body_of(&out, Op::StealDone).verdict, STEAL_COMMIT);
        }
        assert_eq!((v.held_tasks(), v.stats().given), (500, 500));
        let mut out = Vec::new();
        v.poll(t0 + Duration::from_millis(2) + cfg.hold, &mut out);
        let back: Vec<Entry> = out
            .into_iter()
            .flat_map(|a| match a {
                StealAction::PutBack(e) => e,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(back, thieves.iter().filter(|t| *t % 2 == 1).map(|t| entry(*t as u32)).collect::<Vec<_>>());
        assert_eq!(v.held_tasks(), 0);
        // Remembered until `remember` after the hold: a repeat is answered from it, then not.
        let ack = |v: &mut Stealer<u16>, t: u16, at: Instant| {
            let mut out = Vec::new();
            v.on_message(at, t, Op::StealAck, &StealBody::new(t, 7), &[], 0, &mut |_| vec![], &mut out);
            body_of(&out, Op::StealDone).verdict
        };
        assert_eq!(ack(&mut v, 2, t0 + cfg.hold + Duration::from_millis(3)), STEAL_COMMIT);
        assert_eq!(v.next_deadline(), Some(t0 + Duration::from_micros(1) + cfg.hold + cfg.remember));
        v.poll(t0 + Duration::from_millis(2) + cfg.hold + cfg.remember, &mut Vec::new());
        assert_eq!(v.next_deadline(), None, "every outcome forgotten");
        assert_eq!(ack(&mut v, 2, t0 + cfg.hold + cfg.remember + Duration::from_millis(3)), STEAL_ABORT);
    }
}
