//! `cargo xtask setup`: everything a fresh Debian 12 machine needs, installed only when
//! missing so that a second run takes a second.

use std::{path::PathBuf, process::Command};

use clap::Args;

use crate::run::{is_root, output, status};

/// Debian packages: the BPF-capable compiler and its prebuilt `core`, LLVM 22 for
/// bpf-linker, the tools the tests and the testbed use (nftables injects the packet
/// loss and duplication of the fault tests, iptables-legacy's NFQUEUE their reordering),
/// the font of the benchmark plots, and what `bolt bench peers` runs the other
/// schedulers with (a Redis server, Python venvs for pinned pip packages).
pub const PACKAGES: [&str; 14] = [
    "rustc-web",
    "cargo-web",
    "libstd-rust-web-dev-bpf",
    "llvm-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "bpftool",
    "ethtool",
    "iproute2",
    "nftables",
    "iptables",
    "fonts-dejavu-core",
    "redis-server",
    "python3-venv",
];

pub const BPF_LINKER_VERSION: &str = "0.13.0";
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";
const BPFFS: &str = "/sys/fs/bpf";

#[derive(Args, Debug, Default)]
pub struct SetupArgs {
    /// Only report what is missing; change nothing.
    #[arg(long)]
    pub check: bool,
}

pub fn run(args: &SetupArgs) -> anyhow::Result<()> {
    let missing = missing_packages();
    let linker_ok = bpf_linker_ok();
    let bpffs_ok = bpffs_mounted();
    if args.check {
        report(&missing, linker_ok, bpffs_ok);
        anyhow::ensure!(missing.is_empty() && linker_ok && bpffs_ok, "setup is incomplete");
        return Ok(());
    }
    if !(missing.is_empty() && bpffs_ok) {
        anyhow::ensure!(is_root(), "installing packages and mounting bpffs needs root");
    }
    if !missing.is_empty() {
        eprintln!("installing Debian packages: {}", missing.join(" "));
        status(Command::new("apt-get").arg("update").env("DEBIAN_FRONTEND", "noninteractive"))?;
        status(
            Command::new("apt-get").args(["install", "-y"]).args(&missing).env("DEBIAN_FRONTEND", "noninteractive"),
        )?;
    }
    if !linker_ok {
        install_bpf_linker()?;
    }
    if !bpffs_ok {
        status(Command::new("mount").args(["-t", "bpf", "bpf", BPFFS]))?;
    }
    report(&missing_packages(), bpf_linker_ok(), bpffs_mounted());
    // The `bolt` Python package (python/), built and installed into target/python-venv.
    crate::python::setup()?;
    Ok(())
}

fn report(missing: &[&str], linker_ok: bool, bpffs_ok: bool) {
    let yes_no = |ok: bool| if ok { "ok" } else { "missing" };
    eprintln!(
        "setup: packages {}, bpf-linker {BPF_LINKER_VERSION} {}, bpffs at {BPFFS} {}",
        if missing.is_empty() { "ok".to_string() } else { format!("missing ({})", missing.join(" ")) },
        yes_no(linker_ok),
        yes_no(bpffs_ok)
    );
}

fn missing_packages() -> Vec<&'static str> {
    PACKAGES
        .into_iter()
        .filter(|p| {
            output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_none_or(|s| s.trim() != "install ok installed")
        })
        .collect()
}

/// cargo's bin directory, where `cargo install` puts bpf-linker.
pub fn cargo_bin_dir() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"))
        .join("bin")
}

fn bpf_linker_ok() -> bool {
    let in_cargo_bin = cargo_bin_dir().join("bpf-linker");
    [in_cargo_bin, PathBuf::from("bpf-linker")].iter().any(|bin| {
        output(Command::new(bin).arg("--version"))
            .is_some_and(|v| v.split_whitespace().any(|w| w == BPF_LINKER_VERSION))
    })
}

fn install_bpf_linker() -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Without LLVM_PREFIX the build finds LLVM 14's llvm-config and fails to link -lLLVM.
    status(
        Command::new(cargo)
            .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION, "--locked", "--force"])
            .args(["--no-default-features", "--features", "llvm-22"])
            .env("LLVM_PREFIX", LLVM_PREFIX)
            .env("LLVM_SYS_221_PREFIX", LLVM_PREFIX),
    )
}

fn bpffs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 2 && f[1] == BPFFS && f[2] == "bpf"
            })
        })
        .unwrap_or(false)
}
