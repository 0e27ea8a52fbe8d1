//! `cargo xtask test`: the command CI runs. Set-up, the XDP object, every test of the
//! workspace (kernel tests included), the Python package's pytest suite, the demo.

use std::process::Command;

use clap::Args;

use crate::{
    demo,
    ebpf::{self, BuildArgs},
    python,
    run::{status, workspace_root},
    setup::{self, SetupArgs},
};

#[derive(Args, Debug, Default)]
pub struct TestArgs {
    /// Do not run `cargo xtask setup` first.
    #[arg(long)]
    pub no_setup: bool,
    /// Do not run the demo after the tests.
    #[arg(long)]
    pub no_demo: bool,
    /// Extra arguments for `cargo test` (after `--`), e.g. a test name filter.
    #[arg(last = true)]
    pub cargo_args: Vec<String>,
}

pub fn run(args: &TestArgs) -> anyhow::Result<()> {
    if !args.no_setup {
        setup::run(&SetupArgs::default())?;
    }
    ebpf::build(&BuildArgs::default())?;
    // Test binaries run one at a time and their tests on two threads: the machine has two
    // cores, and the kernel tests pin threads to CPUs themselves.
    status(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args(["test", "--workspace", "--locked"])
            .args(&args.cargo_args)
            .env("RUST_TEST_THREADS", std::env::var("RUST_TEST_THREADS").unwrap_or_else(|_| "2".into())),
    )?;
    if !args.cargo_args.is_empty() {
        return Ok(());
    }
    // The Python package, built and installed by set-up, and its pytest suite.
    python::test()?;
    if args.no_demo {
        return Ok(());
    }
    // README's first command, shortened: under CI (root) it must run two-level on the
    // testbed, so a testbed that cannot come up fails here rather than falling back.
    let mode = if in_ci() { "testbed" } else { "auto" };
    demo::run(&<demo::DemoArgs as clap::Parser>::parse_from(["demo", "--no-setup", "--jobs", "50", "--mode", mode]))
}

/// True under CI (`CI=true`), where nothing that needs the kernel may be skipped.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}
