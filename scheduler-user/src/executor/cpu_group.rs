//! A CPU quota for a group of executor threads: a cgroup (v1 `cpu` controller) whose CFS
//! quota caps the CPU time they may use together, so executors of one worker type are
//! really slower at CPU-bound work than those of another. The group is removed when the
//! guard drops (its threads must have exited by then).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{ensure, Context};

/// Where the v1 `cpu` controller is mounted.
pub const CPU_CONTROLLER: &str = "/sys/fs/cgroup/cpu";
/// The CFS period the quota is a share of: short, so that tasks of a few milliseconds
/// already feel the quota (with the default 100 ms a 0.2-core group runs any task under
/// 20 ms at full speed).
const PERIOD_US: u64 = 10_000;

static NEXT_GROUP: AtomicU64 = AtomicU64::new(0);

/// A cgroup with a CPU quota; removed on drop.
#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
}

impl CpuGroup {
    /// Creates a group allowed `cores` CPUs' worth of time (0.2 = 2 ms every 10 ms),
    /// named uniquely for this process.
    pub fn create(cores: f64) -> anyhow::Result<CpuGroup> {
        Self::create_under(Path::new(CPU_CONTROLLER), cores)
    }

    fn create_under(root: &Path, cores: f64) -> anyhow::Result<CpuGroup> {
        ensure!(cores.is_finite() && cores > 0.0, "a CPU quota of {cores} cores is not positive");
        ensure!(root.join("cpu.cfs_quota_us").exists(), "no cgroup v1 cpu controller at {}", root.display());
        let name = format!("bolt-exec-{}-{}", std::process::id(), NEXT_GROUP.fetch_add(1, Ordering::Relaxed));
        let dir = root.join(name);
        std::fs::create_dir(&dir).with_context(|| format!("creating the cgroup {}", dir.display()))?;
        let group = CpuGroup { dir };
        // The quota may not be below 1 ms (the kernel's minimum).
        let quota_us = ((cores * PERIOD_US as f64).round() as u64).max(1_000);
        group.write("cpu.cfs_period_us", &PERIOD_US.to_string())?;
        group.write("cpu.cfs_quota_us", &quota_us.to_string())?;
        Ok(group)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The quota in cores, as the kernel holds it.
    pub fn cores(&self) -> anyhow::Result<f64> {
        let quota: f64 = self.read("cpu.cfs_quota_us")?.parse()?;
        let period: f64 = self.read("cpu.cfs_period_us")?.parse()?;
        Ok(quota / period)
    }

    /// Moves the calling thread into the group.
    pub fn join_current_thread(&self) -> anyhow::Result<()> {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        self.write("tasks", &tid.to_string())
    }

    fn write(&self, file: &str, value: &str) -> anyhow::Result<()> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).with_context(|| format!("writing {value} to {}", path.display()))
    }

    fn read(&self, file: &str) -> anyhow::Result<String> {
        let path = self.dir.join(file);
        Ok(std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?.trim().to_owned())
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::warn!(group = %self.dir.display(), error = %e, "could not remove the executor cgroup");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::clock::thread_cpu;

    #[test]
    fn a_quota_group_caps_a_spinning_thread_and_is_removed() {
        if !Path::new(CPU_CONTROLLER).join("cpu.cfs_quota_us").exists() || unsafe { libc::geteuid() } != 0 {
            assert!(std::env::var_os("CI").is_none(), "CI needs root and the cgroup v1 cpu controller");
            eprintln!("skipped: needs root and the cgroup v1 cpu controller");
            return;
        }
        let group = CpuGroup::create(0.2).unwrap();
        let path = group.path().to_owned();
        assert!((group.cores().unwrap() - 0.2).abs() < 1e-9);
        let used = std::thread::scope(|s| {
            s.spawn(|| {
                group.join_current_thread().unwrap();
                let start = Instant::now();
                let cpu0 = thread_cpu();
                let mut x = 0u64;
                while start.elapsed() < Duration::from_millis(600) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                (thread_cpu() - cpu0).as_secs_f64() / start.elapsed().as_secs_f64()
            })
            .join()
            .unwrap()
        });
        // 20% of one CPU, with slack for the period boundaries.
        assert!(used < 0.35, "the thread used {used:.2} of a CPU under a 0.2 quota");
        // A command an executor thread in the group starts (an `exec` task) is in it too.
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let in_group = std::thread::scope(|s| {
            s.spawn(|| {
                group.join_current_thread().unwrap();
                let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
                let cgroups = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
                child.kill().unwrap();
                child.wait().unwrap();
                cgroups
            })
            .join()
            .unwrap()
        });
        assert!(in_group.lines().any(|l| l.contains(":cpu") && l.ends_with(&name)), "{in_group}");
        drop(group);
        assert!(!path.exists(), "the cgroup was not removed");
        assert!(CpuGroup::create(0.0).is_err() && CpuGroup::create(f64::NAN).is_err());
    }
}
