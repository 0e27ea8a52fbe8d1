//! The clocks userspace reads: CLOCK_MONOTONIC, which `Instant`, `bpf_ktime_get_ns` and
//! timerfd all count on, a thread's CPU time, and a deadline timer that wakes at an
//! `Instant` within the kernel's timer slack.
//!
//! tokio's timer counts whole milliseconds: `sleep_until` wakes on a millisecond tick of
//! its wheel after the deadline, about a millisecond late (1.2 ms at the median for the
//! deadlines of this module's test, on the development VM), by an amount that depends on
//! the phase of the deadline against those ticks. A client replaying jobs at set instants
//! sent each late by an amount that followed when it had last woken (docs/benchmarks.md,
//! "The clients' timer").

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId as TimerClock, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{clock_gettime, ClockId};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// `clock` now (zero if it cannot be read: every clock named here exists on Linux).
fn read(clock: ClockId) -> Duration {
    clock_gettime(clock).map(Duration::from).unwrap_or_default()
}

/// Nanoseconds of CLOCK_MONOTONIC: the clock `bpf_ktime_get_ns` reads.
pub fn monotonic_ns() -> u64 {
    read(ClockId::CLOCK_MONOTONIC).as_nanos() as u64
}

/// CPU time the calling thread has used.
pub fn thread_cpu() -> Duration {
    read(ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// The [`Instant`] of a CLOCK_MONOTONIC time in nanoseconds (`bpf_ktime_get_ns`, a time
/// in the past): Instant counts on the same clock, but its value cannot be built from one.
pub fn instant_of_monotonic_ns(ns: u64) -> Instant {
    let now = Instant::now();
    let ago = monotonic_ns().saturating_sub(ns);
    now.checked_sub(Duration::from_nanos(ago)).unwrap_or(now)
}

/// The CLOCK_MONOTONIC nanoseconds of `at` (now, for an instant in the past).
fn monotonic_ns_of(at: Instant) -> u64 {
    let now = Instant::now();
    monotonic_ns() + at.saturating_duration_since(now).as_nanos() as u64
}

/// The timerfd as tokio's reactor polls it.
struct Timer(TimerFd);

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Wakes at an `Instant` within the kernel's timer slack (50 µs by default), where tokio's
/// timer wakes up to a millisecond late. One timerfd, armed by a wait for a deadline it
/// is not already armed for: a client's loop waits for the same deadline after each
/// datagram, and re-arming would cost a system call every time.
pub struct DeadlineTimer {
    fd: AsyncFd<Timer>,
    /// The deadline the timerfd is armed for, until a wait sees it expire.
    armed: Option<Instant>,
}

impl DeadlineTimer {
    /// Within a tokio runtime (it registers the timerfd with the reactor).
    pub fn new() -> std::io::Result<DeadlineTimer> {
        let fd = TimerFd::new(TimerClock::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC)?;
        // SAFETY: `Timer` owns the timerfd, which stays open, and the same descriptor,
        // until the AsyncFd that holds it is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(Timer(fd), Interest::READABLE) }?;
        Ok(DeadlineTimer { fd, armed: None })
    }

    /// Returns at `at`, or at once if it has passed.
    pub async fn sleep_until(&mut self, at: Instant) -> std::io::Result<()> {
        if self.armed != Some(at) {
            // Absolute time on the timer's clock; it is never 0 (which would disarm it),
            // since CLOCK_MONOTONIC has counted since boot. Arming clears an expiry not yet
            // read.
            let when = TimeSpec::from_duration(Duration::from_nanos(monotonic_ns_of(at)));
            self.fd.get_ref().0.set(Expiration::OneShot(when), TimerSetTimeFlags::TFD_TIMER_ABSTIME)?;
            self.armed = Some(at);
        }
        loop {
            let mut ready = self.fd.readable().await?;
            // Reading the expiry count consumes it; EAGAIN is a readiness left from an
            // earlier arming.
            match ready.get_inner().0.wait() {
                Ok(()) => {
                    self.armed = None;
                    return Ok(());
                }
                Err(Errno::EAGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monotonic_time_maps_back_to_its_instant() {
        let before = Instant::now();
        let at = instant_of_monotonic_ns(monotonic_ns());
        assert!(at >= before && at <= Instant::now());
    }

    /// The deadline timer wakes at its deadline, not before, and well within a
    /// millisecond after it (tokio's timer resolution) on an idle thread; a deadline
    /// already past returns at once; re-arming after an expiry works.
    #[tokio::test(flavor = "current_thread")]
    async fn the_deadline_timer_wakes_at_its_deadline_to_well_under_a_millisecond() {
        let mut timer = DeadlineTimer::new().unwrap();
        let mut lates = Vec::new();
        for k in 0..20u64 {
            let at = Instant::now() + Duration::from_micros(1_300 + 37 * k);
            timer.sleep_until(at).await.unwrap();
            let woke = Instant::now();
            assert!(woke >= at, "woke before its deadline");
            lates.push(woke - at);
        }
        lates.sort();
        // The median, so that a machine busy with other tests does not fail it; tokio's
        // timer is late by about a millisecond at the median on these deadlines.
        assert!(lates[lates.len() / 2] < Duration::from_micros(400), "{lates:?}");
        // A wait given up (as `select!` drops it when a datagram comes first) leaves the
        // timer armed; waiting again for the same deadline does not re-arm it and still
        // wakes at it.
        let at = Instant::now() + Duration::from_millis(3);
        let given_up = tokio::time::timeout(Duration::from_millis(1), timer.sleep_until(at)).await;
        assert!(given_up.is_err(), "the first wait was given up before its deadline");
        timer.sleep_until(at).await.unwrap();
        assert!(Instant::now() >= at, "the second wait for the same deadline woke before it");
        let past = Instant::now() - Duration::from_millis(5);
        tokio::time::timeout(Duration::from_secs(1), timer.sleep_until(past)).await.expect("at once").unwrap();
    }
}
