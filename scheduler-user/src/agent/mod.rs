//! The host agent (tier 1's control loop): it brings up the XDP program on this host,
//! keeps the node's task rings above their low watermark with REFILL batches from tier 2,
//! returns what the rings cannot hold, and gives every queued task back on shutdown.
//!
//! One thread, one UDP socket bound to the Bolt port, no locks. Each turn of the loop:
//! - reads the program's ring events (low watermark, GET_TASK found the rings empty);
//! - reads its socket: REFILL that reached the host stack instead of XDP (no XDP on the
//!   uplink, or the userspace fallback), and GET_TASK from executors pointed at the agent
//!   (answered from the rings, misses forwarded to tier 2 through [`proxy`]);
//! - RETURNs what the program put in the overflow queue;
//! - runs the REFILL_REQ state machine ([`refill`]) with the depth the prefetch policy
//!   measures ([`policy::prefetch`]);
//! - answers and runs work steals with its peers ([`policy::steal`]), and RETURNs ring
//!   heads whose lease expired ([`policy::lease`]);
//! - waits (ppoll) for the socket, the event ring, the log ring or the next deadline.
//!
//! Stopping: `Drain` finishes the answer in flight, detaches the program, RETURNs every
//! queued task to tier 2 in messages of at most 16, and removes the pins;
//! `KeepAttached` leaves the program and its rings pinned and serving, for the next agent.

mod cli;
pub mod hint;
pub mod pin;
pub mod policy;
pub mod proxy;
pub mod recall;
pub mod refill;
pub mod returns;
pub mod rings;
mod stealing;
pub mod tier1;
pub mod waiting;

use std::io::ErrorKind;
use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use scheduler_common::{
    decode, encode_assign, encode_refill_req,
    maps::{Counter, Counters, Tier2Hint, EVENT_BYPASS, EVENT_REFILL_ANSWER, RING_COUNT},
    DecodeError, Entry, Ipv4Prefix, Message, RefillRequest, FLAG_WAIT, MAX_MESSAGE_LEN,
};

use policy::hint::{HintObservation, HintReaction, ReturnBelow};
use policy::lease::LeaseKeeper;
use policy::prefetch::PrefetchSizer;
use policy::steal::{StealAction, StealConfig, Stealer};
use serde::Serialize;

pub use cli::{config_from_args, parse_log_level, run, AgentArgs, HELP};
pub use refill::{RefillController, RefillPolicy};
pub use tier1::{connected_prefix, route_interface, Tier1, Tier1Config, Tier1Mode, XdpChoice};

use crate::clock::thread_cpu;
use crate::xdp::BoltXdp;
use proxy::Proxies;
use refill::{Action, Outcome, Progress};
use returns::Returner;
use rings::{KernelRefills, Rings};

/// How an agent stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopMode {
    /// RETURN every queued task to tier 2, detach the program, remove the pins.
    Drain,
    /// Leave the program attached and its rings pinned (it keeps serving them).
    KeepAttached,
}

/// Everything one agent needs.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub tier1: Tier1Config,
    /// The tier-2 switch (REFILL_REQ, RETURN and forwarded GET_TASK go there; REFILL is
    /// accepted only from its address).
    pub switch: SocketAddrV4,
    /// The agent's socket. Its port must be the switch's: the XDP program knows Bolt
    /// traffic by one port, and REFILL comes back to the port REFILL_REQ left from.
    pub listen: SocketAddrV4,
    pub node: u16,
    /// The node's resources (REFILL_REQ header rsrc): tier 2 sends only tasks they cover.
    pub resources: u8,
    pub policy: RefillPolicy,
    /// How often the rings are checked without any event.
    pub check_interval: Duration,
    /// Nice value for the agent's loop: negative keeps the rings filled while executors
    /// keep the host's CPUs busy.
    pub nice: Option<i32>,
    /// The other hosts' agents (work stealing); empty: no stealing.
    pub peers: Vec<SocketAddrV4>,
    /// Bound of the steal poll interval: reaching it stops stealing until work appears.
    pub steal_max_interval: Duration,
    /// The FLDS monitor's starting `tt` for this host's dedicated ring.
    pub flds_tt: Duration,
    /// Sources PIN is accepted from.
    pub clients: Vec<Ipv4Prefix>,
}

/// How often the drain rate is sampled for the prefetch target.
const RATE_SAMPLE_EVERY: Duration = Duration::from_millis(10);
/// Default bound of the steal poll interval (MATRIX's code uses 1 s).
pub const DEFAULT_STEAL_MAX_INTERVAL: Duration = Duration::from_secs(1);

/// What an agent has done, published while it runs and returned when it stops.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct AgentStats {
    /// "xdp", "userspace-bpf-rings" or "userspace-memory-rings".
    pub mode: String,
    /// Tasks in the rings at the last look, per priority (index 0 = priority 1).
    pub queued: Vec<i64>,
    pub refill_requests: u64,
    /// REFILL_REQs sent again because no answer came.
    pub refill_retries: u64,
    /// Answers that brought tasks.
    pub refill_answers: u64,
    /// Empty REFILLs (tier 2 had nothing for this node).
    pub refill_empty: u64,
    /// Tasks received in REFILL (through XDP or the socket) since this agent started.
    pub refill_tasks: u64,
    /// Of those, tasks that came through the agent's socket.
    pub socket_refill_tasks: u64,
    /// Tasks sent back to tier 2 in RETURN, for any reason.
    pub returned_tasks: u64,
    pub return_messages: u64,
    /// Tasks RETURNed from the overflow queue.
    pub overflow_returned: u64,
    /// Tasks RETURNed by the drain at shutdown.
    pub drained: u64,
    /// RETURN messages the socket refused.
    pub return_errors: u64,
    /// Ring map operations that failed, in serving, refilling and the policies (the task
    /// concerned went back to tier 2 or stayed queued; the agent carries on).
    pub ring_errors: u64,
    /// Tasks the XDP program could put back into no queue and handed to the agent, which
    /// RETURNed them.
    pub rescued: u64,
    /// Ring events read.
    pub events: u64,
    /// GET_TASK answered by the agent itself (userspace fallback).
    pub served: u64,
    /// GET_TASK passed on to tier 2 by the agent.
    pub forwarded: u64,
    /// Answers from tier 2 relayed to executors.
    pub relayed: u64,
    /// Forwarding or relaying failures.
    pub forward_errors: u64,
    /// REFILL at the socket not from the switch, or not arriving on the uplink, dropped.
    pub foreign_refill: u64,
    /// GET_TASK at the agent's socket from outside the executor prefix, dropped.
    pub foreign_get_task: u64,
    /// Datagrams at the socket that did not decode, per `DecodeError` kind.
    pub malformed: u64,
    /// Valid messages the agent does not take (ASSIGN, SUBMIT, ...).
    pub unexpected: u64,
    /// The prefetch depth the agent keeps now (sum over levels, measured).
    pub prefetch_target: u32,
    /// Its REFILL round-trip estimate, in microseconds.
    pub refill_round_trip_us: u64,
    /// Tasks RETURNed because their lease expired in a ring (the agent's scan; the XDP
    /// program's own are its `expired` counter).
    pub lease_returned: u64,
    /// Steal attempts (one per draw of neighbours), successful and failed ones.
    pub steal_attempts: u64,
    pub steal_successes: u64,
    pub steal_failures: u64,
    /// Tasks taken in by steals.
    pub stolen_tasks: u64,
    /// Of those, the ones passed on to tier 2 for this node's executors parked there
    /// ([`policy::steal::stolen_to_tier2`]).
    pub steal_to_tier2: u64,
    /// Steals kept without a verdict after the ACK window.
    pub steal_unconfirmed: u64,
    /// Times stealing stopped at the poll interval's bound.
    pub steal_stops: u64,
    /// Tasks given to thieves (committed).
    pub steal_given: u64,
    /// Steals this node aborted (no ACK in time; the tasks went back into its rings).
    pub steal_aborted: u64,
    /// Tasks a client PINned that went into the dedicated ring.
    pub pinned: u64,
    /// PINned tasks refused (ring full, resources) and answered with QUEUE_FULL.
    pub pin_refused: u64,
    /// Pinned tasks the FLDS monitor moved to the shared rings.
    pub flds_moved: u64,
    /// Pinned tasks sent back to their clients as QUEUE_FULL by the drain.
    pub pin_drained: u64,
    /// PINs from sources outside `--allow-clients`, dropped.
    pub pin_foreign: u64,
    /// STEAL messages from hosts that are not peers, dropped.
    pub steal_foreign: u64,
    /// STEAL messages the socket refused.
    pub steal_send_errors: u64,
    /// Tier 2's last BEST stamp (0: none, or tier 2 empty) and its age in microseconds
    /// (null: never heard).
    pub hint_best: u8,
    pub hint_age_us: Option<u64>,
    /// GET_TASKs the XDP program passed on to tier 2 because the hint outranked the
    /// rings (ring events of that kind read; the program counts them all as `bypass`).
    pub bypass_events: u64,
    /// GET_TASKs the agent itself passed on to tier 2 for the same reason.
    pub bypassed: u64,
    /// Times bypasses persisted while the rings held lower-priority tasks, and the tasks
    /// RETURNed to tier 2 for it ([`policy::hint`]).
    pub hint_reactions: u64,
    pub hint_returned: u64,
    /// RECALLs from tier 2 (an executor waits there; give back a prefetched task), those
    /// naming another node (ignored), the tasks RETURNed for them, and RECALLs that waited
    /// their hold (`policy::recall`) without being answered in full.
    pub recalls: u64,
    pub recall_other_node: u64,
    pub recalled: u64,
    pub recalls_expired: u64,
    /// Tasks this host's executors got from the XDP program, and from tier 2 directly
    /// (ASSIGNs passing through the host or relayed by the agent), since the agent
    /// started.
    pub xdp_served: u64,
    pub tier2_served: u64,
    /// Executors waiting at this host (docs/xdp.md, "Waiting at the host") that the
    /// agent answered with a task from the rings, answered NOOP after the host wait, and
    /// whose records it skipped because they had asked again since. The program's own
    /// hand-offs are its `handoffs` counter.
    pub waiters_served: u64,
    pub waiters_expired: u64,
    pub waiters_stale: u64,
    /// Executors waiting at this host at the last look (estimated from the counters).
    pub waiters_now: u32,
    /// Turns of the agent's loop: one per wake-up (an event, a datagram, a deadline).
    pub loop_turns: u64,
    /// CPU time the agent's thread has used since its loop began, in microseconds: what
    /// it costs the cores the executors run on (loading the program, which the kernel
    /// verifies on this thread, is not counted).
    pub cpu_us: u64,
}

/// The agent: tier 1 up, its socket bound, and the refill state.
pub struct Agent {
    cfg: AgentConfig,
    tier1: Tier1,
    sock: UdpSocket,
    refill: RefillController,
    returner: Returner,
    /// RECALLs the rings could not answer in full yet (agent/recall.rs).
    pending_recalls: policy::recall::PendingRecalls,
    /// When this host's executors last took a task, for RECALL.
    uptake: policy::recall::Uptake,
    proxies: Proxies,
    /// REFILL that came through the socket (the XDP counters cover the rest).
    socket_refills: Progress,
    /// The XDP program's REFILL counters when this agent started (they count from load).
    kernel_base: Progress,
    stats: AgentStats,
    malformed_by_kind: [u64; DecodeError::KINDS],
    /// The uplink's ifindex: REFILL reaching the socket is taken only from there (an
    /// executor behind another interface can forge the switch's address). None: the
    /// uplink is unknown, and the source address is the only check.
    uplink_ifindex: Option<u32>,
    sizer: PrefetchSizer,
    next_rate_sample: Instant,
    /// GET_TASKs the agent answered itself, per ring (the XDP program counts its own).
    served_per_level: [u64; RING_COUNT],
    /// Tier 2's ASSIGNs the agent relayed to executors, per task priority (the XDP
    /// program counts those that pass through the host).
    relayed_per_level: [u64; RING_COUNT],
    /// Tasks served per level from the rings and from tier 2 when the first rate sample
    /// was taken (the program's counters count from its load).
    served_base: Option<([u64; RING_COUNT], [u64; RING_COUNT])>,
    hint_reaction: HintReaction,
    stealer: Stealer<SocketAddrV4>,
    steal_actions: Vec<StealAction<SocketAddrV4>>,
    lease: LeaseKeeper,
    dedicated: pin::Dedicated,
    /// Answers executors waiting at this host; None when they wait at tier 2.
    waiting: Option<waiting::HostWaiting>,
    /// When the next waiting executor has waited the host wait.
    next_waiter_expiry: Option<Instant>,
    /// The program's `parked_here`, and its `handoffs + stale_waiters` plus this agent's
    /// answers to waiters, once the waiters queued before it started were answered.
    waiter_base: Option<(u64, u64)>,
    /// The thread's CPU time when the loop began ([`AgentStats::cpu_us`]).
    loop_cpu_since: Option<Duration>,
}

impl Agent {
    /// Binds the socket and brings tier 1 up (in this thread's network namespace).
    pub fn start(cfg: AgentConfig) -> anyhow::Result<Agent> {
        validate(&cfg)?;
        let sock = bind(cfg.listen)?;
        let tier1 = Tier1::open(&cfg.tier1)?;
        Agent::with_tier1(cfg, tier1, sock)
    }

    /// An agent for rings some earlier agent pinned (to drain them with `--unload`).
    pub fn for_pinned(
        pin_name: &str,
        switch: Option<SocketAddrV4>,
        listen: Option<SocketAddrV4>,
    ) -> anyhow::Result<Agent> {
        let tier1 = Tier1::open_existing(pin_name)?;
        let Rings::Bpf(maps) = &tier1.rings else { unreachable!("pinned rings are BPF maps") };
        let cfg_map = maps.config()?;
        let switch = switch.unwrap_or_else(|| SocketAddrV4::new(cfg_map.switch_ipv4.into(), cfg_map.port));
        anyhow::ensure!(
            !switch.ip().is_unspecified(),
            "the pinned program has no switch address configured: give --switch to RETURN its tasks to"
        );
        let listen = listen.unwrap_or(SocketAddrV4::new([0, 0, 0, 0].into(), switch.port()));
        let sock = bind(listen)?;
        let cfg = AgentConfig {
            tier1: Tier1Config {
                ifaces: vec![pin_name.to_string()],
                uplink: None,
                pin_name: pin_name.to_string(),
                attach_mode: Default::default(),
                xdp: XdpChoice::Require,
                settings: Default::default(),
            },
            switch,
            listen,
            node: cfg_map.node,
            resources: 0,
            policy: RefillPolicy::default(),
            check_interval: Duration::from_millis(5),
            nice: None,
            peers: Vec::new(),
            steal_max_interval: DEFAULT_STEAL_MAX_INTERVAL,
            flds_tt: pin::DEFAULT_FLDS_TT,
            clients: vec![Ipv4Prefix::ANY],
        };
        Agent::with_tier1(cfg, tier1, sock)
    }

    fn with_tier1(cfg: AgentConfig, mut tier1: Tier1, sock: UdpSocket) -> anyhow::Result<Agent> {
        let kernel_base = tier1.rings.kernel_refills()?;
        let mut stats = AgentStats { mode: tier1.mode.name().to_string(), ..AgentStats::default() };
        let uplink_ifindex = cfg.tier1.uplink.as_deref().and_then(|name| crate::net::ifindex(name).ok());
        // How late the refill step may see a drain: the program tells of a ring running
        // low at most once per event interval; tasks the agent hands out itself are seen
        // at the next check.
        let notice = if tier1.mode.is_xdp() {
            Duration::from_nanos(cfg.tier1.settings.event_interval_ns)
        } else {
            cfg.check_interval
        };
        let sizer = PrefetchSizer::new(tier1.rings.levels(), tier1.rings.capacity(), cfg.policy.low_watermark)
            .with_notice(notice);
        let steal_cfg = StealConfig { max_interval: cfg.steal_max_interval, ..StealConfig::new(cfg.node) };
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let stealer = Stealer::new(steal_cfg, cfg.peers.clone(), seed);
        let lease = LeaseKeeper::new(cfg.tier1.settings.lease_ms);
        let mut waiting = open_host_waiting(&cfg, &mut tier1);
        let refill = RefillController::new(cfg.policy.clone(), tier1.rings.capacity(), tier1.rings.levels());
        if let Some(w) = &mut waiting {
            w.answer_all(&mut tier1.rings, &mut stats.ring_errors);
        }
        let waiter_base = match (&waiting, tier1.rings.kernel_counters()) {
            (Some(w), Ok(k)) => Some(waiter_counts(&k, w)),
            _ => None,
        };
        Ok(Agent {
            waiting,
            next_waiter_expiry: None,
            waiter_base,
            loop_cpu_since: None,
            sizer,
            next_rate_sample: Instant::now(),
            served_per_level: [0; RING_COUNT],
            relayed_per_level: [0; RING_COUNT],
            served_base: None,
            hint_reaction: HintReaction::new(policy::hint::DEFAULT_PERSIST),
            stealer,
            steal_actions: Vec::new(),
            lease,
            dedicated: pin::Dedicated::new(cfg.flds_tt, Instant::now()),
            returner: Returner::new(cfg.switch),
            pending_recalls: policy::recall::PendingRecalls::default(),
            uptake: policy::recall::Uptake::default(),
            proxies: Proxies::new(cfg.switch),
            cfg,
            tier1,
            sock,
            refill,
            socket_refills: Progress::default(),
            kernel_base,
            stats,
            malformed_by_kind: [0; DecodeError::KINDS],
            uplink_ifindex,
        })
    }

    pub fn mode(&self) -> &Tier1Mode {
        &self.tier1.mode
    }

    /// Where the program and its maps are pinned (None: rings in this process only).
    pub fn pins(&self) -> Option<&crate::xdp::PinDir> {
        self.tier1.pins.as_ref()
    }

    /// The counters now.
    pub fn stats(&mut self) -> AgentStats {
        let occupancy = self.tier1.rings.occupancy();
        self.stats.queued = occupancy[..self.tier1.rings.levels() as usize].to_vec();
        self.stats.returned_tasks = self.returner.tasks;
        self.stats.return_messages = self.returner.messages;
        self.stats.return_errors = self.returner.send_errors;
        self.stats.socket_refill_tasks = self.socket_refills.tasks;
        self.stats.malformed = self.malformed_by_kind.iter().sum();
        (self.stats.hint_best, self.stats.hint_age_us) =
            hint::describe(self.tier1.rings.tier2_hint(), hint::coarse_now_ns());
        if let Ok(p) = self.progress() {
            self.stats.refill_tasks = p.tasks;
        }
        if let Some(since) = self.loop_cpu_since {
            self.stats.cpu_us = thread_cpu().saturating_sub(since).as_micros() as u64;
        }
        self.stats.clone()
    }

    /// Runs until `stop` returns a mode; `publish` gets the counters every `every`.
    pub fn run(
        &mut self,
        stop: &dyn Fn() -> Option<StopMode>,
        every: Duration,
        publish: &mut dyn FnMut(&AgentStats),
    ) -> anyhow::Result<StopMode> {
        if let Some(nice) = self.cfg.nice {
            // Per thread on Linux: only this loop gets the priority.
            // SAFETY: no pointers; PRIO_PROCESS with 0 names the calling thread.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
                tracing::warn!(nice, error = %std::io::Error::last_os_error(), "cannot change the agent's scheduling priority");
            }
        }
        self.loop_cpu_since = Some(thread_cpu());
        let mut next_check = Instant::now();
        let mut next_publish = Instant::now() + every;
        loop {
            if let Some(mode) = stop() {
                return Ok(mode);
            }
            self.stats.loop_turns += 1;
            let mut poke = self.read_events();
            poke |= self.receive();
            self.relay();
            let now = Instant::now();
            // The waiter queue is looked at when an event may mean a waiter, while some
            // wait, or when one is due to expire; not on every turn.
            if poke || self.stats.waiters_now > 0 || self.next_waiter_expiry.is_some_and(|t| now >= t) {
                self.answer_waiters();
            }
            self.return_overflow(1024);
            // The lease stamps' clock, for the RECALLs that wait.
            let now_ms = rings::monotonic_ms();
            self.step_steal(now);
            self.retry_recalls(now_ms);
            self.scan_leases(now);
            self.step_flds(now);
            // Rings drained while tier 2 has said it has nothing: steal without waiting for
            // the next empty answer.
            if self.refill.tier2_empty() {
                self.starved(now);
            }
            // Executors waiting here end a pause early (RefillController::poll_with_waiters).
            let pause_over =
                self.stats.waiters_now > 0 && self.refill.pause_end_with_waiters().is_some_and(|d| now >= d);
            if poke
                || pause_over
                || now >= next_check
                || self.refill.waiting()
                || self.refill.next_deadline(now).is_some_and(|d| now >= d)
            {
                if let Err(e) = self.step_refill(now) {
                    // The counters map could not be read: refilling waits for the next
                    // turn; the queued tasks and the drain at the end do not depend on it.
                    self.stats.ring_errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "refill step failed");
                }
                if now >= next_check {
                    next_check = now + self.cfg.check_interval;
                }
            }
            self.returner.flush(&self.sock);
            if let Some(logger) = &mut self.tier1.logger {
                logger.flush();
            }
            if now >= next_publish {
                publish(&self.stats());
                next_publish = now + every;
            }
            let mut wake = next_check.min(next_publish);
            let deadlines = [
                self.refill.next_deadline(now),
                self.stealer.next_deadline(),
                self.lease.next_deadline(now),
                Some(self.dedicated.next_deadline()),
                self.pending_recalls.next_retry_ms(now_ms).map(|t| now + Duration::from_millis(t - now_ms)),
                // A RECALL waiting may take young heads once this host turns quiet.
                self.uptake.quiet_at().filter(|&t| t > now && !self.pending_recalls.is_empty()),
                self.next_waiter_expiry,
                // Executors waiting here shorten the pause after an empty REFILL.
                self.refill.pause_end_with_waiters().filter(|_| self.stats.waiters_now > 0),
            ];
            for d in deadlines.into_iter().flatten() {
                wake = wake.min(d);
            }
            self.wait(wake.saturating_duration_since(Instant::now()));
        }
    }

    /// Stops as `mode` says, and returns the final counters.
    pub fn finish(mut self, mode: StopMode) -> anyhow::Result<AgentStats> {
        let persistent = self.tier1.pins.is_some();
        if mode == StopMode::KeepAttached && persistent {
            self.read_events();
            self.return_overflow(usize::MAX);
            self.returner.flush(&self.sock);
            let stats = self.stats();
            tracing::info!(queued = ?stats.queued, mode = stats.mode, "agent exits; the program and its rings stay pinned");
            return Ok(stats);
        }
        if mode == StopMode::KeepAttached {
            tracing::warn!("rings in this process cannot outlive it: draining them to tier 2 instead");
        }
        self.drain()?;
        Ok(self.stats())
    }

    /// RETURNs every queued task and takes the program down.
    fn drain(&mut self) -> anyhow::Result<()> {
        // Let an answer already on its way arrive, so that its tasks are returned too
        // rather than landing after the rings are gone.
        let full = [self.tier1.rings.capacity() as i64; RING_COUNT];
        let policy = self.refill.policy().clone();
        let deadline = Instant::now() + policy.answer_timeout + policy.settle;
        while self.refill.waiting() && Instant::now() < deadline {
            self.receive();
            let Ok(progress) = self.progress() else { break };
            self.refill.poll(Instant::now(), &full, progress);
            std::thread::sleep(refill::POLL_WHILE_WAITING);
        }
        self.refill.halt();
        // Tasks held for thieves leave with the rings.
        for entry in self.stealer.abort_held() {
            self.returner.add(&self.sock, entry);
        }
        if let (Some(pins), true) = (&self.tier1.pins, self.tier1.mode.is_xdp()) {
            // Executors' GET_TASK now goes straight to tier 2, and the rings stop changing.
            BoltXdp::detach_pinned(pins).context("detaching the XDP program")?;
            tracing::info!(pins = %pins.path().display(), "XDP program detached; draining the rings");
        }
        // Pinned tasks were never tier 2's: back to their clients.
        self.stats.pin_drained += self.drain_dedicated();
        let mut drained = self.drain_rings();
        // A program run in flight during the detach, or a late REFILL at the socket, may
        // still add tasks: look again after a short grace period.
        let grace_end = Instant::now() + policy.settle.max(Duration::from_millis(20));
        while Instant::now() < grace_end {
            self.receive();
            self.wait(Duration::from_millis(2));
        }
        self.receive();
        self.read_events();
        drained += self.drain_rings();
        self.returner.flush(&self.sock);
        self.stats.drained += drained;
        if let Some(pins) = &self.tier1.pins {
            if !self.tier1.rings.is_empty() {
                // A RETURN that could not be sent or a ring that could not be popped:
                // the pins are what still holds those tasks.
                tracing::error!(
                    pins = %pins.path().display(),
                    "tasks are left in the pinned rings; the pins stay (`bolt agent --iface {} --unload` returns them)",
                    self.cfg.tier1.pin_name
                );
                return Ok(());
            }
            BoltXdp::unload_pinned(pins).context("removing the pins")?;
        }
        tracing::info!(
            drained,
            returned = self.returner.tasks,
            messages = self.returner.messages,
            "drained every ring back to tier 2"
        );
        Ok(())
    }

    /// RETURNs the overflow queue and every ring. Bounded by what the rings can hold. A
    /// ring that cannot be popped is left (counted, logged; its pins stay for a later
    /// `--unload`) and the others are drained.
    fn drain_rings(&mut self) -> u64 {
        let overflow = self.return_overflow(usize::MAX);
        overflow + self.return_rings(1)
    }

    /// RETURNs every task in the rings of priority `from` and below (larger numbers), in
    /// messages of at most 16. Bounded by what the rings can hold; a ring that cannot be
    /// popped is left (counted, logged) and the others are emptied.
    fn return_rings(&mut self, from: u8) -> u64 {
        let mut n = 0u64;
        let bound = self.tier1.rings.capacity() as usize + 1;
        for prio in from.max(1)..=self.tier1.rings.levels() {
            for _ in 0..bound {
                match self.tier1.rings.pop(prio) {
                    Ok(Some(entry)) => {
                        self.returner.add(&self.sock, entry);
                        n += 1;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.stats.ring_errors += 1;
                        tracing::error!(prio, error = format!("{e:#}"), "popping a ring to RETURN its tasks failed");
                        break;
                    }
                }
            }
        }
        self.returner.flush(&self.sock);
        n
    }

    /// RETURNs up to `max` tasks from the overflow queue, one message each: a task is
    /// read in place, sent, and only then popped, so that it is never held only by this
    /// process (a SIGKILL between send and pop RETURNs it twice; tier 2 queues both and
    /// the client's claim or completion check absorbs the copy). Stops at the first
    /// failure and tries again next turn.
    fn return_overflow(&mut self, max: usize) -> u64 {
        let mut n = 0u64;
        while (n as usize) < max {
            let head = match self.tier1.rings.peek_overflow() {
                Ok(Some(e)) => e,
                Ok(None) => break,
                Err(e) => {
                    self.stats.ring_errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "reading the overflow queue failed");
                    break;
                }
            };
            if !self.returner.send_now(&self.sock, &[head]) {
                break;
            }
            match self.tier1.rings.pop_overflow() {
                // Only the agent pops the overflow queue: the head is the task just sent.
                Ok(Some(popped)) if popped == head => {}
                Ok(Some(other)) => self.returner.add(&self.sock, other),
                Ok(None) => {}
                Err(e) => {
                    self.stats.ring_errors += 1;
                    tracing::warn!(error = format!("{e:#}"), "popping the overflow queue failed");
                    break;
                }
            }
            n += 1;
        }
        if n > 0 {
            self.stats.overflow_returned += n;
            tracing::debug!(tasks = n, "overflow returned to tier 2");
        }
        n
    }

    /// REFILL frames and tasks seen since this agent started.
    fn progress(&self) -> anyhow::Result<Progress> {
        Ok(self.progress_in(&self.tier1.rings.kernel_counters()?))
    }

    /// [`Agent::progress`] from a snapshot of the program's counters.
    fn progress_in(&self, counters: &Counters) -> Progress {
        let k = KernelRefills::of(counters);
        Progress {
            frames: k.frames.wrapping_sub(self.kernel_base.frames) + self.socket_refills.frames,
            tasks: k.tasks.wrapping_sub(self.kernel_base.tasks) + self.socket_refills.tasks,
        }
    }

    /// Tasks this host's executors got so far per level (index 0 = priority 1), from the
    /// rings (the program's hits, the agent's own answers) and from tier 2 directly
    /// (ASSIGNs passing through the host, or relayed by the agent).
    fn taken_per_level(&self, kernel: &Counters) -> ([u64; RING_COUNT], [u64; RING_COUNT]) {
        let from_rings = std::array::from_fn(|i| kernel.hits(i as u8 + 1) + self.served_per_level[i]);
        let from_tier2 = std::array::from_fn(|i| kernel.tier2_assigns(i as u8 + 1) + self.relayed_per_level[i]);
        (from_rings, from_tier2)
    }

    /// Notes the tasks this host's executors have taken so far, every way (for RECALL:
    /// `policy::recall::Uptake`).
    fn observe_uptake(&mut self, now: Instant, kernel: &Counters) {
        let (from_rings, from_tier2) = self.taken_per_level(kernel);
        self.uptake.observe(now, from_rings.iter().chain(&from_tier2).sum());
    }

    /// Samples the drain rate and sets the refill target from it (Little's law), and
    /// feeds the hint reaction.
    ///
    /// The drain of a level is every task of that level this host's executors got: from
    /// the rings (the program's hits, the agent's own answers) and from tier 2 directly
    /// (ASSIGNs passing through the host, or relayed by the agent). Counting only the
    /// rings would size them by what they already serve: where tier 2 serves most tasks
    /// (the rings ran dry), the target would stay at its floor and keep them dry.
    ///
    /// `kernel` is a snapshot of the program's counters: the refill step reads them once
    /// for this, its progress and the waiters.
    fn size_prefetch(&mut self, now: Instant, kernel: &Counters) {
        if now < self.next_rate_sample {
            return;
        }
        self.next_rate_sample = now + RATE_SAMPLE_EVERY;
        let (from_rings, from_tier2) = self.taken_per_level(kernel);
        let served = std::array::from_fn(|i| from_rings[i] + from_tier2[i]);
        self.sizer.observe_served(now, served);
        self.stats.refill_round_trip_us = self.sizer.round_trip().as_micros() as u64;
        let (base_rings, base_tier2) = *self.served_base.get_or_insert((from_rings, from_tier2));
        self.stats.xdp_served = from_rings.iter().zip(base_rings).map(|(a, b)| a.wrapping_sub(b)).sum();
        self.stats.tier2_served = from_tier2.iter().zip(base_tier2).map(|(a, b)| a.wrapping_sub(b)).sum();
        self.react_to_hint(now, kernel.get(Counter::Bypass));
    }

    /// While tier 2 persistently holds higher-priority work than the rings (bypasses go
    /// on), RETURNs the rings' lower-priority tasks, so that the next REFILL brings the
    /// higher level and the executors here run it first.
    fn react_to_hint(&mut self, now: Instant, kernel_bypasses: u64) {
        let obs = HintObservation {
            bypasses: kernel_bypasses + self.stats.bypassed,
            hinted_best: self.tier2_best(),
            occupancy: self.tier1.rings.occupancy(),
        };
        if let Some(ReturnBelow { above }) = self.hint_reaction.observe(now, &obs) {
            let returned = self.return_rings(above.saturating_add(1));
            self.stats.hint_reactions = self.hint_reaction.reactions;
            self.stats.hint_returned += returned;
            tracing::debug!(above, returned, "tier 2 holds higher-priority work: lower-priority prefetch returned");
        }
    }

    /// Tier 2's BEST from its freshest stamp (0: none, or older than `--hint-ttl-ms`).
    fn tier2_best(&self) -> u8 {
        self.tier1.rings.tier2_hint().fresh_best(self.cfg.tier1.settings.hint_ttl_ns, hint::coarse_now_ns())
    }

    fn step_refill(&mut self, now: Instant) -> anyhow::Result<()> {
        // One read of the per-CPU counters (a system call) serves the whole step.
        let counters = self.tier1.rings.kernel_counters()?;
        self.observe_uptake(now, &counters);
        self.size_prefetch(now, &counters);
        let occupancy = self.tier1.rings.occupancy();
        self.refill.set_targets(now, self.tier2_best(), &occupancy, &self.sizer.targets(), &self.sizer.rates());
        self.stats.prefetch_target = self.refill.target();
        let progress = self.progress_in(&counters);
        self.stats.waiters_now = self.waiters_now(&counters);
        let action = self.refill.poll_with_waiters(now, &occupancy, progress, self.stats.waiters_now);
        match self.refill.take_outcome() {
            Some(Outcome::Tasks { tasks, round_trip }) => {
                self.stats.refill_answers += 1;
                if let Some(round_trip) = round_trip {
                    self.sizer.observe_round_trip(round_trip);
                }
                self.stealer.work_appeared();
                tracing::trace!(node = self.cfg.node, tasks, ?round_trip, "REFILL answered");
            }
            Some(Outcome::Empty { waited }) => {
                self.stats.refill_empty += 1;
                tracing::trace!(node = self.cfg.node, ?waited, "empty REFILL: tier 2 has nothing for this node");
                self.starved(now);
            }
            Some(Outcome::Lost) => tracing::debug!("no answer to REFILL_REQ; asking again"),
            None => {}
        }
        if let Action::Request { want, retry } = action {
            self.send_refill_req(want);
            self.stats.refill_requests += 1;
            if retry {
                self.stats.refill_retries += 1;
                if self.stats.refill_retries % 50 == 1 {
                    tracing::warn!(switch = %self.cfg.switch, retries = self.stats.refill_retries, "the switch does not answer REFILL_REQ; still asking");
                }
            }
        }
        Ok(())
    }

    /// Answers what the REFILL frames did not of the executors waiting at this host:
    /// with the rings' tasks, or NOOP after the host wait.
    fn answer_waiters(&mut self) {
        let best = self.tier2_best();
        let Some(waiting) = &mut self.waiting else { return };
        let mut unplaced = Vec::new();
        let levels = self.tier1.rings.levels();
        for prio in waiting.serve(&mut self.tier1.rings, &mut unplaced, &mut self.stats.ring_errors) {
            self.served_per_level[(prio.clamp(1, levels) - 1) as usize] += 1;
        }
        for entry in unplaced {
            self.returner.add(&self.sock, entry);
        }
        let now_ns = hint::coarse_now_ns();
        self.next_waiter_expiry = waiting
            .expire(&mut self.tier1.rings, now_ns, best, &mut self.stats.ring_errors)
            .map(|left| Instant::now() + left);
        let c = waiting.counts;
        (self.stats.waiters_served, self.stats.waiters_expired, self.stats.waiters_stale) =
            (c.served, c.expired, c.stale);
    }

    /// Executors waiting at this host now: those the program queued since this agent
    /// answered the ones queued before it started, less those the program and this agent
    /// answered or skipped since. A replaced record not yet skipped counts too, so this
    /// errs high by the few executors that asked twice. (The program's counters count
    /// from its load, so an agent restarted on the pinned program counts from its base.)
    fn waiters_now(&mut self, counters: &Counters) -> u32 {
        let Some(now) = self.waiting.as_ref().map(|w| waiter_counts(counters, w)) else { return 0 };
        let (parked_base, taken_base) = *self.waiter_base.get_or_insert(now);
        let taken = now.1.wrapping_sub(taken_base);
        now.0.wrapping_sub(parked_base).saturating_sub(taken).min(u32::MAX as u64) as u32
    }

    fn send_refill_req(&mut self, want: u8) {
        let mut buf = [0u8; 16];
        let waiting = self.stats.waiters_now.min(u8::MAX as u32) as u8;
        let req = RefillRequest::new(self.cfg.node, want).with_waiting(waiting);
        tracing::trace!(node = self.cfg.node, want, waiting, "REFILL_REQ sent");
        let n = match encode_refill_req(&mut buf, self.cfg.resources, req) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, want, "encoding REFILL_REQ failed");
                return;
            }
        };
        // Set before the send, so that no frame of the answer can come before it. With
        // executors waiting here, tier 2 sends the answer one task per frame among every
        // waiting host's frames, and the program hands them to the waiters itself: a
        // wake-up at its first stored frame would delay the frames sent after it, so the
        // event is recorded for the next wake-up (docs/xdp.md, "Events").
        self.tier1.rings.arm_refill_answer(waiting == 0);
        if let Err(e) = self.sock.send_to(&buf[..n], self.cfg.switch) {
            tracing::warn!(switch = %self.cfg.switch, error = %e, "sending REFILL_REQ failed");
        }
    }

    /// Reads every waiting ring event; true if there were any.
    fn read_events(&mut self) -> bool {
        let Some(events) = &mut self.tier1.events else { return false };
        let got = events.drain(4096);
        self.stats.events += got.len() as u64;
        self.stats.bypass_events += got.iter().filter(|e| e.kind == EVENT_BYPASS).count() as u64;
        if !got.is_empty() {
            tracing::trace!(node = self.cfg.node, events = got.len(), kinds = ?got.iter().map(|e| e.kind).collect::<Vec<_>>(), "events read");
        }
        if let Some(answer) = got.iter().find(|e| e.kind == EVENT_REFILL_ANSWER) {
            self.refill.first_frame_stamped(crate::clock::instant_of_monotonic_ns(answer.ktime_ns));
        }
        let rescued = events.take_rescued();
        if !rescued.is_empty() {
            tracing::warn!(tasks = rescued.len(), "the XDP program handed over tasks no queue took; returning them");
            self.stats.rescued += rescued.len() as u64;
            for entry in rescued {
                self.returner.add(&self.sock, entry);
            }
            self.returner.flush(&self.sock);
        }
        !got.is_empty()
    }

    /// Handles what waits at the socket. True when the refill step should run now: a
    /// GET_TASK missed (the rings need tasks), or a HINT said a level turned non-empty at
    /// tier 2 (the targets count only the rings at or above it).
    /// A failing map operation costs only its own task, which goes back to tier 2.
    fn receive(&mut self) -> bool {
        let mut buf = [0u8; MAX_MESSAGE_LEN + 1];
        let mut refill_now = false;
        let mut unplaced = Vec::new();
        // Bounded so that the refill logic runs even under a flood.
        for _ in 0..512 {
            let crate::net::Datagram { len: n, from, ifindex, .. } = match crate::net::recv_msg(&self.sock, &mut buf) {
                Ok(d) => d,
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                Err(e) => {
                    // ICMP errors from an unreachable switch surface here; they pass.
                    tracing::debug!(error = %e, "socket error");
                    break;
                }
            };
            let Some(from) = from else {
                self.stats.unexpected += 1;
                continue;
            };
            match decode(&buf[..n]) {
                Ok(Message::Refill { entries, best }) => {
                    if from.ip() != self.cfg.switch.ip() {
                        self.stats.foreign_refill += 1;
                        tracing::debug!(%from, "REFILL from an address other than the switch dropped");
                        continue;
                    }
                    if self.uplink_ifindex.is_some_and(|up| ifindex != Some(up)) {
                        self.stats.foreign_refill += 1;
                        tracing::debug!(%from, ?ifindex, "REFILL arriving on an interface other than the uplink dropped");
                        continue;
                    }
                    self.tier1.rings.record_tier2_hint(Tier2Hint::new(hint::coarse_now_ns(), best));
                    self.socket_refills.frames += 1;
                    self.socket_refills.tasks += entries.len() as u64;
                    // A REFILL lists its entries newest first: stored last to first, the
                    // rings serve them in tier 2's dequeue order.
                    for entry in entries.iter().rev() {
                        self.tier1.rings.push_or_hand_back(entry, &mut unplaced, &mut self.stats.ring_errors);
                    }
                }
                Ok(Message::GetTask { .. } | Message::GetBundle { .. })
                    if !self.cfg.tier1.settings.executors.contains(from.ip().octets()) =>
                {
                    self.stats.foreign_get_task += 1;
                    tracing::debug!(%from, "GET_TASK from outside the executor prefix dropped");
                }
                Ok(msg) if msg.op().is_steal() => self.on_steal_message(Instant::now(), from, &msg),
                Ok(Message::Pin { .. }) if !crate::switch::listed(&self.cfg.clients, from.ip().octets()) => {
                    self.stats.pin_foreign += 1;
                    tracing::debug!(%from, "PIN from outside --allow-clients dropped");
                }
                Ok(Message::Pin { job, flags, tasks }) => self.on_pin(from, job, flags, tasks),
                Ok(Message::Hint { best }) if from.ip() == self.cfg.switch.ip() => {
                    self.tier1.rings.record_tier2_hint(Tier2Hint::new(hint::coarse_now_ns(), best));
                    // Asked now, the level's tasks can reach the rings before the
                    // executors' next GET_TASKs bypass them for it.
                    refill_now = true;
                }
                Ok(Message::Recall { exec_rsrc, req, best }) if from.ip() == self.cfg.switch.ip() => {
                    self.tier1.rings.record_tier2_hint(Tier2Hint::new(hint::coarse_now_ns(), best));
                    self.on_recall(exec_rsrc, req);
                }
                Ok(Message::GetTask { rtrv_prio, .. } | Message::GetBundle { rtrv_prio, .. })
                    if self.tier2_holds_better(rtrv_prio) =>
                {
                    self.stats.bypassed += 1;
                    // Without WAIT, as the program does: if tier 2's work is gone by the
                    // time the request gets there, the executor comes back at once.
                    buf[7] &= !FLAG_WAIT;
                    self.forward(from, &buf[..n]);
                }
                // A GET_BUNDLE is served as a GET_TASK here, with one task (its `want` is
                // an upper bound); a miss goes on to tier 2, which fills the bundle.
                Ok(
                    Message::GetTask { rtrv_prio, exec_rsrc, from: who, .. }
                    | Message::GetBundle { rtrv_prio, exec_rsrc, from: who, .. },
                ) => {
                    let task = if who.node() == self.cfg.node {
                        self.tier1.rings.take_runnable(rtrv_prio, exec_rsrc, &mut unplaced, &mut self.stats.ring_errors)
                    } else {
                        None
                    };
                    match task {
                        Some(entry) => self.assign(from, entry, &mut unplaced),
                        None => {
                            refill_now = true;
                            self.forward(from, &buf[..n]);
                        }
                    }
                }
                Ok(other) => {
                    self.stats.unexpected += 1;
                    tracing::debug!(op = other.op().name(), %from, "message the agent does not take ignored");
                }
                Err(e) => {
                    self.malformed_by_kind[e.index()] += 1;
                    tracing::debug!(error = %e, %from, "malformed datagram dropped");
                }
            }
        }
        for entry in unplaced {
            self.returner.add(&self.sock, entry);
        }
        refill_now
    }

    fn assign(&mut self, to: SocketAddrV4, entry: Entry, unplaced: &mut Vec<Entry>) {
        let mut out = [0u8; MAX_MESSAGE_LEN];
        // The lease stamp stays with the ring; on the wire it is zero.
        let sent = encode_assign(&mut out, &entry.unstamped(), 0)
            .map_err(|e| e.to_string())
            .and_then(|n| self.sock.send_to(&out[..n], to).map_err(|e| e.to_string()));
        match sent {
            Ok(_) => {
                self.stats.served += 1;
                let ring = (entry.task.prio.max(1) as usize).min(self.tier1.rings.levels() as usize);
                self.served_per_level[ring - 1] += 1;
            }
            Err(e) => {
                // The task stays with the node: back into its ring, or to tier 2.
                tracing::warn!(executor = %to, error = %e, "sending ASSIGN failed; task kept");
                self.tier1.rings.put_back_or_hand_back(&entry, unplaced, &mut self.stats.ring_errors);
            }
        }
    }

    fn forward(&mut self, executor: SocketAddrV4, request: &[u8]) {
        match self.proxies.forward(executor, request, Instant::now()) {
            Ok(()) => self.stats.forwarded += 1,
            Err(e) => {
                self.stats.forward_errors += 1;
                tracing::debug!(%executor, error = format!("{e:#}"), "forwarding GET_TASK failed");
            }
        }
    }

    /// The XDP program's bypass rule, for GET_TASKs served here: tier 2's fresh hint
    /// names a level this request searches above every non-empty ring.
    fn tier2_holds_better(&self, rtrv_prio: u8) -> bool {
        let rings = &self.tier1.rings;
        let local = hint::local_best(&rings.occupancy(), rtrv_prio, rings.levels());
        let ttl = self.cfg.tier1.settings.hint_ttl_ns;
        rings.tier2_hint().outranks_local(rtrv_prio, local, ttl, hint::coarse_now_ns)
    }

    fn relay(&mut self) {
        if self.proxies.is_empty() {
            return;
        }
        let t = self.proxies.relay(&self.sock, Instant::now());
        self.stats.relayed += t.relayed;
        self.stats.forward_errors += t.dropped;
        for (total, n) in self.relayed_per_level.iter_mut().zip(t.assigned) {
            *total += n;
        }
        if let Some(best) = t.last_best {
            self.tier1.rings.record_tier2_hint(Tier2Hint::new(hint::coarse_now_ns(), best));
        }
    }

    /// Sleeps until the socket, the event ring, the log ring or an upstream socket is
    /// readable, a signal arrives, or `timeout` passes.
    fn wait(&self, timeout: Duration) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4 + self.proxies.len());
        let mut add = |fd: i32| fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        add(self.sock.as_raw_fd());
        if let Some(events) = &self.tier1.events {
            add(events.as_fd().as_raw_fd());
        }
        if let Some(logger) = &self.tier1.logger {
            add(logger.as_raw_fd());
        }
        for fd in self.proxies.fds() {
            add(fd);
        }
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: fds is a live array of pollfd of the given length; ts outlives the call.
        unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    }
}

fn validate(cfg: &AgentConfig) -> anyhow::Result<()> {
    let p = &cfg.policy;
    anyhow::ensure!(p.batch > 0, "--batch must be 1..=255");
    anyhow::ensure!(
        p.low_watermark <= cfg.tier1.settings.ring_capacity,
        "--low-watermark {} is above --ring-capacity {}",
        p.low_watermark,
        cfg.tier1.settings.ring_capacity
    );
    anyhow::ensure!(!cfg.check_interval.is_zero(), "the check interval must be positive");
    anyhow::ensure!(
        !cfg.switch.ip().is_unspecified() && cfg.switch.port() != 0,
        "--switch {} is not an address to send to",
        cfg.switch
    );
    if cfg.tier1.xdp != XdpChoice::Off {
        anyhow::ensure!(
            cfg.listen.port() == cfg.switch.port(),
            "--listen port {} differs from the switch's port {}: the XDP program knows Bolt traffic by one UDP port \
             (or run with --xdp off)",
            cfg.listen.port(),
            cfg.switch.port()
        );
    }
    Ok(())
}

/// Waiters queued so far (the program's `parked_here`), and waiters answered or skipped
/// so far (the program's `handoffs + stale_waiters` and `waiting`'s answers).
fn waiter_counts(k: &Counters, waiting: &waiting::HostWaiting) -> (u64, u64) {
    let answered = waiting.counts.served + waiting.counts.expired + waiting.counts.stale;
    (k.get(Counter::ParkedHere), k.get(Counter::Handoffs) + k.get(Counter::StaleWaiters) + answered)
}

/// The answers to executors waiting at this host, when the program queues them there:
/// XDP attached and a host wait configured. Should the socket that answers as the switch
/// not open, the program is told to send them to tier 2 instead.
fn open_host_waiting(cfg: &AgentConfig, tier1: &mut Tier1) -> Option<waiting::HostWaiting> {
    let wait_ns = cfg.tier1.settings.host_wait_ns;
    if wait_ns == 0 || !tier1.mode.is_xdp() {
        return None;
    }
    match waiting::HostWaiting::open(cfg.node, Duration::from_nanos(wait_ns)) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = format!("{e:#}"), "executors cannot wait at this host; they wait at tier 2");
            if let rings::Rings::Bpf(maps) = &mut tier1.rings {
                let off = maps.config().map(|c| scheduler_common::maps::XdpConfig { host_wait_ns: 0, ..c });
                if let Err(e) = off.and_then(|c| maps.write_config(&c)) {
                    tracing::error!(error = format!("{e:#}"), "turning waiting at the host off failed");
                }
            }
            None
        }
    }
}

fn bind(listen: SocketAddrV4) -> anyhow::Result<UdpSocket> {
    let sock = UdpSocket::bind(listen).with_context(|| format!("binding the agent's socket to {listen}"))?;
    crate::net::set_buffer_sizes(&sock, 4 << 20);
    crate::net::enable_pktinfo(&sock).context("asking for the arrival interface of datagrams (IP_PKTINFO)")?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// An agent running on a thread of this process (tests, benchmarks, the testbed).
pub struct AgentHandle {
    stop: Arc<AtomicU8>,
    stats: Arc<Mutex<AgentStats>>,
    mode: Tier1Mode,
    thread: Option<JoinHandle<anyhow::Result<AgentStats>>>,
}

const RUNNING: u8 = 0;
const STOP_DRAIN: u8 = 1;
const STOP_KEEP: u8 = 2;

/// Starts an agent on a new thread. Tier 1 comes up in the calling thread's network
/// namespace (the new thread inherits it); this returns once it is up, or its error.
pub fn spawn(cfg: AgentConfig) -> anyhow::Result<AgentHandle> {
    let stop = Arc::new(AtomicU8::new(RUNNING));
    let stats = Arc::new(Mutex::new(AgentStats::default()));
    let (ready_tx, ready_rx) = mpsc::channel();
    let (thread_stop, thread_stats) = (stop.clone(), stats.clone());
    let thread = std::thread::Builder::new().name(format!("bolt-agent-{}", cfg.node)).spawn(move || {
        let mut agent = match Agent::start(cfg) {
            Ok(a) => a,
            Err(e) => {
                let _ = ready_tx.send(Err(format!("{e:#}")));
                return Err(e);
            }
        };
        let _ = ready_tx.send(Ok(agent.mode().clone()));
        let stop_requested = || match thread_stop.load(Ordering::Relaxed) {
            STOP_DRAIN => Some(StopMode::Drain),
            STOP_KEEP => Some(StopMode::KeepAttached),
            _ => None,
        };
        let mut publish = |s: &AgentStats| {
            if let Ok(mut shared) = thread_stats.lock() {
                shared.clone_from(s);
            }
        };
        let mode = agent.run(&stop_requested, Duration::from_millis(20), &mut publish)?;
        let last = agent.finish(mode)?;
        publish(&last);
        Ok(last)
    })?;
    match ready_rx.recv() {
        Ok(Ok(mode)) => Ok(AgentHandle { stop, stats, mode, thread: Some(thread) }),
        Ok(Err(e)) => {
            let _ = thread.join();
            anyhow::bail!("{e}")
        }
        Err(_) => {
            let _ = thread.join();
            anyhow::bail!("the agent thread ended before starting")
        }
    }
}

impl AgentHandle {
    pub fn mode(&self) -> &Tier1Mode {
        &self.mode
    }

    /// Counters as last published (every 20 ms).
    pub fn stats(&self) -> AgentStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops the agent and waits for it.
    pub fn stop(mut self, mode: StopMode) -> anyhow::Result<AgentStats> {
        self.stop_and_join(mode)
    }

    fn stop_and_join(&mut self, mode: StopMode) -> anyhow::Result<AgentStats> {
        self.stop.store(if mode == StopMode::Drain { STOP_DRAIN } else { STOP_KEEP }, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow::anyhow!("the agent thread panicked"))?,
            None => Ok(self.stats()),
        }
    }
}

impl Drop for AgentHandle {
    /// An agent dropped without `stop` drains: nothing stays behind pinned.
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Err(e) = self.stop_and_join(StopMode::Drain) {
                tracing::error!(error = format!("{e:#}"), "agent stopped with an error");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::{JobRef, Message, Task};

    /// An agent with memory rings on loopback, and the socket that plays its switch.
    fn agent_with_memory_rings() -> (Agent, UdpSocket) {
        agent_with_memory_rings_and(&[])
    }

    /// The same, with `extra` arguments.
    fn agent_with_memory_rings_and(extra: &[&str]) -> (Agent, UdpSocket) {
        let switch = UdpSocket::bind("127.0.0.2:0").expect("switch socket");
        let port = switch.local_addr().unwrap().port().to_string();
        let switch_arg = format!("127.0.0.2:{port}");
        let listen_arg = format!("127.0.0.1:{port}");
        let args = [
            "bolt",
            "--iface",
            "lo",
            "--xdp",
            "off",
            "--switch",
            &switch_arg,
            "--listen",
            &listen_arg,
            "--node",
            "1",
            "--resources",
            "0xff",
        ];
        let cfg = config_from_args(args.iter().chain(extra).copied()).expect("configuration");
        switch.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        (Agent::start(cfg).expect("agent"), switch)
    }

    fn entry(tid: u32, prio: u8) -> Entry {
        let mut task = Task { prio, ..Task::default() };
        task.set_tid(tid);
        Entry { task, ..Entry::default() }
    }

    #[test]
    fn persistent_bypasses_return_the_lower_priority_prefetch() {
        let (mut agent, switch) = agent_with_memory_rings();
        let mut unplaced = Vec::new();
        for (tid, prio) in [(1, 2), (2, 3), (3, 3), (4, 4)] {
            agent.tier1.rings.push_or_hand_back(&entry(tid, prio), &mut unplaced, &mut agent.stats.ring_errors);
        }
        assert!(unplaced.is_empty());
        // Tier 2 says it holds level-2 work, and requests keep passing the rings by.
        agent.tier1.rings.record_tier2_hint(Tier2Hint::new(hint::coarse_now_ns(), 2));
        let t0 = Instant::now();
        for ms in 0..=policy::hint::DEFAULT_PERSIST.as_millis() as u64 + 1 {
            agent.stats.bypassed += 1;
            agent.react_to_hint(t0 + Duration::from_millis(ms), 0);
        }
        assert_eq!((agent.stats.hint_reactions, agent.stats.hint_returned), (1, 3));
        assert_eq!(agent.tier1.rings.occupancy()[..4], [0, 1, 0, 0], "the level-2 task stays");
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = switch.recv(&mut buf).expect("a RETURN at the switch");
        let Ok(Message::Return(entries)) = decode(&buf[..n]) else { panic!("not a RETURN") };
        let mut tids: Vec<u32> = entries.iter().map(|e| e.task.tid()).collect();
        tids.sort();
        assert_eq!(tids, [2, 3, 4]);
    }

    #[test]
    fn a_hint_from_the_switch_calls_for_the_refill_step_at_once() {
        let (mut agent, switch) = agent_with_memory_rings();
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = scheduler_common::encode_hint(&mut buf, 3).unwrap();
        // Reads the socket until `done` or two seconds; true if any read called for a step.
        let read_until = |agent: &mut Agent, done: &dyn Fn(&Agent) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut refill_now = false;
            while !done(agent) && Instant::now() < deadline {
                refill_now |= agent.receive();
                std::thread::sleep(Duration::from_millis(1));
            }
            refill_now
        };
        // Anyone but the switch: not taken, and no step.
        let other = UdpSocket::bind("127.0.0.3:0").expect("another sender");
        other.send_to(&buf[..n], agent.cfg.listen).expect("send the HINT");
        assert!(!read_until(&mut agent, &|a| a.stats.unexpected == 1));
        assert_eq!((agent.stats.unexpected, agent.tier2_best()), (1, 0));
        // The switch: BEST recorded, and the step runs now rather than at the next check.
        switch.send_to(&buf[..n], agent.cfg.listen).expect("send the HINT");
        assert!(read_until(&mut agent, &|a| a.tier2_best() == 3));
        assert_eq!(agent.tier2_best(), 3);
    }

    /// Sends a RECALL from the switch's socket to the agent and lets the agent read it.
    fn deliver(agent: &mut Agent, switch: &UdpSocket, bytes: &[u8]) {
        switch.send_to(bytes, agent.cfg.listen).expect("send to the agent");
        let deadline = Instant::now() + Duration::from_secs(2);
        let before = agent.stats.recalls;
        while agent.stats.recalls == before && Instant::now() < deadline {
            agent.receive();
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_recall_returns_ring_heads_old_enough_that_the_waiting_executor_can_run_within_the_return_credit() {
        let (mut agent, switch) = agent_with_memory_rings();
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        // Tier 2 REFILLed three tasks: one needing resource 0b10 at level 1, two at level
        // 2 (pushed as the REFILL path pushes them, and counted as REFILLed: the credit).
        let mut gpu = entry(1, 1);
        gpu.task.rsrc = 0b10;
        let mut unplaced = Vec::new();
        for e in [gpu, entry(2, 2), entry(3, 2)] {
            agent.tier1.rings.push_or_hand_back(&e, &mut unplaced, &mut agent.stats.ring_errors);
        }
        agent.socket_refills.tasks += 3;
        assert_eq!(agent.tier1.rings.total(), 3);
        // The age rule alone: this host's executors never turn quiet here.
        agent.uptake = policy::recall::Uptake::new(Duration::from_secs(3600));
        // Tasks that have just arrived are about to run here: not recalled.
        let n = scheduler_common::encode_recall(&mut buf, 0xff, RefillRequest::new(1, 3), 0).unwrap();
        deliver(&mut agent, &switch, &buf[..n]);
        assert_eq!((agent.stats.recalls, agent.stats.recalled), (1, 0));
        std::thread::sleep(Duration::from_millis(2 * policy::recall::RECALL_MIN_AGE_MS as u64));
        // A RECALL for another node is ignored.
        let n = scheduler_common::encode_recall(&mut buf, 0b01, RefillRequest::new(9, 1), 1).unwrap();
        deliver(&mut agent, &switch, &buf[..n]);
        assert_eq!((agent.stats.recalls, agent.stats.recall_other_node, agent.stats.recalled), (2, 1, 0));
        // An executor offering 0b01 waits at tier 2: two tasks asked back; the level-1
        // head needs 0b10 and stays, the level-2 heads go, oldest first.
        let n = scheduler_common::encode_recall(&mut buf, 0b01, RefillRequest::new(1, 2), 0).unwrap();
        deliver(&mut agent, &switch, &buf[..n]);
        assert_eq!((agent.stats.recalls, agent.stats.recalled), (3, 2));
        assert_eq!(agent.tier1.rings.occupancy()[..2], [1, 0], "the task the executor cannot run stays");
        let n = switch.recv(&mut buf).expect("a RETURN at the switch");
        let Ok(Message::Return(entries)) = decode(&buf[..n]) else { panic!("not a RETURN") };
        assert_eq!(entries.iter().map(|e| e.task.tid()).collect::<Vec<_>>(), [2, 3]);
        // The credit is what tier 2 REFILLed less what went back: one task left.
        let n = scheduler_common::encode_recall(&mut buf, 0xff, RefillRequest::new(1, 4), 0).unwrap();
        deliver(&mut agent, &switch, &buf[..n]);
        assert_eq!(agent.stats.recalled, 3);
        assert_eq!(agent.tier1.rings.total(), 0);
        let n = scheduler_common::encode_recall(&mut buf, 0xff, RefillRequest::new(1, 4), 0).unwrap();
        deliver(&mut agent, &switch, &buf[..n]);
        assert_eq!((agent.stats.recalls, agent.stats.recalled), (5, 3), "nothing left to give");
    }

    #[test]
    fn a_recall_that_came_too_early_is_answered_once_the_heads_are_old_enough() {
        let (mut agent, switch) = agent_with_memory_rings();
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let mut unplaced = Vec::new();
        for e in [entry(1, 1), entry(2, 2)] {
            agent.tier1.rings.push_or_hand_back(&e, &mut unplaced, &mut agent.stats.ring_errors);
        }
        agent.socket_refills.tasks += 2;
        // The age rule alone: this host's executors never turn quiet here.
        agent.uptake = policy::recall::Uptake::new(Duration::from_secs(3600));
        // Stamped at `now` or the millisecond before: at `now` too young to recall, two
        // milliseconds later old enough, and the RECALL still held (3 ms).
        let now = rings::monotonic_ms();
        agent.recall_at(0xff, RefillRequest::new(1, 1), now);
        assert_eq!((agent.stats.recalled, agent.pending_recalls.len()), (0, 1), "too young: it waits");
        agent.retry_recalls(now + 1);
        agent.retry_recalls(now + 2);
        assert_eq!((agent.stats.recalled, agent.pending_recalls.len(), agent.stats.recalls_expired), (1, 0, 0));
        let n = switch.recv(&mut buf).expect("a RETURN at the switch");
        let Ok(Message::Return(entries)) = decode(&buf[..n]) else { panic!("not a RETURN") };
        assert_eq!(entries.iter().map(|e| e.task.tid()).collect::<Vec<_>>(), [1], "the highest priority first");
        assert_eq!(agent.tier1.rings.total(), 1);
        // A RECALL its hold ends before it is answered is counted (the level-2 task is
        // too young at `now`, and the hold is over at the first retry).
        agent.recall_at(0xff, RefillRequest::new(1, 1), now);
        agent.retry_recalls(now + policy::recall::RECALL_HOLD_MS);
        assert_eq!((agent.pending_recalls.len(), agent.stats.recalls_expired), (0, 1));
    }

    #[test]
    fn a_host_whose_executors_took_nothing_for_the_quiet_time_gives_back_a_task_that_just_arrived() {
        let (mut agent, switch) = agent_with_memory_rings();
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let mut unplaced = Vec::new();
        agent.tier1.rings.push_or_hand_back(&entry(1, 1), &mut unplaced, &mut agent.stats.ring_errors);
        agent.socket_refills.tasks += 1;
        // Quiet as soon as a count is seen: every executor here is busy.
        agent.uptake = policy::recall::Uptake::new(Duration::ZERO);
        agent.recall_at(0xff, RefillRequest::new(1, 1), rings::monotonic_ms());
        assert_eq!((agent.stats.recalled, agent.pending_recalls.len()), (1, 0), "young, and given back at once");
        let n = switch.recv(&mut buf).expect("a RETURN at the switch");
        let Ok(Message::Return(entries)) = decode(&buf[..n]) else { panic!("not a RETURN") };
        assert_eq!(entries.iter().map(|e| e.task.tid()).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn a_refill_from_a_switch_on_loopback_reaches_a_userspace_agents_rings() {
        let (mut agent, switch) = agent_with_memory_rings();
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = scheduler_common::encode_refill(&mut buf, &[entry(2, 2), entry(1, 1)], 1).unwrap();
        switch.send_to(&buf[..n], agent.cfg.listen).expect("send the REFILL");
        let deadline = Instant::now() + Duration::from_secs(2);
        while agent.socket_refills.frames + agent.stats.foreign_refill == 0 && Instant::now() < deadline {
            agent.receive();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((agent.socket_refills.frames, agent.stats.foreign_refill), (1, 0));
        assert_eq!(agent.tier1.rings.occupancy()[..2], [1, 1]);
    }

    #[test]
    fn a_pin_from_outside_the_allowed_clients_is_dropped_and_counted() {
        let (mut agent, _switch) = agent_with_memory_rings_and(&["--allow-clients", "127.0.0.9"]);
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = scheduler_common::encode_pin(&mut buf, JobRef::new(1, 1), 0, &[entry(7, 2).task]).unwrap();
        for (client, pinned, foreign) in [("127.0.0.8:0", 0, 1), ("127.0.0.9:0", 1, 1)] {
            let sock = UdpSocket::bind(client).expect("client socket");
            sock.send_to(&buf[..n], agent.cfg.listen).expect("send the PIN");
            let deadline = Instant::now() + Duration::from_secs(2);
            while agent.stats.pinned + agent.stats.pin_foreign < pinned + foreign && Instant::now() < deadline {
                agent.receive();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!((agent.stats.pinned, agent.stats.pin_foreign), (pinned, foreign), "from {client}");
        }
        assert_eq!(agent.tier1.rings.dedicated_len(), Some(1), "only the allowed client's task");
    }

    #[test]
    fn the_drain_rate_counts_what_tier_2_hands_the_hosts_executors() {
        let (mut agent, _switch) = agent_with_memory_rings();
        let t0 = Instant::now();
        let counters = agent.tier1.rings.kernel_counters().unwrap();
        agent.size_prefetch(t0, &counters);
        let floor = agent.sizer.total_target();
        // One second in which tier 2 handed this host's executors 4,000 level-3 tasks
        // directly and the rings served none: the depth follows that drain.
        for step in 1..=100u64 {
            agent.relayed_per_level[2] += 40;
            agent.size_prefetch(t0 + Duration::from_millis(10 * step), &counters);
        }
        assert!(agent.sizer.rate(3) > 3_000.0, "{}", agent.sizer.rate(3));
        assert!(agent.sizer.total_target() > floor, "{} stayed at {floor}", agent.sizer.total_target());
        assert_eq!((agent.stats.xdp_served, agent.stats.tier2_served), (0, 4_000));
    }
}
