//! The switch's packet loop and its `bolt switch` command.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use scheduler_common::{decode, Ipv4Prefix, Message};

use super::admission::{parse_prefix, AccessRules, GetTaskLimit};
use super::credit::ReturnCredit;
use super::thread::ThreadCosts;
use super::tier2::{Answer, Tier2, WaitConfig};
use super::timeline::Timeline;
use super::{Shared, SwitchConfig, SwitchStats};
use crate::executor::unix_now_ns;
use crate::net::Batch;
use crate::queue::origin_index;

const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// Longest the loop sleeps in recv when nothing is parked (stop flag and publishing).
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// Encodes answers into the send batch, flushing when it fills, and credits every REFILL
/// to the agent it goes to. The encoders cannot fail here: every slot is larger than the
/// largest message and the pipeline never produces a list longer than MAX_LIST. A failure
/// would be a bug; it is sent as an empty datagram (counted by the receiver as truncated)
/// rather than panicking.
fn send_all(
    out: &mut Vec<Answer>,
    tx: &mut Batch,
    sock: &UdpSocket,
    credit: &mut ReturnCredit,
    counters: &mut SwitchStats,
    costs: &mut ThreadCosts,
    timeline: &mut Option<Timeline>,
) {
    for a in out.drain(..) {
        if let Answer::Refill { to, entries, .. } = &a {
            if credit.grant(*to.ip(), entries.len() as u32) {
                counters.credit_takeovers += 1;
            }
        }
        if let Some(t) = timeline.as_mut() {
            t.queued(&a);
        }
        tx.push(a.to(), |b| a.encode(b).unwrap_or(0));
        if tx.is_full() {
            flush(tx, sock, counters, costs, timeline);
        }
    }
}

/// Sends what the batch holds, timing it.
fn flush(
    tx: &mut Batch,
    sock: &UdpSocket,
    counters: &mut SwitchStats,
    costs: &mut ThreadCosts,
    timeline: &mut Option<Timeline>,
) {
    let (datagrams, from) = (tx.len(), Instant::now());
    if let Some(t) = timeline.as_mut() {
        t.flushing(unix_now_ns());
    }
    counters.send_failures += tx.flush(sock) as u64;
    costs.flushed(datagrams, from.elapsed());
    if let Some(t) = timeline.as_mut() {
        t.flushed(unix_now_ns());
    }
}

/// Receives a batch, runs every datagram through tier 2, sends what it produced, and
/// answers parked requests whose time ran out; until told to stop.
pub(super) fn packet_loop(
    sock: UdpSocket,
    mut tier2: Tier2,
    batch: usize,
    access: &AccessRules,
    mut limit: Option<GetTaskLimit>,
    mut timeline: Option<Timeline>,
    shared: &Shared,
) -> anyhow::Result<()> {
    let mut rx = Batch::with_arrival_stamps(batch);
    let mut costs = ThreadCosts::new();
    let mut tx = Batch::new(batch);
    let mut out: Vec<Answer> = Vec::with_capacity(batch * 2);
    let mut credit = ReturnCredit::default();
    let mut counters =
        SwitchStats { capacity: tier2.scheduler().pipeline().config().capacity, ..SwitchStats::default() };
    let mut last_publish = Instant::now();
    let mut read_timeout = IDLE_WAIT;
    let mut idle_since = unix_now_ns();
    while !shared.stop.load(Ordering::Relaxed) {
        // Sleep no longer than the next parked deadline, so expiry answers are on time.
        let wait = match tier2.next_deadline() {
            Some(d) => d.saturating_duration_since(Instant::now()).clamp(Duration::from_micros(100), IDLE_WAIT),
            None => IDLE_WAIT,
        };
        if wait != read_timeout && sock.set_read_timeout(Some(wait)).is_ok() {
            read_timeout = wait;
        }
        let n = rx.recv(&sock)?;
        let (first_arrived, taken) = (rx.first_arrived_unix_ns(), unix_now_ns());
        costs.received(idle_since, first_arrived, taken);
        counters.received += n as u64;
        let now = Instant::now();
        tier2.expire(now, &mut out);
        for i in 0..n {
            let began = costs.begin();
            let handled = 'message: {
                let (bytes, src) = rx.received(i);
                let Some(src) = src else {
                    counters.non_ipv4 += 1;
                    break 'message None;
                };
                let msg = match decode(bytes) {
                    Ok(msg) => msg,
                    Err(e) => {
                        counters.malformed[e.index()] += 1;
                        break 'message None;
                    }
                };
                let op = msg.op();
                if !access.admits(op, src) {
                    counters.refused[origin_index(op)] += 1;
                    break 'message None;
                }
                let get = matches!(op, scheduler_common::Op::GetTask | scheduler_common::Op::GetBundle);
                if get && limit.as_mut().is_some_and(|l| !l.admit(src, now)) {
                    counters.get_task_limited += 1;
                    break 'message None;
                }
                let msg = match msg {
                    Message::Return(entries) => {
                        let (covered, over) = credit.cover_return(entries, src, &mut out);
                        counters.return_over_credit += over;
                        if covered.is_empty() {
                            break 'message Some(op);
                        }
                        Message::Return(covered)
                    }
                    other => other,
                };
                if tier2.handle(&msg, src, now, &mut out).is_err() {
                    counters.wrong_direction += 1;
                }
                if let (Message::Submit { job, .. }, Some(t)) = (&msg, timeline.as_mut()) {
                    t.submit(job, (i, n), first_arrived.filter(|_| i == 0), taken, unix_now_ns());
                }
                Some(op)
            };
            send_all(&mut out, &mut tx, &sock, &mut credit, &mut counters, &mut costs, &mut timeline);
            if let Some(op) = handled {
                costs.handled(op, began);
            }
        }
        send_all(&mut out, &mut tx, &sock, &mut credit, &mut counters, &mut costs, &mut timeline);
        flush(&mut tx, &sock, &mut counters, &mut costs, &mut timeline);
        // Publishing and the way back to the socket count towards the next receive's wait.
        idle_since = unix_now_ns();
        if n == 0 || last_publish.elapsed() >= PUBLISH_EVERY {
            counters.thread = costs.stats();
            publish(&tier2, &mut counters, shared);
            last_publish = Instant::now();
        }
    }
    counters.thread = costs.stats();
    publish(&tier2, &mut counters, shared);
    if let (Some(t), Ok(mut kept)) = (timeline, shared.timeline.lock()) {
        *kept = t.into_kept();
    }
    Ok(())
}

fn publish(tier2: &Tier2, counters: &mut SwitchStats, shared: &Shared) {
    counters.queue = tier2.scheduler().stats().clone();
    counters.queue_depth = tier2.scheduler().pipeline().occupancy();
    counters.backlog = tier2.scheduler().pipeline().backlog().clone();
    counters.park = tier2.park_stats().clone();
    counters.hints = tier2.hint_stats();
    if let Ok(mut s) = shared.stats.lock() {
        s.clone_from(counters);
    }
}

/// `bolt switch`: run the software switch (tier 2) until interrupted.
#[derive(clap::Args, Debug)]
pub struct SwitchArgs {
    /// UDP address to listen on (IPv4).
    #[arg(long, default_value = "127.0.0.1:7171")]
    pub listen: SocketAddr,
    /// Entries per priority queue; a power of two (the thesis prototype: 131072).
    #[arg(long, default_value_t = 1 << 17)]
    pub queue_capacity: u32,
    /// Priority levels, 1 (highest) to P.
    #[arg(long, default_value_t = scheduler_common::DEFAULT_PRIORITIES,
          value_parser = clap::value_parser!(u8).range(1..=scheduler_common::MAX_PRIORITIES as i64))]
    pub priorities: u8,
    /// SWAP passes one GET_TASK or REFILL_REQ may spend at each priority level; when they
    /// run out, the search goes on at the next level down (docs/queue.md).
    #[arg(long, default_value_t = 1024)]
    pub max_passes: u16,
    /// Log a line of counters every this many seconds (0: never).
    #[arg(long, default_value_t = 10)]
    pub report_secs: u64,
    /// Sources SUBMIT is accepted from: comma-separated IPv4 prefixes or addresses.
    /// Other SUBMITs are dropped and counted (refused).
    #[arg(long, value_name = "CIDR,...", value_delimiter = ',', default_value = "0.0.0.0/0",
          value_parser = parse_prefix)]
    pub allow_clients: Vec<Ipv4Prefix>,
    /// The registered nodes: both --agents and --executors at once, for a network where
    /// agents and executors share addresses (the meaning this option always had). Either
    /// of those, where given, replaces it for its own ops. Comma-separated IPv4 prefixes
    /// or addresses; default: every source.
    #[arg(long, value_name = "CIDR,...", value_delimiter = ',', value_parser = parse_prefix)]
    pub nodes: Option<Vec<Ipv4Prefix>>,
    /// The host agents: sources REFILL_REQ and RETURN are accepted from. A RETURN queues
    /// tasks in its entries' clients' names, so executors must not be in this list.
    /// Default: --nodes.
    #[arg(long, value_name = "CIDR,...", value_delimiter = ',', value_parser = parse_prefix)]
    pub agents: Option<Vec<Ipv4Prefix>>,
    /// The executors: sources GET_TASK is accepted from. Default: --nodes.
    #[arg(long, value_name = "CIDR,...", value_delimiter = ',', value_parser = parse_prefix)]
    pub executors: Option<Vec<Ipv4Prefix>>,
    /// GET_TASKs per second one source (executor socket) may have served, with bursts
    /// of --get-task-burst; faster ones are dropped and counted, so one source cannot
    /// take every task. 0: no limit (a load generator multiplexing many executors over
    /// one socket needs that).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub get_task_rate: u32,
    /// Burst of --get-task-rate.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub get_task_burst: u32,
    /// How long a GET_TASK with WAIT or a REFILL_REQ that finds nothing waits here for a
    /// task before it is answered NOOP / empty REFILL, in milliseconds (0: never park,
    /// answer at once). Executors' GET timeout must exceed it.
    #[arg(long, value_name = "MS", default_value_t = WaitConfig::default().park_for.as_millis() as u64)]
    pub park_ms: u64,
    /// Most requests parked at once; beyond it requests are answered at once.
    #[arg(long, value_name = "N", default_value_t = WaitConfig::default().max_parked)]
    pub max_parked: usize,
    /// A host that sent a REFILL_REQ within this many milliseconds gets a HINT when a
    /// priority level turns non-empty, and counts among the hosts a level outranking
    /// another is shared between (docs/agent.md, "A host's share of a level"). 0: no
    /// HINT, and a REFILL_REQ gets what it asks for.
    #[arg(long, value_name = "MS", default_value_t = WaitConfig::default().hint_register.as_millis() as u64)]
    pub hint_register_ms: u64,
    /// An executor parking here recalls one task from a host sent a REFILL within this
    /// many milliseconds (RECALL, docs/agent.md "Recall"); 0 turns recall off.
    #[arg(long, value_name = "MS", default_value_t = WaitConfig::default().recall_window.as_millis() as u64)]
    pub recall_window_ms: u64,
    /// Serve counters over HTTP at this address: /metrics (Prometheus) and /stats (JSON,
    /// what `bolt switch stats` reads). "auto": the --listen IP at port 9171, skipped with a
    /// warning if taken; "off": none.
    #[arg(long, value_name = "ADDR|auto|off", default_value = "auto")]
    pub metrics: String,
}

impl SwitchArgs {
    /// The access rules the options describe: --agents and --executors, each defaulting
    /// to --nodes, which defaults to every source.
    pub fn access_rules(&self) -> AccessRules {
        let nodes = self.nodes.clone().unwrap_or_else(|| vec![Ipv4Prefix::ANY]);
        AccessRules {
            clients: self.allow_clients.clone(),
            agents: self.agents.clone().unwrap_or_else(|| nodes.clone()),
            executors: self.executors.clone().unwrap_or(nodes),
        }
    }
}

pub fn run_cli(args: SwitchArgs) -> anyhow::Result<()> {
    let config = SwitchConfig {
        listen: args.listen,
        queue_capacity: args.queue_capacity,
        priorities: args.priorities,
        max_passes: args.max_passes,
        access: args.access_rules(),
        get_task_rate: args.get_task_rate,
        get_task_burst: args.get_task_burst,
        wait: WaitConfig {
            park_for: Duration::from_millis(args.park_ms),
            max_parked: if args.park_ms == 0 { 0 } else { args.max_parked },
            hint_register: Duration::from_millis(args.hint_register_ms),
            recall_window: Duration::from_millis(args.recall_window_ms),
            ..WaitConfig::default()
        },
        ..SwitchConfig::default()
    };
    tracing::info!(
        clients = ?config.access.clients,
        agents = ?config.access.agents,
        executors = ?config.access.executors,
        "access rules"
    );
    let handle = super::spawn(config)?;
    let _metrics = super::metrics::start(&args, &handle)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let period = Duration::from_secs(args.report_secs.max(1));
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        let mut last = handle.stats();
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = tick.tick(), if args.report_secs > 0 => {
                    let now = handle.stats();
                    let rate = (now.queue.decisions - last.queue.decisions) as f64 / period.as_secs_f64();
                    tracing::info!(
                        decisions_per_s = rate as u64,
                        depth = ?now.queue_depth,
                        queue_full = now.queue.queue_full_tasks,
                        malformed = now.malformed_total(),
                        refused = now.refused.iter().sum::<u64>(),
                        return_over_credit = now.return_over_credit,
                        get_task_limited = now.get_task_limited,
                        parked = now.park.waiting,
                        best = now.hints.best,
                        "switch"
                    );
                    last = now;
                }
            }
        }
        anyhow::Ok(())
    })?;
    let stats = handle.shutdown()?;
    tracing::info!(
        decisions = stats.queue.decisions,
        received = stats.received,
        depth = ?stats.queue_depth,
        "switch stopped; queued tasks are dropped (soft state: clients resubmit)"
    );
    Ok(())
}
