//! `cargo xtask test`: the command CI runs. Set-up, the XDP object, then every test of
//! the workspace, kernel tests included.

use std::process::Command;

use clap::Args;

use crate::{
    ebpf::{self, BuildArgs},
    run::{status, workspace_root},
    setup::{self, SetupArgs},
};

#[derive(Args, Debug, Default)]
pub struct TestArgs {
    /// Do not run `cargo xtask setup` first.
    #[arg(long)]
    pub no_setup: bool,
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
    )
}
