//! Claims with leases, with real `bolt executor` processes on loopback: an executor
//! claims a long exactly-once task, renews its lease past the task timeout would allow
//! without leases, and is SIGKILLed; once the lease lapses the client resends the task at
//! once (not after its task timeout), another executor claims it, and it runs to
//! completion exactly once.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use scheduler_common::descriptor::Handler;
use scheduler_user::client::{Client, ClientConfig, TaskSpec, TaskState};
use scheduler_user::switch::{self, SwitchConfig};

const BOLT: &str = env!("CARGO_BIN_EXE_bolt-cli");
/// Nothing in this test waits longer than this.
const DEADLINE: Duration = Duration::from_secs(60);
/// How long the task sleeps.
const TASK: Duration = Duration::from_millis(2_500);
/// The client's lease period (the shortest allowed).
const LEASE: Duration = Duration::from_millis(scheduler_common::MIN_CLAIM_LEASE_MS);

/// A `bolt executor` process, SIGKILLed when dropped if still running.
struct ExecutorProcess(Child);

impl ExecutorProcess {
    fn start(switch: std::net::SocketAddr, node: u16) -> ExecutorProcess {
        let child = Command::new(BOLT)
            .args(["executor", "--switch", &switch.to_string(), "--node", &node.to_string(), "--resources", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bolt executor starts");
        ExecutorProcess(child)
    }

    /// SIGKILL (std's kill is SIGKILL on Unix) and reap.
    fn kill(&mut self) {
        self.0.kill().expect("SIGKILL the executor");
        self.0.wait().expect("reap the executor");
    }
}

impl Drop for ExecutorProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn a_claim_is_regranted_after_its_lease_when_the_executor_is_sigkilled() {
    let cfg = SwitchConfig { listen: "127.0.0.1:0".parse().unwrap(), ..SwitchConfig::default() };
    let switch = switch::spawn(cfg).expect("switch starts");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let mut cfg = ClientConfig::new(switch.local_addr());
        // Far longer than the test: only the lease can bring the task back.
        cfg.tracker.task_timeout = Duration::from_secs(30);
        cfg.tracker.max_attempts = 2;
        cfg.tracker.claim_lease = LEASE;
        let mut client = Client::bind(cfg).await.unwrap();
        let mut spec = TaskSpec::new(Handler::Sleep { micros: TASK.as_micros() as u32 }, 1, 0).unwrap();
        spec.exactly_once = true;
        let start = Instant::now();
        let deadline = start + DEADLINE;
        let mut first = ExecutorProcess::start(switch.local_addr(), 1);
        client.submit(&[spec]).await.unwrap();

        // The first executor claims the task.
        while client.tracker().stats().claims_granted == 0 {
            assert!(Instant::now() < deadline, "no claim within {DEADLINE:?}");
            client.drive_until(Instant::now() + Duration::from_millis(20)).await.unwrap();
        }
        let claimed = Instant::now();
        // It holds the lease past two lease periods by renewing it.
        client.drive_until(claimed + LEASE * 2).await.unwrap();
        let s = client.tracker().stats().clone();
        assert!(s.leases_renewed >= 4, "renewals {}", s.leases_renewed);
        assert_eq!((s.leases_expired, s.resubmitted), (0, 0));
        assert_eq!(client.tracker().states().state_of(0), Some(TaskState::Running));

        // SIGKILL it mid-task; a second executor comes up.
        first.kill();
        let killed = Instant::now();
        let _second = ExecutorProcess::start(switch.local_addr(), 2);
        let finished = client.wait_idle(deadline).await.unwrap();
        assert!(finished, "the task did not finish within {DEADLINE:?}");
        let took = killed.elapsed();

        let s = client.tracker().stats();
        let summary = client.summary();
        // Re-granted after the lease: the lapsed lease brought the task back, not the
        // task timeout, and the new claim is on a new attempt.
        assert_eq!(s.leases_expired, 1, "{s:?}");
        assert_eq!(s.timeouts, 0, "{s:?}");
        assert_eq!(s.resubmitted, 1, "{s:?}");
        assert_eq!(s.claims_granted, 2, "{s:?}");
        assert!(took < LEASE + TASK + Duration::from_secs(5), "took {took:?}");
        // Run to completion once: exactly one COMPLETE came back, OK, and nothing else.
        assert_eq!(summary.completed, 1);
        assert_eq!((s.duplicates, s.attempts_failed, s.attempts_refused, s.failed), (0, 0, 0, 0), "{s:?}");
        assert_eq!(client.tracker().states().state_of(0), Some(TaskState::Done));
    });
    switch.shutdown().expect("the switch stops");
}
