//! `bolt bench xdp --rings`: the rings alone, in the kernel (BPF_PROG_TEST_RUN). Each run
//! of a program takes one entry from a ring and puts it back:
//!
//! - `queue`: the queue map (`BPF_MAP_TYPE_QUEUE`) the Bolt program's rings are, whose
//!   helpers take the map's spin lock;
//! - `queue + reservation`: the same plus the two atomic additions on the ring's
//!   reservation counter that a hit (release) and a REFILL (reserve) pay beside it;
//! - `lock-free`: the bounded MPMC ring of `scheduler_common::lockfree` in one array-map
//!   value, compare-and-swap on head and tail, a sequence number per slot; its occupancy
//!   is tail less head, so it needs no counter beside it.
//!
//! `empty` (the test-run loop alone) is measured too and subtracted. The measurements
//! alternate over rounds, and each is reported as its median over the rounds. Then the
//! queue map and the lock-free ring are measured on every CPU at once, all on one ring;
//! [`check_lockfree_concurrent`] also checks that the ring still holds exactly the
//! entries it started with.

use std::{fmt, time::Duration};

use anyhow::Context as _;
use aya::{
    maps::{Array, MapData, Queue},
    programs::Xdp,
    Ebpf, EbpfLoader,
};
use scheduler_common::{
    lockfree::{
        LockFreeRing, BENCH_OVERFLOW_MAP, BENCH_QUEUE_MAP, LOCKFREE_MAP, RING_BENCH_EMPTY, RING_BENCH_LOCKFREE,
        RING_BENCH_QUEUE, RING_BENCH_QUEUE_RESERVED,
    },
    Entry,
};

use super::{bench::entry, object::RING_BENCH_OBJECT, run_frame, Verdict};

/// Entries each ring holds while measured.
pub const ENTRIES: usize = 16;

/// A frame for the test runs: the programs do not read it.
const FRAME: [u8; 64] = [0; 64];

/// Nanoseconds per run, the test-run loop's own cost subtracted.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct RingBenchReport {
    pub repeat: u32,
    pub rounds: u32,
    /// The test-run loop alone, per run.
    pub empty_ns: f64,
    /// Pop and push on the queue map.
    pub queue_ns: f64,
    /// Pop and push on the queue map, with the release and the reservation on its counter.
    pub queue_reserved_ns: f64,
    /// Pop and push on the lock-free ring.
    pub lockfree_ns: f64,
    /// CPUs running the same program at once in the contended measurement.
    pub cpus: usize,
    /// Pop and push on the queue map, every CPU at once, less the test-run loop.
    pub queue_contended_ns: f64,
    /// Pop and push on the lock-free ring, every CPU at once, less the test-run loop.
    pub lockfree_contended_ns: f64,
    /// Share of the contended lock-free runs whose pop found nothing.
    pub lockfree_contended_empty: f64,
    /// Contended lock-free runs whose push gave up (the entry went to the overflow queue).
    pub lockfree_contended_overflowed: u64,
}

impl fmt::Display for RingBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Rings, BPF_PROG_TEST_RUN: one pop and one push per run, {} runs, median of {} rounds, \
             less {:.1} ns of test-run loop",
            self.repeat, self.rounds, self.empty_ns
        )?;
        writeln!(f, "queue map                      {:>6.1} ns", self.queue_ns)?;
        writeln!(f, "queue map + reservation        {:>6.1} ns", self.queue_reserved_ns)?;
        writeln!(f, "lock-free ring (array map)     {:>6.1} ns", self.lockfree_ns)?;
        writeln!(f, "On {} CPUs at once, one ring:", self.cpus)?;
        writeln!(f, "queue map                      {:>6.1} ns", self.queue_contended_ns)?;
        write!(
            f,
            "lock-free ring (array map)     {:>6.1} ns  ({:.2} % of pops found nothing, {} pushes overflowed)",
            self.lockfree_contended_ns,
            100.0 * self.lockfree_contended_empty,
            self.lockfree_contended_overflowed
        )
    }
}

/// The ring-bench object loaded, its rings filled with [`ENTRIES`] entries each.
struct Rig {
    ebpf: Ebpf,
}

impl Rig {
    fn load() -> anyhow::Result<Rig> {
        let mut ebpf = EbpfLoader::new()
            .load(RING_BENCH_OBJECT)
            .context("loading the ring-bench object (needs root or CAP_BPF)")?;
        for name in [RING_BENCH_EMPTY, RING_BENCH_QUEUE, RING_BENCH_QUEUE_RESERVED, RING_BENCH_LOCKFREE] {
            let p: &mut Xdp = ebpf
                .program_mut(name)
                .with_context(|| format!("the ring-bench object has no program {name}"))?
                .try_into()?;
            p.load().with_context(|| format!("loading {name}"))?;
        }
        let mut queue: Queue<&mut MapData, Entry> =
            Queue::try_from(ebpf.map_mut(BENCH_QUEUE_MAP).context("no queue map")?)?;
        for i in 0..ENTRIES {
            queue.push(entry(i as u32, 1), 0)?;
        }
        let entries: Vec<Entry> = (0..ENTRIES).map(|i| entry(i as u32, 1)).collect();
        let mut ring: Array<&mut MapData, LockFreeRing> =
            Array::try_from(ebpf.map_mut(LOCKFREE_MAP).context("no lock-free ring map")?)?;
        ring.set(0, LockFreeRing::with_entries(&entries), 0)?;
        Ok(Rig { ebpf })
    }

    fn program(&self, name: &str) -> anyhow::Result<&Xdp> {
        Ok(self.ebpf.program(name).with_context(|| format!("no program {name}"))?.try_into()?)
    }

    /// The lock-free ring as it is now.
    fn lockfree(&self) -> anyhow::Result<LockFreeRing> {
        let ring: Array<&MapData, LockFreeRing> =
            Array::try_from(self.ebpf.map(LOCKFREE_MAP).context("no lock-free ring map")?)?;
        Ok(ring.get(&0, 0)?)
    }
}

/// Runs `program` `repeat` times; the kernel's mean per run. Fails unless every run
/// dropped the frame (a run that failed returns XDP_ABORTED).
fn per_run(program: &Xdp, repeat: u32) -> anyhow::Result<Duration> {
    let r = run_frame(program, &FRAME, repeat)?;
    anyhow::ensure!(r.verdict == Verdict::Drop, "a run failed (verdict {:?})", r.verdict);
    Ok(r.per_run)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Measures the three rings, alternating, `rounds` rounds of `repeat` runs each. Needs
/// root.
pub fn run(repeat: u32, rounds: u32) -> anyhow::Result<RingBenchReport> {
    anyhow::ensure!(repeat > 0 && rounds > 0, "repeat and rounds must be at least 1");
    let rig = Rig::load()?;
    let names = [RING_BENCH_EMPTY, RING_BENCH_QUEUE, RING_BENCH_QUEUE_RESERVED, RING_BENCH_LOCKFREE];
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..rounds {
        for (i, name) in names.iter().enumerate() {
            samples[i].push(per_run(rig.program(name)?, repeat)?.as_nanos() as f64);
        }
    }
    let ring = rig.lockfree()?;
    anyhow::ensure!(
        ring.empty_pops == 0 && ring.failed_pushes == 0,
        "the lock-free ring failed runs on one CPU: {} pops found nothing, {} pushes gave up",
        ring.empty_pops,
        ring.failed_pushes
    );
    anyhow::ensure!(ring.queued().is_some_and(|q| q.count() == ENTRIES), "the lock-free ring lost its state");
    let [empty, queue, reserved, lockfree] = samples.map(median);
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).max(2);
    let queue_contended = queue_concurrent(cpus, repeat)?.as_nanos() as f64;
    let check = check_lockfree_concurrent(cpus, repeat)?;
    let mut held: Vec<u32> = check.tids.clone().context("the lock-free ring's sequence numbers are inconsistent")?;
    held.extend(&check.overflow_tids);
    held.sort_unstable();
    anyhow::ensure!(
        held == (0..ENTRIES as u32).collect::<Vec<_>>(),
        "on {cpus} CPUs the lock-free ring lost or duplicated entries: it and its overflow hold {held:?}"
    );
    Ok(RingBenchReport {
        repeat,
        rounds,
        empty_ns: empty,
        queue_ns: queue - empty,
        queue_reserved_ns: reserved - empty,
        lockfree_ns: lockfree - empty,
        cpus,
        queue_contended_ns: queue_contended - empty,
        lockfree_contended_ns: check.per_run_ns - empty,
        lockfree_contended_empty: check.empty_pops as f64 / (cpus as f64 * f64::from(repeat)),
        lockfree_contended_overflowed: check.failed_pushes,
    })
}

/// What several CPUs popping and pushing the lock-free ring at once left.
#[derive(Clone, Debug)]
pub struct ConcurrentCheck {
    pub threads: usize,
    pub runs_per_thread: u32,
    /// The kernel's mean time per run, over the threads (not less the test-run loop).
    pub per_run_ns: f64,
    /// Runs whose pop found nothing (a producer between claiming and publishing the
    /// head's slot, or contention outlasting the program's attempts): nothing taken.
    pub empty_pops: u64,
    /// Runs whose push gave up after its pop: the entry went to the overflow queue.
    pub failed_pushes: u64,
    /// The overflow queue's entries afterwards, by task id.
    pub overflow_tids: Vec<u32>,
    /// Pops that completed: head's final position.
    pub pops: u64,
    /// The entries in the ring afterwards, by task id, in pop order; `None` if its
    /// sequence numbers were inconsistent.
    pub tids: Option<Vec<u32>>,
}

/// Runs `program` `runs` times on each of `threads` threads at once (BPF_PROG_TEST_RUN
/// runs on the calling CPU); the kernel's mean time per run, averaged over the threads.
fn concurrent(program: &Xdp, threads: usize, runs: u32) -> anyhow::Result<Duration> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| run_frame(program, &FRAME, runs))).collect();
        let mut total = Duration::ZERO;
        for h in handles {
            total += h.join().map_err(|_| anyhow::anyhow!("a test-run thread panicked"))??.per_run;
        }
        Ok(total / threads.max(1) as u32)
    })
}

/// Runs the lock-free program `runs_per_thread` times on each of `threads` threads at
/// once and reads back the ring.
pub fn check_lockfree_concurrent(threads: usize, runs_per_thread: u32) -> anyhow::Result<ConcurrentCheck> {
    let mut rig = Rig::load()?;
    let per_run = concurrent(rig.program(RING_BENCH_LOCKFREE)?, threads, runs_per_thread)?;
    let ring = rig.lockfree()?;
    let tids = ring.queued().map(|q| q.map(|e| e.task.tid()).collect::<Vec<u32>>());
    let mut overflow: Queue<&mut MapData, Entry> =
        Queue::try_from(rig.ebpf.map_mut(BENCH_OVERFLOW_MAP).context("no overflow map")?)?;
    let mut overflow_tids = Vec::new();
    while let Ok(e) = overflow.pop(0) {
        overflow_tids.push(e.task.tid());
    }
    Ok(ConcurrentCheck {
        threads,
        runs_per_thread,
        per_run_ns: per_run.as_nanos() as f64,
        empty_pops: ring.empty_pops,
        failed_pushes: ring.failed_pushes,
        overflow_tids,
        pops: ring.head,
        tids,
    })
}

/// The queue map's pop and push on `threads` CPUs at once: the kernel's mean per run.
pub fn queue_concurrent(threads: usize, runs_per_thread: u32) -> anyhow::Result<Duration> {
    let rig = Rig::load()?;
    concurrent(rig.program(RING_BENCH_QUEUE)?, threads, runs_per_thread)
}
