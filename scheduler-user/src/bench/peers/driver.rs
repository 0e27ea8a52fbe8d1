//! Runs one peer's Python driver as a subprocess and reads the JSON lines it prints
//! (peers_common.py writes them). The driver runs in a process group of its own, so the
//! workers it starts (Dask nannies, Celery's pool, Ray's daemons) are ended with it.

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;

/// One line of a driver's output.
#[derive(Debug, Deserialize)]
pub struct DriverLine {
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Absent on an "unavailable" line, which stands for every workload.
    #[serde(default)]
    pub sleep_us: Option<u64>,
    #[serde(default)]
    pub throughput_tasks_per_s: Option<f64>,
    #[serde(default)]
    pub burst_delay_p50_us: Option<f64>,
    #[serde(default)]
    pub burst_delay_p99_us: Option<f64>,
    #[serde(default)]
    pub idle_tasks: Option<u64>,
    #[serde(default)]
    pub delay_p50_us: Option<f64>,
    #[serde(default)]
    pub delay_p99_us: Option<f64>,
    #[serde(default)]
    pub result_p50_us: Option<f64>,
    #[serde(default)]
    pub result_p99_us: Option<f64>,
    #[serde(default)]
    pub burst_result_p50_us: Option<f64>,
    #[serde(default)]
    pub burst_result_p99_us: Option<f64>,
}

/// What came of a driver run: the lines it printed, and why it stopped early if it did.
pub struct DriverRun {
    pub lines: Vec<DriverLine>,
    pub malformed_lines: u64,
    /// Set when the driver timed out or exited non-zero: the cause and its stderr's tail.
    pub error: Option<String>,
}

/// Ends a process group on drop: the driver and everything it started.
struct GroupGuard {
    child: Child,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        // The driver leads its own group (process_group(0)), so its pid is the group id.
        let group = self.child.id() as libc::pid_t;
        // SAFETY: kill has no memory-safety preconditions; ESRCH (group gone) is fine.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// Runs `python script args...` in `dir` for at most `limit`, line by line through `on_line`.
pub fn run(
    python: &Path,
    dir: &Path,
    script: &str,
    args: &[String],
    redis_port: u16,
    limit: Duration,
    mut on_line: impl FnMut(&DriverLine),
) -> anyhow::Result<DriverRun> {
    let log_path = dir.join(format!("{script}.log"));
    let log = std::fs::File::create(&log_path)?;
    let child = Command::new(python)
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // Read at import by celery_driver.py, in the driver and in Celery's worker alike.
        .env("BOLT_PEERS_REDIS_PORT", redis_port.to_string())
        // Ray: no usage reports leave the machine, no token written to the home directory.
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .env("RAY_AUTH_MODE", "disabled")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {} {script}", python.display()))?;
    let mut guard = GroupGuard { child };
    let stdout = guard.child.stdout.take().context("stdout not captured")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let deadline = Instant::now() + limit;
    let mut run = DriverRun { lines: Vec::new(), malformed_lines: 0, error: None };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(text) => match serde_json::from_str::<DriverLine>(&text) {
                Ok(line) => {
                    on_line(&line);
                    run.lines.push(line);
                }
                Err(e) => {
                    run.malformed_lines += 1;
                    tracing::warn!(script, line = %text, error = %e, "driver printed a line that is not a result");
                }
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) if left.is_zero() => {
                run.error = Some(format!("did not finish within {} s", limit.as_secs()));
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    if run.error.is_none() {
        // stdout closed: the driver is exiting; give it a moment to clean up.
        let waited = Instant::now();
        while waited.elapsed() < Duration::from_secs(15) {
            if let Some(status) = guard.child.try_wait()? {
                if !status.success() {
                    run.error = Some(format!("exited with {status}"));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    drop(guard);
    if let Some(e) = &mut run.error {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let tail = super::env::last_lines(&log, 3);
        if !tail.is_empty() {
            e.push_str(": ");
            e.push_str(&tail);
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A driver that hangs is ended at the limit together with what it started, and the
    /// lines it printed before are kept.
    #[test]
    fn a_hanging_driver_and_its_children_are_ended_at_the_limit() {
        // Removed on drop, also when an assertion fails.
        let run_dir = super::super::env::RunDir::create().unwrap();
        let dir = run_dir.path.clone();
        let pid_file = dir.join("child.pid");
        let script = format!(
            "echo '{{\"status\":\"ok\",\"sleep_us\":0}}'\necho not-json\necho started >&2\n\
             sleep 60 & echo $! > {}\nwait\n",
            pid_file.display()
        );
        run_dir.write("hang.sh", &script).unwrap();
        let started = Instant::now();
        let mut seen = 0;
        let run = run(Path::new("/bin/sh"), &dir, "hang.sh", &[], 0, Duration::from_secs(1), |_| seen += 1).unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!((run.lines.len(), seen, run.malformed_lines), (1, 1, 1));
        let error = run.error.unwrap();
        assert!(error.starts_with("did not finish within 1 s") && error.ends_with("started"), "{error}");
        // The grandchild (sleep) went with the group.
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // Gone, or a zombie waiting for its new parent to reap it, once the kernel has
        // scheduled it to die (which takes a moment on a loaded machine).
        let gone = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            (stat.is_empty() || stat.contains(") Z ")).then_some(()).ok_or(stat)
        };
        let waited = Instant::now();
        while gone().is_err() && waited.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Err(stat) = gone() {
            panic!("child {pid} survived the group kill: {stat}");
        }
    }
}
