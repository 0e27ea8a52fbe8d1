//! Builds the XDP object (scheduler-ebpf) and hands its path to `include_bytes_aligned!`.
//!
//! The kernel-side crate compiles with Debian's rustc-web for bpfel-unknown-none and links
//! with bpf-linker (its own .cargo/config.toml says how); aya-build is not used because it
//! passes -Z build-std, which needs a rust-src this machine cannot download.

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

const SETUP_HINT: &str = "run `cargo xtask setup` (as root) to install the eBPF toolchain";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let ebpf_dir = manifest_dir.join("../scheduler-ebpf");
    let common_dir = manifest_dir.join("../scheduler-common");
    for p in ["src", "Cargo.toml", "Cargo.lock", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", ebpf_dir.join(p).display());
    }
    println!("cargo:rerun-if-changed={}", common_dir.join("src").display());
    println!("cargo:rerun-if-changed={}", common_dir.join("Cargo.toml").display());

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let objects = build_ebpf(&ebpf_dir);
    // The Bolt program, and the ring measurement's programs (`bolt bench xdp --rings`).
    for name in ["bolt-xdp", "bolt-ring-bench"] {
        let object = objects.join(name);
        require(object.exists(), &format!("the build produced no target/bpfel-unknown-none/release/{name}"));
        let out = out_dir.join(format!("{name}.o"));
        std::fs::copy(&object, &out)
            .unwrap_or_else(|e| panic!("copying {} to {}: {e}", object.display(), out.display()));
    }
}

fn require(ok: bool, what: &str) {
    if !ok {
        panic!("\n\nThe XDP program cannot be built: {what}.\nFix: {SETUP_HINT}.\n\n");
    }
}

/// Builds the kernel-side crate; returns the directory its objects are in.
fn build_ebpf(ebpf_dir: &Path) -> PathBuf {
    require(Path::new("/usr/bin/rustc").exists(), "/usr/bin/rustc (Debian rustc-web) is missing");
    require(
        Path::new("/usr/lib/rustlib/bpfel-unknown-none/lib").exists(),
        "the prebuilt core for bpfel-unknown-none (Debian libstd-rust-web-dev-bpf) is missing",
    );
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"));
    // bpf-linker lives in cargo's bin directory, which a build script's PATH may lack.
    let path = env::join_paths(
        std::iter::once(cargo_home.join("bin")).chain(env::split_paths(&env::var_os("PATH").unwrap_or_default())),
    )
    .expect("PATH entries are valid");
    let linker_ok = Command::new("bpf-linker")
        .arg("--version")
        .env("PATH", &path)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    require(linker_ok, "bpf-linker is not installed");

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(ebpf_dir).args(["build", "--release", "--locked"]).env("PATH", &path);
    // The outer build's settings must not leak into the BPF build: its rustc, flags and
    // target directory come from scheduler-ebpf/.cargo/config.toml.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_") && key != "CARGO_HOME"
            || key.starts_with("RUSTC")
            || key == "RUSTFLAGS"
            || key == "RUSTDOC"
        {
            cmd.env_remove(&*key);
        }
    }
    let status = cmd.status().unwrap_or_else(|e| panic!("running cargo in {}: {e}. {SETUP_HINT}", ebpf_dir.display()));
    require(status.success(), "`cargo build --release` in scheduler-ebpf failed (see the output above)");
    ebpf_dir.join("target/bpfel-unknown-none/release")
}
