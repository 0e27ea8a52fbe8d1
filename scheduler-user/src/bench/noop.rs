//! `bolt bench noop`: scheduling decisions per second with no-op executors (the thesis's
//! Figure 11 set-up). A closed loop of E executors, each with one GET_TASK outstanding,
//! asks the switch for tasks while a submitter keeps its queue from running dry. The
//! executors and the submitter share one thread and one socket with batched syscalls,
//! so the machine's other core is left to the switch.

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use scheduler_common::descriptor::Handler;
use scheduler_common::{decode, encode_get_task, encode_submit, JobRef, Message, Requester, Task, MAX_LIST};
use serde::Serialize;

use crate::net::{bind_udp, Batch};
use crate::queue::{QueueConfig, Scheduler, Sink};
use crate::switch::{self, SwitchConfig};

#[derive(clap::Args, Debug, Clone)]
pub struct NoopArgs {
    /// Executors asking for tasks, each with one GET_TASK in flight.
    #[arg(long, default_value_t = 256)]
    pub executors: u32,
    /// Seconds to measure (after a short warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Measure an already running switch at this address instead of starting one.
    #[arg(long)]
    pub switch: Option<SocketAddr>,
    /// Tasks the submitter keeps queued ahead of the executors.
    #[arg(long, default_value_t = 8192)]
    pub backlog: u32,
    /// Wait before asking again after a NOOP, in microseconds.
    #[arg(long, default_value_t = 50)]
    pub noop_backoff_us: u64,
    /// Ask as tier-1 hosts do: REFILL_REQ for this many tasks (answered in REFILL
    /// batches of up to 16) instead of one GET_TASK per task. 0: GET_TASK.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8))]
    pub refill_batch: u8,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct NoopResult {
    /// "get_task" (one-level) or "refill" (batches as tier 1 asks for them).
    pub mode: &'static str,
    pub refill_batch: u8,
    pub executors: u32,
    pub seconds: f64,
    pub decisions: u64,
    pub decisions_per_s: f64,
    pub noops: u64,
    pub queue_full_tasks: u64,
    /// From the switch's own counters (in-process switch only).
    pub switch_decisions_per_s: Option<f64>,
    pub recirculations_per_decision: Option<f64>,
    /// The same pipeline driven in memory, without sockets, in this run: the cost of
    /// the algorithm alone.
    pub in_memory_decisions_per_s: f64,
    /// In refill mode: the one-level GET_TASK rate measured in the same run, and this
    /// mode's rate over it.
    pub one_level_decisions_per_s: Option<f64>,
    pub speedup_over_one_level: Option<f64>,
}

/// Runs the experiment; in refill mode also the one-level GET_TASK mode, right after,
/// with the same executors and duration, so the ratio comes from one run.
pub fn run_compared(args: &NoopArgs) -> anyhow::Result<NoopResult> {
    let mut result = run(args)?;
    if args.refill_batch > 0 {
        let one_level = run(&NoopArgs { refill_batch: 0, ..args.clone() })?;
        result.one_level_decisions_per_s = Some(one_level.decisions_per_s);
        result.speedup_over_one_level = Some(result.decisions_per_s / one_level.decisions_per_s.max(1.0));
    }
    Ok(result)
}

/// Executors whose GET_TASK was answered by NOOP wait here until their back-off ends.
struct Waiting {
    due: std::collections::VecDeque<Instant>,
}

pub fn run(args: &NoopArgs) -> anyhow::Result<NoopResult> {
    if args.executors == 0 || args.seconds <= 0.0 {
        bail!("need at least one executor and a positive duration");
    }
    let local_switch = match args.switch {
        Some(_) => None,
        None => Some(switch::spawn(SwitchConfig { listen: "127.0.0.1:0".parse()?, ..SwitchConfig::default() })?),
    };
    let target = match (&local_switch, args.switch) {
        (Some(s), _) => s.local_addr(),
        (None, Some(a)) => a,
        (None, None) => unreachable!(),
    };
    let sock =
        bind_udp("127.0.0.1:0".parse()?, Some(Duration::from_millis(20))).context("binding the load generator")?;
    sock.connect(target)?;
    let SocketAddr::V4(target) = target else { bail!("the switch address must be IPv4") };

    let mut submitter = Submitter::new(target);
    let mut tx = Batch::new(256);
    let mut rx = Batch::new(256);
    let mut waiting = Waiting { due: Default::default() };
    let backoff = Duration::from_micros(args.noop_backoff_us);
    let mut seq = 0u32;

    // Fill the queue, then start every executor.
    let mut decisions = 0u64;
    submitter.top_up(&mut tx, &sock, decisions, args.backlog);
    let ask = |tx: &mut Batch, executor: u32, seq: &mut u32| {
        if args.refill_batch == 0 {
            send_get(tx, &sock, target, executor, seq);
        } else {
            send_refill_req(tx, &sock, target, executor, args.refill_batch);
        }
    };
    for e in 0..args.executors {
        ask(&mut tx, e, &mut seq);
    }
    // Entries of the REFILL answer being received (one answer arrives whole, in order:
    // the switch finishes a REFILL_REQ before it reads the next packet).
    let mut refill_received = 0u16;
    tx.flush(&sock);

    let warmup = Duration::from_millis(300);
    let started = Instant::now();
    let mut measure_from: Option<(Instant, u64, u64, Option<u64>, u64)> = None;
    let total = warmup + Duration::from_secs_f64(args.seconds);
    let progress = super::progress_bar(total);
    let mut noops = 0u64;
    let mut queue_full = 0u64;
    let mut polls = 0u64;
    loop {
        let now = Instant::now();
        let elapsed = now - started;
        if measure_from.is_none() && elapsed >= warmup {
            let sw = local_switch.as_ref().map(|s| s.stats().queue.decisions);
            let recirc = local_switch.as_ref().map(|s| total_recirculations(&s.stats())).unwrap_or(0);
            measure_from = Some((now, decisions, noops, sw, recirc));
        }
        if elapsed >= total {
            break;
        }
        polls += 1;
        if polls.is_multiple_of(256) {
            progress.set_position(elapsed.as_millis() as u64);
        }
        let n = if waiting.due.is_empty() { rx.recv(&sock)? } else { rx.try_recv(&sock)? };
        for i in 0..n {
            let (bytes, _) = rx.received(i);
            match decode(bytes) {
                Ok(Message::Assign { .. }) => {
                    decisions += 1;
                    ask(&mut tx, (decisions % args.executors as u64) as u32, &mut seq);
                }
                Ok(Message::Refill { entries, .. }) => {
                    decisions += entries.len() as u64;
                    refill_received += entries.len() as u16;
                    if entries.len() < MAX_LIST || refill_received >= args.refill_batch as u16 {
                        if refill_received == 0 {
                            noops += 1;
                            waiting.due.push_back(now + backoff);
                        } else {
                            ask(&mut tx, 0, &mut seq);
                        }
                        refill_received = 0;
                    }
                }
                Ok(Message::Noop { .. }) => {
                    noops += 1;
                    waiting.due.push_back(now + backoff);
                }
                Ok(Message::QueueFull { tasks, .. }) => {
                    queue_full += tasks.len() as u64;
                    submitter.refused(tasks.len() as u64);
                }
                _ => {}
            }
        }
        while waiting.due.front().is_some_and(|&d| d <= now) {
            waiting.due.pop_front();
            ask(&mut tx, 0, &mut seq);
        }
        submitter.top_up(&mut tx, &sock, decisions, args.backlog);
        tx.flush(&sock);
    }
    progress.finish_and_clear();
    let (t0, d0, n0, sw0, r0) = measure_from.context("measurement window never started")?;
    let secs = t0.elapsed().as_secs_f64();
    let measured = decisions - d0;
    let (switch_rate, recirc) = match &local_switch {
        Some(s) => {
            let st = s.stats();
            let sw_decisions = st.queue.decisions - sw0.unwrap_or(0);
            let r = total_recirculations(&st) - r0;
            (Some(sw_decisions as f64 / secs), Some(r as f64 / sw_decisions.max(1) as f64))
        }
        None => (None, None),
    };
    if let Some(s) = local_switch {
        s.shutdown()?;
    }
    Ok(NoopResult {
        mode: if args.refill_batch == 0 { "get_task" } else { "refill" },
        refill_batch: args.refill_batch,
        in_memory_decisions_per_s: in_memory_rate(Duration::from_secs_f64(args.seconds.min(2.0))),
        executors: args.executors,
        seconds: secs,
        decisions: measured,
        decisions_per_s: measured as f64 / secs,
        noops: noops - n0,
        queue_full_tasks: queue_full,
        switch_decisions_per_s: switch_rate,
        recirculations_per_decision: recirc,
        one_level_decisions_per_s: None,
        speedup_over_one_level: None,
    })
}

/// Decisions per second of the pipeline alone: SUBMITs of 16 no-op tasks at mixed
/// priorities and GET_TASKs, through [`Scheduler::handle`], for about `time`.
pub fn in_memory_rate(time: Duration) -> f64 {
    struct Count(u64);
    impl Sink for Count {
        fn assign(&mut self, _: SocketAddrV4, _: &scheduler_common::Entry) {
            self.0 += 1;
        }
        fn bundle(&mut self, _: SocketAddrV4, e: &[scheduler_common::Entry]) {
            self.0 += e.len() as u64;
        }
        fn noop(&mut self, _: SocketAddrV4, _: Requester) {}
        fn queue_full(&mut self, _: SocketAddrV4, _: JobRef, _: &[Task]) {}
        fn refill(&mut self, _: SocketAddrV4, e: &[scheduler_common::Entry]) {
            self.0 += e.len() as u64;
        }
    }
    let Ok(mut s) = Scheduler::new(QueueConfig::default()) else { return 0.0 };
    let src = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 1);
    let tasks = Submitter::new(src).tasks;
    let mut out = Count(0);
    let get = Message::GetTask { rtrv_prio: 1, exec_rsrc: 0xff, from: Requester::new(1, 1, 1), wait: false };
    let started = Instant::now();
    while started.elapsed() < time {
        // Keep about 4096 tasks queued, as the socket benchmark does.
        for _ in 0..256 {
            let _ = s.handle(&Message::Submit { job: JobRef::new(1, 1), flags: 0, tasks: &tasks }, src, &mut out);
        }
        for _ in 0..256 * MAX_LIST {
            let _ = s.handle(&get, src, &mut out);
        }
    }
    out.0 as f64 / started.elapsed().as_secs_f64()
}

fn send_refill_req(tx: &mut Batch, sock: &UdpSocket, to: SocketAddrV4, node: u32, want: u8) {
    let req = scheduler_common::RefillRequest::new(node as u16, want);
    tx.push(to, |b| scheduler_common::encode_refill_req(b, 0xff, req).unwrap_or(0));
    if tx.is_full() {
        tx.flush(sock);
    }
}

fn total_recirculations(s: &switch::SwitchStats) -> u64 {
    s.queue.cost.iter().map(|c| c.recirculations).sum()
}

fn send_get(tx: &mut Batch, sock: &UdpSocket, to: SocketAddrV4, executor: u32, seq: &mut u32) {
    *seq = seq.wrapping_add(1);
    let who = Requester::new(1, executor as u16, *seq);
    tx.push(to, |b| encode_get_task(b, 1, 0xff, who, false).unwrap_or(0));
    if tx.is_full() {
        tx.flush(sock);
    }
}

/// Keeps about `backlog` no-op tasks queued at the switch, 16 per SUBMIT.
struct Submitter {
    to: SocketAddrV4,
    submitted: u64,
    refused: u64,
    jid: u32,
    tasks: [Task; MAX_LIST],
}

impl Submitter {
    fn new(to: SocketAddrV4) -> Submitter {
        let desc = Handler::Noop.encode().expect("noop descriptor");
        let tasks = std::array::from_fn(|i| {
            let mut t = Task { prio: 1 + (i % 4) as u8, desc, ..Task::default() };
            t.set_tid(i as u32);
            t
        });
        Submitter { to, submitted: 0, refused: 0, jid: 0, tasks }
    }

    fn refused(&mut self, n: u64) {
        self.refused += n;
    }

    fn top_up(&mut self, tx: &mut Batch, sock: &UdpSocket, decisions: u64, backlog: u32) {
        // Bounded per call so executors' GET_TASKs are not starved of send slots.
        for _ in 0..64 {
            let queued = (self.submitted - self.refused).saturating_sub(decisions);
            if queued + MAX_LIST as u64 > backlog as u64 {
                return;
            }
            self.jid = self.jid.wrapping_add(1);
            let (job, tasks) = (JobRef::new(1, self.jid), &self.tasks);
            tx.push(self.to, |b| encode_submit(b, job, 0, tasks).unwrap_or(0));
            self.submitted += MAX_LIST as u64;
            if tx.is_full() {
                tx.flush(sock);
            }
        }
    }
}

pub fn print(r: &NoopResult, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    println!(
        "mode                 {}{}",
        r.mode,
        if r.refill_batch > 0 { format!(" (batch {})", r.refill_batch) } else { String::new() }
    );
    println!("executors            {}", r.executors);
    println!("seconds              {:.2}", r.seconds);
    println!("decisions            {}", r.decisions);
    println!("decisions/s          {:.0}", r.decisions_per_s);
    if let Some(s) = r.switch_decisions_per_s {
        println!("switch decisions/s   {s:.0}");
    }
    if let Some(x) = r.recirculations_per_decision {
        println!("recirculations/task  {x:.3}");
    }
    println!("noops                {}", r.noops);
    println!("in-memory decisions/s {:.0}", r.in_memory_decisions_per_s);
    if let (Some(one), Some(x)) = (r.one_level_decisions_per_s, r.speedup_over_one_level) {
        println!("one-level decisions/s {one:.0} (this mode: {x:.1}x)");
    }
    Ok(())
}
