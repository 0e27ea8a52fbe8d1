//! Algorithm 1 of MATRIX ("Decision Making to Put a Task in the Right Ready Queue") and
//! the thresholds of its four policies.

use std::time::Duration;

/// One input object of a task, as placement needs it: which host holds it and how big it
/// is. (The object's name matters to the executor that fetches it, not to placement.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputObject {
    /// The node id of the host that holds the object.
    pub host: u16,
    /// Bytes.
    pub size: u64,
}

/// Where a ready task goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// SUBMIT to tier 2 (MATRIX's SReadyQ: any host may run or steal it).
    Shared,
    /// PIN to this host's dedicated ring (MATRIX's LReadyQ: runs only there, unless the
    /// host's FLDS monitor moves it to its shared rings).
    Pinned { host: u16 },
}

/// MATRIX's `t`: the highest data-transfer rate, in bytes per second, at which a task's
/// data may still move to wherever the task runs. A task whose data divided by the
/// estimated task length exceeds it is pinned. The paper sets it to a percentage of the
/// link bandwidth ("10% multiplying the theoretical network bandwidth (e.g. 10Gbps)"),
/// the percentage being the ratio of transfer time to task length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold(f64);

/// The paper's example link: 10 Gb/s, in bytes per second.
pub const DEFAULT_LINK_BYTES_PER_SEC: f64 = 10e9 / 8.0;
/// The paper's example percentage for RLDS and FLDS: 10 % of the link.
pub const DEFAULT_RLDS_FRACTION: f64 = 0.1;

impl Threshold {
    /// MLB's `t = LONG_MAX`: nothing is ever pinned.
    pub const UNBOUNDED: Threshold = Threshold(f64::INFINITY);
    /// MDL's `t = 0`: every task that reads any data is pinned.
    pub const ZERO: Threshold = Threshold(0.0);

    /// A threshold in bytes per second; `None` for a negative or NaN rate.
    pub fn bytes_per_sec(rate: f64) -> Option<Threshold> {
        (rate >= 0.0).then_some(Threshold(rate))
    }

    /// `fraction` of a link of `link_bytes_per_sec`.
    pub fn fraction_of_link(fraction: f64, link_bytes_per_sec: f64) -> Option<Threshold> {
        Threshold::bytes_per_sec(fraction * link_bytes_per_sec)
    }

    pub fn as_bytes_per_sec(self) -> f64 {
        self.0
    }

    /// True when moving `bytes` within `est_task_length` stays at or under the rate
    /// (Algorithm 1's `size / est_task_length <= t`). A zero task length makes any data
    /// an infinite rate; no data is always within the rate (0 <= t for every t >= 0).
    fn admits(self, bytes: u64, est_task_length: Duration) -> bool {
        if bytes == 0 {
            return true;
        }
        let secs = est_task_length.as_secs_f64();
        if secs == 0.0 {
            return self.0.is_infinite();
        }
        bytes as f64 / secs <= self.0
    }
}

/// A job's placement policy; the client may change it at run time, and the next ready
/// task is placed by the new one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PlacementPolicy {
    /// Maximised load balancing: everything shared.
    Mlb,
    /// Maximised data locality: every task with input data pinned to its largest input.
    Mdl,
    /// Rigid load balancing and data-locality segregation: pinned above the threshold,
    /// and a pinned task runs only on its host.
    Rlds(Threshold),
    /// Flexible: as RLDS, and the host's monitor may move pinned tasks to its shared
    /// rings when its dedicated ring would take longer than `tt` to run.
    Flds(Threshold),
}

impl PlacementPolicy {
    /// The policy's `t` in Algorithm 1.
    pub fn threshold(self) -> Threshold {
        match self {
            PlacementPolicy::Mlb => Threshold::UNBOUNDED,
            PlacementPolicy::Mdl => Threshold::ZERO,
            PlacementPolicy::Rlds(t) | PlacementPolicy::Flds(t) => t,
        }
    }

    /// True when the host's FLDS monitor may move this policy's pinned tasks.
    pub fn movable(self) -> bool {
        matches!(self, PlacementPolicy::Flds(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            PlacementPolicy::Mlb => "mlb",
            PlacementPolicy::Mdl => "mdl",
            PlacementPolicy::Rlds(_) => "rlds",
            PlacementPolicy::Flds(_) => "flds",
        }
    }

    /// Algorithm 1 under this policy.
    pub fn place(self, inputs: &[InputObject], est_task_length: Duration) -> Placement {
        place(inputs, self.threshold(), est_task_length)
    }
}

/// Algorithm 1: shared when all of the task's data, or else its largest object, moves
/// within the rate `t` over the estimated task length; otherwise pinned to the host of
/// the largest object (the first of equal largest ones, as the paper's strict `>`).
pub fn place(inputs: &[InputObject], t: Threshold, est_task_length: Duration) -> Placement {
    let all: u64 = inputs.iter().fold(0u64, |sum, o| sum.saturating_add(o.size));
    if t.admits(all, est_task_length) {
        return Placement::Shared;
    }
    let Some(largest) = largest(inputs) else {
        return Placement::Shared;
    };
    if t.admits(largest.size, est_task_length) {
        Placement::Shared
    } else {
        Placement::Pinned { host: largest.host }
    }
}

/// The largest of a task's inputs, the first of equal largest ones (the paper's strict
/// `>`): the host a pinned task goes to.
pub fn largest(inputs: &[InputObject]) -> Option<&InputObject> {
    inputs.iter().fold(None::<&InputObject>, |best, o| match best {
        Some(b) if o.size <= b.size => Some(b),
        _ => Some(o),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;

    fn obj(host: u16, size: u64) -> InputObject {
        InputObject { host, size }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn mlb_shares_everything() {
        let inputs = [obj(3, 24 * MB), obj(4, 2 * MB)];
        assert_eq!(PlacementPolicy::Mlb.place(&inputs, ms(100)), Placement::Shared);
        assert_eq!(PlacementPolicy::Mlb.place(&inputs, Duration::ZERO), Placement::Shared);
    }

    #[test]
    fn mdl_pins_any_data_and_shares_tasks_without_data() {
        assert_eq!(PlacementPolicy::Mdl.place(&[obj(7, 1)], ms(100)), Placement::Pinned { host: 7 });
        assert_eq!(PlacementPolicy::Mdl.place(&[], ms(100)), Placement::Shared);
        // Empty objects are no data: 0 / len <= 0.
        assert_eq!(PlacementPolicy::Mdl.place(&[obj(7, 0), obj(8, 0)], ms(100)), Placement::Shared);
    }

    #[test]
    fn the_largest_input_decides_the_host_and_the_first_of_equals_wins() {
        let inputs = [obj(1, 5 * MB), obj(2, 12 * MB), obj(3, 12 * MB), obj(4, 7 * MB)];
        assert_eq!(PlacementPolicy::Mdl.place(&inputs, ms(100)), Placement::Pinned { host: 2 });
    }

    #[test]
    fn rlds_compares_the_total_then_the_largest_object_with_t() {
        // t = 10 % of 10 Gb/s = 125 MB/s; est 100 ms: 12.5 MB may move.
        let t = Threshold::fraction_of_link(DEFAULT_RLDS_FRACTION, DEFAULT_LINK_BYTES_PER_SEC).unwrap();
        assert_eq!(t.as_bytes_per_sec(), 125_000_000.0);
        let rlds = PlacementPolicy::Rlds(t);
        // All-pairs: 12 MB + 12 MB = 24 MB / 0.1 s = 240 MB/s > t; largest 12 MB / 0.1 s =
        // 120 MB/s <= t: shared.
        assert_eq!(rlds.place(&[obj(1, 12 * MB), obj(2, 12 * MB)], ms(100)), Placement::Shared);
        // 13 MB / 0.1 s = 130 MB/s > t: pinned to the 13 MB object's host.
        assert_eq!(rlds.place(&[obj(1, 2 * MB), obj(2, 13 * MB)], ms(100)), Placement::Pinned { host: 2 });
        // Exactly at the rate is shared (<=): 12.5 MB in 100 ms.
        assert_eq!(rlds.place(&[obj(5, 12_500_000)], ms(100)), Placement::Shared);
        assert_eq!(rlds.place(&[obj(5, 12_500_001)], ms(100)), Placement::Pinned { host: 5 });
        // Total within the rate: shared without looking at the largest.
        assert_eq!(rlds.place(&[obj(1, 4 * MB), obj(2, 4 * MB)], ms(100)), Placement::Shared);
        // Longer tasks tolerate more data: 13 MB over 200 ms = 65 MB/s.
        assert_eq!(rlds.place(&[obj(1, 2 * MB), obj(2, 13 * MB)], ms(200)), Placement::Shared);
    }

    #[test]
    fn flds_places_as_rlds_and_is_the_only_movable_policy() {
        let t = Threshold::bytes_per_sec(50.0 * MB as f64).unwrap();
        let inputs = [obj(9, 6 * MB)];
        // 6 MB / 0.1 s = 60 MB/s > 50 MB/s.
        assert_eq!(PlacementPolicy::Flds(t).place(&inputs, ms(100)), Placement::Pinned { host: 9 });
        assert_eq!(PlacementPolicy::Flds(t).place(&inputs, ms(100)), PlacementPolicy::Rlds(t).place(&inputs, ms(100)));
        assert!(PlacementPolicy::Flds(t).movable());
        assert!(![PlacementPolicy::Mlb, PlacementPolicy::Mdl, PlacementPolicy::Rlds(t)].iter().any(|p| p.movable()));
    }

    #[test]
    fn a_zero_task_length_pins_data_unless_t_is_unbounded() {
        let t = Threshold::bytes_per_sec(1e12).unwrap();
        assert_eq!(place(&[obj(2, 1)], t, Duration::ZERO), Placement::Pinned { host: 2 });
        assert_eq!(place(&[obj(2, 1)], Threshold::UNBOUNDED, Duration::ZERO), Placement::Shared);
    }

    #[test]
    fn negative_or_nan_thresholds_are_refused() {
        assert!(Threshold::bytes_per_sec(-1.0).is_none());
        assert!(Threshold::bytes_per_sec(f64::NAN).is_none());
    }
}
