//! The handlers an executor runs. Only these exist: `noop`, `sleep`, `spin`, and `exec`
//! for commands the operator put on the allow-list, and for tasks with a spec (data in,
//! data out) the data handlers `stack`, `compare` and `mix` ([`run_data`]). Anything
//! else is refused, never run.

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
    /// A spec task reached an executor started without an object store (`--store`).
    NoStore,
    /// The spec was refused (unknown spec or data handler, bad arguments or inputs); its
    /// text went to the client in RESULT.
    Spec,
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
            Refusal::NoStore => write!(f, "spec task on an executor without an object store"),
            Refusal::Spec => write!(f, "spec refused (reason sent in RESULT)"),
            Refusal::TooLong { micros } => write!(f, "duration {micros} us exceeds the task time limit"),
            Refusal::MissingResources { needed, offered } => {
                write!(f, "task needs resources {needed:#010b}, executor offers {offered:#010b}")
            }
        }
    }
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
            // An executor with a store takes spec tasks before they get here (executor::spec).
            Handler::Spec { .. } => Outcome::Refused(Refusal::NoStore),
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

/// The data handlers a spec may name.
pub const DATA_HANDLERS: [&str; 3] = ["stack", "compare", "mix"];
/// Most passes over its inputs a data handler makes.
pub const MAX_PASSES: u32 = 10_000;
/// Largest output `mix` writes.
pub const MAX_MIX_OUTPUT: u32 = 16 << 20;

/// How a data handler ended when it did not produce an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataFailure {
    /// Not run: unknown handler, bad arguments, wrong number of inputs.
    Refused(String),
    /// Ran and failed.
    Failed(String),
}

/// Runs data handler `name` over `inputs` with `args`; returns its output.
///
/// `args` starts with `passes` (u32, big-endian; empty args mean 1): the handler reads
/// its inputs that many times, so its CPU cost is proportional to passes × input bytes.
/// - `stack` (image stacking): one input, reduced to 88 bytes: a 16-bin histogram of its
///   bytes (u32 each), then sum, sum of squares and count (u64 each).
/// - `compare` (all-pairs): two inputs compared byte by byte over the shorter: equal
///   bytes, sum of absolute differences, and the length difference (u64 each, 24 bytes).
/// - `mix` (DAG tasks): any inputs, hashed (FNV-1a, 64 bit) in order, expanded to
///   `out_len` bytes (u32 after passes, at most 16 MiB) with xorshift from the hash.
pub fn run_data(name: &str, args: &[u8], inputs: &[&[u8]]) -> Result<Vec<u8>, DataFailure> {
    let word = |i: usize| args.get(4 * i..4 * i + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let passes = if args.is_empty() { 1 } else { word(0).ok_or_else(|| bad_args(name, args))? };
    if passes == 0 || passes > MAX_PASSES {
        return Err(DataFailure::Refused(format!("{name}: passes {passes} outside 1..={MAX_PASSES}")));
    }
    let want = |n: usize| {
        if inputs.len() == n {
            Ok(())
        } else {
            Err(DataFailure::Refused(format!("{name} takes {n} input(s), the spec names {}", inputs.len())))
        }
    };
    match name {
        "stack" => {
            if args.len() > 4 {
                return Err(bad_args(name, args));
            }
            want(1)?;
            Ok(stack(inputs[0], passes))
        }
        "compare" => {
            if args.len() > 4 {
                return Err(bad_args(name, args));
            }
            want(2)?;
            Ok(compare(inputs[0], inputs[1], passes))
        }
        "mix" => {
            let out_len = match (args.len(), word(1)) {
                (8, Some(n)) if n <= MAX_MIX_OUTPUT => n,
                _ => return Err(bad_args(name, args)),
            };
            Ok(mix(inputs, passes, out_len as usize))
        }
        other => Err(DataFailure::Refused(format!("unknown data handler {other:?} (known: {DATA_HANDLERS:?})"))),
    }
}

fn bad_args(name: &str, args: &[u8]) -> DataFailure {
    DataFailure::Refused(format!("{name}: {} argument bytes do not fit its arguments", args.len()))
}

fn stack(input: &[u8], passes: u32) -> Vec<u8> {
    let mut bins = [0u64; 16];
    let (mut sum, mut sumsq) = (0u64, 0u64);
    for _ in 0..passes {
        for &b in std::hint::black_box(input) {
            bins[(b >> 4) as usize] += 1;
            sum += b as u64;
            sumsq += (b as u64) * (b as u64);
        }
    }
    let p = passes as u64;
    let mut out = Vec::with_capacity(88);
    for b in bins {
        out.extend_from_slice(&((b / p) as u32).to_be_bytes());
    }
    for v in [sum / p, sumsq / p, input.len() as u64] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
}

fn compare(a: &[u8], b: &[u8], passes: u32) -> Vec<u8> {
    let (mut equal, mut diff) = (0u64, 0u64);
    for _ in 0..passes {
        for (x, y) in std::hint::black_box(a).iter().zip(b) {
            equal += (x == y) as u64;
            diff += x.abs_diff(*y) as u64;
        }
    }
    let p = passes as u64;
    let mut out = Vec::with_capacity(24);
    for v in [equal / p, diff / p, a.len().abs_diff(b.len()) as u64] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out
}

fn mix(inputs: &[&[u8]], passes: u32, out_len: usize) -> Vec<u8> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for _ in 0..passes {
        h = 0xcbf2_9ce4_8422_2325;
        for input in inputs {
            for &b in std::hint::black_box(*input) {
                h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    let mut x = h | 1;
    let mut out = Vec::with_capacity(out_len + 8);
    while out.len() < out_len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_be_bytes());
    }
    out.truncate(out_len);
    out
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
    fn data_handlers_reduce_compare_and_mix() {
        let img = [0u8, 16, 255, 255];
        let out = run_data("stack", &[], &[&img]).unwrap();
        assert_eq!(out.len(), 88);
        assert_eq!(&out[0..4], &1u32.to_be_bytes());
        assert_eq!(&out[60..64], &2u32.to_be_bytes());
        assert_eq!(&out[64..72], &526u64.to_be_bytes());
        // More passes: same answer, proportionally more work.
        assert_eq!(run_data("stack", &3u32.to_be_bytes(), &[&img]).unwrap(), out);
        let cmp = run_data("compare", &[], &[&[1, 2, 3], &[1, 5]]).unwrap();
        assert_eq!(cmp, [1u64, 3, 1].iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>());
        let args = [1u32.to_be_bytes(), 100u32.to_be_bytes()].concat();
        let m = run_data("mix", &args, &[b"a", b"b"]).unwrap();
        assert_eq!(m.len(), 100);
        assert_eq!(run_data("mix", &args, &[b"a", b"b"]).unwrap(), m);
        assert_ne!(run_data("mix", &args, &[b"b", b"a"]).unwrap(), m);
        assert_eq!(run_data("mix", &args, &[]).unwrap().len(), 100);
    }

    #[test]
    fn data_handlers_refuse_bad_specs() {
        let refused = |r: Result<Vec<u8>, DataFailure>| matches!(r, Err(DataFailure::Refused(_)));
        assert!(refused(run_data("stack", &[], &[])));
        assert!(refused(run_data("compare", &[], &[b"a"])));
        assert!(refused(run_data("stack", &[0, 0, 0], &[b"a"])));
        assert!(refused(run_data("stack", &0u32.to_be_bytes(), &[b"a"])));
        assert!(refused(run_data("mix", &1u32.to_be_bytes(), &[])));
        assert!(refused(run_data("rm", &[], &[])));
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
