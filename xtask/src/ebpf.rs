//! `cargo xtask build-ebpf`: the XDP object, built the way scheduler-user's build script
//! builds it (Debian's rustc for bpfel-unknown-none, bpf-linker), standalone.

use std::{path::PathBuf, process::Command};

use clap::Args;

use crate::{
    run::{status, workspace_root},
    setup::cargo_bin_dir,
};

#[derive(Args, Debug, Default)]
pub struct BuildArgs {
    /// Build the debug profile instead of release.
    #[arg(long)]
    pub debug: bool,
}

/// Builds the object and returns its path.
pub fn build(args: &BuildArgs) -> anyhow::Result<PathBuf> {
    let dir = workspace_root().join("scheduler-ebpf");
    let mut path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    path.insert(0, cargo_bin_dir());
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(&dir).args(["build", "--locked"]).env("PATH", std::env::join_paths(path)?);
    if !args.debug {
        cmd.arg("--release");
    }
    // scheduler-ebpf/.cargo/config.toml picks the compiler; nothing inherited may override it.
    for var in [
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    status(&mut cmd).map_err(|e| {
        e.context("building the XDP object failed; is the toolchain installed? run `cargo xtask setup`")
    })?;
    let profile = if args.debug { "debug" } else { "release" };
    let object = dir.join("target/bpfel-unknown-none").join(profile).join("bolt-xdp");
    anyhow::ensure!(object.exists(), "the build produced no {}", object.display());
    Ok(object)
}
