//! The agent's side of its policies that move tasks between hosts and tiers: it feeds the
//! steal state machine ([`super::policy::steal`]) with the STEAL messages its socket
//! receives and carries out its actions on the rings and the socket, and it enforces the
//! lease ([`super::policy::lease`]) by looking at the rings' heads.

use std::net::SocketAddrV4;
use std::time::Instant;

use scheduler_common::{
    encode_steal, encode_steal_grant, encode_steal_req, EncodeError, Entry, Message, Op, StealBody, MAX_MESSAGE_LEN,
};

use super::policy::steal::{stolen_to_tier2, StealAction};
use super::rings::monotonic_ms;
use super::Agent;

/// Most expired heads one lease scan returns per ring (the rest wait for the next scan).
const MAX_EXPIRED_PER_SCAN: usize = 256;

impl Agent {
    /// Stealable tasks: everything queued in the rings (prefetched from tier 2).
    fn stealable(&self) -> u32 {
        self.tier1.rings.total().clamp(0, u32::MAX as i64) as u32
    }

    /// A STEAL message at the agent's socket. Only configured peers are answered.
    pub(super) fn on_steal_message(&mut self, now: Instant, from: SocketAddrV4, msg: &Message<'_>) {
        let Some(peer) = self.cfg.peers.iter().copied().find(|p| p.ip() == from.ip()) else {
            self.stats.steal_foreign += 1;
            tracing::debug!(%from, op = msg.op().name(), "STEAL message from a host that is not a peer dropped");
            return;
        };
        let (body, entries, thief_rsrc): (StealBody, &[Entry], u8) = match *msg {
            Message::StealProbe(b) | Message::StealLoad(b) | Message::StealAck(b) | Message::StealDone(b) => {
                (b, &[], 0)
            }
            Message::StealReq { steal, thief_rsrc } => (steal, &[], thief_rsrc),
            Message::StealGrant { steal, entries } => (steal, entries, 0),
            _ => return,
        };
        let load = self.stealable();
        let mut out = std::mem::take(&mut self.steal_actions);
        let rings = &mut self.tier1.rings;
        let mut errors = 0u64;
        // The victim gives its oldest, most urgent tasks that the thief's node can run:
        // the thief is idle and runs them at once, while they would wait here behind the
        // running ones.
        let mut refused = Vec::new();
        let mut take = |n: usize| rings.take_heads_for(thief_rsrc, n, &mut refused, &mut errors);
        self.stealer.on_message(now, peer, msg.op(), &body, entries, load, &mut take, &mut out);
        self.stats.ring_errors += errors;
        for entry in refused {
            self.returner.add(&self.sock, entry);
        }
        self.apply_steal_actions(&mut out);
        self.steal_actions = out;
    }

    /// The steal machine's timeouts.
    pub(super) fn step_steal(&mut self, now: Instant) {
        if self.stealer.next_deadline().is_none_or(|d| now < d) {
            return;
        }
        let mut out = std::mem::take(&mut self.steal_actions);
        self.stealer.poll(now, &mut out);
        self.apply_steal_actions(&mut out);
        self.steal_actions = out;
    }

    /// What tier 2 would take back from this node in RETURNs: the tasks its REFILLs brought
    /// less those it RETURNed (tier 2 keeps the same count per agent address; see
    /// `switch::credit`). An estimate: it leaves out a credit slot another agent took over.
    pub(super) fn return_credit(&self) -> u64 {
        let refilled = self.progress().map_or(0, |p| p.tasks);
        refilled.saturating_sub(self.returner.tasks)
    }

    /// The node found nothing at tier 2 with its rings empty: steal (when it has peers).
    pub(super) fn starved(&mut self, now: Instant) {
        if self.cfg.peers.is_empty() || self.tier1.rings.total() > 0 {
            return;
        }
        let mut out = std::mem::take(&mut self.steal_actions);
        self.stealer.starved(now, &mut out);
        self.apply_steal_actions(&mut out);
        self.steal_actions = out;
    }

    /// A STEAL message of this node; a request names the node's resources, so that the
    /// victim gives only tasks they cover.
    fn encode_steal_message(&self, buf: &mut [u8], op: Op, body: &StealBody) -> Result<usize, EncodeError> {
        if op == Op::StealReq {
            encode_steal_req(buf, body, self.cfg.resources)
        } else {
            encode_steal(buf, op, body)
        }
    }

    fn apply_steal_actions(&mut self, actions: &mut Vec<StealAction<SocketAddrV4>>) {
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        for action in actions.drain(..) {
            match action {
                StealAction::Send { to, op, body } => match self.encode_steal_message(&mut buf, op, &body) {
                    Ok(n) => self.send_steal(to, op, &buf[..n]),
                    Err(e) => tracing::error!(error = %e, op = op.name(), "encoding a STEAL message failed"),
                },
                StealAction::Grant { to, body, entries } => {
                    // The held copies keep their stamps (an abort puts them back as they were).
                    let wire: Vec<Entry> = entries.iter().map(Entry::unstamped).collect();
                    match encode_steal_grant(&mut buf, &body, &wire) {
                        Ok(n) => self.send_steal(to, Op::StealGrant, &buf[..n]),
                        Err(e) => tracing::error!(error = %e, "encoding STEAL_GRANT failed"),
                    }
                }
                StealAction::Keep(entries) => {
                    let to_tier2 = stolen_to_tier2(entries.len(), self.tier1.rings.total(), self.return_credit());
                    tracing::debug!(tasks = entries.len(), to_tier2, "stolen tasks taken in");
                    for (i, e) in entries.iter().enumerate() {
                        if i < to_tier2 {
                            self.stats.steal_to_tier2 += 1;
                            self.returner.add(&self.sock, e.unstamped());
                        } else {
                            self.push_or_return(e, false);
                        }
                    }
                }
                StealAction::PutBack(entries) => {
                    tracing::debug!(tasks = entries.len(), "steal aborted: tasks back in the rings");
                    for e in entries {
                        self.push_or_return(&e, true);
                    }
                }
            }
        }
        let s = self.stealer.stats();
        self.stats.steal_attempts = s.attempts;
        self.stats.steal_successes = s.successes;
        self.stats.steal_failures = s.failures;
        self.stats.stolen_tasks = s.stolen;
        self.stats.steal_unconfirmed = s.unconfirmed;
        self.stats.steal_stops = s.stops;
        self.stats.steal_given = s.given;
        self.stats.steal_aborted = s.aborted;
    }

    /// Into its ring (stamped now, or with its stamp kept for a put-back); to tier 2 when
    /// the ring is full or the map fails: a task is never dropped.
    fn push_or_return(&mut self, entry: &Entry, keep_stamp: bool) {
        let pushed = if keep_stamp { self.tier1.rings.put_back(entry) } else { self.tier1.rings.push(entry) };
        match pushed {
            Ok(Ok(())) => {}
            Ok(Err(back)) => self.returner.add(&self.sock, back),
            Err(e) => {
                self.stats.ring_errors += 1;
                tracing::warn!(error = format!("{e:#}"), "pushing a task failed; returned to tier 2");
                self.returner.add(&self.sock, *entry);
            }
        }
    }

    fn send_steal(&mut self, to: SocketAddrV4, op: Op, bytes: &[u8]) {
        if let Err(e) = self.sock.send_to(bytes, to) {
            self.stats.steal_send_errors += 1;
            tracing::debug!(%to, op = op.name(), error = %e, "sending a STEAL message failed");
        }
    }

    /// RETURNs every ring head whose lease has expired (tasks no executor here took in
    /// time, or none can run). The XDP program does the same on its pops; this covers
    /// rings no executor pops.
    pub(super) fn scan_leases(&mut self, now: Instant) {
        if !self.lease.scan_due(now) {
            return;
        }
        let now_ms = monotonic_ms();
        for prio in 1..=self.tier1.rings.levels() {
            for _ in 0..MAX_EXPIRED_PER_SCAN {
                match self.tier1.rings.peek_stamp(prio) {
                    Ok(Some(stamp)) if self.lease.expired(stamp, now_ms) => {}
                    Ok(_) => break,
                    Err(e) => {
                        self.stats.ring_errors += 1;
                        tracing::warn!(error = format!("{e:#}"), prio, "peeking a ring failed");
                        break;
                    }
                }
                match self.tier1.rings.pop(prio) {
                    Ok(Some(e)) if self.lease.expired(e.pad, now_ms) => {
                        self.stats.lease_returned += 1;
                        self.returner.add(&self.sock, e);
                    }
                    // An executor took the expired head between the peek and the pop; this
                    // one is younger: it goes back (to the tail; rare).
                    Ok(Some(e)) => {
                        self.push_or_return(&e, true);
                        break;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.stats.ring_errors += 1;
                        tracing::warn!(error = format!("{e:#}"), prio, "popping an expired task failed");
                        break;
                    }
                }
            }
        }
    }
}
