//! `udp-floor`: the idle-worker path with nothing in it but its datagrams. A submitter,
//! one relay thread and a thread per worker on loopback UDP, making the system calls
//! Bolt's one-level path makes (the relay receives with `recvmmsg` and sends with
//! `sendmmsg`, as the software switch does; each worker blocks in `recv_from` on its
//! own socket, as an executor does), and no scheduling: the relay keeps a FIFO of tasks
//! and one of idle workers and pairs them. A worker tells the relay it is idle before
//! it sends its result, so every wave finds every worker waiting.
//!
//! Bolt's delay over this one is what its protocol and tier 2 add to the two hops; the
//! Redis queue's over this one bounds the ratio any design can reach here whose
//! scheduler and workers sleep until a datagram comes.
//!
//! The datagrams are the bench's own, not a Bolt wire format: a task is 16 bytes (its
//! number and its submit time, ns since the Unix epoch, little-endian), a submit is one
//! to [`TASKS_PER_DATAGRAM`] of them, a worker's "idle" is one byte, and its result the
//! task's 16 bytes and its start time.

use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::{phase_limit, Measurement, PeersArgs, Status, System, Workload};
use crate::bench::plot::quantile;
use crate::executor::unix_now_ns;
use crate::net::{bind_udp, Batch};

const TASK_BYTES: usize = 16;
const RESULT_BYTES: usize = 24;
/// The most tasks in one submit datagram.
const TASKS_PER_DATAGRAM: usize = 64;
/// Tasks in flight during the burst, as Bolt's client keeps.
const WINDOW: u64 = 1024;
/// How often a blocked relay or worker looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);
const IDLE: [u8; 1] = [b'I'];

/// The floor on `workload`: a warm-up wave of two tasks per worker, the burst and the
/// waves, as every system gets them.
pub(super) fn measure(workload: Workload, args: &PeersArgs) -> Measurement {
    match try_measure(workload, args) {
        Ok(m) => m,
        Err(e) => Measurement::new(System::UdpFloor, workload, args, Status::Failed, Some(format!("{e:#}"))),
    }
}

fn try_measure(workload: Workload, args: &PeersArgs) -> anyhow::Result<Measurement> {
    let mut floor = Floor::start(args.workers, workload)?;
    let limit = phase_limit(args);
    floor.waves(1, 2 * args.workers as usize, limit).context("warm-up")?;
    let burst = floor.burst(u64::from(args.tasks()), limit).context("burst")?;
    let idle = floor.waves(args.waves(), args.workers as usize, limit).context("waves")?;
    drop(floor);
    let mut m = Measurement::new(System::UdpFloor, workload, args, Status::Ok, None);
    m.throughput_tasks_per_s = Some(burst.tasks as f64 / burst.took.as_secs_f64().max(1e-9));
    (m.burst_delay_p50_us, m.burst_delay_p99_us) = burst.start_us.p50_p99();
    (m.burst_result_p50_us, m.burst_result_p99_us) = burst.result_us.p50_p99();
    (m.delay_p50_us, m.delay_p99_us) = idle.start_us.p50_p99();
    (m.result_p50_us, m.result_p99_us) = idle.result_us.p50_p99();
    m.idle_tasks = Some(idle.tasks);
    Ok(m)
}

/// Delays of one phase's tasks, µs.
#[derive(Default)]
struct Delays(Vec<f64>);

impl Delays {
    fn p50_p99(&self) -> (Option<f64>, Option<f64>) {
        (Some(quantile(&self.0, 0.5)), Some(quantile(&self.0, 0.99)))
    }
}

/// One phase's results: submit → start and submit → result back at the submitter.
#[derive(Default)]
struct Phase {
    tasks: u64,
    took: Duration,
    start_us: Delays,
    result_us: Delays,
}

/// The submitter's side, and the relay and worker threads, which stop when it drops.
struct Floor {
    submitter: UdpSocket,
    relay_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<anyhow::Result<()>>>,
    next_task: u64,
}

impl Floor {
    fn start(workers: u16, workload: Workload) -> anyhow::Result<Floor> {
        let any = "127.0.0.1:0".parse()?;
        let relay = bind_udp(any, Some(STOP_POLL))?;
        let mut floor = Floor {
            submitter: bind_udp(any, None)?,
            relay_addr: relay.local_addr()?,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            next_task: 0,
        };
        // Each thread is in `floor` as soon as it runs, so an error from here on stops
        // those already started.
        let (relay_addr, submitter_addr) = (floor.relay_addr, floor.submitter.local_addr()?);
        let flag = floor.stop.clone();
        floor
            .threads
            .push(std::thread::Builder::new().name("floor-relay".into()).spawn(move || relay_loop(&relay, &flag))?);
        for i in 0..workers {
            let socket = bind_udp(any, Some(STOP_POLL))?;
            let flag = floor.stop.clone();
            floor.threads.push(
                std::thread::Builder::new()
                    .name(format!("floor-worker-{i}"))
                    .spawn(move || worker_loop(&socket, relay_addr, submitter_addr, workload, &flag))?,
            );
        }
        Ok(floor)
    }

    /// `waves` waves of `per_wave` tasks, each submitted in one datagram when the wave
    /// before has all its results.
    fn waves(&mut self, waves: u32, per_wave: usize, limit: Duration) -> anyhow::Result<Phase> {
        let deadline = Instant::now() + limit;
        let began = Instant::now();
        let mut phase = Phase::default();
        for _ in 0..waves {
            let mut left = per_wave;
            while left > 0 {
                let n = left.min(TASKS_PER_DATAGRAM);
                self.submit(n)?;
                left -= n;
            }
            self.collect(per_wave as u64, deadline, &mut phase)?;
        }
        phase.took = began.elapsed();
        Ok(phase)
    }

    /// `tasks` tasks submitted as fast as results free room in the window.
    fn burst(&mut self, tasks: u64, limit: Duration) -> anyhow::Result<Phase> {
        let deadline = Instant::now() + limit;
        let began = Instant::now();
        let mut phase = Phase::default();
        let mut sent = 0u64;
        while phase.tasks < tasks {
            let room = (WINDOW - (sent - phase.tasks)).min(tasks - sent);
            // Top up in full datagrams, or with what is left.
            if room > 0 && (room >= TASKS_PER_DATAGRAM as u64 || sent + room == tasks) {
                let n = room.min(TASKS_PER_DATAGRAM as u64);
                self.submit(n as usize)?;
                sent += n;
                continue;
            }
            self.collect(1, deadline, &mut phase)?;
        }
        phase.took = began.elapsed();
        Ok(phase)
    }

    /// Sends `n` tasks in one datagram, stamped now.
    fn submit(&mut self, n: usize) -> anyhow::Result<()> {
        let mut datagram = [0u8; TASK_BYTES * TASKS_PER_DATAGRAM];
        let now = unix_now_ns();
        for task in datagram.chunks_exact_mut(TASK_BYTES).take(n) {
            task[..8].copy_from_slice(&self.next_task.to_le_bytes());
            task[8..].copy_from_slice(&now.to_le_bytes());
            self.next_task += 1;
        }
        self.submitter.send_to(&datagram[..n * TASK_BYTES], self.relay_addr)?;
        Ok(())
    }

    /// Waits for `n` results, recording each one's delays; fails past `deadline`.
    fn collect(&self, n: u64, deadline: Instant, phase: &mut Phase) -> anyhow::Result<()> {
        let mut buf = [0u8; 64];
        let left = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(!left.is_zero(), "the phase's time ran out after {} results", phase.tasks);
        // One receive timeout for these `n`: they may overrun the deadline by that much.
        self.submitter.set_read_timeout(Some(left))?;
        for _ in 0..n {
            let len = match self.submitter.recv(&mut buf) {
                Ok(len) => len,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    anyhow::bail!("no result within the phase's time: {} results", phase.tasks)
                }
                Err(e) => return Err(e.into()),
            };
            let back = unix_now_ns();
            anyhow::ensure!(len == RESULT_BYTES, "a result of {len} bytes");
            let field = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
            let (submitted, started) = (field(8), field(16));
            phase.start_us.0.push(started.saturating_sub(submitted) as f64 / 1e3);
            phase.result_us.0.push(back.saturating_sub(submitted) as f64 / 1e3);
            phase.tasks += 1;
        }
        Ok(())
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %format!("{e:#}"), "a udp-floor thread failed"),
                Err(_) => tracing::warn!("a udp-floor thread panicked"),
            }
        }
    }
}

/// Pairs queued tasks with idle workers, in arrival order, until stopped.
fn relay_loop(socket: &UdpSocket, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut received = Batch::new(64);
    let mut sending = Batch::new(64);
    let mut tasks: VecDeque<[u8; TASK_BYTES]> = VecDeque::new();
    let mut idle: VecDeque<SocketAddrV4> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        for i in 0..received.recv(socket)? {
            match received.received(i) {
                (b, Some(from)) if b == IDLE => idle.push_back(from),
                (b, _) if !b.is_empty() && b.len() % TASK_BYTES == 0 => {
                    tasks.extend(b.chunks_exact(TASK_BYTES).map(|t| <[u8; TASK_BYTES]>::try_from(t).expect("16 bytes")))
                }
                (b, from) => tracing::warn!(len = b.len(), ?from, "udp-floor relay: a datagram it does not know"),
            }
        }
        while !idle.is_empty() && !tasks.is_empty() {
            let (worker, task) = (idle.pop_front().expect("not empty"), tasks.pop_front().expect("not empty"));
            sending.push(worker, |buf| {
                buf[..TASK_BYTES].copy_from_slice(&task);
                TASK_BYTES
            });
            if sending.is_full() {
                sending.flush(socket);
            }
        }
        sending.flush(socket);
    }
    Ok(())
}

/// Says it is idle, runs each task it is sent, and sends its result, until stopped.
fn worker_loop(
    socket: &UdpSocket,
    relay: SocketAddr,
    submitter: SocketAddr,
    workload: Workload,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    socket.send_to(&IDLE, relay)?;
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        let len = match socket.recv(&mut buf) {
            Ok(len) => len,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e.into()),
        };
        let started = unix_now_ns();
        anyhow::ensure!(len == TASK_BYTES, "a task of {len} bytes");
        if let Workload::Sleep { micros } = workload {
            std::thread::sleep(Duration::from_micros(micros.into()));
        }
        let mut result = [0u8; RESULT_BYTES];
        result[..TASK_BYTES].copy_from_slice(&buf[..TASK_BYTES]);
        result[TASK_BYTES..].copy_from_slice(&started.to_le_bytes());
        socket.send_to(&IDLE, relay)?;
        socket.send_to(&result, submitter)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_runs_every_task_of_the_burst_and_the_waves_once() {
        let args = PeersArgs { tasks: Some(300), waves: Some(5), workers: 3, ..PeersArgs::every_system(true) };
        for workload in [Workload::Noop, Workload::Sleep { micros: 200 }] {
            let m = measure(workload, &args);
            assert_eq!(m.status, Status::Ok, "{m:?}");
            assert_eq!(m.idle_tasks, Some(15), "five waves of three");
            let (p50, p99) = (m.delay_p50_us.unwrap(), m.delay_p99_us.unwrap());
            assert!(p50 > 0.0 && p99 >= p50, "{m:?}");
            assert!(m.result_p50_us.unwrap() >= p50, "{m:?}");
            assert!(m.throughput_tasks_per_s.unwrap() > 0.0 && m.burst_delay_p50_us.unwrap() > 0.0, "{m:?}");
        }
    }

    #[test]
    fn a_phase_that_cannot_finish_fails_with_a_reason() {
        // No workers: nothing ever runs.
        let mut floor = Floor::start(0, Workload::Noop).unwrap();
        let err = floor.waves(1, 2, Duration::from_millis(200)).err().expect("no worker to run it");
        drop(floor);
        assert!(format!("{err:#}").contains("results"), "{err:#}");
    }
}
