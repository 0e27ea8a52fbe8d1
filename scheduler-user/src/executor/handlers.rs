//! The handlers an executor runs. Only these exist: `noop`, `sleep`, `spin`, and `exec`
//! for commands the operator put on the allow-list. Anything else is refused, never run.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use scheduler_common::descriptor::{valid_exec_name, DescriptorError, Handler};
use scheduler_common::{STATUS_FAILED, STATUS_OK, STATUS_REFUSED};

/// One allow-listed command: the name a descriptor carries and the command line it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRule {
    pub name: String,
    pub command: String,
}

impl ExecRule {
    /// Parses `NAME=COMMAND` as given to `--allow-exec`.
    pub fn parse(s: &str) -> anyhow::Result<ExecRule> {
        let (name, command) = s.split_once('=').context("expected NAME=COMMAND")?;
        if !valid_exec_name(name.as_bytes()) {
            bail!("exec name {name:?} must be 1 to 14 characters of A-Z a-z 0-9 _ . -");
        }
        if command.trim().is_empty() {
            bail!("exec name {name:?} has an empty command");
        }
        Ok(ExecRule { name: name.to_owned(), command: command.to_owned() })
    }
}

/// Why a task was refused (reported as STATUS_REFUSED; the handler never ran).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Descriptor(DescriptorError),
    /// An exec name that is not on this executor's allow-list.
    NotAllowed,
    /// A sleep or spin longer than the task time limit.
    TooLong {
        micros: u32,
    },
    /// A spec task reached an executor started without a [`SpecRunner`].
    NoSpecRunner,
    /// The [`SpecRunner`] did not run the spec (its RESULT to the client says why).
    SpecRefused,
    /// The task needs resources this executor does not offer (the scheduler erred).
    MissingResources {
        needed: u8,
        offered: u8,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Descriptor(e) => write!(f, "{e}"),
            Refusal::NotAllowed => write!(f, "command not on the allow-list"),
            Refusal::NoSpecRunner => write!(f, "spec task on an executor without spec handlers"),
            Refusal::SpecRefused => write!(f, "spec refused (the RESULT says why)"),
            Refusal::TooLong { micros } => write!(f, "duration {micros} us exceeds the task time limit"),
            Refusal::MissingResources { needed, offered } => {
                write!(f, "task needs resources {needed:#010b}, executor offers {offered:#010b}")
            }
        }
    }
}

/// Runs tasks whose descriptor names a spec (handler id 4, SPEC): fetches the spec from
/// the task's client, runs the handler it names, sends the RESULT back. The program that
/// starts the executors supplies it (the `bolt` crate's `Executor` with its registered
/// handlers); it runs on the executor's thread.
pub trait SpecRunner: Send + Sync + std::fmt::Debug {
    /// `spec_server`: the ENTRY's client_ip with the descriptor's port; `node`: this
    /// host; `job`: the task's (uid, jid), which own what it stores.
    fn run(&self, spec_server: std::net::SocketAddr, spec_id: u64, node: u16, job: scheduler_common::JobRef)
        -> Outcome;
}

/// What running one descriptor came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The handler ran and failed (a command exited non-zero, could not start, or was
    /// killed at the time limit).
    Failed,
    Refused(Refusal),
}

impl Outcome {
    /// The COMPLETE status code for this outcome.
    pub fn status(self) -> u8 {
        match self {
            Outcome::Ok => STATUS_OK,
            Outcome::Failed => STATUS_FAILED,
            Outcome::Refused(_) => STATUS_REFUSED,
        }
    }
}

/// The handlers of one executor process: shared read-only by all its executor threads.
#[derive(Clone, Debug)]
pub struct Handlers {
    allow: Vec<ExecRule>,
    /// Longest a task may take: longer sleep/spin requests are refused, commands are
    /// killed when they reach it.
    time_limit: Duration,
}

impl Handlers {
    pub fn new(allow: Vec<ExecRule>, time_limit: Duration) -> Handlers {
        Handlers { allow, time_limit }
    }

    pub fn allow_list(&self) -> &[ExecRule] {
        &self.allow
    }

    /// Decodes and runs one descriptor. Never panics on bad input and never runs a
    /// command that is not on the allow-list.
    pub fn run(&self, desc: &[u8; 16]) -> Outcome {
        let handler = match Handler::decode(desc) {
            Ok(h) => h,
            Err(e) => return Outcome::Refused(Refusal::Descriptor(e)),
        };
        match handler {
            Handler::Noop => Outcome::Ok,
            Handler::Sleep { micros } => match self.bounded(micros) {
                Ok(d) => {
                    std::thread::sleep(d);
                    Outcome::Ok
                }
                Err(r) => Outcome::Refused(r),
            },
            Handler::Spin { micros } => match self.bounded(micros) {
                Ok(d) => {
                    spin_for(d);
                    Outcome::Ok
                }
                Err(r) => Outcome::Refused(r),
            },
            Handler::Exec { name } => match self.allow.iter().find(|r| r.name.as_bytes() == name) {
                Some(rule) => run_command(rule, self.time_limit),
                None => Outcome::Refused(Refusal::NotAllowed),
            },
            // An executor with a SpecRunner hands spec tasks to it before they get here.
            Handler::Spec { .. } => Outcome::Refused(Refusal::NoSpecRunner),
        }
    }

    fn bounded(&self, micros: u32) -> Result<Duration, Refusal> {
        let d = Duration::from_micros(micros as u64);
        if d > self.time_limit {
            return Err(Refusal::TooLong { micros });
        }
        Ok(d)
    }
}

/// Burns CPU with integer arithmetic (xorshift) until `d` has passed; returns the final
/// state so the work cannot be optimised away. The clock is read every 64 rounds
/// (well under a microsecond of work) so the overshoot stays small.
pub fn spin_for(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        if start.elapsed() >= d {
            return std::hint::black_box(x);
        }
    }
}

/// Runs an allow-listed command through `/bin/sh -c` with no input and discarded output.
/// The command line comes from the operator's allow-list only; nothing from the wire
/// reaches it except the name used to look it up.
fn run_command(rule: &ExecRule, limit: Duration) -> Outcome {
    let mut child = match Command::new("/bin/sh")
        .arg("-c")
        .arg(&rule.command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(name = %rule.name, error = %e, "allow-listed command could not start");
            return Outcome::Failed;
        }
    };
    let deadline = Instant::now() + limit;
    // Poll with a growing pause: short commands are seen quickly, long ones cost little.
    let mut pause = Duration::from_micros(20);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Outcome::Ok,
            Ok(Some(status)) => {
                tracing::debug!(name = %rule.name, %status, "command failed");
                return Outcome::Failed;
            }
            Ok(None) if Instant::now() >= deadline => {
                tracing::warn!(name = %rule.name, limit_ms = limit.as_millis() as u64, "command reached the time limit; killed");
                let _ = child.kill();
                let _ = child.wait();
                return Outcome::Failed;
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
            Err(e) => {
                tracing::warn!(name = %rule.name, error = %e, "waiting for command failed");
                let _ = child.kill();
                let _ = child.wait();
                return Outcome::Failed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_common::descriptor::HANDLER_EXEC;

    fn handlers(allow: &[&str]) -> Handlers {
        let rules = allow.iter().map(|s| ExecRule::parse(s).unwrap()).collect();
        Handlers::new(rules, Duration::from_secs(2))
    }

    fn desc(h: Handler<'_>) -> [u8; 16] {
        h.encode().unwrap()
    }

    #[test]
    fn noop_returns_ok_at_once() {
        let t = Instant::now();
        assert_eq!(handlers(&[]).run(&desc(Handler::Noop)), Outcome::Ok);
        assert!(t.elapsed() < Duration::from_millis(50));
    }

    #[test]
    fn spin_runs_about_as_long_as_asked() {
        let h = handlers(&[]);
        for micros in [200u32, 2_000] {
            let t = Instant::now();
            assert_eq!(h.run(&desc(Handler::Spin { micros })), Outcome::Ok);
            let took = t.elapsed();
            let asked = Duration::from_micros(micros as u64);
            assert!(took >= asked, "spin {micros} us took only {took:?}");
            // Generous upper bound: the machine is shared, the thread may be descheduled.
            assert!(took < asked + Duration::from_millis(50), "spin {micros} us took {took:?}");
        }
    }

    #[test]
    fn spin_does_cpu_work() {
        // The result depends on how many rounds ran, so it is not the seed.
        assert_ne!(spin_for(Duration::from_micros(50)), 0x9E37_79B9_7F4A_7C15);
    }

    #[test]
    fn sleep_sleeps_at_least_as_long_as_asked() {
        let t = Instant::now();
        assert_eq!(handlers(&[]).run(&desc(Handler::Sleep { micros: 3_000 })), Outcome::Ok);
        let took = t.elapsed();
        assert!(took >= Duration::from_micros(3_000), "took {took:?}");
        assert!(took < Duration::from_millis(100), "took {took:?}");
    }

    #[test]
    fn durations_over_the_limit_are_refused_without_running() {
        let h = Handlers::new(vec![], Duration::from_millis(1));
        let t = Instant::now();
        assert_eq!(
            h.run(&desc(Handler::Sleep { micros: 5_000_000 })),
            Outcome::Refused(Refusal::TooLong { micros: 5_000_000 })
        );
        assert_eq!(
            h.run(&desc(Handler::Spin { micros: 5_000_000 })),
            Outcome::Refused(Refusal::TooLong { micros: 5_000_000 })
        );
        assert!(t.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn exec_runs_allow_listed_commands_and_reports_failure() {
        let h = handlers(&["ok=true", "bad=exit 3"]);
        assert_eq!(h.run(&desc(Handler::Exec { name: b"ok" })), Outcome::Ok);
        assert_eq!(h.run(&desc(Handler::Exec { name: b"bad" })), Outcome::Failed);
        assert_eq!(Outcome::Failed.status(), STATUS_FAILED);
    }

    #[test]
    fn exec_refuses_names_not_on_the_allow_list() {
        let dir = std::env::temp_dir().join(format!("bolt-exec-refusal-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        // "touch" is allowed under another name only; asking for "touch" must not run it.
        let h = handlers(&[&format!("mark=touch {}", dir.display())]);
        let out = h.run(&desc(Handler::Exec { name: b"touch" }));
        assert_eq!(out, Outcome::Refused(Refusal::NotAllowed));
        assert_eq!(out.status(), STATUS_REFUSED);
        assert!(!dir.exists(), "a refused command ran");
        // With no allow-list at all, nothing runs.
        assert_eq!(handlers(&[]).run(&desc(Handler::Exec { name: b"mark" })), Outcome::Refused(Refusal::NotAllowed));
        // The allowed name does run (and proves the marker would have shown a run).
        assert_eq!(h.run(&desc(Handler::Exec { name: b"mark" })), Outcome::Ok);
        assert!(dir.exists());
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn exec_is_killed_at_the_time_limit() {
        let h = Handlers::new(vec![ExecRule::parse("long=sleep 5").unwrap()], Duration::from_millis(100));
        let t = Instant::now();
        assert_eq!(h.run(&desc(Handler::Exec { name: b"long" })), Outcome::Failed);
        assert!(t.elapsed() < Duration::from_secs(3), "took {:?}", t.elapsed());
    }

    #[test]
    fn malformed_descriptors_are_refused() {
        let h = handlers(&["ok=true"]);
        let mut d = [0u8; 16];
        d[0] = 200;
        assert_eq!(h.run(&d), Outcome::Refused(Refusal::Descriptor(DescriptorError::UnknownHandler(200))));
        let mut d = desc(Handler::Noop);
        d[9] = 1;
        assert_eq!(h.run(&d), Outcome::Refused(Refusal::Descriptor(DescriptorError::Malformed)));
        // An exec descriptor whose name has a byte outside the allowed set.
        let mut d = [0u8; 16];
        d[0] = HANDLER_EXEC;
        d[1] = 2;
        d[2] = b'o';
        d[3] = b' ';
        assert_eq!(h.run(&d), Outcome::Refused(Refusal::Descriptor(DescriptorError::Malformed)));
    }

    #[test]
    fn allow_exec_parsing() {
        assert_eq!(
            ExecRule::parse("wc=wc -l /etc/hosts").unwrap(),
            ExecRule { name: "wc".into(), command: "wc -l /etc/hosts".into() }
        );
        assert!(ExecRule::parse("novalue").is_err());
        assert!(ExecRule::parse("bad name=true").is_err());
        assert!(ExecRule::parse("waytoolongname15=true").is_err());
        assert!(ExecRule::parse("x=  ").is_err());
    }
}
