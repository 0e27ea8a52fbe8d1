//! `bolt bench tiers`: two-level scheduling (XDP tier 1 refilled from the switch) against
//! one-level (executors ask the switch directly), on a namespace testbed, in one run.
//!
//! The testbed is created for the run and removed after it: a switch namespace, W worker
//! hosts, an executor namespace behind each. A submitter in the switch namespace keeps a
//! backlog of no-op tasks queued at the switch. Executors (E per worker, each a thread
//! with its own socket in its executor namespace) run a closed loop: GET_TASK to the
//! switch's address, wait for the answer, "run" the task (sleep --task-us), ask again
//! (after a NOOP, following a 50 µs pause, as `bolt executor` does). The same executors
//! run twice:
//! - one-level: no agent, so GET_TASK crosses the worker host by plain forwarding and
//!   every task costs the switch a GET_TASK;
//! - two-level: an agent per worker host (XDP in generic mode on both links), so
//!   GET_TASK is answered on the host from rings the agent refills in batches of B.
//!
//! Reported per level: median and p99 of the GET_TASK → ASSIGN round trip seen by the
//! executors, tasks handed to executors per second, and the switch's packets per task
//! (scheduling packets only: GET_TASK, REFILL_REQ and RETURN in; SUBMIT is the same in
//! both levels and left out).

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use scheduler_common::descriptor::Handler;
use scheduler_common::{
    decode, encode_get_task, encode_submit, JobRef, Message, Op, Requester, Task, MAX_LIST, MAX_MESSAGE_LEN,
};
use serde::Serialize;

use crate::agent::{self, AgentHandle, StopMode};
use crate::netns;
use crate::queue::QueueStats;
use crate::switch::{self, SwitchConfig, SwitchHandle};
use crate::testbed::{services::agent_args, Layout, Testbed};
use crate::xdp::{CounterSnapshot, PinDir, XdpMaps};

#[derive(clap::Args, Debug, Clone)]
pub struct TiersArgs {
    /// Worker nodes (each a host namespace with an executor namespace behind it).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub workers: u16,
    /// Executors per worker node (closed loop, one GET_TASK outstanding each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub executors: u16,
    /// Seconds measured per level, after a warm-up of half a second.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Tasks per REFILL_REQ (the agents' --batch).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub batch: u8,
    /// The agents' --low-watermark.
    #[arg(long, default_value_t = 256)]
    pub low_watermark: u32,
    /// How long each executor "runs" a task (sleeps) before asking again, in
    /// microseconds. 0 asks again at once: most decisions per second, but executors
    /// then keep every CPU busy and round trips include waits for a CPU.
    #[arg(long, default_value_t = 100)]
    pub task_us: u64,
    /// The agents' --nice (their loop's scheduling priority).
    #[arg(long, default_value_t = -10, allow_hyphen_values = true)]
    pub agent_nice: i32,
    /// Tasks the submitter keeps queued ahead of the executors.
    #[arg(long, default_value_t = 8192)]
    pub backlog: u32,
    /// Name of the testbed created for the run (namespaces and interfaces carry it).
    #[arg(long, default_value = "tiers")]
    pub name: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One level's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct LevelResult {
    /// "one-level" or "two-level".
    pub level: &'static str,
    pub seconds: f64,
    /// Tasks handed to executors in the measured window.
    pub tasks: u64,
    pub decisions_per_s: f64,
    /// GET_TASK → ASSIGN round trip at the executors, in microseconds.
    pub rtt_p50_us: f64,
    pub rtt_p99_us: f64,
    pub noops: u64,
    pub get_timeouts: u64,
    /// Scheduling packets the switch received (GET_TASK, REFILL_REQ, RETURN) per task
    /// handed to an executor, over the whole level.
    pub switch_packets_per_task: f64,
    /// The same plus what it sent (ASSIGN, NOOP, REFILL).
    pub switch_packets_in_out_per_task: f64,
    /// Pipeline passes (recirculations included) of those packets per task.
    pub switch_passes_per_task: f64,
    /// GET_TASK answered by XDP, and passed on to the switch (two-level only).
    pub xdp_hits: u64,
    pub xdp_misses: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TiersResult {
    pub workers: u16,
    pub executors_per_worker: u16,
    pub task_us: u64,
    pub batch: u8,
    pub low_watermark: u32,
    pub one_level: LevelResult,
    pub two_level: LevelResult,
    /// one-level median RTT / two-level median RTT.
    pub median_rtt_ratio: f64,
    pub p99_rtt_ratio: f64,
    /// one-level switch packets per task / two-level.
    pub switch_packets_ratio: f64,
}

pub fn run(args: &TiersArgs) -> anyhow::Result<TiersResult> {
    anyhow::ensure!(args.seconds > 0.0, "--seconds must be positive");
    anyhow::ensure!(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "bolt bench tiers creates network namespaces and attaches XDP: run it as root"
    );
    let layout = Layout::plan(&args.name, args.workers, 1)?;
    let testbed =
        Testbed::create(layout).context("creating the testbed (is one of this name up? `bolt testbed down`)")?;
    let layout = testbed.layout().clone();
    let listen = SocketAddr::V4(layout.switch_socket());
    let switch =
        netns::run_in(&layout.switch_ns, move || switch::spawn(SwitchConfig { listen, ..SwitchConfig::default() }))?;
    let assigned = Arc::new(AtomicU64::new(0));
    let submitter = Submitter::start(&layout, args.backlog, assigned.clone())?;
    let progress = super::progress_bar(Duration::from_secs_f64(2.0 * (args.seconds + 1.5)));
    let one = run_level(args, &layout, &switch, &assigned, false)?;
    progress.set_position((args.seconds * 1000.0 + 1500.0) as u64);
    let two = run_level(args, &layout, &switch, &assigned, true)?;
    progress.finish_and_clear();
    submitter.stop();
    drop(switch);
    drop(testbed);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
    Ok(TiersResult {
        workers: args.workers,
        executors_per_worker: args.executors,
        task_us: args.task_us,
        batch: args.batch,
        low_watermark: args.low_watermark,
        median_rtt_ratio: ratio(one.rtt_p50_us, two.rtt_p50_us),
        p99_rtt_ratio: ratio(one.rtt_p99_us, two.rtt_p99_us),
        switch_packets_ratio: ratio(one.switch_packets_per_task, two.switch_packets_per_task),
        one_level: one,
        two_level: two,
    })
}

/// Runs one level: (agents), executors warm up, are measured, stop.
fn run_level(
    args: &TiersArgs,
    layout: &Layout,
    switch: &SwitchHandle,
    assigned: &Arc<AtomicU64>,
    two_level: bool,
) -> anyhow::Result<LevelResult> {
    // The switch publishes its counters when idle for 50 ms: let it settle first.
    std::thread::sleep(Duration::from_millis(200));
    let sw0 = switch.stats().queue;
    let mut agents: Vec<AgentHandle> = Vec::new();
    if two_level {
        for w in &layout.workers {
            let mut a = agent_args(layout, w);
            a.extend([
                "--batch".into(),
                args.batch.to_string(),
                "--low-watermark".into(),
                args.low_watermark.to_string(),
            ]);
            a.extend(["--nice".into(), args.agent_nice.to_string()]);
            let cfg = agent::config_from_args(a)?;
            agents.push(netns::run_in(&w.host_ns, move || agent::spawn(cfg))?);
        }
    }
    let xdp0 = xdp_counters(layout, two_level)?;
    let shared = Arc::new(Shared { stop: AtomicBool::new(false), record: AtomicBool::new(false) });
    let mut executors = Vec::new();
    for w in &layout.workers {
        for index in 0..args.executors {
            let task_time = Duration::from_micros(args.task_us);
            executors.push(spawn_executor(
                &w.exec().ns,
                layout.switch_socket(),
                w.node,
                index,
                task_time,
                shared.clone(),
                assigned.clone(),
            )?);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    shared.record.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    shared.record.store(false, Ordering::Relaxed);
    let seconds = t0.elapsed().as_secs_f64();
    shared.stop.store(true, Ordering::Relaxed);
    let mut rtt = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3)?;
    let (mut tasks, mut noops, mut timeouts, mut all_tasks) = (0u64, 0u64, 0u64, 0u64);
    for e in executors {
        let r = e.join().map_err(|_| anyhow::anyhow!("a bench executor panicked"))??;
        rtt.add(&r.rtt)?;
        tasks += r.measured_tasks;
        all_tasks += r.all_tasks;
        noops += r.noops;
        timeouts += r.timeouts;
    }
    let xdp1 = xdp_counters(layout, two_level)?;
    std::thread::sleep(Duration::from_millis(200));
    let sw1 = switch.stats().queue;
    for a in agents {
        a.stop(StopMode::Drain)?;
    }
    let d = SwitchDelta::between(&sw0, &sw1);
    let per_task = |x: u64| x as f64 / all_tasks.max(1) as f64;
    let xdp = xdp1.since(&xdp0);
    Ok(LevelResult {
        level: if two_level { "two-level" } else { "one-level" },
        seconds,
        tasks,
        decisions_per_s: tasks as f64 / seconds,
        rtt_p50_us: rtt.value_at_quantile(0.5) as f64 / 1000.0,
        rtt_p99_us: rtt.value_at_quantile(0.99) as f64 / 1000.0,
        noops,
        get_timeouts: timeouts,
        switch_packets_per_task: per_task(d.sched_in),
        switch_packets_in_out_per_task: per_task(d.sched_in + d.sched_out),
        switch_passes_per_task: per_task(d.passes),
        xdp_hits: xdp.total_hits(),
        xdp_misses: xdp.get(scheduler_common::maps::Counter::Miss),
    })
}

/// The XDP counters of every worker host, summed (zero without agents).
fn xdp_counters(layout: &Layout, attached: bool) -> anyhow::Result<CounterSnapshot> {
    let mut total = scheduler_common::maps::Counters::default();
    if attached {
        for w in &layout.workers {
            let pins = PinDir::under(std::path::Path::new(scheduler_common::maps::PIN_ROOT), w.pin_name())?;
            let c = XdpMaps::open_pinned(&pins)?.counters()?;
            for (t, v) in total.values.iter_mut().zip(c.0.values) {
                *t += v;
            }
        }
    }
    Ok(CounterSnapshot(total))
}

/// Scheduling packets the switch handled between two snapshots.
struct SwitchDelta {
    sched_in: u64,
    sched_out: u64,
    passes: u64,
}

impl SwitchDelta {
    fn between(a: &QueueStats, b: &QueueStats) -> SwitchDelta {
        let ops = [Op::GetTask, Op::RefillReq, Op::Return];
        let sum =
            |s: &QueueStats, f: fn(&crate::queue::OpCost) -> u64| ops.iter().map(|op| f(s.cost_of(*op))).sum::<u64>();
        SwitchDelta {
            sched_in: sum(b, |c| c.packets) - sum(a, |c| c.packets),
            sched_out: (b.assigns + b.noops + b.refill_packets) - (a.assigns + a.noops + a.refill_packets),
            passes: sum(b, |c| c.passes) - sum(a, |c| c.passes),
        }
    }
}

struct Shared {
    stop: AtomicBool,
    /// True during the measured window.
    record: AtomicBool,
}

struct ExecutorResult {
    rtt: Histogram<u64>,
    measured_tasks: u64,
    all_tasks: u64,
    noops: u64,
    timeouts: u64,
}

/// Starts a closed-loop executor that times its GET_TASKs (and runs nothing: the tasks
/// are no-ops) on a thread in namespace `ns`.
fn spawn_executor(
    ns: &str,
    switch: SocketAddrV4,
    node: u16,
    index: u16,
    task_time: Duration,
    shared: Arc<Shared>,
    assigned: Arc<AtomicU64>,
) -> anyhow::Result<JoinHandle<anyhow::Result<ExecutorResult>>> {
    let ns = ns.to_string();
    Ok(std::thread::Builder::new().name(format!("tiers-exec-{node}-{index}")).spawn(move || {
        netns::enter(&ns)?;
        let sock = UdpSocket::bind("0.0.0.0:0")?;
        // Answers come from the switch's address, whichever tier wrote them.
        sock.connect(switch)?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let mut r = ExecutorResult {
            rtt: Histogram::new_with_bounds(1, 10_000_000, 3)?,
            measured_tasks: 0,
            all_tasks: 0,
            noops: 0,
            timeouts: 0,
        };
        let (mut tx, mut rx) = ([0u8; 64], [0u8; MAX_MESSAGE_LEN + 1]);
        let mut seq = 0u32;
        while !shared.stop.load(Ordering::Relaxed) {
            seq = seq.wrapping_add(1);
            let n = encode_get_task(&mut tx, 1, 0xff, Requester::new(node, index, seq), false)?;
            let sent = Instant::now();
            sock.send(&tx[..n])?;
            // Wait for this request's answer (or any ASSIGN); bounded by the timeout.
            loop {
                let len = match sock.recv(&mut rx) {
                    Ok(len) => len,
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        r.timeouts += 1;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                };
                match decode(&rx[..len]) {
                    Ok(Message::Assign { .. }) => {
                        let rtt = sent.elapsed();
                        assigned.fetch_add(1, Ordering::Relaxed);
                        r.all_tasks += 1;
                        if shared.record.load(Ordering::Relaxed) {
                            r.measured_tasks += 1;
                            r.rtt.saturating_record(rtt.as_nanos() as u64);
                        }
                        if !task_time.is_zero() {
                            std::thread::sleep(task_time);
                        }
                        break;
                    }
                    Ok(Message::Noop { to: who, .. }) if who.seq() == seq => {
                        r.noops += 1;
                        std::thread::sleep(Duration::from_micros(50));
                        break;
                    }
                    _ => {}
                }
            }
        }
        Ok(r)
    })?)
}
/// Keeps about `backlog` no-op tasks queued at the switch, from a socket in the switch's
/// namespace: submitted minus handed to executors (the rings hold far fewer).
struct Submitter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Submitter {
    fn start(layout: &Layout, backlog: u32, assigned: Arc<AtomicU64>) -> anyhow::Result<Submitter> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ns, to, thread_stop) = (layout.switch_ns.clone(), layout.switch_socket(), stop.clone());
        let thread = std::thread::Builder::new().name("tiers-submitter".into()).spawn(move || {
            netns::enter(&ns)?;
            let sock = UdpSocket::bind("0.0.0.0:0")?;
            sock.set_nonblocking(true)?;
            let desc = Handler::Noop.encode().map_err(|e| anyhow::anyhow!("{e}"))?;
            let tasks: [Task; MAX_LIST] = std::array::from_fn(|i| {
                let mut t = Task { prio: 1, desc, ..Task::default() };
                t.set_tid(i as u32);
                t
            });
            let (mut buf, mut rx) = ([0u8; MAX_MESSAGE_LEN], [0u8; MAX_MESSAGE_LEN + 1]);
            let (mut submitted, mut refused, mut jid) = (0u64, 0u64, 0u32);
            while !thread_stop.load(Ordering::Relaxed) {
                while let Ok(n) = sock.recv(&mut rx) {
                    if let Ok(Message::QueueFull { tasks, .. }) = decode(&rx[..n]) {
                        refused += tasks.len() as u64;
                    }
                }
                // Bounded per turn; the turn repeats every 200 µs.
                for _ in 0..256 {
                    let queued = (submitted - refused).saturating_sub(assigned.load(Ordering::Relaxed));
                    if queued + MAX_LIST as u64 > backlog as u64 {
                        break;
                    }
                    jid = jid.wrapping_add(1);
                    let n = encode_submit(&mut buf, JobRef::new(1, jid), 0, &tasks)?;
                    if sock.send_to(&buf[..n], to).is_err() {
                        break;
                    }
                    submitted += MAX_LIST as u64;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(())
        })?;
        Ok(Submitter { stop, thread: Some(thread) })
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Err(e)) => tracing::warn!(error = format!("{e:#}"), "submitter"),
                Err(_) => tracing::warn!("submitter panicked"),
                Ok(Ok(())) => {}
            }
        }
    }
}

pub fn print(r: &TiersResult, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    println!(
        "{} workers x {} executors, tasks of {} us, batch {}, low watermark {}",
        r.workers, r.executors_per_worker, r.task_us, r.batch, r.low_watermark
    );
    println!("{:<34} {:>14} {:>14}", "", "one-level", "two-level");
    let row = |name: &str, a: String, b: String| println!("{name:<34} {a:>14} {b:>14}");
    let (a, b) = (&r.one_level, &r.two_level);
    row("GET_TASK round trip p50 (us)", format!("{:.1}", a.rtt_p50_us), format!("{:.1}", b.rtt_p50_us));
    row("GET_TASK round trip p99 (us)", format!("{:.1}", a.rtt_p99_us), format!("{:.1}", b.rtt_p99_us));
    row("decisions/s", format!("{:.0}", a.decisions_per_s), format!("{:.0}", b.decisions_per_s));
    row(
        "switch packets in per task",
        format!("{:.4}", a.switch_packets_per_task),
        format!("{:.4}", b.switch_packets_per_task),
    );
    row(
        "switch packets in+out per task",
        format!("{:.4}", a.switch_packets_in_out_per_task),
        format!("{:.4}", b.switch_packets_in_out_per_task),
    );
    row(
        "switch passes per task",
        format!("{:.4}", a.switch_passes_per_task),
        format!("{:.4}", b.switch_passes_per_task),
    );
    row("XDP hits / misses", "-".into(), format!("{} / {}", b.xdp_hits, b.xdp_misses));
    row("NOOPs, GET timeouts", format!("{}, {}", a.noops, a.get_timeouts), format!("{}, {}", b.noops, b.get_timeouts));
    println!(
        "median round trip {:.2}x lower, p99 {:.2}x lower, switch packets per task {:.1}x lower (batch {})",
        r.median_rtt_ratio, r.p99_rtt_ratio, r.switch_packets_ratio, r.batch
    );
    Ok(())
}
