//! Running commands with their command line echoed, and the workspace's paths.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

use anyhow::Context as _;

/// The workspace root (the parent of xtask/).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd`, its output going to ours; fails unless it exits 0.
pub fn status(cmd: &mut Command) -> anyhow::Result<()> {
    let line = describe(cmd);
    eprintln!("+ {line}");
    let st = cmd.status().with_context(|| format!("starting `{line}`"))?;
    anyhow::ensure!(st.success(), "`{line}` failed ({st})");
    Ok(())
}

/// Runs `cmd` quietly and returns its stdout, or None when it cannot start or fails.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when running as root.
pub fn is_root() -> bool {
    output(Command::new("id").arg("-u")).is_some_and(|s| s.trim() == "0")
}

/// Builds the `bolt` binary (release or debug) and returns its path.
pub fn build_bolt(release: bool) -> anyhow::Result<PathBuf> {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root()).args(["build", "--locked", "-p", "scheduler-user", "--bin", "bolt"]);
    if release {
        cmd.arg("--release");
    }
    status(&mut cmd)?;
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"));
    let bolt = target.join(if release { "release" } else { "debug" }).join("bolt");
    anyhow::ensure!(bolt.exists(), "the build produced no {}", bolt.display());
    Ok(bolt)
}
