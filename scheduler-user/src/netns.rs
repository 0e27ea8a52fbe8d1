//! Network namespaces: creating and deleting them, and running code or processes inside
//! one. A thread can join a namespace (setns) on its own; sockets it creates stay in that
//! namespace, and threads it starts inherit it, so a whole component (switch, agent,
//! executors) can run inside one from this process.
//!
//! Processes are put in a namespace with setns between fork and exec, not with
//! `ip netns exec`: that also remounts /sys privately, which would hide the bpf
//! filesystem at /sys/fs/bpf the agent pins its rings on.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::Context as _;

/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";

fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// True when a namespace of this name exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).stdin(Stdio::null()).output().context("running `ip` (install iproute2)")?;
    anyhow::ensure!(
        out.status.success(),
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Creates a named namespace with its loopback up.
pub fn create(name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(!exists(name), "network namespace {name} exists already");
    ip(&["netns", "add", name])?;
    ip(&["-n", name, "link", "set", "lo", "up"])
}

/// Deletes a namespace (and with it every interface inside; veth peers elsewhere go too).
/// A namespace that does not exist is not an error.
pub fn delete(name: &str) -> anyhow::Result<()> {
    if !exists(name) {
        return Ok(());
    }
    ip(&["netns", "del", name])
}

/// Moves the calling thread into namespace `name`.
pub fn enter(name: &str) -> anyhow::Result<()> {
    let f = File::open(path(name)).with_context(|| format!("opening network namespace {name}"))?;
    // SAFETY: a valid namespace fd; affects only the calling thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    anyhow::ensure!(rc == 0, "joining network namespace {name}: {}", std::io::Error::last_os_error());
    Ok(())
}

/// Runs `f` on a new thread inside namespace `name` and returns its result. What `f`
/// creates there (sockets, threads) stays in the namespace after it returns.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let ns = name.to_string();
    std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || {
            enter(&ns)?;
            f()
        })?
        .join()
        .map_err(|_| anyhow::anyhow!("a thread in network namespace {name} panicked"))?
}

/// A command that runs `program` inside namespace `name`.
pub fn command_in(name: &str, program: impl AsRef<std::ffi::OsStr>) -> anyhow::Result<Command> {
    let f = File::open(path(name)).with_context(|| format!("opening network namespace {name}"))?;
    let mut cmd = Command::new(program);
    // SAFETY: setns is async-signal-safe; the closure owns the fd it uses.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(cmd)
}

/// Sets a sysctl inside namespace `name`: net sysctls are looked up in the namespace of
/// the thread that opens them.
pub fn sysctl(name: &str, key: &str, value: &str) -> anyhow::Result<()> {
    let file = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
    let value = value.to_string();
    run_in(name, move || std::fs::write(&file, &value).with_context(|| format!("writing {}", file.display())))
}
