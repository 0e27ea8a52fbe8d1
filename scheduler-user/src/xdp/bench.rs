//! Nanoseconds per packet of the XDP program, measured in the kernel with
//! BPF_PROG_TEST_RUN on a freshly loaded instance (no interface involved).
//!
//! - REFILL and the GET_TASK miss leave their frame unchanged (XDP_DROP, XDP_PASS), so
//!   one call with `repeat` runs them back to back and the kernel reports the mean.
//! - A GET_TASK hit rewrites its frame into an ASSIGN, and the kernel does not restore the
//!   frame between repetitions (nor in live-frames mode), so a repeated hit would measure
//!   one hit and then the other-port path. The hit is therefore measured one run per call,
//!   `repeat` calls, each timed by the kernel; such single-run timings include the cost of
//!   reading the clock once, which is measured on the miss path (single runs minus
//!   repeated runs) and subtracted. Both the raw and the corrected figure are reported.

use std::{fmt, time::Instant};

use anyhow::Context as _;
use scheduler_common::{encode_get_task, encode_refill, Entry, Requester, Task, MAX_LIST, MAX_MESSAGE_LEN};

use super::{
    frames::{sample_endpoints, udp_frame, Endpoints, Ipv4Fields},
    loader::BoltXdp,
    settings::XdpSettings,
    test_run::Verdict,
};

/// What to measure with.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    /// Runs per measurement (GET_TASK hits, misses, REFILL frames).
    pub repeat: u32,
    /// Tasks per REFILL frame (1..=16).
    pub refill_batch: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions { repeat: 1_000_000, refill_batch: MAX_LIST }
    }
}

/// Results, in nanoseconds.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct XdpBenchReport {
    pub repeat: u32,
    pub refill_batch: usize,
    /// GET_TASK hit, mean of single runs, clock read subtracted.
    pub hit_ns: f64,
    /// GET_TASK hit, mean of single runs as the kernel reports them.
    pub hit_single_run_ns: f64,
    /// GET_TASK miss (all rings empty, XDP_PASS), repeated runs.
    pub miss_ns: f64,
    /// The clock-read cost included in a single-run timing.
    pub single_run_overhead_ns: f64,
    /// REFILL, per task, repeated runs.
    pub refill_ns_per_task: f64,
    /// REFILL, per frame of `refill_batch` tasks.
    pub refill_ns_per_frame: f64,
    /// Wall-clock time per BPF_PROG_TEST_RUN call of the hit loop (syscall included).
    pub hit_syscall_ns: f64,
}

impl fmt::Display for XdpBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Bolt XDP, BPF_PROG_TEST_RUN, {} runs per measurement", self.repeat)?;
        writeln!(
            f,
            "GET_TASK hit    {:>7.1} ns/packet  ({:.1} ns as timed per single run, minus {:.1} ns clock read)",
            self.hit_ns, self.hit_single_run_ns, self.single_run_overhead_ns
        )?;
        writeln!(f, "GET_TASK miss   {:>7.1} ns/packet", self.miss_ns)?;
        writeln!(
            f,
            "REFILL          {:>7.1} ns/task    ({:.1} ns per frame of {} tasks)",
            self.refill_ns_per_task, self.refill_ns_per_frame, self.refill_batch
        )?;
        write!(f, "(hit loop: {:.0} ns per test-run syscall, wall clock)", self.hit_syscall_ns)
    }
}

/// A task entry for the measurements (`ring_bench` too).
pub(super) fn entry(tid: u32, prio: u8) -> Entry {
    let mut task = Task { prio, ..Task::default() };
    task.set_tid(tid);
    Entry::new(1, 1, task, [198, 51, 100, 1], 9000)
}

fn refill_frame(switch_leg: &Endpoints, entries: &[Entry]) -> anyhow::Result<Vec<u8>> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode_refill(&mut buf, entries, 0)?;
    Ok(udp_frame(switch_leg, Ipv4Fields::default(), &buf[..n]))
}

/// Runs every measurement on its own freshly loaded program. Needs root.
pub fn run(opts: BenchOptions) -> anyhow::Result<XdpBenchReport> {
    anyhow::ensure!(opts.repeat > 0, "repeat must be at least 1");
    anyhow::ensure!((1..=MAX_LIST).contains(&opts.refill_batch), "REFILL batch must be 1..={MAX_LIST}");
    let (exec, switch) = sample_endpoints(scheduler_common::DEFAULT_PORT);
    // The switch sends REFILL from its Bolt port to the node's Bolt port.
    let mut switch_leg = exec.reversed();
    switch_leg.dst.set_port(scheduler_common::DEFAULT_PORT);
    let mut get = [0u8; 16];
    encode_get_task(&mut get, 1, 0, Requester::new(0, 1, 1), false)?;
    let get_task = udp_frame(&exec, Ipv4Fields::default(), &get);
    let levels = scheduler_common::DEFAULT_PRIORITIES;

    // REFILL: tasks spread over the levels, rings big enough that none overflows.
    let batch: Vec<Entry> = (0..opts.refill_batch).map(|i| entry(i as u32, (i % levels as usize) as u8 + 1)).collect();
    let per_ring = (opts.repeat as u64 * opts.refill_batch as u64).div_ceil(levels as u64);
    let capacity = u32::try_from(per_ring).context("repeat × batch too large for one ring")?;
    let refill_xdp = BoltXdp::load(&XdpSettings {
        switch_addr: Some(*switch_leg.src.ip()),
        uplink_ifindex: super::settings::TEST_RUN_UPLINK,
        ring_capacity: capacity.max(1),
        low_watermark: 0,
        ..Default::default()
    })?;
    let r = refill_xdp.run_frame(&refill_frame(&switch_leg, &batch)?, opts.repeat)?;
    anyhow::ensure!(r.verdict == Verdict::Drop, "REFILL returned {:?}", r.verdict);
    let stored: i64 = refill_xdp.maps().occupancy().iter().sum();
    anyhow::ensure!(
        stored == opts.repeat as i64 * opts.refill_batch as i64,
        "REFILL stored {stored} tasks, expected {}",
        opts.repeat as u64 * opts.refill_batch as u64
    );
    let refill_ns_per_frame = r.per_run.as_nanos() as f64;
    drop(refill_xdp);

    // Miss, repeated and single: the difference is the single-run clock overhead.
    // Default settings: events on, so each miss also reads the clock for its rate limit.
    let miss_xdp = BoltXdp::load(&XdpSettings::default())?;
    let r = miss_xdp.run_frame(&get_task, opts.repeat)?;
    anyhow::ensure!(r.verdict == Verdict::Pass, "miss returned {:?}", r.verdict);
    let miss_ns = r.per_run.as_nanos() as f64;
    let singles = opts.repeat.min(200_000);
    let mut total = 0u128;
    for _ in 0..singles {
        total += miss_xdp.run_frame(&get_task, 1)?.per_run.as_nanos();
    }
    let single_run_overhead_ns = (total as f64 / singles as f64 - miss_ns).max(0.0);
    drop(miss_xdp);

    // Hit: fill ring 1 by REFILL (one repeated call), then one GET_TASK per call. Leases
    // stay on (each hit reads the lease clock, as on a host), at their longest, so that no
    // task filled at the start expires while the loop runs.
    let hit_xdp = BoltXdp::load(&XdpSettings {
        switch_addr: Some(switch),
        uplink_ifindex: super::settings::TEST_RUN_UPLINK,
        ring_capacity: opts.repeat.next_multiple_of(MAX_LIST as u32),
        lease_ms: scheduler_common::maps::MAX_LEASE_MS,
        ..Default::default()
    })?;
    let ones: Vec<Entry> = (0..MAX_LIST as u32).map(|t| entry(t, 1)).collect();
    let fill = hit_xdp.run_frame(&refill_frame(&switch_leg, &ones)?, opts.repeat.div_ceil(MAX_LIST as u32))?;
    anyhow::ensure!(fill.verdict == Verdict::Drop, "fill REFILL returned {:?}", fill.verdict);
    let mut total = 0u128;
    let started = Instant::now();
    for i in 0..opts.repeat {
        let r = hit_xdp.run_frame(&get_task, 1)?;
        anyhow::ensure!(r.verdict == Verdict::Tx, "GET_TASK {i} was not a hit: {:?}", r.verdict);
        total += r.per_run.as_nanos();
    }
    let hit_syscall_ns = started.elapsed().as_nanos() as f64 / opts.repeat as f64;
    let hit_single_run_ns = total as f64 / opts.repeat as f64;

    Ok(XdpBenchReport {
        repeat: opts.repeat,
        refill_batch: opts.refill_batch,
        hit_ns: (hit_single_run_ns - single_run_overhead_ns).max(0.0),
        hit_single_run_ns,
        miss_ns,
        single_run_overhead_ns,
        refill_ns_per_task: refill_ns_per_frame / opts.refill_batch as f64,
        refill_ns_per_frame,
        hit_syscall_ns,
    })
}
