//! Packet reordering injected into one namespace: iptables (legacy xtables) rules send the
//! UDP datagrams it forwards or sends to an NFQUEUE, and a thread of this process,
//! bound to that queue over nfnetlink_queue, accepts most at once but holds a random
//! fraction back until a few later datagrams have overtaken them (or a short time has
//! passed). Kernels without sch_netem (and without nft's `queue`) can still reorder so.
//!
//! The rules carry `--queue-bypass`, so traffic passes unimpaired whenever no reorderer
//! is bound, and the queue fails open when full: a dead reorderer never blackholes the
//! testbed. The guard deletes the rules, then stops the thread, which accepts whatever
//! it still holds.

use std::collections::VecDeque;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::Rng as _;
use scheduler_user::{netns, testbed::SUBNET};

use crate::cluster::DEADLINE;

const IPTABLES: &str = "iptables-legacy";
/// Queue numbers are per network namespace, and each test has namespaces of its own.
const QUEUE_NUM: u16 = 0;
/// The hooks datagrams cross on a worker host: forwarded between the switch and the
/// executors, and sent by the agent.
const CHAINS: [&str; 2] = ["FORWARD", "OUTPUT"];
/// How long the thread sleeps when the queue is empty: bounds the extra delay of a
/// released datagram, and the thread's idle wake-ups.
const POLL: Duration = Duration::from_micros(200);

/// True when `iptables-legacy` runs (Debian package `iptables`).
pub fn iptables_legacy_available() -> bool {
    Command::new(IPTABLES).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// How many NFQUEUE rules namespace `ns` holds (`iptables-legacy -S`).
pub fn queue_rules(ns: &str) -> anyhow::Result<usize> {
    let out = netns::command_in(ns, Path::new(IPTABLES))?.args(["-w", "5", "-S"]).stdin(Stdio::null()).output()?;
    anyhow::ensure!(out.status.success(), "{IPTABLES} -S in {ns}: {}", String::from_utf8_lossy(&out.stderr).trim());
    Ok(String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("-j NFQUEUE")).count())
}

/// How datagrams are reordered.
#[derive(Clone, Copy, Debug)]
pub struct ReorderPolicy {
    /// Share of datagrams held back, per mille.
    pub hold_permille: u32,
    /// A held datagram is released once this many later ones have been accepted...
    pub overtakers: u64,
    /// ...or once it has been held this long, whichever comes first.
    pub max_hold: Duration,
}

/// What the reorderer did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReorderCounts {
    /// Datagrams received from the queue.
    pub queued: u64,
    /// Datagrams held back.
    pub held: u64,
    /// Held datagrams released after at least one later datagram had been accepted.
    pub reordered: u64,
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    held: AtomicU64,
    reordered: AtomicU64,
}

/// The rules and the thread; both go when it drops.
pub struct Reorderer {
    ns: String,
    rules_installed: usize,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Reorderer {
    /// Binds a reorderer to the queue in namespace `ns`, then queues the UDP datagrams
    /// to testbed addresses that `ns` forwards or sends.
    pub fn install(ns: &str, policy: ReorderPolicy) -> anyhow::Result<Reorderer> {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let (bound_tx, bound_rx) = std::sync::mpsc::channel();
        let thread = {
            let (ns, stop, counters) = (ns.to_string(), stop.clone(), counters.clone());
            std::thread::Builder::new().name(format!("reorder-{ns}")).spawn(move || {
                let queue = netns::enter(&ns).and_then(|()| open_queue());
                let queue = match queue {
                    Ok(q) => {
                        let _ = bound_tx.send(Ok(()));
                        q
                    }
                    Err(e) => {
                        let _ = bound_tx.send(Err(e));
                        return Ok(());
                    }
                };
                reorder(queue, policy, &stop, &counters)
            })?
        };
        let mut guard = Reorderer { ns: ns.to_string(), rules_installed: 0, stop, counters, thread: Some(thread) };
        bound_rx
            .recv_timeout(Duration::from_secs(10))
            .context("the reorderer thread did not bind its queue")?
            .context("binding the NFQUEUE")?;
        for chain in CHAINS {
            guard.iptables("-A", chain)?;
            guard.rules_installed += 1;
        }
        Ok(guard)
    }

    /// Counts so far.
    pub fn counts(&self) -> ReorderCounts {
        ReorderCounts {
            queued: self.counters.queued.load(Ordering::Relaxed),
            held: self.counters.held.load(Ordering::Relaxed),
            reordered: self.counters.reordered.load(Ordering::Relaxed),
        }
    }

    /// Deletes the rules, stops the thread (releasing what it holds) and returns the
    /// final counts, or the error the thread ended with.
    pub fn finish(mut self) -> anyhow::Result<ReorderCounts> {
        self.remove_rules();
        self.stop_thread()?;
        Ok(self.counts())
    }

    /// Appends (`-A`) or deletes (`-D`) the rule on `chain`.
    fn iptables(&self, op: &str, chain: &str) -> anyhow::Result<()> {
        let queue_num = QUEUE_NUM.to_string();
        let out = netns::command_in(&self.ns, Path::new(IPTABLES))?
            .args(["-w", "5", op, chain, "-p", "udp", "-d", SUBNET, "-j", "NFQUEUE"])
            .args(["--queue-num", &queue_num, "--queue-bypass"])
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {IPTABLES} (Debian package iptables)"))?;
        anyhow::ensure!(
            out.status.success(),
            "{IPTABLES} {op} {chain} in {}: {}",
            self.ns,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    fn remove_rules(&mut self) {
        for chain in CHAINS.iter().take(self.rules_installed) {
            if let Err(e) = self.iptables("-D", chain) {
                tracing::warn!("removing the reordering rule: {e:#}");
            }
        }
        self.rules_installed = 0;
    }

    fn stop_thread(&mut self) -> anyhow::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow::anyhow!("the reorderer thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for Reorderer {
    fn drop(&mut self) {
        self.remove_rules();
        let _ = self.stop_thread();
    }
}

fn open_queue() -> anyhow::Result<nfq::Queue> {
    let mut queue = nfq::Queue::open().context("opening an nfnetlink_queue socket")?;
    queue.bind(QUEUE_NUM).context("binding queue")?;
    // A full queue accepts rather than drops: this injects reordering, not loss.
    queue.set_fail_open(QUEUE_NUM, true).context("setting fail-open")?;
    // After configuring: the configuration calls wait for the kernel's acknowledgement.
    queue.set_nonblocking(true);
    Ok(queue)
}

/// A datagram held back, and how many datagrams had passed when it arrived.
struct Held {
    msg: nfq::Message,
    since: Instant,
    passed_before: u64,
}

/// Accepts or holds each queued datagram until `stop` (or [`DEADLINE`] twice over, so
/// the loop is bounded even if the guard never stops it), then accepts what it holds.
fn reorder(mut queue: nfq::Queue, policy: ReorderPolicy, stop: &AtomicBool, counters: &Counters) -> anyhow::Result<()> {
    let mut rng = rand::thread_rng();
    let mut held: VecDeque<Held> = VecDeque::new();
    // Datagrams accepted on arrival: a held one released after any of these was overtaken.
    let mut passed = 0u64;
    let end = Instant::now() + 2 * DEADLINE;
    let result = 'serve: loop {
        if stop.load(Ordering::Relaxed) || Instant::now() >= end {
            break Ok(());
        }
        match queue.recv() {
            Ok(msg) => {
                counters.queued.fetch_add(1, Ordering::Relaxed);
                if rng.gen_range(0..1000) < policy.hold_permille {
                    counters.held.fetch_add(1, Ordering::Relaxed);
                    held.push_back(Held { msg, since: Instant::now(), passed_before: passed });
                } else {
                    if let Err(e) = accept(&mut queue, msg) {
                        break Err(e);
                    }
                    passed += 1;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => break Err(anyhow::Error::new(e).context("receiving from the queue")),
        }
        // Held in arrival order, so the oldest is always the first due.
        while let Some(h) = held.front() {
            if passed - h.passed_before < policy.overtakers && h.since.elapsed() < policy.max_hold {
                break;
            }
            let h = held.pop_front().expect("front exists");
            if passed > h.passed_before {
                counters.reordered.fetch_add(1, Ordering::Relaxed);
            }
            if let Err(e) = accept(&mut queue, h.msg) {
                break 'serve Err(e);
            }
        }
    };
    // Closing the socket afterwards unbinds the queue.
    for h in held {
        accept(&mut queue, h.msg)?;
    }
    result
}

fn accept(queue: &mut nfq::Queue, mut msg: nfq::Message) -> anyhow::Result<()> {
    msg.set_verdict(nfq::Verdict::Accept);
    queue.verdict(msg).context("accepting a datagram")
}
