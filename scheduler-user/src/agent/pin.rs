//! The PIN receive path and the FLDS monitor of the dedicated ring.
//!
//! A PIN's tasks go into this host's dedicated ring (MATRIX's LReadyQ), which the XDP
//! program serves before the shared rings; a task the ring cannot take, or this host's
//! resources cannot run, goes back to the PIN's sender as QUEUE_FULL (one per task, as
//! tier 2 answers SUBMIT). Pinned tasks have no lease and are never stolen: they wait for
//! this host. Only the FLDS monitor moves them, and only those PINned with MOVABLE: when
//! the dedicated ring would take longer than `tt` at this host's rate, the excess (the
//! newest, MATRIX's "bottom of LReadyQ") moves into the shared rings (SReadyQ), where this
//! host still runs them after its pinned ones and idle hosts may steal them.
//!
//! **How a moved task reaches tier 2.** Only through the shared rings' own exits: a thief's
//! steal, or a RETURN when its lease runs out or the agent drains. Tier 2 queues RETURNed
//! entries within the host's RETURN credit, which counts only what tier 2 REFILLed to it
//! (switch/credit.rs); a moved task beyond that credit is bounced to its client as
//! QUEUE_FULL, and the client places it again. So a move never queues work at tier 2 that
//! tier 2 did not hand out, and nothing is lost either way.
//!
//! When the agent drains (it stops and takes its rings down), pinned tasks go back to
//! their clients as QUEUE_FULL rather than to tier 2: they were never tier 2's.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use scheduler_common::{
    encode_queue_full,
    maps::{Counter, DEDICATED_MOVABLE},
    Entry, JobRef, Task, FLAG_MOVABLE, MAX_MESSAGE_LEN,
};

use super::Agent;
use crate::placement::FldsMonitor;

/// How often the FLDS monitor looks at the dedicated ring (MATRIX's monitor sleeps 100 ms).
pub const FLDS_CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// `tt` an agent starts with unless configured: MATRIX's 10 s.
pub const DEFAULT_FLDS_TT: Duration = Duration::from_secs(10);

/// The dedicated ring's bookkeeping in the agent.
pub struct Dedicated {
    monitor: FldsMonitor,
    started: Instant,
    next_check: Instant,
    /// Tasks stored by PIN, moved out by the monitor, and served by the agent itself
    /// (userspace fallback), since this agent started.
    pushed: u64,
    moved: u64,
    /// The program's counters when this agent started (dedicated hits, all hits).
    base: Option<(u64, u64)>,
    steal_failures_seen: u64,
}

impl Dedicated {
    pub fn new(tt: Duration, now: Instant) -> Dedicated {
        // tt moves between a hundredth and 64 times its start.
        Dedicated {
            monitor: FldsMonitor::new(tt, tt / 100, tt.saturating_mul(64)),
            started: now,
            next_check: now + FLDS_CHECK_INTERVAL,
            pushed: 0,
            moved: 0,
            base: None,
            steal_failures_seen: 0,
        }
    }

    pub fn next_deadline(&self) -> Instant {
        self.next_check
    }

    pub fn tt(&self) -> Duration {
        self.monitor.tt()
    }
}

/// The QUEUE_FULL of one refused task, to `to`.
fn queue_full(sock: &std::net::UdpSocket, to: SocketAddrV4, job: JobRef, task: &Task) -> bool {
    let mut out = [0u8; MAX_MESSAGE_LEN];
    let sent = encode_queue_full(&mut out, job, std::slice::from_ref(task))
        .map_err(|e| e.to_string())
        .and_then(|n| sock.send_to(&out[..n], to).map_err(|e| e.to_string()));
    match sent {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(client = %to, error = %e, "sending QUEUE_FULL failed");
            false
        }
    }
}

impl Agent {
    /// A PIN from `from`: each task into the dedicated ring, or back as QUEUE_FULL.
    pub(super) fn on_pin(&mut self, from: SocketAddrV4, job: JobRef, flags: u8, tasks: &[Task]) {
        let mark = if flags & FLAG_MOVABLE != 0 { DEDICATED_MOVABLE } else { [0; 2] };
        for task in tasks {
            let stored = task.runs_on(self.cfg.resources) && {
                let mut entry = Entry::new(job.uid(), job.jid(), *task, from.ip().octets(), from.port());
                entry.pad = mark;
                match self.tier1.rings.push_dedicated(&entry) {
                    Ok(Ok(())) => true,
                    Ok(Err(_)) => false,
                    Err(e) => {
                        self.stats.ring_errors += 1;
                        tracing::warn!(error = format!("{e:#}"), "storing a pinned task failed; refused");
                        false
                    }
                }
            };
            if stored {
                self.stats.pinned += 1;
                self.dedicated.pushed += 1;
            } else {
                self.stats.pin_refused += 1;
                queue_full(&self.sock, from, job, task);
            }
        }
    }

    /// (dedicated hits, all hits) of the XDP program; zeros without one.
    fn program_hits(&self) -> (u64, u64) {
        match self.tier1.rings.kernel_counters() {
            Ok(c) => {
                let dedicated = c.values[Counter::DedicatedHit as usize];
                let shared: u64 = (1..=scheduler_common::maps::RING_COUNT as u8).map(|p| c.hits(p)).sum();
                (dedicated, dedicated + shared)
            }
            Err(_) => (0, 0),
        }
    }

    /// One turn of the FLDS monitor, when due: `est_run_time` of the dedicated ring from
    /// this host's rate since the agent started; the excess movable tasks to the shared
    /// rings. A failed steal since the last turn doubles `tt`.
    pub(super) fn step_flds(&mut self, now: Instant) {
        if now < self.dedicated.next_check {
            return;
        }
        self.dedicated.next_check = now + FLDS_CHECK_INTERVAL;
        let failures = self.stats.steal_failures;
        if failures > self.dedicated.steal_failures_seen {
            self.dedicated.monitor.stealing_failed();
        }
        self.dedicated.steal_failures_seen = failures;
        let (dedicated_hits, all_hits) = self.program_hits();
        let (hits0, all0) = *self.dedicated.base.get_or_insert((dedicated_hits, all_hits));
        // A program reloaded under this agent starts its counters again: never negative.
        let served_from_dedicated = dedicated_hits.saturating_sub(hits0);
        let finished = all_hits.saturating_sub(all0) + self.stats.served;
        let queued = match self.tier1.rings.dedicated_len() {
            Some(exact) => exact as u64,
            None => self.dedicated.pushed.saturating_sub(served_from_dedicated + self.dedicated.moved),
        };
        let Some(mv) = self.dedicated.monitor.check(queued as usize, finished, now - self.dedicated.started) else {
            return;
        };
        let moved = self.move_to_shared(mv.count);
        self.dedicated.moved += moved;
        self.stats.flds_moved += moved;
        tracing::debug!(
            want = mv.count,
            moved,
            est_run_time_ms = mv.est_run_time.as_millis() as u64,
            tt_ms = self.dedicated.tt().as_millis() as u64,
            "FLDS monitor moved pinned tasks to the shared rings"
        );
    }

    /// Moves up to `count` movable tasks, the newest first, from the dedicated ring into
    /// the shared rings; the rest go back in their order. Returns how many moved. A task
    /// that fits neither ring is RETURNed (see the module's note on credit).
    fn move_to_shared(&mut self, count: usize) -> u64 {
        let mut held = Vec::new();
        let bound = crate::agent::rings::DEDICATED_POP_BOUND;
        for _ in 0..bound {
            match self.tier1.rings.pop_dedicated() {
                Ok(Some(e)) => held.push(e),
                Ok(None) => break,
                Err(e) => {
                    self.stats.ring_errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "popping the dedicated ring failed");
                    break;
                }
            }
        }
        let mut to_move = count;
        let mut moving = vec![false; held.len()];
        for (i, e) in held.iter().enumerate().rev() {
            if to_move == 0 {
                break;
            }
            if e.pad == DEDICATED_MOVABLE {
                moving[i] = true;
                to_move -= 1;
            }
        }
        let mut unplaced = Vec::new();
        let mut moved = 0;
        for (e, go) in held.iter().zip(moving) {
            if go {
                // A shared entry carries a lease stamp where the mark was: push stamps it.
                self.tier1.rings.push_or_hand_back(&e.unstamped(), &mut unplaced, &mut self.stats.ring_errors);
                moved += 1;
            } else {
                match self.tier1.rings.push_dedicated(e) {
                    Ok(Ok(())) => {}
                    Ok(Err(back)) => unplaced.push(back.unstamped()),
                    Err(err) => {
                        self.stats.ring_errors += 1;
                        tracing::warn!(error = format!("{err:#}"), "a pinned task could not go back; RETURNed");
                        unplaced.push(e.unstamped());
                    }
                }
            }
        }
        for entry in unplaced {
            self.returner.add(&self.sock, entry);
        }
        moved
    }

    /// At the drain: every pinned task back to its client as QUEUE_FULL. Returns how many.
    pub(super) fn drain_dedicated(&mut self) -> u64 {
        let mut n = 0;
        for _ in 0..crate::agent::rings::DEDICATED_POP_BOUND {
            let entry = match self.tier1.rings.pop_dedicated() {
                Ok(Some(e)) => e,
                Ok(None) => break,
                Err(e) => {
                    self.stats.ring_errors += 1;
                    tracing::error!(error = format!("{e:#}"), "popping the dedicated ring to drain it failed");
                    break;
                }
            };
            let to = SocketAddrV4::new(entry.client_ip.into(), entry.client_port());
            if queue_full(&self.sock, to, JobRef::new(entry.uid(), entry.jid()), &entry.task) {
                n += 1;
            } else {
                // The client cannot be told: tier 2 takes it (or bounces it to the client).
                self.returner.add(&self.sock, entry.unstamped());
            }
        }
        n
    }
}
