//! `est_task_length`: "the average length of the previous tasks that have been finished".
//! Before any task has finished the paper gives no value; a configured prior stands in.

use std::time::Duration;

/// The running mean of finished tasks' run times.
#[derive(Clone, Copy, Debug)]
pub struct TaskLength {
    prior: Duration,
    finished: u64,
    total_ns: u128,
}

impl TaskLength {
    /// Starts with `prior` as the estimate until the first task finishes.
    pub fn new(prior: Duration) -> TaskLength {
        TaskLength { prior, finished: 0, total_ns: 0 }
    }

    /// A task finished after running for `run`.
    pub fn finished(&mut self, run: Duration) {
        self.finished += 1;
        self.total_ns += run.as_nanos();
    }

    /// Tasks finished so far.
    pub fn count(&self) -> u64 {
        self.finished
    }

    /// The estimate: the mean of finished tasks, or the prior before any.
    pub fn estimate(&self) -> Duration {
        if self.finished == 0 {
            return self.prior;
        }
        let mean = self.total_ns / self.finished as u128;
        Duration::from_nanos(u64::try_from(mean).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prior_stands_until_a_task_finishes_then_the_running_mean() {
        let mut l = TaskLength::new(Duration::from_millis(50));
        assert_eq!(l.estimate(), Duration::from_millis(50));
        l.finished(Duration::from_millis(100));
        assert_eq!(l.estimate(), Duration::from_millis(100));
        l.finished(Duration::from_millis(20));
        l.finished(Duration::from_millis(30));
        assert_eq!(l.estimate(), Duration::from_millis(50));
        assert_eq!(l.count(), 3);
    }
}
