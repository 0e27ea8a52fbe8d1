//! The client and executor as a library: `scheduler-user` without its default `cli`
//! feature builds, and pulls in none of the CLI's heavy dependencies (the XDP loader,
//! the dashboard, the plots).

use std::process::Command;

const CLI_ONLY: &[&str] = &["aya", "aya-log", "aya-obj", "ratatui", "plotters"];

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    cmd
}

#[test]
fn the_library_depends_on_none_of_the_cli_crates() {
    let out = cargo()
        .args(["tree", "--offline", "--locked", "-p", "scheduler-user", "--no-default-features"])
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("utf-8");
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"tokio"), "the tree lists the library's own dependencies:\n{tree}");
    for heavy in CLI_ONLY {
        assert!(!names.contains(heavy), "{heavy} is in the library's dependency tree:\n{tree}");
    }
    // The full crate does depend on them: the feature is what keeps them out.
    let full = cargo()
        .args(["tree", "--offline", "--locked", "-p", "scheduler-user", "-e", "normal", "--prefix", "none"])
        .output()
        .expect("run cargo tree");
    assert!(String::from_utf8_lossy(&full.stdout).lines().any(|l| l.starts_with("aya ")));
}

#[test]
fn the_library_builds_without_the_cli_feature() {
    // A target dir of its own: the feature set differs from the workspace build's, and
    // sharing one would make the two rebuild each other's artifacts.
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/library-check");
    let out = cargo()
        .args(["check", "--offline", "--locked", "-p", "scheduler-user", "--lib", "--no-default-features"])
        .args(["--target-dir", target])
        .output()
        .expect("run cargo check");
    assert!(out.status.success(), "the library does not build alone:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_bolt_api_crate_depends_on_none_of_the_cli_crates() {
    let out = cargo()
        .args(["tree", "--offline", "--locked", "-p", "bolt", "-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).expect("utf-8");
    let names: Vec<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains(&"scheduler-user") && names.contains(&"bytes"), "bolt's own dependencies:\n{tree}");
    for heavy in CLI_ONLY {
        assert!(!names.contains(heavy), "{heavy} is in bolt's dependency tree:\n{tree}");
    }
}
