//! Tier 2's BEST stamp as the agent sees it: recorded from the tier-2 packets that reach
//! its socket (REFILL and HINT, and the ASSIGN/NOOP it relays to executors), and applied
//! to GET_TASKs it serves from userspace by the same rule as the XDP program
//! ([`Tier2Hint::outranks_local`]).

use scheduler_common::maps::{Tier2Hint, RING_COUNT};

/// CLOCK_MONOTONIC_COARSE in nanoseconds: the clock bpf_ktime_get_coarse_ns() reads, so
/// hints recorded by the program and by the agent compare.
pub fn coarse_now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to write into; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The highest level in `rtrv_prio..=levels` whose ring holds a task, or 0.
pub fn local_best(occupancy: &[i64; RING_COUNT], rtrv_prio: u8, levels: u8) -> u8 {
    (rtrv_prio.max(1)..=levels.min(RING_COUNT as u8)).find(|&p| occupancy[p as usize - 1] > 0).unwrap_or(0)
}

/// How the hint looks now, for the agent's stats.
pub fn describe(hint: Tier2Hint, now_ns: u64) -> (u8, Option<u64>) {
    if hint.0 == 0 {
        return (0, None);
    }
    (hint.best(), Some(now_ns.saturating_sub(hint.read_at_ns()) / 1_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_best_looks_from_the_requested_level_down() {
        let mut occ = [0i64; RING_COUNT];
        occ[1] = 2;
        occ[3] = 1;
        assert_eq!(local_best(&occ, 1, 4), 2);
        assert_eq!(local_best(&occ, 3, 4), 4);
        assert_eq!(local_best(&occ, 3, 3), 0);
    }

    #[test]
    fn stats_show_the_level_and_its_age() {
        assert_eq!(describe(Tier2Hint::default(), 5_000_000), (0, None), "never heard");
        assert_eq!(describe(Tier2Hint::new(2_000_000, 3), 5_000_000), (3, Some(3_000)));
        assert_eq!(describe(Tier2Hint::new(2_000_000, 0), 5_000_000), (0, Some(3_000)), "tier 2 empty");
    }

    #[test]
    fn the_coarse_clock_moves_forward() {
        let a = coarse_now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(coarse_now_ns() > a);
    }
}
