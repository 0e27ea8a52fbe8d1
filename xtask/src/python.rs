//! The `bolt` Python package: a venv under target/ with maturin and pytest, the package
//! built from python/ (PyO3) and installed into it, and its pytest suite.

use std::path::PathBuf;
use std::process::Command;

use crate::run::{status, workspace_root};

/// maturin and pytest, pinned so that every machine builds and tests alike.
const PIP_PACKAGES: [&str; 2] = ["maturin==1.16.0", "pytest==8.3.5"];

/// The venv the package is installed into.
pub fn venv() -> PathBuf {
    workspace_root().join("target").join("python-venv")
}

fn venv_python() -> PathBuf {
    venv().join("bin").join("python")
}

/// True under CI (`CI=true`), where a missing Python toolchain fails instead of skipping.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn python_found() -> bool {
    Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Creates the venv (once), installs maturin and pytest, builds and installs the package.
/// Without python3: an error under CI, a notice elsewhere.
pub fn setup() -> anyhow::Result<bool> {
    if !python_found() {
        anyhow::ensure!(!in_ci(), "python3 is missing: the Python package cannot be built (CI=true)");
        eprintln!("python3 not found: skipping the Python package (install python3 and python3-venv)");
        return Ok(false);
    }
    let venv = venv();
    if !venv_python().exists() {
        status(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    let pip_ok =
        Command::new(venv_python()).args(["-c", "import maturin, pytest"]).output().is_ok_and(|o| o.status.success());
    if !pip_ok {
        status(Command::new(venv_python()).args(["-m", "pip", "install", "--quiet"]).args(PIP_PACKAGES))?;
    }
    // `maturin develop` builds python/ with cargo (the workspace's target dir) and
    // installs it into the venv named by VIRTUAL_ENV.
    status(
        Command::new(venv.join("bin").join("maturin"))
            .args(["develop", "--quiet", "--manifest-path"])
            .arg(workspace_root().join("python").join("Cargo.toml"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default())),
    )?;
    Ok(true)
}

/// Runs python/tests with pytest in the venv. No tests collected (exit 5) fails.
pub fn test() -> anyhow::Result<()> {
    if !setup()? {
        return Ok(());
    }
    let code = Command::new(venv_python())
        .args(["-m", "pytest", "-q"])
        .arg(workspace_root().join("python").join("tests"))
        .current_dir(workspace_root())
        .status()?
        .code();
    match code {
        Some(0) => Ok(()),
        Some(5) => anyhow::bail!("pytest collected no tests in python/tests"),
        other => anyhow::bail!("pytest failed (exit {other:?})"),
    }
}
