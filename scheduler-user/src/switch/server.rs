//! The switch's packet loop and its `bolt switch` command.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use scheduler_common::{
    decode, encode_assign, encode_noop, encode_queue_full, encode_refill, Entry, Ipv4Prefix, JobRef, Message, Op,
    Requester, Task,
};

use super::admission::{parse_prefix, AccessRules, GetTaskLimit};
use super::credit::ReturnCredit;
use super::{Shared, SwitchConfig, SwitchStats};
use crate::net::Batch;
use crate::queue::{origin_index, Scheduler, Sink};

/// Encodes pipeline outputs straight into the send batch, flushing when it fills; and
/// credits every REFILL to the agent it goes to.
struct UdpSink<'a> {
    tx: &'a mut Batch,
    sock: &'a UdpSocket,
    send_failures: &'a mut u64,
    credit: &'a mut ReturnCredit,
    credit_takeovers: &'a mut u64,
}

impl UdpSink<'_> {
    #[inline(always)]
    fn push(&mut self, to: SocketAddrV4, fill: impl FnOnce(&mut [u8]) -> usize) {
        self.tx.push(to, fill);
        if self.tx.is_full() {
            *self.send_failures += self.tx.flush(self.sock) as u64;
        }
    }
}

// The encoders cannot fail here: every slot is larger than the largest message and the
// pipeline never produces a list longer than MAX_LIST. A failure would be a bug; it is
// sent as an empty datagram (counted by the receiver as truncated) rather than panicking.
impl Sink for UdpSink<'_> {
    fn assign(&mut self, to: SocketAddrV4, entry: &Entry) {
        self.push(to, |b| encode_assign(b, entry).unwrap_or(0));
    }
    fn noop(&mut self, to: SocketAddrV4, who: Requester) {
        self.push(to, |b| encode_noop(b, who).unwrap_or(0));
    }
    fn queue_full(&mut self, to: SocketAddrV4, job: JobRef, tasks: &[Task]) {
        self.push(to, |b| encode_queue_full(b, job, tasks).unwrap_or(0));
    }
    fn refill(&mut self, to: SocketAddrV4, entries: &[Entry]) {
        if self.credit.grant(*to.ip(), entries.len() as u32) {
            *self.credit_takeovers += 1;
        }
        self.push(to, |b| encode_refill(b, entries).unwrap_or(0));
    }
}

/// The part of a RETURN from `src` that its credit covers (possibly none). Each entry
/// beyond it goes back to its own client as QUEUE_FULL, as the pipeline bounces a RETURN
/// entry it cannot queue.
fn covered_by_credit<'m>(entries: &'m [Entry], src: SocketAddrV4, sink: &mut UdpSink, over: &mut u64) -> &'m [Entry] {
    let covered = sink.credit.take(*src.ip(), entries.len() as u32) as usize;
    for entry in &entries[covered..] {
        let client = SocketAddrV4::new(entry.client_ip.into(), entry.client_port());
        let job = JobRef::new(entry.uid(), entry.jid());
        sink.queue_full(client, job, &[entry.task]);
    }
    *over += (entries.len() - covered) as u64;
    &entries[..covered]
}

const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Receives a batch, runs every datagram through the pipeline, sends what it produced;
/// until told to stop.
pub(super) fn packet_loop(
    sock: UdpSocket,
    mut scheduler: Scheduler,
    batch: usize,
    access: &AccessRules,
    mut limit: Option<GetTaskLimit>,
    shared: &Shared,
) -> anyhow::Result<()> {
    let mut rx = Batch::new(batch);
    let mut tx = Batch::new(batch);
    let mut credit = ReturnCredit::default();
    let mut counters = SwitchStats { capacity: scheduler.pipeline().config().capacity, ..SwitchStats::default() };
    let mut last_publish = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        let n = rx.recv(&sock)?;
        counters.received += n as u64;
        let mut sink = UdpSink {
            tx: &mut tx,
            sock: &sock,
            send_failures: &mut counters.send_failures,
            credit: &mut credit,
            credit_takeovers: &mut counters.credit_takeovers,
        };
        let now = Instant::now();
        for i in 0..n {
            let (bytes, src) = rx.received(i);
            let Some(src) = src else {
                counters.non_ipv4 += 1;
                continue;
            };
            match decode(bytes) {
                Ok(msg) => {
                    let op = msg.op();
                    if !access.admits(op, src) {
                        counters.refused[origin_index(op)] += 1;
                        continue;
                    }
                    if op == Op::GetTask && limit.as_mut().is_some_and(|l| !l.admit(src, now)) {
                        counters.get_task_limited += 1;
                        continue;
                    }
                    let msg = match msg {
                        Message::Return(entries) => {
                            let covered = covered_by_credit(entries, src, &mut sink, &mut counters.return_over_credit);
                            if covered.is_empty() {
                                continue;
                            }
                            Message::Return(covered)
                        }
                        other => other,
                    };
                    if scheduler.handle(&msg, src, &mut sink).is_err() {
                        counters.wrong_direction += 1;
                    }
                }
                Err(e) => counters.malformed[e.index()] += 1,
            }
        }
        counters.send_failures += tx.flush(&sock) as u64;
        if n == 0 || last_publish.elapsed() >= PUBLISH_EVERY {
            publish(&scheduler, &mut counters, shared);
            last_publish = Instant::now();
        }
    }
    publish(&scheduler, &mut counters, shared);
    Ok(())
}

fn publish(scheduler: &Scheduler, counters: &mut SwitchStats, shared: &Shared) {
    counters.queue = scheduler.stats().clone();
    counters.queue_depth = scheduler.pipeline().occupancy();
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
