//! The private environment the peers run in: a Python venv with pinned packages
//! (created on first use, reused while its pins match), a Redis server on a loopback
//! port of its own, and a run directory for the driver scripts and logs. Guards remove
//! what they started.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Packages installed together; `pins` is also the stamp that marks them installed.
pub struct PackageSet {
    pub name: &'static str,
    pub pins: &'static [&'static str],
}

/// What Dask, Celery and the plain Redis queue need.
pub const CORE: PackageSet =
    PackageSet { name: "core", pins: &["dask[distributed]==2026.8.0", "celery[redis]==5.7.0", "redis==8.1.0"] };
/// Ray on its own: it is large, and its failing to install must not cost the others.
pub const RAY: PackageSet = PackageSet { name: "ray", pins: &["ray==2.60.0"] };

/// pip gets this long per package set.
const PIP_TIME_LIMIT: Duration = Duration::from_secs(900);

/// The default venv: `<cargo target dir>/bench/peers-venv`, found from the running
/// executable (cargo marks its target directory with CACHEDIR.TAG).
pub fn default_venv() -> PathBuf {
    target_dir().unwrap_or_else(std::env::temp_dir).join("bench").join("peers-venv")
}

/// Debian's interpreter (whose venv module `cargo xtask setup` installs) when present.
pub fn default_python() -> PathBuf {
    let debian = PathBuf::from("/usr/bin/python3");
    if debian.is_file() {
        debian
    } else {
        PathBuf::from("python3")
    }
}

/// The cargo target directory this executable was built in (cargo marks it with
/// CACHEDIR.TAG).
fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file()).map(Path::to_path_buf)
}

/// The venv `cargo xtask setup` installs the `bolt` Python package into:
/// `<cargo target dir>/python-venv`.
pub fn default_bolt_venv() -> PathBuf {
    target_dir().unwrap_or_else(std::env::temp_dir).join("python-venv")
}

/// What `cargo xtask setup` installs beside the package (maturin builds it).
const MATURIN: &str = "maturin==1.16.0";

/// The interpreter of a venv where `import bolt` works. A venv without the package is
/// made as `cargo xtask setup` makes it (python -m venv, pip install maturin, maturin
/// develop), here with --release since it is measured, from the workspace whose target
/// directory holds this executable.
pub fn bolt_package(venv_dir: &Path, python: &Path) -> anyhow::Result<PathBuf> {
    let venv = Venv::create(venv_dir, python)?;
    // Run in the venv's directory: from a workspace root, the crate directory `bolt/`
    // would import as an empty namespace package and pass for the package.
    let imports = |venv: &Venv| {
        Command::new(venv.python())
            .args(["-c", "import bolt"])
            .current_dir(&venv.dir)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if imports(&venv) {
        return Ok(venv.python());
    }
    let manifest = target_dir()
        .and_then(|t| Some(t.parent()?.join("python").join("Cargo.toml")))
        .filter(|m| m.is_file())
        .context("the bolt package is not installed and no workspace with python/Cargo.toml holds this executable")?;
    tracing::info!(venv = %venv_dir.display(), "building the bolt Python package (first use only)");
    let maturin = venv.dir.join("bin").join("maturin");
    if !maturin.is_file() {
        let mut pip = Command::new(venv.python());
        pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q", MATURIN]);
        let out = run_bounded(&mut pip, PIP_TIME_LIMIT).context("running pip")?;
        if !out.success {
            bail!("pip install {MATURIN} failed: {}", out.tail);
        }
    }
    let path = format!("{}:{}", venv.dir.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut develop = Command::new(&maturin);
    develop
        .args(["develop", "--release", "--quiet", "--manifest-path"])
        .arg(&manifest)
        .env("VIRTUAL_ENV", &venv.dir)
        .env("PATH", path);
    let out = run_bounded(&mut develop, PIP_TIME_LIMIT).context("running maturin develop")?;
    if !out.success {
        bail!("maturin develop --release failed: {}", out.tail);
    }
    if !imports(&venv) {
        bail!("{} cannot import bolt after maturin develop", venv.python().display());
    }
    Ok(venv.python())
}

pub struct Venv {
    pub dir: PathBuf,
}

impl Venv {
    pub fn python(&self) -> PathBuf {
        self.dir.join("bin").join("python")
    }

    /// Creates the venv unless it exists.
    pub fn create(dir: &Path, python: &Path) -> anyhow::Result<Venv> {
        let venv = Venv { dir: dir.to_path_buf() };
        if venv.python().is_file() {
            return Ok(venv);
        }
        tracing::info!(venv = %dir.display(), "creating the peers' Python venv");
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let out = run_bounded(Command::new(python).arg("-m").arg("venv").arg(dir), Duration::from_secs(300))
            .with_context(|| format!("running {} -m venv", python.display()))?;
        if !out.success {
            bail!("{} -m venv failed: {}", python.display(), out.tail);
        }
        Ok(venv)
    }

    fn stamp(&self, set: &PackageSet) -> PathBuf {
        self.dir.join(format!("bolt-{}.installed", set.name))
    }

    pub fn is_installed(&self, set: &PackageSet) -> bool {
        std::fs::read_to_string(self.stamp(set)).is_ok_and(|s| s == set.pins.join("\n"))
    }

    /// pip-installs the set unless its stamp matches the pins.
    pub fn install(&self, set: &PackageSet) -> anyhow::Result<()> {
        if self.is_installed(set) {
            return Ok(());
        }
        tracing::info!(packages = %set.pins.join(" "), "pip install (first use only)");
        let mut pip = Command::new(self.python());
        pip.args(["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q"]).args(set.pins);
        let out = run_bounded(&mut pip, PIP_TIME_LIMIT).context("running pip")?;
        if !out.success {
            bail!("pip install {} failed: {}", set.pins.join(" "), out.tail);
        }
        std::fs::write(self.stamp(set), set.pins.join("\n"))?;
        Ok(())
    }
}

pub struct Finished {
    pub success: bool,
    /// The last lines of stderr, for a reason.
    pub tail: String,
}

/// Runs a command to its end or `limit` (then kills it), capturing stderr's tail.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> anyhow::Result<Finished> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let mut stderr = child.stderr.take().context("stderr not captured")?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let err = reader.join().unwrap_or_default();
    let tail = match status {
        None => format!("did not finish within {} s", limit.as_secs()),
        Some(_) => last_lines(&err, 3),
    };
    Ok(Finished { success: status.is_some_and(|s| s.success()), tail })
}

/// The last `n` non-empty lines of `s`, joined with " | ".
pub fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// A directory for one run (driver scripts, Redis's working directory, logs),
/// removed on drop.
pub struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    pub fn create() -> anyhow::Result<RunDir> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let path = std::env::temp_dir().join(format!("bolt-peers-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(RunDir { path })
    }

    pub fn write(&self, name: &str, contents: &str) -> anyhow::Result<PathBuf> {
        let p = self.path.join(name);
        std::fs::write(&p, contents).with_context(|| format!("writing {}", p.display()))?;
        Ok(p)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!(dir = %self.path.display(), error = %e, "could not remove the run directory");
        }
    }
}

/// A redis-server on 127.0.0.1, without persistence, killed on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port and waits until it answers PING.
    pub fn start(dir: &Path) -> anyhow::Result<RedisServer> {
        // A port the kernel just gave out and took back; another process taking it
        // in between makes redis-server exit, and the start is tried again.
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
            let log = std::fs::File::create(dir.join("redis.log"))?;
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
                .args(["--protected-mode", "yes", "--dir"])
                .arg(dir)
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(Stdio::null())
                .spawn()
                .context("redis-server not found (Debian package redis-server; cargo xtask setup installs it)")?;
            let mut server = RedisServer { child, port };
            if server.wait_ready(Duration::from_secs(10))? {
                return Ok(server);
            }
        }
        bail!("redis-server did not answer PING on a loopback port (log: {})", dir.join("redis.log").display())
    }

    fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<bool> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.child.try_wait()?.is_some() {
                return Ok(false);
            }
            if ping(SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))) {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(false)
    }
}

fn ping(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut answer = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
